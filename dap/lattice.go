package dap

import (
	"errors"
	"fmt"
	"math"

	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/statistic/gram"
)

// ErrTooLarge is returned for a statistic too large for a device.
var ErrTooLarge = errors.New("statistic too large for a device")

// Lattice is how the aggregators' engine turns a method's statistics into
// tasks: the fixed-point steps, the noise split and a device's budget.
// Every setting is public: the engine that runs the tasks and a device
// that rebuilds a method's model from their releases (package
// dap/devicemodel) derive the same task from the same statistic.
type Lattice struct {
	// StepBits sets the lattice step 2^−StepBits of statistics whose
	// coordinates are bounded by 1 (counts, bias); GramStepBits that of
	// the Gram (its entries are ≈ 1/n for a user with n covered items).
	StepBits     int `json:"step_bits"`
	GramStepBits int `json:"gram_step_bits"`
	// Noise is the aggregators' noise split (default NoiseEachAlone).
	Noise NoiseMode `json:"noise,omitempty"`
	// MaxReportDimension refuses statistics a device should not be asked
	// to shard (more coordinates than this; 0: 2^17).
	MaxReportDimension int `json:"max_report_dimension,omitempty"`
	// MaxReportElements is a device's budget in field elements of her
	// measurement (Dimension·Bits; Prio3SumVec's leader input share is
	// that many 16-byte elements, and sharding and proving take time
	// linear in it). 0: 2^21. Affords tells a method what fits
	// (methods.BudgetedEngine); TaskFor refuses what does not.
	MaxReportElements int `json:"max_report_elements,omitempty"`
}

// latticeShape is how a statistic's contributions sit on the lattice.
type latticeShape struct {
	coord  float64 // bound on |x_j|
	norm   float64 // bound on ‖x‖₂
	signed bool
	// nonneg: the statistic's replace-one proof is ‖x − x'‖² ≤ ‖x‖² +
	// ‖x'‖² from ⟨x, x'⟩ ≥ 0, which coordinatewise truncation toward zero
	// keeps (signs kept; for the bias statistic |q_S| ≤ q_C per item).
	nonneg   bool
	stepBits int
}

// shape gives each known statistic's bounds (proved in package statistic:
// counts and bias have |x_j| ≤ 1 and ‖x‖ = Δ/√2; the Gram has non-negative
// entries and ‖x‖ ≤ Norm = Δ/√2). Another statistic falls back to the
// bounds every replace-one statistic has when an empty row contributes
// nothing: ‖x‖ ≤ Δ, and Δ_q = 2Δ/g by the triangle inequality.
func (e Lattice) shape(c statistic.Contribution) latticeShape {
	delta := c.Spec().Sensitivity.Value
	switch c.(type) {
	case *statistic.Counts:
		return latticeShape{coord: 1, norm: delta / math.Sqrt2, nonneg: true, stepBits: e.StepBits}
	case *statistic.Bias:
		return latticeShape{coord: 1, norm: delta / math.Sqrt2, signed: true, nonneg: true, stepBits: e.StepBits}
	case *gram.Gram:
		return latticeShape{coord: delta / math.Sqrt2, norm: delta / math.Sqrt2, nonneg: true, stepBits: e.GramStepBits}
	case *mf.CovStatistic:
		// A user's part is the upper triangle of x xᵀ with Σx² ≤ R²
		// (statistic.CovSensitivity's proof), so each entry and the
		// triangle's norm are ≤ R² = Δ/√2; entries are signed, so the
		// replace-one bound is the triangle inequality, 2R²/g.
		return latticeShape{coord: delta / math.Sqrt2, norm: delta / math.Sqrt2, signed: true, stepBits: e.GramStepBits}
	}
	return latticeShape{coord: delta, norm: delta, signed: true, stepBits: e.GramStepBits}
}

// lattice is the step g, the bits per coordinate and the encoding offset
// of a statistic of this shape.
func (sh latticeShape) lattice() (g float64, bits int, lo int64) {
	g = math.Ldexp(1, -sh.stepBits)
	top := math.Ceil(sh.coord / g) // largest |q_j|
	if sh.signed {
		bits = int(math.Ceil(math.Log2(top+1))) + 1
		return g, bits, -(int64(1) << (bits - 1))
	}
	return g, int(math.Ceil(math.Log2(top + 1))), 0
}

// limits are the device budget's coordinates and field elements.
func (e Lattice) limits() (dim, elements int) {
	dim, elements = e.MaxReportDimension, e.MaxReportElements
	if dim <= 0 {
		dim = 1 << 17
	}
	if elements <= 0 {
		elements = 1 << 21
	}
	return dim, elements
}

func (e Lattice) fits(dim, bits int) bool {
	maxDim, maxEl := e.limits()
	return dim <= maxDim && dim*bits <= maxEl
}

// Affords implements methods.BudgetedEngine: whether a device's part of
// c, at the bits its task would use, is within the budget.
func (e Lattice) Affords(c statistic.Contribution) bool {
	sh := e.shape(c)
	if sh.stepBits <= 0 || sh.stepBits > 24 {
		return false
	}
	_, bits, _ := sh.lattice()
	return e.fits(c.Spec().Dim, bits)
}

// TaskFor is the task releasing c with at least mech's guarantee: the
// same zCDP ρ under the same relation (one user's ratings replaced), with
// the ℓ2 sensitivity of the lattice sum bounded as shape explains, and
// each aggregator's noise alone enough (dap.NoiseEachAlone) unless Noise
// says otherwise.
func (e Lattice) TaskFor(id string, plan statistic.RowPlan, c statistic.Contribution, mech *mechanism.Gaussian) (Task, error) {
	spec := c.Spec()
	if spec.Sensitivity.Relation != mechanism.ReplaceOne || spec.Sensitivity.Norm != mechanism.L2 {
		return Task{}, fmt.Errorf("dap: %s: sensitivity %v/%v, want ℓ2 under replacement", spec.Name, spec.Sensitivity.Norm, spec.Sensitivity.Relation)
	}
	sh := e.shape(c)
	if sh.stepBits <= 0 || sh.stepBits > 24 {
		return Task{}, fmt.Errorf("dap: %s: step bits %d outside [1, 24]", spec.Name, sh.stepBits)
	}
	g, bits, lo := sh.lattice()
	sens := 2 * sh.norm / g
	if sh.nonneg {
		sens = math.Sqrt2 * sh.norm / g
	}
	if !e.fits(spec.Dim, bits) {
		maxDim, maxEl := e.limits()
		return Task{}, fmt.Errorf("dap: %s has %d coordinates × %d bits: %w (limits %d coordinates, %d field elements)", spec.Name, spec.Dim, bits, ErrTooLarge, maxDim, maxEl)
	}
	pj, err := NewPlan(plan, c)
	if err != nil {
		return Task{}, err
	}
	return NewTask(Task{ID: id, Statistic: spec.Name, Plan: pj, Dimension: spec.Dim, Step: g, Min: lo, Bits: bits,
		NormSq: int64(math.Floor(sh.norm / g * sh.norm / g)), Relation: RelationReplace,
		Sensitivity: math.Nextafter(sens, math.Inf(1)), Rho: mech.Rho(), Noise: e.Noise, MinReports: 1})
}
