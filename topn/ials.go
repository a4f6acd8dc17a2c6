package topn

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas/gonum"
)

// IALSOptions configure IALS. The loss is Rendle et al.'s (RecSys 2022):
//
//	Σ_{(u,i) observed} (w_u·h_i − 1)² + α₀ Σ_{u,i} (w_u·h_i)²
//	  + λ Σ_u (|I_u| + α₀|I|)^ν ‖w_u‖² + λ Σ_i (|U_i| + α₀|U|)^ν ‖h_i‖²
//
// (|I| items, |U| users, |I_u| user u's items, |U_i| item i's users).
type IALSOptions struct {
	Rank   int
	Alpha0 float64 // weight α₀ of the unobserved pairs
	Lambda float64 // λ
	Nu     float64 // ν: the frequency scaling of λ (1: λ grows with the count)
	Epochs int
	// CGSteps is the number of conjugate-gradient steps per row and
	// half-epoch, warm-started from the row's previous value (Takács et
	// al.: 3 is nearly as good as an exact solve).
	CGSteps int
	// InitScale is the standard deviation of the initial item factors
	// (times 1/√Rank).
	InitScale float64
	// WarmShare and WarmEpochs, when both set, start the factors with
	// WarmEpochs epochs on a sample of the users (each kept with
	// probability WarmShare, drawn from Rand) before the Epochs on all:
	// the sample's epochs cost about WarmShare of a full one each and take
	// the item factors from random to the sample's fit, so the full epochs
	// refine a subspace instead of growing one (see IALSWarmWork).
	WarmShare  float64
	WarmEpochs int
	Rand       *rand.Rand
	Workers    int
	// Progress, when set, is told each finished epoch.
	Progress func(done, total int)
}

// Check validates the options (a random source aside).
func (o *IALSOptions) Check() error {
	switch {
	case o.Rank < 1 || o.Rank > 4096:
		return fmt.Errorf("ials: rank %d must be in [1, 4096]", o.Rank)
	case !(o.Alpha0 >= 0) || math.IsInf(o.Alpha0, 0):
		return fmt.Errorf("ials: α₀ = %g must be finite and ≥ 0", o.Alpha0)
	case !(o.Lambda > 0) || math.IsInf(o.Lambda, 0):
		return fmt.Errorf("ials: λ = %g must be finite and > 0", o.Lambda)
	case !(o.Nu >= 0 && o.Nu <= 2):
		return fmt.Errorf("ials: ν = %g must be in [0, 2]", o.Nu)
	case o.Epochs < 1 || o.CGSteps < 1:
		return fmt.Errorf("ials: epochs and CG steps must be ≥ 1")
	case !(o.InitScale > 0) || math.IsInf(o.InitScale, 0):
		return fmt.Errorf("ials: the initial scale %g must be finite and > 0", o.InitScale)
	case o.WarmEpochs < 0 || (o.WarmEpochs > 0 && !(o.WarmShare > 0 && o.WarmShare < 1)):
		return fmt.Errorf("ials: warm-start epochs %d must be ≥ 0, and need a user share in (0, 1) (got %g)", o.WarmEpochs, o.WarmShare)
	}
	return nil
}

// IALS fits item factors H (items × rank, row-major) and user factors W
// (users × rank). The factors live in float32 during training (half the
// memory traffic of the row solves, which are bound by it at scale; see
// HalfStep) and are returned in float64.
func IALS(ctx context.Context, x *Interactions, o IALSOptions) (W, H []float64, err error) {
	if err := o.Check(); err != nil {
		return nil, nil, err
	}
	if o.Rand == nil {
		return nil, nil, fmt.Errorf("ials: a random source is needed")
	}
	k := o.Rank
	h := make([]float32, x.NumItems*k)
	sd := o.InitScale / math.Sqrt(float64(k))
	for i := range h {
		h[i] = float32(o.Rand.NormFloat64() * sd)
	}
	total := o.WarmEpochs + o.Epochs
	progress := func(done int) {
		if o.Progress != nil {
			o.Progress(done, total)
		}
	}
	if o.WarmEpochs > 0 {
		s := x.SampleUsers(o.WarmShare, o.Rand)
		if err := alternate(ctx, s, h, make([]float32, s.NumUsers*k), o, o.WarmEpochs, progress); err != nil {
			return nil, nil, err
		}
	}
	w := make([]float32, x.NumUsers*k)
	if err := alternate(ctx, x, h, w, o, o.Epochs, func(done int) { progress(o.WarmEpochs + done) }); err != nil {
		return nil, nil, err
	}
	return widen(w), widen(h), nil
}

// alternate runs epochs of alternating half-steps on x (users, then
// items) from the item factors h and the user factors w.
func alternate(ctx context.Context, x *Interactions, h, w []float32, o IALSOptions, epochs int, done func(int)) error {
	xt := x.Transpose()
	for e := range epochs {
		if err := HalfStep(ctx, x, h, w, o.Rank, o.Alpha0, RegFor(o.Lambda, o.Nu, o.Alpha0, x.NumItems), o.CGSteps, o.Workers); err != nil {
			return err
		}
		if err := HalfStep(ctx, xt, w, h, o.Rank, o.Alpha0, RegFor(o.Lambda, o.Nu, o.Alpha0, x.NumUsers), o.CGSteps, o.Workers); err != nil {
			return err
		}
		done(e + 1)
	}
	return nil
}

