package mf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/statistic"
)

// Releaser adds the privacy noise of one DPALS item step: a
// privacy/mechanism Gaussian calibrated for that step's statistics (the
// solver never chooses a noise scale).
type Releaser interface {
	// Release adds noise to x in place.
	Release(src *noise.Source, x []float64) error
	// ReleaseSym adds a symmetric noise matrix to s in place.
	ReleaseSym(src *noise.Source, s *mat.SymDense) error
}

// DPALSOptions configure DPALS. Everything here is public (declared,
// chosen, or released earlier through an accounted mechanism); the
// ratings are the only private input.
type DPALSOptions struct {
	// Rank is the number of factor columns k.
	Rank int
	// Steps holds one Releaser per ALS step; the number of steps is its
	// length.
	Steps []Releaser
	// Noise is the source the Releasers draw from.
	Noise *noise.Source

	// Mean and ItemBias are the public offset and item biases the ratings
	// are centred with; Counts the public (noisy) item counts that set
	// the adaptive weights; Active marks the items that get factors (the
	// others keep a zero row).
	Mean     float64
	ItemBias []float64
	Counts   []float64
	Active   []bool

	// UserLambda is the ridge λ_u of the user solve and UserDamping the
	// shrinkage of the user's bias: the user side is exactly
	// model.FoldRidge with a user-centred transform (see userSolve).
	UserLambda, UserDamping float64
	// ItemLambda is the ridge λ_j of each item solve on the factor
	// coordinates, BiasLambda that on the bias coordinate (bias
	// refinement only).
	ItemLambda []float64
	BiasLambda []float64
	// UserClip Γ bounds ‖u‖ and ResidualClip R the centred rating in the
	// item statistics; RHSScale s weighs the right-hand sides against the
	// Gram blocks in the released vector (see DPALSSensitivity).
	UserClip, ResidualClip, RHSScale float64
	// BiasScale γ_b > 0 appends a constant coordinate γ_b to every user's
	// clipped row in the item statistics, so that each step also
	// re-estimates the item biases: the item solve gives (v_j, β_j) and
	// the public item bias becomes b_j + γ_b·β_j (0: item biases fixed).
	// The row the sensitivity bounds is then the augmented one, of norm
	// ≤ √(Γ² + γ_b²).
	BiasScale float64
	// MaxPerUser, if > 0, keeps a uniform sample of at most that many of
	// a user's (active) ratings in the item statistics.
	MaxPerUser int
	// WeightExponent μ sets the adaptive weights c_ij ∝ max(count_j, 1)^μ,
	// normalised so that Σ_j c_ij² = 1 for every user (the papers use
	// μ ≤ 0, favouring rare items; μ > 0 favours popular ones).
	WeightExponent float64
	// Init, when non-nil, is the initial item factors (items × k, public);
	// otherwise they are drawn with standard deviation InitScale/√k. With
	// PriorRidge the item solves shrink toward Init instead of toward 0:
	// v_j = (G_j + λ_j I)⁻¹ (h_j + λ_j·v⁰_j).
	Init       []float64
	PriorRidge bool
	InitScale  float64
	// PoolWeights, when set, makes every item solve use the pooled Gram
	// (solvePooled): item j's system is PoolWeights[j]·S̄, S̄ the noised
	// Gram blocks of all active items summed and divided by the sum of
	// their weights. PoolWeights[j] is a public proxy of item j's weight
	// in the statistics, Σ_i c_ij², up to one constant factor (which
	// cancels: S̄ is divided by the sum of the weights): with μ = 0 its
	// released weighted count, with adaptive weights that count times
	// w_j² (w_j = max(Counts_j, 1)^μ). No MaxPerUser sample with it.
	PoolWeights []float64
	// PoolNoise, with PoolWeights, is the standard deviation σ of the
	// noise on a Gram block's diagonal entries (σ/√2 off the diagonal).
	// When > 0 each item's system blends its own PSD-projected block
	// with the pooled one by their signal-to-noise ratio:
	// a_j·G_j + (1 − a_j)·W_j·S̄, a_j = ‖W_j·S̄‖²_F / (‖W_j·S̄‖²_F + σ²d²/2);
	// 0: the pooled block alone.
	PoolNoise float64
	// PoolPosterior, with PoolWeights, replaces each item's ridge solve
	// by the posterior mean under an empirical prior fitted to all items'
	// released right-hand sides (posteriorFit, solvePosterior): the
	// release's noise on the right-hand side (PoolNoise/RHSScale) enters
	// the solve, so items whose statistics are under it keep their prior
	// mean (the public Init with PriorRidge) and the most rated ones get
	// nearly the unregularised solve. ItemLambda is then unused.
	// Post-processing of the same release.
	PoolPosterior bool
	// Posterior, when set, is told the fitted prior: the pooled Gram's
	// eigenvalues, the factors' variance and the rating noise per
	// direction.
	Posterior func(s, p, alpha []float64)
	// Rand draws the initial factors and the per-user samples.
	Rand *rand.Rand
	// Workers bounds the goroutines (0: GOMAXPROCS).
	Workers int
	// Progress, when set, is told after every step.
	Progress func(Iteration)
	// Engine, when set, sums each step's statistic (ALSStepStatistic) in
	// place of the in-process sums over the Problem, which is then nil:
	// the users' rows are computed where the engine runs, and only the
	// sums come back (MaxPerUser must be 0: its sample is drawn in user
	// order from Rand, which an engine's workers do not share).
	Engine statistic.Engine

	// snapshot, when set (tests), gets the item factors and the clipped
	// user rows after every step.
	snapshot func(step int, v, u []float64)
}

