package topn

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	lapackgonum "gonum.org/v1/gonum/lapack/gonum"
	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/statistic"
)

// Private implicit ALS (dp-ials) in the line of Chien, Jain, Krichene,
// Rendle, Song, Thakurta and Zhang, "Private Alternating Least Squares:
// Practical Private Matrix Completion with Tighter Rates" (ICML 2021), and
// Krichene, Jain, Song, Sundararajan, Thakurta and Zhang, "Multi-Task
// Differential Privacy Under Distribution Skew" (ICML 2023). One step:
//
//  1. every user solves her own row exactly against the public item
//     factors H (the iALS user step, the "implicit" fold-in: UserRows) and
//     keeps it; it is never released;
//  2. her row is scaled by a public 1/Γ and clipped to the unit ball (w̃),
//     and she weighs her covered items by c_uj ≥ 0 with Σ_j c_uj² ≤ 1
//     (StepWeights: public item weights, normalised per user);
//  3. the item side's sufficient statistics are summed over users — per
//     covered item j, r·Σ_u c_uj T(w̃_u w̃_uᵀ) and s·Σ_u c_uj w̃_u, and once
//     g·Σ_u T(w̃_u w̃_uᵀ) (T: the upper triangle with the off-diagonal
//     entries ×√2, so that ⟨T(A), T(B)⟩ is the Frobenius product) — and
//     released once with Gaussian noise of ℓ2 sensitivity
//     StepScales.Sensitivity;
//  4. the items are solved from the released statistics alone
//     (SolveItems): post-processing.
//
// The layout of the released vector is StatsLayout's.

// StatsLayout is the shape of one step's released vector: for each of
// Items covered items (in column order) the block [r·T(G_j) (when Gram),
// s·b_j], then the global block g·T(G).
type StatsLayout struct {
	K, Items int
	Gram     bool // whether the per-item Gram blocks are released
}

// Tri is the length of T(A) for a K×K symmetric A.
func (l StatsLayout) Tri() int { return l.K * (l.K + 1) / 2 }

// PerItem is the length of one item's block.
func (l StatsLayout) PerItem() int {
	if l.Gram {
		return l.Tri() + l.K
	}
	return l.K
}

// Len is the length of the released vector.
func (l StatsLayout) Len() int { return l.Items*l.PerItem() + l.Tri() }

// Global is the offset of the global block.
func (l StatsLayout) Global() int { return l.Items * l.PerItem() }

// StepScales are the public weights of the three blocks of a user's
// contribution: r (per-item Gram, 0 when not released), s (per-item
// right-hand side) and g (global Gram).
type StepScales struct {
	Gram, RHS, Global float64
}

// Check validates the scales.
func (sc StepScales) Check() error {
	for _, v := range []float64{sc.Gram, sc.RHS, sc.Global} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("dp-ials: block weights (%g, %g, %g) must be finite and ≥ 0", sc.Gram, sc.RHS, sc.Global)
		}
	}
	if sc.RHS == 0 || sc.Global == 0 {
		return fmt.Errorf("dp-ials: the right-hand side and global Gram weights must be > 0")
	}
	return nil
}