func widen(f []float32) []float64 {
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out
}

// RegFor is the regularisation of a row with n interactions when the
// other side has m rows: λ·(n + α₀·m)^ν.
func RegFor(lambda, nu, alpha0 float64, m int) func(n int) float64 {
	return func(n int) float64 { return lambda * math.Pow(float64(n)+alpha0*float64(m), nu) }
}

// Gramian is FᵀF for the row-major rows × k matrix f (k × k, row-major).
func Gramian(f []float64, k int) []float64 {
	g := make([]float64, k*k)
	for r := 0; r+k <= len(f); r += k {
		row := f[r : r+k]
		for p, a := range row {
			if a == 0 {
				continue
			}
			gp := g[p*k : p*k+k]
			for q, b := range row {
				gp[q] += a * b
			}
		}
	}
	return g
}

// gramian32 is α₀·FᵀF for the row-major rows × k float32 matrix f,
// accumulated in float64 (k × k, row-major, float32).
func gramian32(f []float32, k int, alpha0 float64) []float32 {
	g := make([]float64, k*k)
	row := make([]float64, k)
	for r := 0; r+k <= len(f); r += k {
		for q, v := range f[r : r+k] {
			row[q] = float64(v)
		}
		for p, a := range row {
			if a == 0 {
				continue
			}
			gp := g[p*k : p*k+k]
			for q, b := range row {
				gp[q] += a * b
			}
		}
	}
	out := make([]float32, k*k)
	for i, v := range g {
		out[i] = float32(alpha0 * v)
	}
	return out
}

// HalfStep updates every row of solve (one per row of x) given the fixed
// side fixed: row r minimises Σ_{j∈x_r} (s·f_j − 1)² + α₀ Σ_j (s·f_j)² +
// reg(|x_r|)‖s‖², by cgSteps conjugate-gradient steps from its current
// value. The work is the matrix–vector products of the steps (cgRow); at
// scale they are bound by reading the fixed rows from memory, which is
// why the factors are float32 (the products run in gonum's float32
// assembly kernels; the step sizes are accumulated in float64).
func HalfStep(ctx context.Context, x *Interactions, fixed, solve []float32, k int, alpha0 float64, reg func(n int) float64, cgSteps, w int) error {
	g := gramian32(fixed, k, alpha0)
	w = workers(w)
	scr := make([]cgScratch, w)
	for i := range scr {
		scr[i] = newCGScratch(k)
	}
	return parallel(ctx, x.NumUsers, w, 32, func(wk, lo, hi int) {
		s := &scr[wk]
		for u := lo; u < hi; u++ {
			items := x.Row(u)
			cgRow(g, fixed, items, k, float32(reg(len(items))), solve[u*k:u*k+k], cgSteps, s)
		}
	})
}

// cgScratch is one worker's conjugate-gradient vectors and the buffer
// its rows' fixed factors are gathered into.
type cgScratch struct{ r, p, ap, rows []float32 }

// gatherRows is the most fixed rows a row's solve gathers into one
// contiguous block (2 MB at rank 128): the conjugate-gradient steps read
// them once per step, and from a block that stays in the core's cache
// instead of scattered rows from memory. Longer rows (the most popular
// items' users) are read in place.
const gatherRows = 4096

func newCGScratch(k int) cgScratch {
	return cgScratch{r: make([]float32, k), p: make([]float32, k), ap: make([]float32, k)}
}

// gather returns the rows of fixed listed in items as one contiguous
// block (in sc's buffer), or nil if there are more than gatherRows.
func (sc *cgScratch) gather(fixed []float32, items []int32, k int) []float32 {
	if len(items) > gatherRows {
		return nil
	}
	n := len(items) * k
	if cap(sc.rows) < n {
		sc.rows = make([]float32, n, max(n, 2*cap(sc.rows)))
	}
	rows := sc.rows[:n]
	for i, j := range items {
		copy(rows[i*k:i*k+k], fixed[int(j)*k:int(j)*k+k])
	}
	return rows
}

// rowSet is the fixed rows of one solve: a contiguous block, or the rows
// of fixed listed in items.
type rowSet struct {
	block, fixed []float32
	items        []int32
	k            int
}

func (rs rowSet) len() int {
	if rs.block != nil {
		return len(rs.block) / rs.k
	}
	return len(rs.items)
}

func (rs rowSet) row(i int) []float32 {
	if rs.block != nil {
		return rs.block[i*rs.k : i*rs.k+rs.k]
	}
	j := int(rs.items[i])
	return rs.fixed[j*rs.k : j*rs.k+rs.k]
}