// DPALSSensitivity is the ℓ2 sensitivity of one DPALS step's released
// vector when one user's ratings are replaced by any others
// (statistic.ALSStepSensitivity, where the proof is); userClip is the
// bound on the norm of the rows that enter the statistics (with bias
// refinement, √(Γ² + γ_b²) for the augmented rows).
func DPALSSensitivity(userClip, residualClip, rhsScale float64) float64 {
	return statistic.ALSStepSensitivity(userClip, residualClip, rhsScale)
}

// DPALSDim is the number of coordinates one step releases for a items at
// rank k (k+1 with bias refinement).
func DPALSDim(items, k int) int { return statistic.ALSStepDim(items, k) }

// items is the number of items of the problem: the Problem's, or with an
// engine the item biases'.
func (o *DPALSOptions) items(p *Problem) (int, error) {
	if o.Engine != nil {
		if o.MaxPerUser > 0 {
			return 0, fmt.Errorf("DPALS: --max-per-user %d samples each user's ratings in user order in process; an external engine needs it 0", o.MaxPerUser)
		}
		return len(o.ItemBias), nil
	}
	if p == nil {
		return 0, fmt.Errorf("DPALS needs the ratings or an engine")
	}
	return p.NumItems, nil
}

func (o *DPALSOptions) check(n int) error {
	if err := checkRank(o.Rank); err != nil {
		return err
	}
	if o.Init != nil && len(o.Init) != n*o.Rank {
		return fmt.Errorf("DPALS: the initial factors have %d values, want %d × %d", len(o.Init), n, o.Rank)
	}
	if o.Noise == nil || o.Rand == nil {
		return fmt.Errorf("DPALS needs a noise source and a random source")
	}
	if len(o.ItemBias) != n || len(o.Counts) != n || len(o.Active) != n || len(o.ItemLambda) != n {
		return fmt.Errorf("DPALS: item biases, counts, active flags and λs must have one entry per item (%d)", n)
	}
	for _, x := range []struct {
		name string
		v    float64
		pos  bool
	}{{"user λ", o.UserLambda, true}, {"user damping", o.UserDamping, false}, {"user clip", o.UserClip, true},
		{"residual clip", o.ResidualClip, true}, {"right-hand-side scale", o.RHSScale, true}, {"init scale", o.InitScale, false},
		{"bias scale", o.BiasScale, false}} {
		if math.IsNaN(x.v) || math.IsInf(x.v, 0) || x.v < 0 || (x.pos && x.v == 0) {
			return fmt.Errorf("DPALS: %s must be finite and %s, got %g", x.name, map[bool]string{true: "> 0", false: "≥ 0"}[x.pos], x.v)
		}
	}
	if math.IsNaN(o.WeightExponent) || math.IsInf(o.WeightExponent, 0) {
		return fmt.Errorf("DPALS: the weight exponent must be finite, got %g", o.WeightExponent)
	}
	if o.PoolWeights != nil && (len(o.PoolWeights) != n || o.MaxPerUser != 0) {
		return fmt.Errorf("DPALS: the pooled Gram needs one weight per item (%d, got %d) and no per-user sample", n, len(o.PoolWeights))
	}
	if o.BiasScale > 0 && len(o.BiasLambda) != n {
		return fmt.Errorf("DPALS: bias refinement needs one bias λ per item (%d)", n)
	}
	for j, l := range o.ItemLambda {
		if o.Active[j] && (!(l > 0) || math.IsInf(l, 0)) {
			return fmt.Errorf("DPALS: item λ of item %d must be finite and > 0, got %g", j, l)
		}
		if o.Active[j] && o.BiasScale > 0 && (!(o.BiasLambda[j] > 0) || math.IsInf(o.BiasLambda[j], 0)) {
			return fmt.Errorf("DPALS: bias λ of item %d must be finite and > 0, got %g", j, o.BiasLambda[j])
		}
	}
	return nil
}