// Sensitivity is the ℓ2 sensitivity of one step's released vector when
// one user's data are replaced by any others.
//
// User u's part is x_u = ((c_uj·r·T(w̃w̃ᵀ), c_uj·s·w̃) per covered item j ;
// g·T(w̃w̃ᵀ)) with ‖w̃‖ ≤ 1, c_uj ≥ 0 and Σ_j c_uj² ≤ 1, where w̃ and c
// depend only on her own data and public values (the previous releases),
// so replacing her changes x_u alone (adaptive composition covers the
// dependence on earlier releases). As ‖T(w̃w̃ᵀ)‖ = ‖w̃w̃ᵀ‖_F = ‖w̃‖²:
//
//	‖x_u‖² = Σ_j c_uj²(r²‖w̃‖⁴ + s²‖w̃‖²) + g²‖w̃‖⁴ ≤ r² + s² + g².
//
// For two users u, u' with t = w̃·w̃' ∈ [−1, 1] and C = Σ_j c_uj c_u'j ∈
// [0, 1] (non-negative weights; Cauchy–Schwarz), and ⟨T(aaᵀ), T(bbᵀ)⟩ =
// (a·b)²:
//
//	⟨x_u, x_u'⟩ = C(r²t² + s²t) + g²t²,
//
// linear in C, so its minimum over C ∈ [0, 1] is at C = 0 (g²t² ≥ 0) or
// C = 1: μ = min(0, min_{t∈[−1,1]} (r² + g²)t² + s²t), which is
// −s⁴/(4(r² + g²)) when s² ≤ 2(r² + g²) and r² + g² − s² otherwise.
// Hence
//
//	‖x_u − x_u'‖² ≤ 2(r² + s² + g²) − 2μ.
//
// With r = s = 1 and g → 0 this is √4.5 ≈ 2.12 against 2√(2 + g²) from the
// triangle inequality. TestStepSensitivityHolds checks it on random and
// adversarial pairs; the adversarial pair (w̃' = t*·w̃/|t*| …, one shared
// item) reaches it.
func (sc StepScales) Sensitivity() float64 {
	a := sc.Gram*sc.Gram + sc.Global*sc.Global
	s2 := sc.RHS * sc.RHS
	var mu float64
	if s2 <= 2*a {
		mu = -s2 * s2 / (4 * a)
	} else {
		mu = a - s2
	}
	return math.Sqrt(2*(a+s2) - 2*mu)
}

// shrinkOne keeps clipped norms and weights a hair inside their bounds so
// that float rounding cannot push a contribution past the sensitivity.
const shrinkOne = 1 - 1e-9

// ClipRow scales the row w by 1/gamma and clips it to the unit ball (a
// hair inside), in place: the w̃ of a user's contribution.
func ClipRow(w []float64, gamma float64) {
	var n2 float64
	for _, v := range w {
		n2 += v * v
	}
	f := shrinkOne / gamma
	if n := math.Sqrt(n2) / gamma; n > 1 {
		f = shrinkOne / (gamma * n)
	}
	for i := range w {
		w[i] *= f
	}
}

// StepWeights returns a user's normalisation for the public item weights
// f (catalogue-indexed, ≥ 0, zero for items not covered): she weighs her
// covered item j by c_uj = f_j·Norm(items), so that Σ_j c_uj² ≤ 1.
// Krichene et al.'s adaptive weights take f_j = max(count_j, 1)^μ with
// μ < 0: a user spends more of her contribution on rare items, whose
// statistics have fewer users to average the noise.
func StepWeights(f []float64, items []int32) float64 {
	var s float64
	for _, j := range items {
		s += f[j] * f[j]
	}
	if s == 0 {
		return 0
	}
	return (1 - 1e-12) / math.Sqrt(s)
}

// Unpack writes the symmetric k×k matrix T⁻¹(src)/weight (both triangles)
// into the row-major a.
func Unpack(a, src []float64, k int, weight float64) {
	o := 0
	inv := 1 / weight
	invo := inv / math.Sqrt2
	for p := range k {
		a[p*k+p] = src[o] * inv
		o++
		for q := p + 1; q < k; q++ {
			v := src[o] * invo
			a[p*k+q], a[q*k+p] = v, v
			o++
		}
	}
}

// UserContribution adds user u's part x_u of a step's released vector to
// dst (length lay.Len()): her clipped row wt (‖wt‖ ≤ 1), her items, the
// covered columns and the public item weights f. It is the definition the
// summed statistics (StepStats, StepStatistic) are built from — the same
// factors (stepFactors) expanded by the same code (expandStep) — and the
// sensitivity test's subject.
func UserContribution(dst []float64, lay StatsLayout, sc StepScales, cols Columns, f []float64, items []int32, wt []float64) {
	per := lay.PerItem()
	slab := make([]float64, per)
	stepFactors(lay, sc, cols, f, items, wt, func(key int, fac []float64) {
		expandStep(fac, slab)
		for i, x := range slab {
			if o := key*per + i; o < len(dst) {
				dst[o] += x
			}
		}
	})
}