// apply computes out = (G + Σ_j f_j f_jᵀ + λI)·v over the rows f_j of rs,
// through gonum's float32 BLAS kernels (G is symmetric: its row q times v
// is out's entry q).
func apply(g []float32, rs rowSet, lam float32, v, out []float32) {
	var b gonum.Implementation
	k := rs.k
	for q := range out {
		out[q] = lam*v[q] + b.Sdot(k, g[q*k:q*k+k], 1, v, 1)
	}
	for i := range rs.len() {
		f := rs.row(i)
		b.Saxpy(k, b.Sdot(k, f, 1, v, 1), f, 1, out, 1)
	}
}

// cgRow runs steps of conjugate gradient on (G + Σ f fᵀ + λI)·s = Σ f
// from the current s, f the rows of fixed listed in items.
func cgRow(g, fixed []float32, items []int32, k int, lam float32, s []float32, steps int, sc *cgScratch) {
	var b gonum.Implementation
	rs := rowSet{block: sc.gather(fixed, items, k), fixed: fixed, items: items, k: k}
	r, p, ap := sc.r, sc.p, sc.ap
	apply(g, rs, lam, s, ap)
	for q := range r {
		r[q] = -ap[q]
	}
	for i := range rs.len() {
		b.Saxpy(k, 1, rs.row(i), 1, r, 1)
	}
	copy(p, r)
	rr := b.Dsdot(k, r, 1, r, 1)
	for range steps {
		if rr < 1e-20 {
			return
		}
		apply(g, rs, lam, p, ap)
		alpha := float32(rr / b.Dsdot(k, p, 1, ap, 1))
		b.Saxpy(k, alpha, p, 1, s, 1)
		b.Saxpy(k, -alpha, ap, 1, r, 1)
		rr2 := b.Dsdot(k, r, 1, r, 1)
		beta := float32(rr2 / rr)
		rr = rr2
		for q := range p {
			p[q] = r[q] + beta*p[q]
		}
	}
}

// IALSLambda is the ridge λ (ν = 1) whose two frequency-scaled ridges
// threshold the singular values of the users × items interaction matrix X
// at τ = kappa·‖X‖_F = kappa·√interactions. With every user's ridge at its
// mean λ(d̄ + α₀|I|) and every item's at λ(c̄ + α₀|U|) (d̄, c̄ the mean
// interactions of a user and of an item), the least penalty of a
// factorisation Y = WHᵀ is 2√(λ_u·λ_i)·‖Y‖_* (the nuclear norm), and where
// the unobserved weight α₀ dominates the squared loss the fit
// soft-thresholds X's singular values at τ = √(λ_u·λ_i). X's spectrum
// grows with the population as ‖X‖_F does (both like √N for a fixed
// per-user distribution), so a threshold in units of ‖X‖_F keeps the
// same share of it at any N — the rule that ease's λ = 3·d̄ (the Gram's
// mean diagonal, ‖X‖²_F per item) follows too. λ then depends on the
// density, not on N: a fixed λ already grows with N through the item
// ridges' α₀|U|, and a λ that also fell like 1/√N thresholded below the
// sampling noise's singular values.
func IALSLambda(users, items, interactions int, alpha0, kappa float64) float64 {
	return kappa * math.Sqrt(float64(max(interactions, 1))) / IALSThreshold(users, items, interactions, alpha0, 1)
}

// IALSThreshold is the singular-value threshold √(λ_u·λ_i) that the ridge
// λ implies at the mean user and the mean item (see IALSLambda).
func IALSThreshold(users, items, interactions int, alpha0, lambda float64) float64 {
	n, m, nnz := float64(max(users, 1)), float64(max(items, 1)), float64(max(interactions, 1))
	d, c := nnz/n, nnz/m
	return lambda * math.Sqrt((d+alpha0*m)*(c+alpha0*n))
}

// IALSEpochWork is the multiply–adds of one epoch's row solves: per side,
// the Gramian (rows·k²), then cgSteps + 1 products with the k × k Gram
// and two passes over the interactions (a dot and an axpy per fixed row),
// plus the gathering and the right-hand side.
func IALSEpochWork(users, items, interactions, rank, cgSteps int) float64 {
	k, s := float64(rank), float64(cgSteps)
	return (s+2)*float64(users+items)*k*k + 4*(s+2)*float64(interactions)*k
}

// IALSEpochs is the number of epochs whose row solves fit budget
// multiply–adds, within [lo, hi].
func IALSEpochs(users, items, interactions, rank, cgSteps int, budget float64, lo, hi int) int {
	e := budget / IALSEpochWork(users, items, interactions, rank, cgSteps)
	if !(e < float64(hi)) {
		return hi
	}
	return max(lo, int(e))
}

// IALSWarmWork is the multiply–adds of epochs warm-start epochs on a
// share of the users (IALSOptions.WarmShare): IALSEpochWork at the
// sample's expected size.
func IALSWarmWork(users, items, interactions, rank, cgSteps int, share float64, epochs int) float64 {
	n, nnz := int(share*float64(users)), int(share*float64(interactions))
	return float64(epochs) * IALSEpochWork(n, items, nnz, rank, cgSteps)
}
