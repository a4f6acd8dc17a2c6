package topn

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/statistic"
)

// StepKind is StepStatistic's kind for statistic.Decode.
const StepKind = "ials-step"

// StepStatistic's parts are factored: per covered item she has, her
// weights and clipped row.
var _ statistic.Factored = (*StepStatistic)(nil)

func init() {
	statistic.Register(StepKind, func() statistic.Contribution { return new(StepStatistic) })
}

// StepStatistic is the statistic one dp-ials step releases (StatsLayout's
// vector; StepScales.Sensitivity has the proof of its sensitivity) as a
// statistic.Contribution, so that any engine sums it: the in-process
// training (SumMatrix) and privrec-beam's pipelines call the same code.
//
// User u's part is computed from her own interactions and the public plan
// only: the previous step's public item factors H, her own solve against
// them (UserRows' rule, her device's computation), her row scaled by 1/Γ
// and clipped to the unit ball (ClipRow), and her weights from the public
// item weights (StepWeights); then UserContribution's factors.
type StepStatistic struct {
	// Step numbers the step (1, 2, …) in the release's name.
	Step int `json:"step"`
	// Rank is k; H holds the public item factors (items × Rank).
	Rank int       `json:"rank"`
	H    []float64 `json:"h"`
	// Alpha0, Lambda and Nu are the users' own solve (RegFor).
	Alpha0 float64 `json:"alpha0"`
	Lambda float64 `json:"lambda"`
	Nu     float64 `json:"nu"`
	// Gamma is the public row scale Γ.
	Gamma float64 `json:"gamma"`
	// Columns maps each item to its covered column (−1: none) and Weights
	// are the public item weights f (0 for an item without a column).
	Columns Columns   `json:"columns"`
	Weights []float64 `json:"weights"`
	// Scales are the blocks' weights r, s and g.
	Scales StepScales `json:"scales"`

	lay StatsLayout
	sys []float64 // α₀·HᵀH, Validate builds it
	reg func(n int) float64
	// solvers hold *rowSolver scratch (64 KB at k = 32) across the users
	// an engine's worker hands to Factors.
	solvers sync.Pool
}

// NewStepStatistic is the statistic of step step over the covered columns
// cols with item weights f, item factors h (items × k) and the users'
// solve and clip; it is validated.
func NewStepStatistic(step, k int, h []float64, alpha0, lambda, nu, gamma float64, cols Columns, f []float64, sc StepScales) (*StepStatistic, error) {
	st := &StepStatistic{Step: step, Rank: k, H: h, Alpha0: alpha0, Lambda: lambda, Nu: nu, Gamma: gamma, Columns: cols, Weights: f, Scales: sc}
	return st, st.Validate()
}

// Kind implements statistic.Contribution.
func (st *StepStatistic) Kind() string { return StepKind }

// Layout is the released vector's layout.
func (st *StepStatistic) Layout() StatsLayout { return st.lay }

// Spec implements statistic.Contribution.
func (st *StepStatistic) Spec() statistic.Spec {
	return statistic.Spec{Name: fmt.Sprintf("the item statistics of step %d", st.Step), Dim: st.lay.Len(),
		Sensitivity: mechanism.Sensitivity{Value: st.Scales.Sensitivity(), Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}}
}