// itemLists are the entries of the item statistics in item-major order:
// for item j, entries [ptr[j], ptr[j+1]) with the user, her rating and
// the weight c_ij. Without sampling they are the problem's item-major
// arrays themselves (entries of inactive items are never read), and only
// the weights are new.
type itemLists struct {
	ptr  []int64
	user []int32
	r    []float32
	c    []float32
}

// DPALS runs user-level joint-DP alternating least squares (Chien, Jain,
// Krichene, Rendle, Song, Thakurta, Zhang, "Private Alternating Least
// Squares: Practical Private Matrix Completion with Tighter Rates", ICML
// 2021), with the adaptive weights and frequency-scaled regularisation of
// Krichene, Jain, Song, Sundararajan, Thakurta, Zhang, "Multi-Task
// Differential Privacy Under Distribution Skew", ICML 2023. Each step:
//
//  1. every user centres her ratings with the public offset and item
//     biases and her own bias, and solves for her own row from the public
//     item factors (userSolve: the computation her device does; the rows
//     are never released), clipped to ‖ũ‖ ≤ Γ for the statistics;
//  2. every active item's statistics G_j = Σ_i c_ij ũ_i ũ_iᵀ and
//     h_j = Σ_i c_ij y_ij ũ_i (ũ augmented by γ_b with bias refinement)
//     are released through the step's Releaser (DPALSSensitivity);
//  3. the noisy G_j is projected on the PSD cone and the item row is
//     (G_j + λ_j I)⁻¹ h_j.
//
// It returns the public item factors (items × k, zero rows for inactive
// items) and item biases; with no steps, the initial factors.
//
// With o.Engine set, step 1 is the engine's sum of ALSStepStatistic (the
// users' rows computed where the engine runs, from the factors in the
// statistic's plan) and steps 2–3 are the same as in process.
func DPALS(ctx context.Context, p *Problem, o DPALSOptions) (V, itemBias []float64, err error) {
	n, err := o.items(p)
	if err != nil {
		return nil, nil, err
	}
	if err := o.check(n); err != nil {
		return nil, nil, err
	}
	k := o.Rank
	w := workers(o.Workers)
	V = make([]float64, n*k)
	sc := o.InitScale / math.Sqrt(float64(k))
	for j := range n {
		if !o.Active[j] {
			continue
		}
		for c := range k {
			if o.Init != nil {
				V[j*k+c] = o.Init[j*k+c]
			} else {
				V[j*k+c] = sc * o.Rand.NormFloat64()
			}
		}
	}
	itemBias = append([]float64(nil), o.ItemBias...)
	d := k
	if o.BiasScale > 0 {
		d = k + 1
	}
	var (
		lists *itemLists
		U     []float64
		shift []float64
		uscr  []*alsRowScratch
	)
	if o.Engine == nil {
		if lists, err = dpalsLists(ctx, p, &o, w); err != nil {
			return nil, nil, err
		}
		U = make([]float64, p.NumUsers*d)
		shift = make([]float64, p.NumUsers)
		uscr = make([]*alsRowScratch, w)
		for i := range uscr {
			uscr[i] = newALSRowScratch(k)
		}
	}
	prev := make([]float64, len(V))
	for t, rel := range o.Steps {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		var sums *stepSums
		if o.Engine != nil {
			if sums, err = dpalsEngineStep(ctx, &o, t+1, V, itemBias); err != nil {
				return nil, nil, err
			}
		} else if err := dpalsUsers(ctx, p, &o, V, itemBias, shift, U, d, w, uscr); err != nil {
			return nil, nil, err
		}
		copy(prev, V)
		if err := dpalsItems(ctx, n, &o, rel, lists, sums, U, d, shift, V, itemBias, w); err != nil {
			return nil, nil, err
		}
		if o.snapshot != nil {
			o.snapshot(t+1, V, U)
		}
		if o.Progress != nil {
			o.Progress(Iteration{Done: t + 1, Total: len(o.Steps), Change: relChange(prev, V, nil)})
		}
	}
	return V, itemBias, nil
}