// A step's part is factored: for each covered item j she has, keyed by its
// column q, the factor (0, c_uj·r, c_uj·s, w̃), whose slab is the item's
// block [c_uj·r·T(w̃w̃ᵀ) (with per-item Grams), c_uj·s·w̃]; the global block
// g·T(w̃w̃ᵀ) follows the items' blocks as keys Items, Items+1, … (one key
// when the blocks carry Grams, ⌈Tri/K⌉ without), each with the factor
// (1+m, g, 0, w̃) of its piece m. Expanding every factor at key·PerItem
// (the last key cut at the vector's end) gives x_u.

// stepFactorLen is the length of a factor at rank k.
func stepFactorLen(k int) int { return k + 3 }

// globalKeys is the number of keys the global block spans.
func (l StatsLayout) globalKeys() int {
	per := l.PerItem()
	return (l.Tri() + per - 1) / per
}

// stepFactors emits the user's factors (the factor slice is reused).
func stepFactors(lay StatsLayout, sc StepScales, cols Columns, f []float64, items []int32, wt []float64, emit func(key int, fac []float64)) {
	fac := make([]float64, stepFactorLen(lay.K))
	copy(fac[3:], wt)
	norm := StepWeights(f, items)
	for _, j := range items {
		q := cols[j]
		if q < 0 || f[j] == 0 {
			continue
		}
		c := f[j] * norm
		fac[0], fac[1], fac[2] = 0, c*sc.Gram, c*sc.RHS
		emit(int(q), fac)
	}
	for m := range lay.globalKeys() {
		fac[0], fac[1], fac[2] = float64(1+m), sc.Global, 0
		emit(lay.Items+m, fac)
	}
}

// expandStep writes factor fac's slab (a key's PerItem coordinates) into
// slab. It reads nothing but fac and len(slab): an item's block carries its
// Gram when the slab has room for it (Tri + K), and a global piece m
// holds the entries [m·len(slab), (m+1)·len(slab)) of g·T(w̃w̃ᵀ), zero past
// its end. T(w̃w̃ᵀ)'s entries are a·(w̃_p·w̃_p) on the diagonal and
// (a·√2)·(w̃_p·w̃_q) off it.
func expandStep(fac, slab []float64) {
	mode, a, b, w := int(fac[0]), fac[1], fac[2], fac[3:]
	k := len(w)
	tri := k * (k + 1) / 2
	ao := a * math.Sqrt2
	if mode == 0 {
		o := 0
		if len(slab) >= tri+k {
			for p, x := range w {
				slab[o] = a * (x * x)
				o++
				for _, y := range w[p+1:] {
					slab[o] = ao * (x * y)
					o++
				}
			}
		}
		for p, x := range w {
			slab[o+p] = b * x
		}
		return
	}
	clear(slab)
	lo := (mode - 1) * len(slab)
	hi := lo + len(slab)
	o := 0
	for p, x := range w {
		if o >= hi {
			return
		}
		if o+k-p <= lo {
			o += k - p
			continue
		}
		for q := p; q < k; q++ {
			if o >= lo && o < hi {
				v := x * w[q]
				if q == p {
					slab[o-lo] = a * v
				} else {
					slab[o-lo] = ao * v
				}
			}
			o++
		}
	}
}

// rowBlock is the number of rows the Gram kernel gathers at a time.
const rowBlock = 128

// gramScratch is the Gram kernel's scratch.
type gramScratch struct{ x, xw, ones []float64 }

func newGramScratch(k int) *gramScratch {
	s := &gramScratch{x: make([]float64, rowBlock*k), xw: make([]float64, rowBlock*k), ones: make([]float64, rowBlock)}
	for i := range s.ones {
		s.ones[i] = 1
	}
	return s
}

