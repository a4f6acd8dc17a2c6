package mf

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/statistic"
)

// alsStepKind is ALSStepStatistic's kind for statistic.Decode.
const alsStepKind = "als-step"

// ALSStepStatistic's parts are factored (per rated item, her row and weights).
var _ statistic.Factored = (*ALSStepStatistic)(nil)

func init() {
	statistic.Register(alsStepKind, func() statistic.Contribution { return new(ALSStepStatistic) })
}

// ALSStepStatistic is the statistic one private ALS step of DPALS
// releases (statistic.ALSStep has its sensitivity, with the proof): for
// every active item j, in item order, the upper triangle of the Gram
// block G_j = Σ_i c_ij ũ_i ũ_iᵀ (row by row) followed by the right-hand
// side h_j = Σ_i c_ij y_ij ũ_i, unscaled (the release scales the
// off-diagonal entries and the right-hand side; releaseStep).
//
// User i's part is computed from her own ratings and the public plan
// only: the previous step's public item factors V and item biases, the
// offset and the adaptive weights of the noised counts. Her row ũ_i is her
// own ridge solve (userSolve, the computation her device does), clipped to
// ‖ũ_i‖ ≤ Γ (with bias refinement augmented by the constant γ_b), her
// bias b_i as userResiduals computes it, her weights
// c_ij = w_j/‖(w_j')_{j' active in her row}‖ rounded down to float32, and
// y_ij = clip(r_ij − μ − b_j − b_i, ±R). The in-process DPALS computes the
// same rows and weights with the same functions (alsUserRow,
// alsUserWeight) and sums them item by item (gramAdd); an external engine
// (privrec-beam) sums Contribute over its workers with the factors as a
// side input.
type ALSStepStatistic struct {
	// Step numbers the step (1, 2, …) in the release's name.
	Step int `json:"step"`
	// Rank is k; the rows have k coordinates, k+1 with bias refinement.
	Rank int `json:"rank"`
	// V is the previous step's public item factors (items × Rank).
	V []float64 `json:"v"`
	// Mean and ItemBias centre the ratings (ItemBias: the current public
	// item biases, one per item).
	Mean     float64   `json:"mean"`
	ItemBias []float64 `json:"item_bias"`
	// Weight is w_j = max(count_j, 1)^μ for every item; Active marks the
	// items with factors (the only ones in the statistic).
	Weight []float64 `json:"weight"`
	Active []bool    `json:"active"`
	// The user side and the clips: DPALSOptions' fields of the same names.
	UserLambda   float64 `json:"user_lambda"`
	UserDamping  float64 `json:"user_damping"`
	UserClip     float64 `json:"user_clip"`
	BiasScale    float64 `json:"bias_scale,omitempty"`
	ResidualClip float64 `json:"residual_clip"`
	RHSScale     float64 `json:"rhs_scale"`

	pos     []int32 // item → active position (−1: inactive); Validate builds it
	nActive int
}

// Kind implements statistic.Contribution.
func (st *ALSStepStatistic) Kind() string { return alsStepKind }

// d is the row dimension in the statistics.
func (st *ALSStepStatistic) d() int {
	if st.BiasScale > 0 {
		return st.Rank + 1
	}
	return st.Rank
}

// rowBound is the bound on the norm of the rows in the statistics:
// √(Γ² + γ_b²).
func (st *ALSStepStatistic) rowBound() float64 {
	return math.Sqrt(st.UserClip*st.UserClip + st.BiasScale*st.BiasScale)
}

// Spec implements statistic.Contribution.
func (st *ALSStepStatistic) Spec() statistic.Spec {
	return statistic.ALSStep(st.Step, st.nActive, st.d(), statistic.ALSStepSensitivity(st.rowBound(), st.ResidualClip, st.RHSScale))
}

// Validate checks the plan and builds the item positions (Decode calls
// it; so does DPALS before it hands the statistic to an engine).
func (st *ALSStepStatistic) Validate() error {
	n := len(st.ItemBias)
	switch {
	case st.Rank < 1 || n == 0 || len(st.V) != n*st.Rank || len(st.Weight) != n || len(st.Active) != n:
		return fmt.Errorf("ALS step statistic: rank %d, %d item biases, %d factor values, %d weights and %d active flags do not agree",
			st.Rank, n, len(st.V), len(st.Weight), len(st.Active))
	case st.Step < 1:
		return fmt.Errorf("ALS step statistic: step %d", st.Step)
	}
	for _, x := range []float64{st.Mean, st.UserLambda, st.UserDamping, st.UserClip, st.BiasScale, st.ResidualClip, st.RHSScale} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("ALS step statistic: a parameter is not finite (%g)", x)
		}
	}
	if !(st.UserLambda > 0 && st.UserClip > 0 && st.ResidualClip > 0 && st.RHSScale > 0 && st.UserDamping >= 0 && st.BiasScale >= 0) {
		return fmt.Errorf("ALS step statistic: user λ, user clip, residual clip and right-hand-side scale must be > 0, damping and bias scale ≥ 0")
	}
	st.pos = make([]int32, n)
	st.nActive = 0
	for j, a := range st.Active {
		st.pos[j] = -1
		if !a {
			continue
		}
		if w := st.Weight[j]; !(w > 0) || math.IsInf(w, 0) {
			return fmt.Errorf("ALS step statistic: weight of item %d is %g, must be finite and > 0", j, w)
		}
		st.pos[j] = int32(st.nActive)
		st.nActive++
	}
	return nil
}

