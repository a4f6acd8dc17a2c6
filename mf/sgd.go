package mf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas/gonum"
)

// SGDOptions configure SGD.
type SGDOptions struct {
	// Rank is the number of factor columns k.
	Rank int
	// Lambda is the L2 penalty on the factors, applied at every rating a
	// row takes part in (so a row with n ratings is penalised ∝ λ·n, the
	// weighted-λ of ALS).
	Lambda float64
	// BiasLambda is the same penalty on the biases.
	BiasLambda float64
	// LearnRate is the base step η of the per-row adaptive steps
	// η/√G_row, G_row the running mean squared gradient of the row plus 1.
	LearnRate float64
	// Iterations is the number of passes over the ratings.
	Iterations int
	// Bins is the side of the block grid (0: max(4, 2·workers)): one
	// barrier per stratum, so few strata, each with about two blocks per
	// worker to balance.
	Bins int
	// InitScale is the standard deviation of the initial factors, times
	// 1/√k.
	InitScale float64
	// Workers bounds the goroutines (0: GOMAXPROCS).
	Workers int
	// Rand draws the initial factors, the user and item permutations and
	// the block order.
	Rand *rand.Rand
	// Progress, when set, is told after every iteration.
	Progress func(Iteration)

	// snapshot, when set (tests and tuning), gets the model after every
	// iteration.
	snapshot func(it int, f *Factors)
}

func (o *SGDOptions) check() error {
	if err := checkRank(o.Rank); err != nil {
		return err
	}
	for _, x := range []struct {
		name string
		v    float64
	}{{"λ", o.Lambda}, {"bias λ", o.BiasLambda}} {
		if !(x.v >= 0) || math.IsInf(x.v, 0) {
			return fmt.Errorf("%s must be finite and ≥ 0, got %g", x.name, x.v)
		}
	}
	if !(o.LearnRate > 0) || math.IsInf(o.LearnRate, 0) {
		return fmt.Errorf("learning rate must be finite and > 0, got %g", o.LearnRate)
	}
	if o.Iterations < 1 {
		return fmt.Errorf("iterations must be ≥ 1, got %d", o.Iterations)
	}
	if o.Rand == nil {
		return fmt.Errorf("SGD needs a random source")
	}
	return nil
}

// SGD fits a biased rank-k model by parallel stochastic gradient descent
// on a grid of blocks, as LIBMF does (Chin, Zhuang, Juan, Lin, "A Fast
// Parallel Stochastic Gradient Method for Matrix Factorization in Shared
// Memory Systems", ACM TIST 2015): users and items are randomly permuted
// and cut into Bins×Bins blocks, each block's ratings are kept in user
// order (a user's row stays in cache), blocks that share no row or column
// run in parallel (see runStrata), and steps adapt per row (Chin, Zhuang,
// Juan, Lin, "A Learning-Rate Schedule for Stochastic Gradient Methods to
// Matrix Factorization", PAKDD 2015). The result is a function of the
// data, the options (Bins included) and the random source only, not of
// which goroutine ran which block.
func SGD(ctx context.Context, p *Problem, o SGDOptions) (*Factors, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	k := o.Rank
	w := workers(o.Workers)
	nb := o.Bins
	if nb <= 0 {
		nb = max(4, 2*w)
	}
	nb = max(1, min(nb, p.NumUsers, p.NumItems))
	mean := p.Mean()
	g := newGrid(p, nb, mean, o.Rand)
	st := &sgdState{k: k,
		P: make([]float32, p.NumUsers*k), Q: make([]float32, p.NumItems*k),
		bu: make([]float32, p.NumUsers), bi: make([]float32, p.NumItems),
		pG: make([]float32, p.NumUsers), qG: make([]float32, p.NumItems),
		pn: make([]float32, p.NumUsers), qn: make([]float32, p.NumItems),
		ps: ones(p.NumUsers), qs: ones(p.NumItems),
		lambda: float32(o.Lambda), lambdaB: float32(o.BiasLambda), eta: float32(o.LearnRate)}
	sc := o.InitScale / math.Sqrt(float64(k))
	for i := range st.P {
		st.P[i] = float32(sc * o.Rand.NormFloat64())
	}
	st.perm = g.perm
	for i := range p.NumItems { // in item order, each row where the grid keeps it
		q := st.Q[g.perm[i]*k : g.perm[i]*k+k]
		for d := range q {
			q[d] = float32(sc * o.Rand.NormFloat64())
		}
	}
	for i := range st.pG {
		st.pG[i] = 1
	}
	for i := range st.qG {
		st.qG[i] = 1
	}
	prevQ := make([]float64, len(st.Q)+len(st.bi))
	for it := range o.Iterations {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i, x := range st.Q {
			prevQ[i] = float64(x)
		}
		for i, x := range st.bi {
			prevQ[len(st.Q)+i] = float64(x)
		}
		st.materialiseAll()
		if err := runStrata(ctx, nb, w, o.Rand, func(b int) { st.block(g, b) }); err != nil {
			return nil, err
		}
		if o.snapshot != nil {
			o.snapshot(it+1, st.factors(mean))
		}
		if o.Progress != nil {
			var d, n float64
			for i := range p.NumItems { // in item order
				j := g.perm[i]
				for c := j * k; c < j*k+k; c++ {
					x := st.Q[c]
					d += (float64(x) - prevQ[c]) * (float64(x) - prevQ[c])
					n += float64(x) * float64(x)
				}
			}
			for i := range p.NumItems {
				j := g.perm[i]
				x, y := st.bi[j], prevQ[len(st.Q)+j]
				d += (float64(x) - y) * (float64(x) - y)
				n += float64(x) * float64(x)
			}
			ch := 0.0
			if n > 0 {
				ch = math.Sqrt(d / n)
			}
			o.Progress(Iteration{Done: it + 1, Total: o.Iterations, Change: ch})
		}
	}
	if g.release() {
		g = nil
		debug.FreeOSMemory()
	}
	return st.factors(mean), nil
}

