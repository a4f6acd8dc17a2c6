package mf

import (
	"context"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// benchProblem is a random problem of MovieLens-1M's shape: 6 040 users,
// 3 706 items, 900 000 ratings on 1..5 (items drawn with a skewed
// popularity so that blocks and rows differ in size as in real data).
func benchProblem(b testing.TB, users, items, n int, seed uint64) *Problem {
	b.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	rowPtr := make([]int64, users+1)
	per := n / users
	var cols []int32
	var vals []float32
	seen := make(map[int32]bool)
	for u := range users {
		clear(seen)
		m := per/2 + r.IntN(per+1)
		for len(seen) < m {
			// Popularity ∝ 1/(1+j)^0.8 through inverse-CDF sampling.
			j := int32(float64(items) * (r.Float64() * r.Float64()))
			if j >= int32(items) {
				j = int32(items) - 1
			}
			seen[j] = true
		}
		row := make([]int32, 0, m)
		for j := range seen {
			row = append(row, j)
		}
		sortInt32(row)
		for _, j := range row {
			cols = append(cols, j)
			vals = append(vals, float32(1+r.IntN(5)))
		}
		rowPtr[u+1] = int64(len(cols))
	}
	m, err := ratings.FromCSR(ratings.Sequential(users), ratings.Sequential(items), items, rowPtr, cols, vals, nil)
	if err != nil {
		b.Fatal(err)
	}
	return FromMatrix(m)
}

func sortInt32(x []int32) {
	for i := 1; i < len(x); i++ {
		for j := i; j > 0 && x[j] < x[j-1]; j-- {
			x[j], x[j-1] = x[j-1], x[j]
		}
	}
}

// BenchmarkSGDEpoch is one pass of SGD (rank 64, one worker) over a
// problem of MovieLens-1M's shape, set-up excluded.
func BenchmarkSGDEpoch(b *testing.B) {
	p := benchProblem(b, 6040, 3706, 900000, 1)
	r := rand.New(rand.NewPCG(1, 2))
	k := 64
	g := newGrid(p, 20, p.Mean(), r)
	st := &sgdState{k: k,
		P: make([]float32, p.NumUsers*k), Q: make([]float32, p.NumItems*k),
		bu: make([]float32, p.NumUsers), bi: make([]float32, p.NumItems),
		pG: make([]float32, p.NumUsers), qG: make([]float32, p.NumItems),
		pn: make([]float32, p.NumUsers), qn: make([]float32, p.NumItems),
		ps: ones(p.NumUsers), qs: ones(p.NumItems),
		lambda: 0.05, lambdaB: 0.01, eta: 0.1}
	for i := range st.P {
		st.P[i] = float32(0.01 * r.NormFloat64())
	}
	for i := range st.Q {
		st.Q[i] = float32(0.01 * r.NormFloat64())
	}
	for i := range st.pG {
		st.pG[i] = 1
	}
	for i := range st.qG {
		st.qG[i] = 1
	}
	run := st.block
	if os.Getenv("SGD_SCALAR") != "" {
		run = st.blockScalar
	}
	b.ResetTimer()
	c0 := cpuSeconds()
	for b.Loop() {
		st.materialiseAll()
		if err := runStrata(context.Background(), 20, 1, r, func(blk int) { run(g, blk) }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds()-c0)*1e9/float64(b.N)/float64(p.Len()), "cpu-ns/rating")
}

// BenchmarkALSIteration is one ALS sweep (rank 64, one worker) on the
// same problem.
func BenchmarkALSIteration(b *testing.B) {
	p := benchProblem(b, 6040, 3706, 900000, 1)
	r := rand.New(rand.NewPCG(1, 2))
	o := ALSOptions{Rank: 64, Lambda: 0.05, BiasLambda: 5, Iterations: 1, InitScale: 0.1, Workers: 1, Norm: r.NormFloat64}
	b.ResetTimer()
	c0 := cpuSeconds()
	for b.Loop() {
		if _, err := ALS(context.Background(), p, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds()-c0)*1e9/float64(b.N)/float64(p.Len()), "cpu-ns/rating")
}

// cpuSeconds is the CPU time the process has used (user + system): on a
// shared machine, wall-clock benchmarks measure the neighbours.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// blockScalar is the scalar version of block (for BenchmarkSGDEpoch): it runs SGD over the ratings of block b. With e = r − b_u − b_i −
// p·q, the gradients are g_p = λp − e·q and g_q = λq − e·p; the step is
// p' = (1 − η_pλ)p + η_p e·q (and likewise q'). The squared gradient
// norms that drive the adaptive steps are not summed coordinate by
// coordinate: ‖g_p‖² = λ²‖p‖² − 2λe(p·q) + e²‖q‖², from norms of p and q
// kept up to date the same way (‖p'‖² = a²‖p‖² + 2ac(p·q) + c²‖q‖² with
// a = 1 − η_pλ, c = η_p e), which leaves six flops per coordinate.
func (s *sgdState) blockScalar(g *grid, b int) {
	k := s.k
	lam, lamB, eta := s.lambda, s.lambdaB, s.eta
	rk := 1 / float32(k)
	us, is, rs := g.u[g.ptr[b]:g.ptr[b+1]], g.i[g.ptr[b]:g.ptr[b+1]], g.r[g.ptr[b]:g.ptr[b+1]]
	is, rs = is[:len(us)], rs[:len(us)]
	for t, u32 := range us {
		u, it := int(u32), int(is[t])
		p := s.P[u*k : u*k+k : u*k+k]
		q := s.Q[it*k : it*k+k : it*k+k]
		q = q[:len(p)]
		pq := dot32(p, q)
		e := rs[t] - s.bu[u] - s.bi[it] - pq
		pn, qn := s.pn[u], s.qn[it]
		etaP := eta / sqrt32(s.pG[u])
		etaQ := eta / sqrt32(s.qG[it])
		ap, cp := 1-etaP*lam, etaP*e
		aq, cq := 1-etaQ*lam, etaQ*e
		step32(p, q, ap, cp, aq, cq)
		s.pn[u] = max(0, ap*ap*pn+2*ap*cp*pq+cp*cp*qn)
		s.qn[it] = max(0, aq*aq*qn+2*aq*cq*pq+cq*cq*pn)
		gp2 := max(0, lam*lam*pn-2*lam*e*pq+e*e*qn)
		gq2 := max(0, lam*lam*qn-2*lam*e*pq+e*e*pn)
		s.bu[u] -= etaP * (lamB*s.bu[u] - e)
		s.bi[it] -= etaQ * (lamB*s.bi[it] - e)
		s.pG[u] += gp2 * rk
		s.qG[it] += gq2 * rk
	}
}
