package mf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
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
	g.each(b, func(u, it int, r float32) {
		p := s.P[u*k : u*k+k : u*k+k]
		q := s.Q[it*k : it*k+k : it*k+k]
		q = q[:len(p)]
		pq := dot32(p, q)
		e := r - s.bu[u] - s.bi[it] - pq
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
	})
}

// bigProblem builds a users × items problem with about perUser ratings per
// user (uniform in [perUser/2, 3·perUser/2]), items drawn with a skewed
// popularity, values 1..5, directly in CSR and CSC form (no ratings.Matrix:
// it would double the memory).
func bigProblem(users, items, perUser int, seed uint64) *Problem {
	r := rand.New(rand.NewPCG(seed, 5))
	p := &Problem{NumUsers: users, NumItems: items, RowPtr: make([]int64, users+1), ColPtr: make([]int64, items+1)}
	est := users * perUser
	p.RowCol = make([]int32, 0, est+est/50)
	p.RowVal = make([]float32, 0, est+est/50)
	seen := make([]uint32, items) // seen[j] == u+1: user u has j
	row := make([]int32, 0, 2*perUser)
	for u := range users {
		m := perUser/2 + r.IntN(perUser+1)
		row = row[:0]
		for len(row) < m {
			j := int32(float64(items) * r.Float64() * r.Float64())
			if seen[j] != uint32(u+1) {
				seen[j] = uint32(u + 1)
				row = append(row, j)
			}
		}
		slices.Sort(row)
		for _, j := range row {
			p.RowCol = append(p.RowCol, j)
			p.RowVal = append(p.RowVal, float32(1+r.IntN(5)))
			p.ColPtr[j+1]++
		}
		p.RowPtr[u+1] = int64(len(p.RowCol))
	}
	for j := range items {
		p.ColPtr[j+1] += p.ColPtr[j]
	}
	n := len(p.RowCol)
	p.ColRow, p.ColVal = make([]int32, n), make([]float32, n)
	next := slices.Clone(p.ColPtr[:items])
	for u := range users {
		for t := p.RowPtr[u]; t < p.RowPtr[u+1]; t++ {
			j := p.RowCol[t]
			p.ColRow[next[j]], p.ColVal[next[j]] = int32(u), p.RowVal[t]
			next[j]++
		}
	}
	return p
}