// release reports whether the grid is large enough (64 MB of per-rating
// arrays) that its memory is worth returning to the system before the
// float64 factors are allocated, rather than leaving it to the garbage
// collector's next cycle, which the allocations after SGD would not reach
// before the process holds both.
func (g *grid) release() bool { return g.bytes() >= 1<<26 }

// bytes is the memory of the grid's per-rating arrays.
func (g *grid) bytes() int {
	return 2*len(g.item16) + 4*len(g.item32) + len(g.code) + 4*len(g.val)
}

// factors returns the model (as float64) with the scales folded in.
func (st *sgdState) factors(mean float64) *Factors {
	st.materialiseAll()
	f := &Factors{Rank: st.k, Mean: mean, U: make([]float64, len(st.P)), V: make([]float64, len(st.Q)),
		UserBias: make([]float64, len(st.bu)), ItemBias: make([]float64, len(st.bi))}
	for i, x := range st.P {
		f.U[i] = float64(x)
	}
	k := st.k
	for i, j := range st.perm { // back in item order
		for d, x := range st.Q[j*k : j*k+k] {
			f.V[i*k+d] = float64(x)
		}
		f.ItemBias[i] = float64(st.bi[j])
	}
	for i, x := range st.bu {
		f.UserBias[i] = float64(x)
	}
	return f
}

// grid holds the ratings cut into blocks, in a compact copy read in
// order: block b is a list of runs, one per user with ratings in it (users
// in permuted order), and a run is her ratings in the block's items (in
// item index order), each as the item's place within the block's range of
// permuted items (16 bits while a range has at most 65 536 items) and the
// centred value (an 8-bit code into a table when the data has at most 16
// distinct values, as rating scales do; a float32 otherwise). At Netflix
// size a rating costs 3 bytes here instead of 12 for (user, item, value),
// and SGD streams them in order as before; the item factors are kept in
// the permuted order (sgdState.perm), so a block's items are a range.
type grid struct {
	nb, segI int
	perm     []int   // item i's place in the permuted order
	runPtr   []int   // block b's runs are [runPtr[b], runPtr[b+1])
	runU     []int32 // the run's user
	runEnd   []int   // run r's ratings end at runEnd[r] (they start where run r−1's end)
	item16   []uint16
	item32   []uint32
	code     []uint8   // with table: table[code] is the centred value
	table    []float32 // nil when the values are stored as val
	val      []float32
}

// start is where block b's ratings start.
func (g *grid) start(b int) int {
	if r := g.runPtr[b]; r > 0 {
		return g.runEnd[r-1]
	}
	return 0
}

// maxCodes is the most distinct values the grid stores as codes.
const maxCodes = 16

// maxNarrowItems is the largest range of items a 16-bit index covers (a
// variable so that tests can take the 32-bit path on small data).
var maxNarrowItems = 1 << 16