// gramAcc adds Σ_t w_t·f_t f_tᵀ to the upper triangle of the k×k
// row-major a and Σ_t w_t·f_t to b (b nil: skipped), f_t the row idx[t]
// of the row-major rows (stride k) and w_t = weight(t) (nil: 1). Rows are
// gathered rowBlock at a time and each row of the triangle is one gonum
// Dgemv (its assembly kernel), the scheme of package mf's Gram blocks.
func gramAcc(a, b []float64, k int, rows []float64, idx []int32, weight func(t int) float64, s *gramScratch) {
	var impl gonum.Implementation
	for beg := 0; beg < len(idx); beg += rowBlock {
		n := min(rowBlock, len(idx)-beg)
		x, xw := s.x[:n*k], s.x[:n*k]
		for t, j := range idx[beg : beg+n] {
			copy(x[t*k:t*k+k], rows[int(j)*k:int(j)*k+k])
		}
		if weight != nil {
			xw = s.xw[:n*k]
			for t := range n {
				wt := weight(beg + t)
				r, d := x[t*k:t*k+k], xw[t*k:t*k+k]
				for c, v := range r {
					d[c] = wt * v
				}
			}
		}
		for p := range k {
			impl.Dgemv(blas.Trans, n, k-p, 1, x[p:], k, xw[p:], k, 1, a[p*k+p:], 1)
		}
		if b != nil {
			impl.Dgemv(blas.Trans, n, k, 1, xw, k, s.ones[:n], 1, 1, b, 1)
		}
	}
}

// UserRows solves every user's row exactly against the item factors h
// (items × k, row-major): w_u = (α₀·HᵀH + Σ_{j∈I_u} h_j h_jᵀ + reg(|I_u|)·I)⁻¹
// Σ_{j∈I_u} h_j, the iALS user step and the "implicit" fold-in rule, into
// out (users × k). This is each user's own computation (her row is her
// state, never released); users whose system is not positive definite get
// a zero row.
func UserRows(ctx context.Context, x *Interactions, h []float64, k int, alpha0 float64, reg func(n int) float64, w int, out []float64) error {
	if len(h) != x.NumItems*k || len(out) != x.NumUsers*k {
		return fmt.Errorf("dp-ials user rows: %d item and %d user values for %d × %d at rank %d", len(h), len(out), x.NumItems, x.NumUsers, k)
	}
	return userRows(ctx, x, h, k, userSystem(h, k, alpha0), reg, w, out)
}

// userRows is UserRows with the common system g = userSystem(h, k, α₀)
// already formed.
func userRows(ctx context.Context, x *Interactions, h []float64, k int, g []float64, reg func(n int) float64, w int, out []float64) error {
	w = workers(w)
	scr := make([]*rowSolver, w)
	for i := range scr {
		scr[i] = newRowSolver(k)
	}
	return parallel(ctx, x.NumUsers, w, 256, func(wk, lo, hi int) {
		for u := lo; u < hi; u++ {
			items := x.Row(u)
			scr[wk].solve(g, h, k, items, reg(len(items)), out[u*k:u*k+k])
		}
	})
}

// userSystem is the part of every user's system the items she lacks
// bring, α₀·HᵀH (k × k, row-major).
func userSystem(h []float64, k int, alpha0 float64) []float64 {
	g := Gramian(h, k)
	for i := range g {
		g[i] *= alpha0
	}
	return g
}

// rowSolver is one worker's scratch for a user's own solve.
type rowSolver struct {
	a, b []float64
	s    *gramScratch
}

func newRowSolver(k int) *rowSolver {
	return &rowSolver{make([]float64, k*k), make([]float64, k), newGramScratch(k)}
}

// solve writes a user's row (her items, her ridge lam) against the item
// factors h and the common system g (userSystem) into row; it reports
// false, and writes a zero row, when her system is not positive definite.
func (s *rowSolver) solve(g, h []float64, k int, items []int32, lam float64, row []float64) bool {
	copy(s.a, g)
	clear(s.b)
	gramAcc(s.a, s.b, k, h, items, nil, s.s)
	for p := range k {
		s.a[p*k+p] += lam
	}
	if !cholSolve(s.a, k, s.b) {
		clear(row)
		return false
	}
	copy(row, s.b)
	return true
}