// Validate checks the plan and builds the users' common system (Decode
// calls it).
func (st *StepStatistic) Validate() error {
	n := len(st.Columns)
	switch {
	case st.Step < 1:
		return fmt.Errorf("dp-ials step statistic: step %d", st.Step)
	case st.Rank < 1 || n == 0 || len(st.H) != n*st.Rank || len(st.Weights) != n:
		return fmt.Errorf("dp-ials step statistic: rank %d, %d columns, %d factor values and %d weights do not agree", st.Rank, n, len(st.H), len(st.Weights))
	case !(st.Gamma > 0) || math.IsInf(st.Gamma, 0) || !(st.Alpha0 >= 0) || !(st.Lambda > 0) || !(st.Nu >= 0) ||
		math.IsInf(st.Alpha0, 0) || math.IsInf(st.Lambda, 0) || math.IsInf(st.Nu, 0):
		return fmt.Errorf("dp-ials step statistic: Γ %g and λ %g must be finite and > 0, α₀ %g and ν %g finite and ≥ 0", st.Gamma, st.Lambda, st.Alpha0, st.Nu)
	}
	if err := st.Scales.Check(); err != nil {
		return err
	}
	m := st.Columns.Covered()
	for j, q := range st.Columns {
		if q >= int32(m) {
			return fmt.Errorf("dp-ials step statistic: item %d maps to column %d of %d", j, q, m)
		}
		if w := st.Weights[j]; !(w >= 0) || math.IsInf(w, 0) || q < 0 && w != 0 {
			return fmt.Errorf("dp-ials step statistic: item %d has weight %g (finite, ≥ 0, 0 without a column)", j, w)
		}
	}
	for _, v := range st.H {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("dp-ials step statistic: an item factor is not finite")
		}
	}
	st.lay = StatsLayout{K: st.Rank, Items: m, Gram: st.Scales.Gram > 0}
	st.sys = userSystem(st.H, st.Rank, st.Alpha0)
	st.reg = RegFor(st.Lambda, st.Nu, st.Alpha0, n)
	return nil
}

// SlabDim implements statistic.Factored: one covered item's block; the
// global block spans the last keys (UserContribution).
func (st *StepStatistic) SlabDim() int { return st.lay.PerItem() }

// Keys is the number of combine keys: the covered items, then the pieces
// of the global block (the last one cut at the vector's end).
func (st *StepStatistic) Keys() int { return st.lay.Items + st.lay.globalKeys() }

// Factors implements statistic.Factored: her own row, clipped, then
// UserContribution's factors. A user whose system is not positive
// definite has a zero row (as in UserRows) and contributes nothing.
func (st *StepStatistic) Factors(r statistic.Row, emit func(key int, f []float64)) {
	k := st.Rank
	row := make([]float64, k)
	s, _ := st.solvers.Get().(*rowSolver)
	if s == nil {
		s = newRowSolver(k)
	}
	ok := s.solve(st.sys, st.H, k, r.Items, st.reg(len(r.Items)), row)
	st.solvers.Put(s)
	if !ok {
		return
	}
	ClipRow(row, st.Gamma)
	stepFactors(st.lay, st.Scales, st.Columns, st.Weights, r.Items, row, emit)
}

// Expand implements statistic.Factored (expandStep: it reads only the
// factor and the slab's length).
func (*StepStatistic) Expand(f, slab []float64) { expandStep(f, slab) }

// Contribute implements statistic.Contribution: Factors, each expanded at
// its key's slab (the last cut at the vector's end).
func (st *StepStatistic) Contribute(r statistic.Row, add func(i int, x float64)) {
	per, dim := st.SlabDim(), st.lay.Len()
	slab := make([]float64, per)
	st.Factors(r, func(key int, f []float64) {
		expandStep(f, slab)
		for i, x := range slab {
			if o := key*per + i; o < dim {
				add(o, x)
			}
		}
	})
}

// SumMatrix is the in-process engine's sum of the statistic over the
// users of x on w workers: every user's own solve (UserRows' rule, with
// the system Validate formed), her clip,
// then StepStats' double-double sums of the same factors — equal to what
// an engine summing Contribute in that form returns.
func (st *StepStatistic) SumMatrix(ctx context.Context, x *Interactions, w int) ([]float64, error) {
	k := st.Rank
	if x.NumItems != len(st.Columns) {
		return nil, fmt.Errorf("dp-ials step statistic: %d items in the data, %d in the plan", x.NumItems, len(st.Columns))
	}
	rows := make([]float64, x.NumUsers*k)
	if err := userRows(ctx, x, st.H, k, st.sys, st.reg, w, rows); err != nil {
		return nil, err
	}
	for u := range x.NumUsers {
		ClipRow(rows[u*k:u*k+k], st.Gamma)
	}
	return StepStats(ctx, x, x.Transpose(), st.lay, st.Scales, st.Columns, st.Weights, rows, w)
}