// distinctValues returns the distinct values of vals in order of first
// appearance, or nil when there are more than maxCodes or a NaN (which
// equals no code).
func distinctValues(vals []float32) []float32 {
	var d []float32
	for _, v := range vals {
		if v != v {
			return nil
		}
		if !slices.Contains(d, v) {
			if len(d) == maxCodes {
				return nil
			}
			d = append(d, v)
		}
	}
	return d
}

func newGrid(p *Problem, nb int, mean float64, rnd *rand.Rand) *grid {
	pu, pi := rnd.Perm(p.NumUsers), rnd.Perm(p.NumItems)
	segU := (p.NumUsers + nb - 1) / nb
	segI := (p.NumItems + nb - 1) / nb
	g := &grid{nb: nb, segI: segI, perm: pi}
	// Count the ratings and runs of every block.
	cnt := make([]int, nb*nb+1)
	runs := make([]int, nb*nb+1)
	seen := make([]int, nb) // last user (+1) seen in each column of blocks
	for u := range p.NumUsers {
		row := pu[u] / segU * nb
		for _, it := range p.RowCol[p.RowPtr[u]:p.RowPtr[u+1]] {
			bi := pi[it] / segI
			cnt[row+bi+1]++
			if seen[bi] != u+1 {
				seen[bi] = u + 1
				runs[row+bi+1]++
			}
		}
	}
	for b := range nb * nb {
		cnt[b+1] += cnt[b]
		runs[b+1] += runs[b]
	}
	n := p.Len()
	g.runPtr = runs
	g.runU = make([]int32, runs[nb*nb])
	g.runEnd = make([]int, runs[nb*nb])
	narrow := segI <= maxNarrowItems
	if narrow {
		g.item16 = make([]uint16, n)
	} else {
		g.item32 = make([]uint32, n)
	}
	distinct := distinctValues(p.RowVal)
	if distinct != nil {
		g.code = make([]uint8, n)
		g.table = make([]float32, len(distinct))
		for c, v := range distinct {
			g.table[c] = float32(float64(v) - mean)
		}
	} else {
		g.val = make([]float32, n)
	}
	pos := slices.Clone(cnt[:nb*nb])
	rpos := slices.Clone(runs[:nb*nb])
	// Users in permuted order, so each block's runs come out in permuted
	// user order, each run in item index order (a user's row stays in
	// cache).
	order := make([]int32, p.NumUsers)
	for u, x := range pu {
		order[x] = int32(u)
	}
	clear(seen)
	for _, u := range order {
		row := pu[u] / segU * nb
		a := p.RowPtr[u]
		vals := p.RowVal[a:p.RowPtr[u+1]]
		for t, it := range p.RowCol[a:p.RowPtr[u+1]] {
			bi := pi[it] / segI
			b := row + bi
			if seen[bi] != int(u)+1 {
				seen[bi] = int(u) + 1
				g.runU[rpos[b]] = u
				rpos[b]++
			}
			q := pos[b]
			if local := pi[it] - bi*segI; narrow {
				g.item16[q] = uint16(local)
			} else {
				g.item32[q] = uint32(local)
			}
			if distinct != nil {
				g.code[q] = uint8(slices.Index(distinct, vals[t]))
			} else {
				g.val[q] = float32(float64(vals[t]) - mean)
			}
			pos[b]++
			g.runEnd[rpos[b]-1] = pos[b]
		}
	}
	return g
}

// each calls f for every rating of block b in the block's order, the item
// as its place in the permuted order (slower than block's own loop, which
// calls no closure; for tests and benchmarks).
func (g *grid) each(b int, f func(u, it int, r float32)) {
	col0 := b % g.nb * g.segI
	from := g.start(b)
	for r := g.runPtr[b]; r < g.runPtr[b+1]; r++ {
		for t := from; t < g.runEnd[r]; t++ {
			var it int
			if g.item16 != nil {
				it = int(g.item16[t])
			} else {
				it = int(g.item32[t])
			}
			v := float32(0)
			if g.table != nil {
				v = g.table[g.code[t]]
			} else {
				v = g.val[t]
			}
			f(int(g.runU[r]), col0+it, v)
		}
		from = g.runEnd[r]
	}
}

// sgdState is the model being trained (float32: half the cache footprint
// of float64, and the precision SGD needs).
type sgdState struct {
	k      int
	P, Q   []float32
	bu, bi []float32
	pG, qG []float32
	pn, qn []float32 // squared row norms
	ps, qs []float32 // row scales: user u's row is ps[u]·P[u·k:(u+1)·k]
	// perm is where each item's row is kept (item i at perm[i]: the
	// grid's permuted order, in which a block's items are a range).
	perm                 []int
	lambda, lambdaB, eta float32
}