// cholSolve solves a·x = b for the symmetric positive definite k×k
// row-major a (upper triangle read, overwritten by its Cholesky factor);
// b is overwritten by x. It reports false when a is not positive
// definite.
func cholSolve(a []float64, k int, b []float64) bool {
	if !(lapackgonum.Implementation{}).Dpotrf(blas.Upper, k, a, k) {
		return false
	}
	for i := range k {
		if d := a[i*k+i]; !(d > 0) || math.IsInf(d, 0) {
			return false
		}
	}
	var impl gonum.Implementation
	impl.Dtrsv(blas.Upper, blas.Trans, blas.NonUnit, k, a, k, b, 1)
	impl.Dtrsv(blas.Upper, blas.NoTrans, blas.NonUnit, k, a, k, b, 1)
	return true
}

// StepStats sums the users' contributions (UserContribution) to one
// step's statistics from their clipped rows wt (users × k, each ‖·‖ ≤ 1)
// and weights, into a vector of lay.Len(). xt is the items × users view of
// the interactions (Transpose). Each item's block is summed on one of w
// workers over its users, the global block over users on every worker and
// merged; every coordinate is the double-double sum (statistic.DD) of the
// users' expanded factors (expandStep), so it is the float64 nearest the
// exact sum whatever the order — what any engine that sums the same
// factors in that form (privrec-beam's combiner) returns.
func StepStats(ctx context.Context, x, xt *Interactions, lay StatsLayout, sc StepScales, cols Columns, f, wt []float64, w int) ([]float64, error) {
	k := lay.K
	if len(wt) != x.NumUsers*k || len(f) != x.NumItems || len(cols) != x.NumItems || xt.NumItems != x.NumUsers {
		return nil, fmt.Errorf("dp-ials statistics: shapes disagree")
	}
	w = workers(w)
	// Each user's normalisation of the item weights.
	norm := make([]float64, x.NumUsers)
	if err := parallel(ctx, x.NumUsers, w, 4096, func(_, lo, hi int) {
		for u := lo; u < hi; u++ {
			norm[u] = StepWeights(f, x.Row(u))
		}
	}); err != nil {
		return nil, err
	}
	out := make([]float64, lay.Len())
	per, nf := lay.PerItem(), stepFactorLen(k)
	// The global block, over users.
	gk := lay.globalKeys()
	parts := make([]statistic.DD, w)
	if err := parallel(ctx, x.NumUsers, w, 8192, func(wk, lo, hi int) {
		if parts[wk].Hi == nil {
			parts[wk] = statistic.NewDD(gk * per)
		}
		fac, slab := make([]float64, nf), make([]float64, per)
		for u := lo; u < hi; u++ {
			copy(fac[3:], wt[u*k:u*k+k])
			for m := range gk {
				fac[0], fac[1], fac[2] = float64(1+m), sc.Global, 0
				expandStep(fac, slab)
				parts[wk].AddAt(m*per, slab)
			}
		}
	}); err != nil {
		return nil, err
	}
	copy(out[lay.Global():], statistic.Merged(parts, gk*per))
	// The per-item blocks, item by item.
	err := parallel(ctx, x.NumItems, w, 1, func(_, lo, hi int) {
		fac, slab := make([]float64, nf), make([]float64, per)
		acc := statistic.NewDD(per)
		for j := lo; j < hi; j++ {
			q := cols[j]
			if q < 0 || f[j] == 0 {
				continue
			}
			clear(acc.Hi)
			clear(acc.Lo)
			for _, u := range xt.Row(j) {
				c := f[j] * norm[u]
				copy(fac[3:], wt[int(u)*k:int(u)*k+k])
				fac[0], fac[1], fac[2] = 0, c*sc.Gram, c*sc.RHS
				expandStep(fac, slab)
				acc.AddAt(0, slab)
			}
			blk := out[int(q)*per : int(q)*per+per]
			for i, v := range acc.Hi {
				blk[i] = v + acc.Lo[i]
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ProjectPSD replaces the symmetric k×k row-major a by its projection on
// the positive semi-definite cone (negative eigenvalues set to 0).
func ProjectPSD(a []float64, k int) error {
	s := mat.NewSymDense(k, a)
	var eig mat.EigenSym
	if !eig.Factorize(s, true) {
		return fmt.Errorf("dp-ials: eigendecomposition failed")
	}
	vals := eig.Values(nil)
	if vals[0] >= 0 {
		return nil
	}
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	clear(a)
	for e, l := range vals {
		if l <= 0 {
			continue
		}
		for p := range k {
			vp := vecs.At(p, e) * l
			for q := range k {
				a[p*k+q] += vp * vecs.At(q, e)
			}
		}
	}
	return nil
}

// ItemSolve describes the item side's solve from released statistics.
type ItemSolve struct {
	Layout StatsLayout
	Scales StepScales
	// Alpha is the weight of the global Gram (α₀ of the weighted loss).
	Alpha float64
	// Ridge is the ridge of covered column q (in the clipped rows' units).
	Ridge func(q int) float64
	// Gamma is the users' row scale Γ: item factors are returned in the
	// units of the unclipped rows (h = h'/Γ).
	Gamma float64
	// Prior, when not nil, holds the previous item factors (items × k, the
	// unclipped rows' units): the ridge then pulls each item toward its
	// previous factor instead of toward 0, and the items not covered keep
	// theirs.
	Prior []float64
	// Workers bounds parallelism.
	Workers int
}

// SolveItems solves each covered item from the released vector stats:
// h'_j = (PSD(G_j) + α·PSD(G) + ridge_j·I)⁻¹ b_j (G_j omitted when the
// per-item Gram is not released), in the clipped rows' units, written as
// h_j = h'_j/Γ into row j of h (items × k; rows of items not covered are
// left as they are). With a prior, the right-hand side gains ridge_j·Γ·h⁰_j
// (the ridge pulls toward h⁰). Post-processing of the release.
func SolveItems(ctx context.Context, stats []float64, o ItemSolve, cols Columns, h []float64) error {
	lay, k := o.Layout, o.Layout.K
	if len(stats) != lay.Len() || len(h) != len(cols)*k || o.Prior != nil && len(o.Prior) != len(h) {
		return fmt.Errorf("dp-ials item solve: shapes disagree")
	}
	glob := make([]float64, k*k)
	Unpack(glob, stats[lay.Global():], k, o.Scales.Global)
	if err := ProjectPSD(glob, k); err != nil {
		return err
	}
	byCol := make([]int32, lay.Items)
	for j, q := range cols {
		if q >= 0 {
			byCol[q] = int32(j)
		}
	}
	w := workers(o.Workers)
	type scratch struct{ a, b []float64 }
	scr := make([]scratch, w)
	var fail error
	failed := make([]bool, w)
	per := lay.PerItem()
	err := parallel(ctx, lay.Items, w, 16, func(wk, lo, hi int) {
		if scr[wk].a == nil {
			scr[wk] = scratch{make([]float64, k*k), make([]float64, k)}
		}
		s := &scr[wk]
		for q := lo; q < hi; q++ {
			blk := stats[q*per : q*per+per]
			if lay.Gram {
				Unpack(s.a, blk[:lay.Tri()], k, o.Scales.Gram)
				if ProjectPSD(s.a, k) != nil {
					failed[wk] = true
					return
				}
				blk = blk[lay.Tri():]
			} else {
				clear(s.a)
			}
			lam := o.Ridge(q)
			for i := range s.a {
				s.a[i] += o.Alpha * glob[i]
			}
			for p := range k {
				s.a[p*k+p] += lam
			}
			j := int(byCol[q])
			for p, v := range blk {
				s.b[p] = v / o.Scales.RHS
			}
			if o.Prior != nil {
				for p, v := range o.Prior[j*k : j*k+k] {
					s.b[p] += lam * o.Gamma * v
				}
			}
			row := h[j*k : j*k+k]
			if !cholSolve(s.a, k, s.b) {
				clear(row)
				continue
			}
			for p, v := range s.b {
				row[p] = v / o.Gamma
			}
		}
	})
	if err != nil {
		return err
	}
	for _, f := range failed {
		if f {
			fail = fmt.Errorf("dp-ials item solve: eigendecomposition failed")
		}
	}
	return fail
}
