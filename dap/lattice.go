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
	nonneg bool
	// gram: the statistic's step is the Lattice's GramStepBits.
	gram bool
}

// shapeOf gives each known statistic's bounds (proved in package
// statistic: counts and bias have |x_j| ≤ 1 and ‖x‖ = Δ/√2; the Gram has
// non-negative entries and ‖x‖ ≤ Norm = Δ/√2). Another statistic falls
// back to the bounds every replace-one statistic has when an empty row
// contributes nothing: ‖x‖ ≤ Δ, and Δ_q = 2Δ/g by the triangle
// inequality. The engine (TaskFor) and every party checking a task
// (Derive) read the bounds from here.
func shapeOf(c statistic.Contribution) latticeShape {
	delta := c.Spec().Sensitivity.Value
	switch c.(type) {
	case *statistic.Counts:
		return latticeShape{coord: 1, norm: delta / math.Sqrt2, nonneg: true}
	case *statistic.Bias:
		return latticeShape{coord: 1, norm: delta / math.Sqrt2, signed: true, nonneg: true}
	case *gram.Gram:
		return latticeShape{coord: delta / math.Sqrt2, norm: delta / math.Sqrt2, nonneg: true, gram: true}
	case *mf.CovStatistic:
		// A user's part is the upper triangle of x xᵀ with Σx² ≤ R²
		// (statistic.CovSensitivity's proof), so each entry and the
		// triangle's norm are ≤ R² = Δ/√2; entries are signed, so the
		// replace-one bound is the triangle inequality, 2R²/g.
		return latticeShape{coord: delta / math.Sqrt2, norm: delta / math.Sqrt2, signed: true, gram: true}
	}
	return latticeShape{coord: delta, norm: delta, signed: true, gram: true}
}

// stepBits is the lattice step exponent the engine uses for a statistic
// of this shape.
func (e Lattice) stepBits(sh latticeShape) int {
	if sh.gram {
		return e.GramStepBits
	}
	return e.StepBits
}

// lattice is the bits per coordinate, the encoding offset and the bound
// on Σq² of a statistic of this shape on the lattice of step g. The bound
// (‖x‖/g)² is raised by a relative 10⁻⁹ before it is rounded down, so a
// bound that is an integer (counts capped at 2, step 2⁻⁴: 512) is not
// lost to the rounding of ‖x‖ = Δ/√2: it is never below the true bound.
func (sh latticeShape) lattice(g float64) (bits int, lo int64, normSq float64) {
	top := math.Ceil(sh.coord / g) // largest |q_j|
	normSq = math.Floor(sh.norm / g * sh.norm / g * (1 + 1e-9))
	if sh.signed {
		bits = int(math.Ceil(math.Log2(top+1))) + 1
		return bits, -(int64(1) << (bits - 1)), normSq
	}
	return int(math.Ceil(math.Log2(top + 1))), 0, normSq
}

// replaceSq is k in Δ_q² ≤ k·NormSq, the squared ℓ2 sensitivity of the
// lattice sum when one user's contribution is replaced: 2 when the
// contributions' inner products are non-negative (nonneg), else 4 (the
// triangle inequality).
func (sh latticeShape) replaceSq() int64 {
	if sh.nonneg {
		return 2
	}
	return 4
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
	sh := shapeOf(c)
	sb := e.stepBits(sh)
	if sb <= 0 || sb > 24 {
		return false
	}
	bits, _, _ := sh.lattice(math.Ldexp(1, -sb))
	return e.fits(c.Spec().Dim, bits)
}

// TaskFor is the task releasing c with at least mech's guarantee: the
// same zCDP ρ under the same relation (one user's ratings replaced), with
// the ℓ2 sensitivity of the lattice sum bounded as shapeOf explains, and
// each aggregator's noise alone enough (dap.NoiseEachAlone) unless Noise
// says otherwise.
func (e Lattice) TaskFor(id string, plan statistic.RowPlan, c statistic.Contribution, mech *mechanism.Gaussian) (Task, error) {
	spec := c.Spec()
	if spec.Sensitivity.Relation != mechanism.ReplaceOne || spec.Sensitivity.Norm != mechanism.L2 {
		return Task{}, fmt.Errorf("dap: %s: sensitivity %v/%v, want ℓ2 under replacement", spec.Name, spec.Sensitivity.Norm, spec.Sensitivity.Relation)
	}
	sh := shapeOf(c)
	sb := e.stepBits(sh)
	if sb <= 0 || sb > 24 {
		return Task{}, fmt.Errorf("dap: %s: step bits %d outside [1, 24]", spec.Name, sb)
	}
	g := math.Ldexp(1, -sb)
	bits, lo, normSq := sh.lattice(g)
	sens := math.Sqrt(float64(sh.replaceSq()) * normSq)
	if !e.fits(spec.Dim, bits) {
		maxDim, maxEl := e.limits()
		return Task{}, fmt.Errorf("dap: %s has %d coordinates × %d bits: %w (limits %d coordinates, %d field elements)", spec.Name, spec.Dim, bits, ErrTooLarge, maxDim, maxEl)
	}
	pj, err := NewPlan(plan, c)
	if err != nil {
		return Task{}, err
	}
	return NewTask(Task{ID: id, Statistic: spec.Name, Plan: pj, Dimension: spec.Dim, Step: g, Min: lo, Bits: bits,
		NormSq: int64(normSq), Relation: RelationReplace,
		Sensitivity: math.Nextafter(sens, math.Inf(1)), Rho: mech.Rho(), Noise: e.Noise, MinReports: 1})
}
