package audit

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// Names lists the mechanisms For knows, in the order of `privrec audit --help`.
var Names = []string{"laplace", "gaussian", "rr", "krr", "modlaplace", "l2laplace"}

// Options tune the audited instance.
type Options struct {
	// Values is d for krr (ratings 1..d plus missing); default 5.
	Values int
	// Dim is the dimension for l2laplace; default 2.
	Dim int
	// NoiseFactor < 1 deliberately under-noises the mechanism (it is built
	// for ε/NoiseFactor while ε is still claimed) to show the audit
	// catching it; default 1.
	NoiseFactor float64
	// BoundedTime audits modlaplace with its bounded-time sampler.
	BoundedTime bool
}

// For returns the audit spec of a named mechanism calibrated for ε (and
// δ for gaussian) on its worst-case neighbouring pair, with ℓ1/ℓ2
// sensitivity 1 where one applies.
func For(name string, eps, delta float64, o Options) (Spec, error) {
	if o.NoiseFactor == 0 {
		o.NoiseFactor = 1
	}
	if math.IsNaN(o.NoiseFactor) || o.NoiseFactor <= 0 || o.NoiseFactor > 1e6 {
		return Spec{}, fmt.Errorf("noise factor %v must be positive", o.NoiseFactor)
	}
	if o.Values == 0 {
		o.Values = 5
	}
	if o.Dim == 0 {
		o.Dim = 2
	}
	built := eps / o.NoiseFactor
	if name != "gaussian" && delta != 0 {
		return Spec{}, fmt.Errorf("%s is a pure-ε mechanism: δ must be 0", name)
	}
	l1 := mechanism.Sensitivity{Value: 1, Norm: mechanism.L1, Relation: mechanism.ReplaceOne, Unit: privacy.UnitEntry}
	l2 := l1
	l2.Norm = mechanism.L2
	spec := Spec{Mechanism: name, ClaimedEpsilon: eps, Delta: delta}
	switch name {
	case "laplace":
		m, err := mechanism.NewLaplace(built, l1, 1)
		if err != nil {
			return Spec{}, err
		}
		b := m.Scale()
		spec.Sample = func(src *noise.Source, side int) float64 {
			return noise.SnapLaplace(src, float64(side), b)
		}
		spec.Events = tails(0, 1, b)
	case "gaussian":
		m, err := mechanism.NewGaussian(built, delta, l2, 1, mechanism.CalibrateAnalytic)
		if err != nil {
			return Spec{}, err
		}
		s := m.Sigma()
		spec.Sample = func(src *noise.Source, side int) float64 {
			return noise.SnapGaussian(src, float64(side), s)
		}
		spec.Events = tails(0, 1, s/4)
	case "rr":
		m, err := mechanism.NewRandomizedResponse(built)
		if err != nil {
			return Spec{}, err
		}
		spec.Sample = func(src *noise.Source, side int) float64 {
			if m.Randomize(src, side == 0) {
				return 1
			}
			return 0
		}
		spec.Events = []Event{{Kind: Equals, T: 1}, {Kind: Equals, T: 0}}
	case "krr":
		m, err := mechanism.NewKaryRR(built, o.Values)
		if err != nil {
			return Spec{}, err
		}
		spec.Sample = func(src *noise.Source, side int) float64 {
			v, err := m.Randomize(src, side) // missing (0) vs rating 1
			if err != nil {
				return math.Inf(1) // unreachable: 0 and 1 are valid
			}
			return float64(v)
		}
		for v := range o.Values + 1 {
			spec.Events = append(spec.Events, Event{Kind: Equals, T: float64(v)})
		}
	case "modlaplace":
		m, err := mechanism.NewModifiedLaplace(built)
		if err != nil {
			return Spec{}, err
		}
		if o.BoundedTime {
			m = m.BoundedTime()
		}
		b := m.Scale()
		spec.Sample = func(src *noise.Source, side int) float64 {
			y, ok, err := m.Randomize(src, float64(2*side-1), true) // −1 vs +1
			if err != nil || !ok {
				return math.NaN()
			}
			return y
		}
		spec.Events = append(tails(-1, 1, b/2), Event{Kind: IsMissing})
	case "l2laplace":
		m, err := mechanism.NewL2Laplace(built, l2, o.Dim)
		if err != nil {
			return Spec{}, err
		}
		dim := o.Dim
		spec.Sample = func(src *noise.Source, side int) float64 {
			x := make([]float64, dim) // per call: the two sides run concurrently
			x[0] = float64(side)
			if err := m.Release(src, x); err != nil {
				return math.NaN()
			}
			return x[0]
		}
		spec.Events = tails(0, 1, m.Scale()/2)
	default:
		return Spec{}, fmt.Errorf("unknown mechanism %q (known: %v)", name, Names)
	}
	return spec, nil
}

// tails returns {y ≥ hi + k·step} and {y ≤ lo − k·step} for k = −2..8:
// for location families shifted from lo to hi these are the
// likelihood-ratio-optimal events.
func tails(lo, hi, step float64) []Event {
	var ev []Event
	for k := -2; k <= 8; k++ {
		ev = append(ev, Event{Kind: AtLeast, T: hi + float64(k)*step}, Event{Kind: AtMost, T: lo - float64(k)*step})
	}
	return ev
}