// alsRowScratch is one worker's buffers for alsUserRow.
type alsRowScratch struct {
	a, b, res []float64
	g         gramBuf
}

func newALSRowScratch(k int) *alsRowScratch {
	return &alsRowScratch{a: make([]float64, k*k), b: make([]float64, k)}
}

// alsUserRow is user i's own computation in an ALS step, from her row
// (items, vals) on the catalogue and the public factors V (rank k) and
// item biases: her residuals and bias (centre), her ridge solve
// (userSolve), the row clipped a hair inside ‖ũ‖ ≤ Γ written to out[:k]
// and, with bias refinement (len(out) > k), the constant γ_b in out[k].
// It returns her bias b_i, and false when her system is not positive
// definite.
func alsUserRow(items []int32, vals []float32, k int, V, itemBias []float64, mean, damping, lambda, clip, biasScale float64, out []float64, s *alsRowScratch) (float64, bool) {
	if cap(s.res) < len(items) {
		s.res = make([]float64, len(items))
	}
	res := s.res[:len(items)]
	shift := centre(items, vals, mean, damping, itemBias, res)
	if !userSolve(s.a, s.b, k, V, items, res, lambda, &s.g) {
		return shift, false
	}
	copy(out, s.b[:k])
	if n2 := dot(out[:k], out[:k]); n2 > clip*clip {
		// A hair inside the ball, so rounding cannot leave it.
		sc := clip / math.Sqrt(n2) * (1 - 1e-12)
		for c := range k {
			out[c] *= sc
		}
	}
	if len(out) > k {
		out[k] = biasScale
	}
	return shift, true
}

// alsUserWeight is 1/‖(w_j)_j‖ over a user's active items (0 if she has
// none): her weight on item j is w_j times it, rounded down to float32
// (roundDown32) so that Σ_j c_ij² ≤ 1.
func alsUserWeight(items []int32, active []bool, w []float64) float64 {
	var norm2 float64
	for _, j := range items {
		if active[j] {
			norm2 += w[j] * w[j]
		}
	}
	if norm2 > 0 {
		return 1 / math.Sqrt(norm2)
	}
	return 0
}

// SlabDim implements statistic.Factored: an active item's Gram block
// (upper triangle) and right-hand side, d(d+1)/2 + d coordinates.
func (st *ALSStepStatistic) SlabDim() int {
	d := st.d()
	return d*(d+1)/2 + d
}

// Factors implements statistic.Factored: for each active item j she
// rated, keyed by its active position, her factor (c_ij, y_ij, ũ_i) —
// d+2 values from which Expand forms the slab. A user whose system is
// not positive definite (impossible with λ_u > 0 and finite factors)
// contributes nothing, where the in-process DPALS fails the run.
func (st *ALSStepStatistic) Factors(r statistic.Row, emit func(key int, f []float64)) {
	if len(r.Items) == 0 {
		return
	}
	k, d := st.Rank, st.d()
	f := make([]float64, 2+d)
	u := f[2:]
	shift, ok := alsUserRow(r.Items, r.Vals, k, st.V, st.ItemBias, st.Mean, st.UserDamping, st.UserLambda, st.UserClip, st.BiasScale, u, newALSRowScratch(k))
	if !ok {
		return
	}
	inv := alsUserWeight(r.Items, st.Active, st.Weight)
	if inv == 0 {
		return
	}
	R := st.ResidualClip
	for t, j := range r.Items {
		if !st.Active[j] {
			continue
		}
		f[0] = float64(roundDown32(st.Weight[j] * inv))
		// As dpalsItems: ((r − μ) − b_j) − b_i, clipped to ±R.
		f[1] = max(-R, min(R, float64(r.Vals[t])-st.Mean-st.ItemBias[j]-shift))
		emit(int(st.pos[j]), f)
	}
}

// Expand implements statistic.Factored: the slab of the factor
// f = (c, y, ũ) is the upper triangle of c·ũũᵀ row by row, then c·y·ũ
// (each entry ũ_b·(c·ũ_a) and (c·ũ_a)·y, the products the sensitivity
// bound is stated for). It reads nothing but f.
func (*ALSStepStatistic) Expand(f, slab []float64) {
	c, y, u := f[0], f[1], f[2:]
	d := len(u)
	off := 0
	for a := range d {
		cu := c * u[a]
		for b := a; b < d; b++ {
			slab[off] = u[b] * cu
			off++
		}
	}
	for a := range d {
		slab[off+a] = c * u[a] * y
	}
}

// Contribute implements statistic.Contribution: Factors, each expanded
// at its item's slab.
func (st *ALSStepStatistic) Contribute(r statistic.Row, add func(i int, x float64)) {
	per := st.SlabDim()
	slab := make([]float64, per)
	st.Factors(r, func(key int, f []float64) {
		st.Expand(f, slab)
		for i, x := range slab {
			add(key*per+i, x)
		}
	})
}