// block runs SGD over the ratings of block b. With e = r − b_u − b_i −
// p·q, the gradients are g_p = λp − e·q and g_q = λq − e·p, and the step
// is p' = a_p·p + c_p·q with a_p = 1 − η_pλ, c_p = η_p·e (likewise q').
//
// A row is held as a scale times a direction, p = s_p·p̃, so the shrink
// a_p is a change of s_p and the step is one axpy on p̃: q̃ ← q̃ + β·p̃
// first (β = c_q·s_p/s_q'), then p̃ ← p̃ + (α/(1 − αβ))·q̃ (α = c_p·s_q/s_p'),
// which is the step from the old q̃ = q̃' − β·p̃ with the factor 1 − αβ
// moved into s_p. The dot product and both axpys run in gonum's SIMD
// kernels. The squared gradient norms that drive the adaptive steps come
// from squared row norms kept in closed form: ‖g_p‖² = λ²‖p‖² −
// 2λe(p·q) + e²‖q‖² and ‖p'‖² = a_p²‖p‖² + 2a_p·c_p(p·q) + c_p²‖q‖².
func (s *sgdState) block(g *grid, b int) {
	switch {
	case g.item16 != nil && g.code != nil:
		blockRuns(s, g, b, g.item16, g.code)
	case g.item16 != nil:
		blockRuns(s, g, b, g.item16, g.val)
	case g.code != nil:
		blockRuns(s, g, b, g.item32, g.code)
	default:
		blockRuns(s, g, b, g.item32, g.val)
	}
}

// blockRuns is block over the grid's arrays of either width.
func blockRuns[I uint16 | uint32, V uint8 | float32](s *sgdState, g *grid, b int, items []I, vals []V) {
	lam, lamB, eta := s.lambda, s.lambdaB, s.eta
	rk := 1 / float32(s.k)
	var impl gonum.Implementation
	col0 := b % g.nb * g.segI
	table := g.table
	from := g.start(b)
	for r := g.runPtr[b]; r < g.runPtr[b+1]; r++ {
		u, to := int(g.runU[r]), g.runEnd[r]
		for t := from; t < to; t++ {
			v := float32(vals[t])
			if table != nil {
				v = table[uint8(vals[t])]
			}
			s.step(u, col0+int(items[t]), v, lam, lamB, eta, rk, &impl)
		}
		from = to
	}
}

// step is one SGD step on the rating r (centred) of user u and item it.
func (s *sgdState) step(u, it int, r, lam, lamB, eta, rk float32, impl *gonum.Implementation) {
	k := s.k
	p := s.P[u*k : u*k+k : u*k+k]
	q := s.Q[it*k : it*k+k : it*k+k]
	sp, sq := s.ps[u], s.qs[it]
	pq := sp * sq * impl.Sdot(k, p, 1, q, 1)
	e := r - s.bu[u] - s.bi[it] - pq
	pn, qn := s.pn[u], s.qn[it]
	etaP := eta / sqrt32(s.pG[u])
	etaQ := eta / sqrt32(s.qG[it])
	ap, cp := 1-etaP*lam, etaP*e
	aq, cq := 1-etaQ*lam, etaQ*e
	sp2, sq2 := ap*sp, aq*sq
	alpha, beta := cp*sq/sp2, cq*sp/sq2
	c := 1 - alpha*beta
	if c > 0.5 && c < 2 && sp2 > 1e-3 && sq2 > 1e-3 {
		impl.Saxpy(k, beta, p, 1, q, 1)
		impl.Saxpy(k, alpha/c, q, 1, p, 1)
		s.ps[u], s.qs[it] = sp2*c, sq2
	} else {
		// Huge steps or tiny scales: fold the scales into the rows
		// and take the plain step.
		s.materialise(u, it)
		step32(p, q, ap, cp, aq, cq)
	}
	s.pn[u] = max(0, ap*ap*pn+2*ap*cp*pq+cp*cp*qn)
	s.qn[it] = max(0, aq*aq*qn+2*aq*cq*pq+cq*cq*pn)
	gp2 := max(0, lam*lam*pn-2*lam*e*pq+e*e*qn)
	gq2 := max(0, lam*lam*qn-2*lam*e*pq+e*e*pn)
	s.bu[u] -= etaP * (lamB*s.bu[u] - e)
	s.bi[it] -= etaQ * (lamB*s.bi[it] - e)
	s.pG[u] += gp2 * rk
	s.qG[it] += gq2 * rk
}