// BenchmarkDPALSStep is one DPALS step at rank 32 on 500 000 users × 3 700
// items × 50 M ratings (issue 13's target: ≤ 30 s on 2 cores, peak memory
// ≤ 4 GB): the per-user weights and lists, the residuals, every user's
// solve, every item's Gram block and right-hand side through a Gaussian
// mechanism, the PSD projections and item solves. It reports the CPU
// time per step and the process's peak resident memory (VmHWM), data
// included. Skipped with -short.
//
//	go test ./mf -run XXX -bench DPALSStep -benchtime 1x -cpu 2
func BenchmarkDPALSStep(b *testing.B) {
	if testing.Short() {
		b.Skip("50 M ratings")
	}
	users, items, per := 500000, 3700, 100
	if s := os.Getenv("DPALS_BENCH_USERS"); s != "" {
		fmt.Sscan(s, &users)
	}
	p := bigProblem(users, items, per, 1)
	k := 32
	o := DPALSOptions{Rank: k, Noise: noise.Seeded(1), Mean: p.Mean(), ItemBias: make([]float64, items),
		Counts: make([]float64, items), Active: make([]bool, items), ItemLambda: make([]float64, items),
		UserLambda: 10, UserDamping: 5, UserClip: 0.3, ResidualClip: 1.5, RHSScale: 0.2, InitScale: 1, Rand: rand.New(rand.NewPCG(2, 2))}
	for u := range p.NumUsers {
		for t := p.RowPtr[u]; t < p.RowPtr[u+1]; t++ {
			o.Counts[p.RowCol[t]] += 1 / math.Sqrt(float64(p.RowPtr[u+1]-p.RowPtr[u]))
		}
	}
	for j := range items {
		o.Active[j] = true
		o.ItemLambda[j] = 0.3*(o.Counts[j]+1) + 1
	}
	sens := mechanism.Sensitivity{Value: DPALSSensitivity(o.UserClip, o.ResidualClip, o.RHSScale), Norm: mechanism.L2,
		Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
	m, err := mechanism.NewGaussianSigma(0.1, 1e-6, sens, DPALSDim(items, k))
	if err != nil {
		b.Fatal(err)
	}
	o.Steps = []Releaser{m}
	b.ReportMetric(float64(p.Len()), "ratings")
	b.ResetTimer()
	c0 := cpuSeconds()
	for b.Loop() {
		if _, _, err := DPALS(context.Background(), p, o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds()-c0)/float64(b.N), "cpu-s/op")
	b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
}

// peakRSSMB is the process's peak resident set (VmHWM), in MB (0 if
// unknown).
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkGram compares gramAdd with the previous kernel (gramAdd8) and
// gonum's Dsyrk on the gathered rows:
// the Gram block of 100 rows of rank 32 (one user's solve in DPALS).
func BenchmarkGram(b *testing.B) {
	const k, n, rows = 32, 100, 3700
	r := rand.New(rand.NewPCG(1, 1))
	f := make([]float64, rows*k)
	for i := range f {
		f[i] = r.NormFloat64()
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(r.IntN(rows))
	}
	b.Run("gramAdd", func(b *testing.B) {
		a := make([]float64, k*k)
		var buf gramBuf
		c0 := cpuSeconds()
		for b.Loop() {
			clear(a)
			gramAdd(a, k, k, f, idx, nil, nil, nil, &buf)
		}
		b.ReportMetric((cpuSeconds()-c0)*1e9/float64(b.N), "cpu-ns/op")
	})
	b.Run("gramAdd8", func(b *testing.B) {
		a := make([]float64, k*k)
		c0 := cpuSeconds()
		for b.Loop() {
			clear(a)
			gramAdd8(a, k, k, f, idx, nil, nil, nil)
		}
		b.ReportMetric((cpuSeconds()-c0)*1e9/float64(b.N), "cpu-ns/op")
	})
	b.Run("gonum-Dsyrk", func(b *testing.B) {
		x := make([]float64, n*k)
		c := blas64.Symmetric{N: k, Stride: k, Data: make([]float64, k*k), Uplo: blas.Upper}
		c0 := cpuSeconds()
		for b.Loop() {
			for t, j := range idx {
				copy(x[t*k:], f[int(j)*k:int(j)*k+k])
			}
			blas64.Syrk(blas.Trans, 1, blas64.General{Rows: n, Cols: k, Stride: k, Data: x}, 0, c)
		}
		b.ReportMetric((cpuSeconds()-c0)*1e9/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkSolve compares cholSolve with the previous hand-written
// solver and gonum's mat.Cholesky on a 32×32 positive definite system.
func BenchmarkSolve(b *testing.B) {
	const k = 32
	r := rand.New(rand.NewPCG(1, 1))
	g := make([]float64, k*k)
	x := make([]float64, 4*k*k)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	idx := []int32{}
	for i := range 4 * k {
		idx = append(idx, int32(i%(4*k*k/k)))
	}
	gramAdd(g, k, k, x, idx, nil, nil, nil, nil)
	for p := range k {
		g[p*k+p] += 1
	}
	rhs := make([]float64, k)
	for i := range rhs {
		rhs[i] = r.NormFloat64()
	}
	b.Run("cholSolve", func(b *testing.B) {
		a, v := make([]float64, k*k), make([]float64, k)
		c0 := cpuSeconds()
		for b.Loop() {
			copy(a, g)
			copy(v, rhs)
			cholSolve(a, k, v)
		}
		b.ReportMetric((cpuSeconds()-c0)*1e9/float64(b.N), "cpu-ns/op")
	})
	b.Run("cholSolveAxpy", func(b *testing.B) {
		a, v := make([]float64, k*k), make([]float64, k)
		c0 := cpuSeconds()
		for b.Loop() {
			copy(a, g)
			copy(v, rhs)
			cholSolveAxpy(a, k, v)
		}
		b.ReportMetric((cpuSeconds()-c0)*1e9/float64(b.N), "cpu-ns/op")
	})
	b.Run("gonum-Cholesky", func(b *testing.B) {
		sym := mat.NewSymDense(k, nil)
		var ch mat.Cholesky
		dst := mat.NewVecDense(k, nil)
		bv := mat.NewVecDense(k, rhs)
		c0 := cpuSeconds()
		for b.Loop() {
			for p := range k {
				for q := p; q < k; q++ {
					sym.SetSym(p, q, g[p*k+q])
				}
			}
			ch.Factorize(sym)
			_ = ch.SolveVecTo(dst, bv)
		}
		b.ReportMetric((cpuSeconds()-c0)*1e9/float64(b.N), "cpu-ns/op")
	})
}

// gramAdd8 (the previous kernel, for BenchmarkGram) adds Σ_t w_t · x_t x_tᵀ to the upper triangle of the leading
// k×k block of the row-major matrix a (row stride lda ≥ k), where x_t is
// row idx[t] of the row-major factor matrix f (stride k) and w_t = w[t]
// (w nil: all 1); and, when h is not nil, Σ_t w_t·z_t·x_t to h (z nil:
// all 1) in the same pass, so each row is loaded once.
func gramAdd8(a []float64, lda, k int, f []float64, idx []int32, w, z, h []float64) {
	n := len(idx)
	t := 0
	row := func(t int) []float64 { j := int(idx[t]) * k; return f[j : j+k : j+k] }
	wt := func(t int) float64 {
		if w == nil {
			return 1
		}
		return w[t]
	}
	zt := func(t int) float64 {
		if z == nil {
			return 1
		}
		return z[t]
	}
	for ; t+8 <= n; t += 8 {
		x0, x1, x2, x3 := row(t), row(t+1), row(t+2), row(t+3)
		x4, x5, x6, x7 := row(t+4), row(t+5), row(t+6), row(t+7)
		w0, w1, w2, w3 := wt(t), wt(t+1), wt(t+2), wt(t+3)
		w4, w5, w6, w7 := wt(t+4), wt(t+5), wt(t+6), wt(t+7)
		for p := range k {
			a0, a1, a2, a3 := w0*x0[p], w1*x1[p], w2*x2[p], w3*x3[p]
			a4, a5, a6, a7 := w4*x4[p], w5*x5[p], w6*x6[p], w7*x7[p]
			r := a[p*lda+p : p*lda+k]
			m := len(r)
			y0, y1, y2, y3 := x0[p:k][:m], x1[p:k][:m], x2[p:k][:m], x3[p:k][:m]
			y4, y5, y6, y7 := x4[p:k][:m], x5[p:k][:m], x6[p:k][:m], x7[p:k][:m]
			for q := range r {
				r[q] += (a0*y0[q] + a1*y1[q] + a2*y2[q] + a3*y3[q]) + (a4*y4[q] + a5*y5[q] + a6*y6[q] + a7*y7[q])
			}
		}
		if h != nil {
			b0, b1, b2, b3 := w0*zt(t), w1*zt(t+1), w2*zt(t+2), w3*zt(t+3)
			b4, b5, b6, b7 := w4*zt(t+4), w5*zt(t+5), w6*zt(t+6), w7*zt(t+7)
			hh := h[:k]
			for q := range hh {
				hh[q] += (b0*x0[q] + b1*x1[q] + b2*x2[q] + b3*x3[q]) + (b4*x4[q] + b5*x5[q] + b6*x6[q] + b7*x7[q])
			}
		}
	}
	for ; t < n; t++ {
		x0 := row(t)
		w0 := wt(t)
		for p := range k {
			a0 := w0 * x0[p]
			r := a[p*lda+p : p*lda+k]
			y0 := x0[p:k]
			y0 = y0[:len(r)]
			for q := range r {
				r[q] += a0 * y0[q]
			}
		}
		if h != nil {
			axpy(w0*zt(t), x0, h)
		}
	}
}

// cholSolveAxpy (the previous solver, for BenchmarkSolve) solves a·x = b for the symmetric positive definite k×k
// row-major a, reading only its upper triangle, which it overwrites with
// the Cholesky factor R (a = RᵀR); b is overwritten with x. It returns
// false when a pivot is not positive (a not positive definite).
func cholSolveAxpy(a []float64, k int, b []float64) bool {
	// Right-looking, row-oriented (LAPACK's dpotf2, upper): every update is
	// an axpy on a contiguous row segment.
	for i := range k {
		d := a[i*k+i]
		if !(d > 0) || math.IsInf(d, 0) {
			return false
		}
		d = math.Sqrt(d)
		a[i*k+i] = d
		ri := a[i*k+i+1 : i*k+k]
		inv := 1 / d
		for q := range ri {
			ri[q] *= inv
		}
		for p := i + 1; p < k; p++ {
			c := ri[p-i-1]
			if c == 0 {
				continue
			}
			axpy(-c, ri[p-i-1:], a[p*k+p:p*k+k])
		}
	}
	// Rᵀy = b (forward), then Rx = y (backward).
	for i := range k {
		b[i] /= a[i*k+i]
		axpy(-b[i], a[i*k+i+1:i*k+k], b[i+1:k])
	}
	for i := k - 1; i >= 0; i-- {
		b[i] = (b[i] - dot(a[i*k+i+1:i*k+k], b[i+1:k])) / a[i*k+i]
	}
	return true
}

// BenchmarkCovSum is the in-process covariance sum over 4 801 items (the
// large-population plan's covariance at 480 189 users) for 10 000 users
// with ≈ 175 covered ratings each, by tile side.
func BenchmarkCovSum(b *testing.B) {
	const items = 4801
	p := benchProblem(b, 10000, items, 10000*175, 5)
	st := &CovStatistic{Items: make([]int, items), Mean: 3, ItemBias: make([]float64, items), UserDamping: 5, Clip: 1}
	for j := range st.Items {
		st.Items[j] = j
	}
	if err := st.Validate(); err != nil {
		b.Fatal(err)
	}
	for _, tile := range []int{256, 512} {
		b.Run(fmt.Sprintf("tile=%d", tile), func(b *testing.B) {
			defer func(t int) { covTile = t }(covTile)
			covTile = tile
			for b.Loop() {
				if _, err := st.sum(context.Background(), p, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