// dpalsLists chooses the entries of the item statistics (a user's ratings
// of active items, a uniform sample of at most MaxPerUser of them) and
// their weights c_ij ∝ max(count_j, 1)^μ with Σ_j c_ij² = 1, and lays them
// out item by item.
func dpalsLists(ctx context.Context, p *Problem, o *DPALSOptions, w int) (*itemLists, error) {
	wj := AdaptiveWeights(o.Counts, o.WeightExponent)
	if o.MaxPerUser == 0 && len(p.ColPtr) == p.NumItems+1 && len(p.ColRow) == p.Len() {
		// Every rating of an active item: the item-major arrays as they
		// are, with 1/‖(w_j)_j‖ per user from one user-major pass.
		inv := make([]float64, p.NumUsers)
		err := parallelRows(ctx, p.NumUsers, w, 4096, func(_, lo, hi int) error {
			for u := lo; u < hi; u++ {
				inv[u] = alsUserWeight(p.RowCol[p.RowPtr[u]:p.RowPtr[u+1]], o.Active, wj)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		l := &itemLists{ptr: p.ColPtr, user: p.ColRow, r: p.ColVal, c: make([]float32, p.Len())}
		err = parallelRows(ctx, p.NumItems, w, 8, func(_, lo, hi int) error {
			for j := lo; j < hi; j++ {
				if !o.Active[j] {
					continue
				}
				for q := p.ColPtr[j]; q < p.ColPtr[j+1]; q++ {
					// Rounding to float32 must not raise Σ c² above 1: round down.
					l.c[q] = roundDown32(wj[j] * inv[p.ColRow[q]])
				}
			}
			return nil
		})
		return l, err
	}
	cnt := make([]int64, p.NumItems+1)
	keep := make([]bool, p.Len())
	var idx []int
	for u := range p.NumUsers {
		idx = idx[:0]
		for t := p.RowPtr[u]; t < p.RowPtr[u+1]; t++ {
			if o.Active[p.RowCol[t]] {
				idx = append(idx, int(t))
			}
		}
		if o.MaxPerUser > 0 && len(idx) > o.MaxPerUser {
			o.Rand.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
			idx = idx[:o.MaxPerUser]
		}
		for _, t := range idx {
			keep[t] = true
			cnt[p.RowCol[t]+1]++
		}
	}
	for j := range p.NumItems {
		cnt[j+1] += cnt[j]
	}
	n := cnt[p.NumItems]
	l := &itemLists{ptr: cnt, user: make([]int32, n), r: make([]float32, n), c: make([]float32, n)}
	next := make([]int64, p.NumItems)
	copy(next, cnt[:p.NumItems])
	for u := range p.NumUsers {
		beg, end := p.RowPtr[u], p.RowPtr[u+1]
		var norm2 float64
		for t := beg; t < end; t++ {
			if keep[t] {
				a := wj[p.RowCol[t]]
				norm2 += a * a
			}
		}
		if norm2 == 0 {
			continue
		}
		inv := 1 / math.Sqrt(norm2)
		for t := beg; t < end; t++ {
			if !keep[t] {
				continue
			}
			j := p.RowCol[t]
			q := next[j]
			next[j]++
			l.user[q], l.r[q] = int32(u), p.RowVal[t]
			// Rounding to float32 must not raise Σ c² above 1: round down.
			l.c[q] = roundDown32(wj[j] * inv)
		}
	}
	return l, nil
}

// AdaptiveWeights is w_j = max(count_j, 1)^μ for every item: the adaptive
// weights of DPALSOptions.WeightExponent (public post-processing of the
// released counts); user i weighs item j by w_j/‖(w_j')_{j' in her
// statistics}‖ (alsUserWeight).
func AdaptiveWeights(counts []float64, mu float64) []float64 {
	wj := make([]float64, len(counts))
	for j := range wj {
		wj[j] = math.Pow(math.Max(counts[j], 1), mu)
	}
	return wj
}

// centre writes a user's centred ratings (her row items, vals) with the
// current public item biases into res (one per rating, in her order), her
// bias removed as model.FoldInUser does: res = r − μ − b_j − b_u with
// b_u = Σ(r − μ − b_j)/(n_u + damping), which it returns. The item
// statistics use clip(r − μ − b_j − b_u, ±R) (dpalsItems).
func centre(items []int32, vals []float32, mu, damping float64, itemBias, res []float64) float64 {
	if len(items) == 0 {
		return 0
	}
	res = res[:len(items)]
	var mean float64
	for i, j := range items {
		res[i] = float64(vals[i]) - mu - itemBias[j]
		mean += res[i]
	}
	mean /= float64(len(items)) + damping
	for i := range res {
		res[i] -= mean
	}
	return mean
}

// roundDown32 is x as a float32 no larger in magnitude than x.
func roundDown32(x float64) float32 {
	f := float32(x)
	if (x >= 0 && float64(f) > x) || (x < 0 && float64(f) < x) {
		f = math.Nextafter32(f, 0)
	}
	return f
}

// userSolve is user i's own computation: with her centred residuals y
// (bias removed) over her items, u = (Σ_j v_j v_jᵀ + λ_u I)⁻¹ Σ_j y_j v_j,
// which is model.FoldInUser's ridge fold-in (FoldRidge, FoldLambda λ_u).
func userSolve(a, b []float64, k int, V []float64, items []int32, y []float64, lambda float64, buf *gramBuf) bool {
	clear(a)
	clear(b)
	gramAdd(a, k, k, V, items, nil, y, b, buf)
	for c := range k {
		a[c*k+c] += lambda
	}
	return cholSolve(a, k, b)
}

// dpalsUsers solves every user's row and stores it clipped to ‖ũ‖ ≤ Γ in
// U (stride d; with bias refinement the last coordinate is γ_b), and her
// bias (userResiduals) in shift.
func dpalsUsers(ctx context.Context, p *Problem, o *DPALSOptions, V, itemBias, shift, U []float64, d, w int, scr []*alsRowScratch) error {
	return parallelRows(ctx, p.NumUsers, w, 256, func(wk, lo, hi int) error {
		for u := lo; u < hi; u++ {
			beg, end := p.RowPtr[u], p.RowPtr[u+1]
			var ok bool
			shift[u], ok = alsUserRow(p.RowCol[beg:end], p.RowVal[beg:end], o.Rank, V, itemBias, o.Mean, o.UserDamping, o.UserLambda, o.UserClip, o.BiasScale, U[u*d:u*d+d], scr[wk])
			if !ok {
				return fmt.Errorf("DPALS: the system of user %d is not positive definite", u)
			}
		}
		return nil
	})
}

// stepSums is an engine's pre-noise sum of one step's statistic and the
// items' positions in it.
type stepSums struct {
	v   []float64
	pos []int32
}

// dpalsEngineStep sums step's statistic through o.Engine, with the
// current public factors V and item biases as its plan.
func dpalsEngineStep(ctx context.Context, o *DPALSOptions, step int, V, itemBias []float64) (*stepSums, error) {
	st := &ALSStepStatistic{Step: step, Rank: o.Rank, V: V, Mean: o.Mean, ItemBias: itemBias, Weight: AdaptiveWeights(o.Counts, o.WeightExponent), Active: o.Active,
		UserLambda: o.UserLambda, UserDamping: o.UserDamping, UserClip: o.UserClip, BiasScale: o.BiasScale,
		ResidualClip: o.ResidualClip, RHSScale: o.RHSScale}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	v, err := o.Engine.Sum(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("DPALS: summing %s: %w", st.Spec().Name, err)
	}
	if len(v) != st.Spec().Dim {
		return nil, fmt.Errorf("DPALS: the engine returned %d coordinates for %s, want %d", len(v), st.Spec().Name, st.Spec().Dim)
	}
	return &stepSums{v: v, pos: st.pos}, nil
}

// releaseGram releases the symmetric g through rel in the Frobenius
// layout DPALSSensitivity bounds (statistic.ReleaseFrobenius).
func releaseGram(rel Releaser, src *noise.Source, g *mat.SymDense) error {
	return statistic.ReleaseFrobenius(rel, src, g)
}

// psdProject writes the projection of g on the PSD cone (negative
// eigenvalues set to zero) into the upper triangle of out (k×k).
func psdProject(g *mat.SymDense, eig *mat.EigenSym, vecs *mat.Dense, out []float64) error {
	k := g.SymmetricDim()
	if !eig.Factorize(g, true) {
		return fmt.Errorf("eigendecomposition failed")
	}
	vals := eig.Values(nil)
	eig.VectorsTo(vecs)
	clear(out)
	raw := vecs.RawMatrix()
	for e, lam := range vals {
		if lam <= 0 {
			continue
		}
		for a := range k {
			x := lam * raw.Data[a*raw.Stride+e]
			for b := a; b < k; b++ {
				out[a*k+b] += x * raw.Data[b*raw.Stride+e]
			}
		}
	}
	return nil
}

// itemChunk is the number of items that share one noise stream.
const itemChunk = 16

// dpalsItems releases every active item's statistics and solves for its
// row. The clipped centred ratings y_ij = clip(r − μ − b_j − b_i, ±R) are
// formed here, item by item, from the users' biases b_i (shift).
//
// With sums (an engine's step), the item's pre-noise statistics are read
// from them instead (l, U and shift are then nil); the release and the
// solve are the same.
func dpalsItems(ctx context.Context, n int, o *DPALSOptions, rel Releaser, l *itemLists, sums *stepSums, U []float64, d int, shift, V, itemBias []float64, w int) error {
	k := o.Rank
	// One noise stream per chunk of items, split in item order, so a
	// seeded run does not depend on the number of workers.
	nc := (n + itemChunk - 1) / itemChunk
	srcs := make([]*noise.Source, nc)
	for c := range srcs {
		srcs[c] = o.Noise.Split()
	}
	iscr := make([]*itemScratch, w)
	for i := range iscr {
		iscr[i] = &itemScratch{g: mat.NewSymDense(d, nil), h: make([]float64, d), sys: make([]float64, d*d)}
	}
	// With a pooled Gram every item's noised statistics are kept until the
	// pool is known (items × (d² + d) values); otherwise each item is
	// solved as soon as it is released.
	var keptG, keptH []float64
	if o.PoolWeights != nil {
		keptG, keptH = make([]float64, n*d*d), make([]float64, n*d)
	}
	err := parallelRows(ctx, nc, w, 1, func(wk, lo, hi int) error {
		s := iscr[wk]
		for ch := lo; ch < hi; ch++ {
			src := srcs[ch]
			for j := ch * itemChunk; j < min(n, (ch+1)*itemChunk); j++ {
				v := V[j*k : j*k+k]
				if !o.Active[j] {
					clear(v)
					continue
				}
				raw := s.g.RawSymmetric()
				if sums != nil {
					sums.item(j, raw.Data, raw.Stride, d, s.h)
				} else {
					s.itemStats(o, l, j, U, d, shift, itemBias, raw.Data, raw.Stride)
				}
				if err := releaseGram(rel, src, s.g); err != nil {
					return fmt.Errorf("DPALS: releasing the Gram block of item %d: %w", j, err)
				}
				for c := range s.h {
					s.h[c] *= o.RHSScale
				}
				if err := rel.Release(src, s.h); err != nil {
					return fmt.Errorf("DPALS: releasing the right-hand side of item %d: %w", j, err)
				}
				for c := range s.h {
					s.h[c] /= o.RHSScale
				}
				if keptG != nil {
					copy(keptG[j*d*d:(j+1)*d*d], raw.Data)
					copy(keptH[j*d:(j+1)*d], s.h)
					continue
				}
				// Post-processing: PSD projection, ridge, solve.
				if err := psdProject(s.g, &s.eig, &s.vecs, s.sys); err != nil {
					return fmt.Errorf("DPALS: item %d: %w", j, err)
				}
				if err := solveItem(o, j, d, s.sys, s.h, V, itemBias); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil || keptG == nil {
		return err
	}
	return solvePooled(ctx, o, keptG, keptH, d, V, itemBias, w)
}

// solveItem adds item j's ridge to its (PSD) system sys (d × d) and
// solves it against h (the prior ridge pulls toward Init), writing the
// item's factors into V and, with bias refinement, its bias.
func solveItem(o *DPALSOptions, j, d int, sys, h, V, itemBias []float64) error {
	k := o.Rank
	for a := range k {
		sys[a*d+a] += o.ItemLambda[j]
		if o.PriorRidge && o.Init != nil {
			h[a] += o.ItemLambda[j] * o.Init[j*k+a]
		}
	}
	if d > k {
		sys[k*d+k] += o.BiasLambda[j]
	}
	if !cholSolve(sys, d, h) {
		return fmt.Errorf("DPALS: the system of item %d is not positive definite", j)
	}
	copy(V[j*k:j*k+k], h[:k])
	if d > k {
		itemBias[j] += o.BiasScale * h[k]
	}
	return nil
}

// solvePooled solves every active item with the pooled Gram: the noised
// Gram blocks of all active items summed, divided by the sum of their
// public weights and projected on the PSD cone (S̄: the second moment of
// the users' rows, its noise averaged over every item), and item j's
// system W_j·S̄ (W_j = PoolWeights[j], the item's public weighted count).
// Each item's own noisy block is then used only through the pool: for
// the many items whose block is under its noise this is far better than
// the block itself, and for popular items W_j·S̄ differs from G_j only as
// far as their raters' rows differ from everyone's.
func solvePooled(ctx context.Context, o *DPALSOptions, keptG, keptH []float64, d int, V, itemBias []float64, w int) error {
	n := len(o.Active)
	pool := mat.NewSymDense(d, nil)
	var wsum float64
	for j := range n {
		if !o.Active[j] {
			continue
		}
		wsum += math.Max(o.PoolWeights[j], 0)
		pool.AddSym(pool, mat.NewSymDense(d, keptG[j*d*d:(j+1)*d*d]))
	}
	if !(wsum > 0) {
		return fmt.Errorf("DPALS: the pooled Gram needs a positive total item weight, got %g", wsum)
	}
	pool.ScaleSym(1/wsum, pool)
	var eig mat.EigenSym
	var vecs mat.Dense
	S := make([]float64, d*d)
	if err := psdProject(pool, &eig, &vecs, S); err != nil {
		return fmt.Errorf("DPALS: the pooled Gram: %w", err)
	}
	s2 := math.Pow(mat.Norm(mat.NewSymDense(d, S), 2), 2) // ‖S̄‖²_F (S holds the upper triangle)
	noise2 := o.PoolNoise * o.PoolNoise * float64(d*d) / 2
	// sysOf writes item j's system a_j·G_j + (1 − a_j)·W_j·S̄ into sys.
	sysOf := func(j int, sys []float64, own []float64, g *mat.SymDense, eig *mat.EigenSym, vecs *mat.Dense) (float64, error) {
		wj := math.Max(o.PoolWeights[j], 0)
		a := 0.0
		if noise2 > 0 {
			a = wj * wj * s2 / (wj*wj*s2 + noise2)
			copy(g.RawSymmetric().Data, keptG[j*d*d:(j+1)*d*d])
			if err := psdProject(g, eig, vecs, own); err != nil {
				return 0, fmt.Errorf("DPALS: item %d: %w", j, err)
			}
		}
		for t := range sys {
			sys[t] = a*own[t] + (1-a)*wj*S[t]
		}
		return a, nil
	}
	var prior *itemPrior
	if o.PoolPosterior {
		var err error
		if prior, err = posteriorFit(o, keptH, S, d, o.PoolNoise/o.RHSScale); err != nil {
			return err
		}
		if o.Posterior != nil {
			o.Posterior(prior.s, prior.p, prior.alpha)
		}
	}
	return parallelRows(ctx, n, w, 256, func(_, lo, hi int) error {
		sys := make([]float64, d*d)
		own := make([]float64, d*d)
		g := mat.NewSymDense(d, nil)
		var eig mat.EigenSym
		var vecs mat.Dense
		for j := lo; j < hi; j++ {
			if !o.Active[j] {
				continue
			}
			a, err := sysOf(j, sys, own, g, &eig, &vecs)
			if err != nil {
				return err
			}
			if prior != nil {
				err = o.solvePosterior(prior, j, d, sys, a*a*o.PoolNoise*o.PoolNoise/2, keptH[j*d:(j+1)*d], V, itemBias)
			} else {
				err = solveItem(o, j, d, sys, keptH[j*d:(j+1)*d], V, itemBias)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// itemScratch is one worker's buffers for dpalsItems.
type itemScratch struct {
	g    *mat.SymDense
	eig  mat.EigenSym
	vecs mat.Dense
	h    []float64
	sys  []float64
	f, x []float64    // one rating's factor (c, y, ũ) and its slab
	slab statistic.DD // the item's slab, summed in double-double form
}

// itemStats writes item j's pre-noise statistics, the in-process sum over
// its entries in l, into the upper triangle of g (stride ld) and into s.h.
//
// Each rating's factor (c_ij, y_ij, ũ_i) is expanded by
// ALSStepStatistic.Expand — the statistic's one definition of the part,
// the products the sensitivity bound is stated for — and summed in
// double-double form (statistic.DD), as privrec-beam's combine sums the
// same expansions: both give the float64 nearest the exact sum, so the
// release's noise lattice puts them on the same point. What enters is
// what DPALSSensitivity bounds, in floating point: the rows as stored
// (‖ũ‖ ≤ Γ, clipped a hair inside), the float32 weights rounded down
// (Σ_j c² ≤ 1) and y clipped in float64 (|y| ≤ R exactly).
func (s *itemScratch) itemStats(o *DPALSOptions, l *itemLists, j int, U []float64, d int, shift, itemBias []float64, g []float64, ld int) {
	per := d*(d+1)/2 + d
	if len(s.slab.Hi) != per {
		s.slab, s.f, s.x = statistic.NewDD(per), make([]float64, 2+d), make([]float64, per)
	}
	clear(s.slab.Hi)
	clear(s.slab.Lo)
	R := o.ResidualClip
	for q := l.ptr[j]; q < l.ptr[j+1]; q++ {
		u := int(l.user[q])
		// As alsUserRow's residuals: ((r − μ) − b_j) − b_i.
		y := float64(l.r[q]) - o.Mean - itemBias[j] - shift[u]
		s.f[0], s.f[1] = float64(l.c[q]), max(-R, min(R, y))
		copy(s.f[2:], U[u*d:u*d+d])
		(*ALSStepStatistic)(nil).Expand(s.f, s.x)
		s.slab.AddAt(0, s.x)
	}
	unpackSlab(s.slab.Result(), g, ld, d, s.h)
}

// item writes item j's pre-noise statistics from an engine's sum (the
// layout of ALSStepStatistic) into the upper triangle of g (stride ld,
// the lower triangle cleared) and into h.
func (s *stepSums) item(j int, g []float64, ld, d int, h []float64) {
	per := d*(d+1)/2 + d
	off := int(s.pos[j]) * per
	unpackSlab(s.v[off:off+per], g, ld, d, h)
}

// unpackSlab writes an item's slab (ALSStepStatistic's layout: the upper
// triangle row by row, then the right-hand side) into the upper triangle
// of g (stride ld, the rest cleared) and into h.
func unpackSlab(slab, g []float64, ld, d int, h []float64) {
	clear(g)
	off := 0
	for a := range d {
		copy(g[a*ld+a:a*ld+d], slab[off:off+d-a])
		off += d - a
	}
	copy(h, slab[off:off+d])
}