// materialise folds the scales of user u's and item i's rows into them.
func (s *sgdState) materialise(u, i int) {
	k := s.k
	if sc := s.ps[u]; sc != 1 {
		p := s.P[u*k : u*k+k]
		for d := range p {
			p[d] *= sc
		}
		s.ps[u] = 1
	}
	if sc := s.qs[i]; sc != 1 {
		q := s.Q[i*k : i*k+k]
		for d := range q {
			q[d] *= sc
		}
		s.qs[i] = 1
	}
}

// materialiseAll folds every scale into its row and recomputes the
// squared norms (otherwise updated in closed form, where rounding would
// accumulate).
func (s *sgdState) materialiseAll() {
	k := s.k
	for u := range s.ps {
		s.materialise(u, 0)
		p := s.P[u*k : u*k+k]
		s.pn[u] = dot32(p, p)
	}
	for i := range s.qs {
		s.materialise(0, i)
		q := s.Q[i*k : i*k+k]
		s.qn[i] = dot32(q, q)
	}
}

// step32 sets p ← ap·p + cp·q and q ← aq·q + cq·p (old p), unrolled by
// four.
func step32(p, q []float32, ap, cp, aq, cq float32) {
	for len(p) >= 4 && len(q) >= 4 {
		p0, p1, p2, p3 := p[0], p[1], p[2], p[3]
		q0, q1, q2, q3 := q[0], q[1], q[2], q[3]
		p[0], p[1], p[2], p[3] = ap*p0+cp*q0, ap*p1+cp*q1, ap*p2+cp*q2, ap*p3+cp*q3
		q[0], q[1], q[2], q[3] = aq*q0+cq*p0, aq*q1+cq*p1, aq*q2+cq*p2, aq*q3+cq*p3
		p, q = p[4:], q[4:]
	}
	for d := range p {
		pd, qd := p[d], q[d]
		p[d], q[d] = ap*pd+cp*qd, aq*qd+cq*pd
	}
}

func ones(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	return x
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// dot32 is Σ x[i]·y[i] (len(y) ≥ len(x)), with four partial sums so
// that the additions pipeline.
func dot32(x, y []float32) float32 {
	var s0, s1, s2, s3 float32
	for len(x) >= 4 && len(y) >= 4 {
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		x, y = x[4:], y[4:]
	}
	for i := range x {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// runStrata makes one pass over the nb×nb blocks in nb strata, in a
// random order: stratum s holds the blocks (r, (r+s) mod nb), which share
// no row and no column of blocks (Gemulla, Nijkamp, Haas, Sismanis,
// "Large-Scale Matrix Factorization with Distributed Stochastic Gradient
// Descent", KDD 2011). The result is a function of the seed and nb only:
// every row of blocks and every column of blocks sees its blocks in the
// strata's order, and blocks that share neither commute. With several
// workers there is no barrier between strata: a block runs as soon as the
// two blocks of the previous stratum it depends on (the one in its row and
// the one in its column) are done, so a worker the OS deschedules holds up
// only what depends on its block, while the other takes any ready block —
// the freedom of LIBMF's dynamic scheduler (which takes any free block,
// and is therefore not repeatable) without giving up a repeatable result.
// Cancelling ctx skips the blocks not yet started and returns its error.
func runStrata(ctx context.Context, nb, w int, rnd *rand.Rand, f func(b int)) error {
	order := rnd.Perm(nb)
	if w == 1 || nb == 1 {
		for _, s := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			for r := range nb {
				f(r*nb + (r+s)%nb)
			}
		}
		return nil
	}
	// Task t·nb + r is the block of row r in the t-th stratum of order.
	total := nb * nb
	pending := make([]atomic.Int32, total)
	for x := nb; x < total; x++ {
		pending[x].Store(2)
	}
	ready := make(chan int, total)
	for r := range nb {
		ready <- r
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	for range min(w, nb) {
		wg.Go(func() {
			for x := range ready {
				t, r := x/nb, x%nb
				c := (r + order[t]) % nb
				if ctx.Err() == nil {
					f(r*nb + c)
				}
				if t+1 < nb {
					// Its successors: the next stratum's block in row r,
					// and the one in column c (row c − s′).
					for _, r2 := range [2]int{r, ((c-order[t+1])%nb + nb) % nb} {
						if y := (t+1)*nb + r2; pending[y].Add(-1) == 0 {
							ready <- y
						}
					}
				}
				if done.Add(1) == int64(total) {
					close(ready)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}
