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
	// Instrument, when set, is attached to the laplace, gaussian or
	// l2laplace mechanism audited (mechanism.Laplace.Instrumented): its
	// Release then adds Instrument.NoiseFactor times the noise while the
	// mechanism still claims ε. It is how tests show that the audit samples
	// the mechanism's own Release — the code path a release uses — and
	// catches a Release that adds too little noise.
	Instrument *mechanism.Instrument
}

// For returns the audit spec of a named mechanism calibrated for ε (and
// δ for gaussian) on its worst-case neighbouring pair, with ℓ1/ℓ2
// sensitivity 1 where one applies.
//
// Two specs need more than threshold events on the raw output:
//   - gaussian: for δ > 0 the events that can exceed the claim sit where
//     the privacy loss is near ε, far in the tail, and δ is a large part of
//     their probability. The events are {L(y) ≥ c·ε} for c = 0.80, 0.85,
//     …, 1.00 (and their mirror images), L being the privacy loss of the
//     *claimed* mechanism (σ calibrated for ε, δ): c = 1 is the claim's own
//     worst event, and the smaller c are where a Gaussian with up to ≈ 15 %
//     less noise than claimed exceeds (ε, δ) most detectably. Even so the
//     excess of a 10 % under-noised Gaussian is only ≈ 3·10⁻⁵ in
//     probability, so its audit needs GaussianSamples samples per side.
//   - l2laplace: the sample is the likelihood-ratio statistic
//     ‖y‖₂ − ‖y − e₁‖₂ ∈ [−1, 1] of the whole output vector (the privacy
//     loss is ε times it, whatever the scale), not one coordinate, whose
//     marginal hides most of the loss. Events {stat ≥ t}, {stat ≤ −t} for
//     t near 1.
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
	if name != "gaussian" && delta != 0 {
		return Spec{}, fmt.Errorf("%s is a pure-ε mechanism: δ must be 0", name)
	}
	build, ok := specBuilders[name]
	if !ok {
		return Spec{}, fmt.Errorf("unknown mechanism %q (known: %v)", name, Names)
	}
	l1 := mechanism.Sensitivity{Value: 1, Norm: mechanism.L1, Relation: mechanism.ReplaceOne, Unit: privacy.UnitEntry}
	l2 := l1
	l2.Norm = mechanism.L2
	in := instance{eps: eps, built: eps / o.NoiseFactor, delta: delta, o: o, l1: l1, l2: l2}
	spec := Spec{Mechanism: name, ClaimedEpsilon: eps, Delta: delta}
	if err := build(in, &spec); err != nil {
		return Spec{}, err
	}
	return spec, nil
}

// instance is what a spec builder calibrates: the claimed ε (and δ), the ε
// the mechanism is built for (ε/NoiseFactor), the options and the ℓ1 and
// ℓ2 sensitivities (1, replace-one, one entry).
type instance struct {
	eps, built, delta float64
	o                 Options
	l1, l2            mechanism.Sensitivity
}

// specBuilders set the Sample and Events (and Samples, Statistic where
// they differ) of each mechanism in Names.
var specBuilders = map[string]func(instance, *Spec) error{
	"laplace":    laplaceSpec,
	"gaussian":   gaussianSpec,
	"rr":         rrSpec,
	"krr":        krrSpec,
	"modlaplace": modLaplaceSpec,
	"l2laplace":  l2LaplaceSpec,
}

func laplaceSpec(in instance, spec *Spec) error {
	m, err := mechanism.NewLaplace(in.built, in.l1, 1)
	if err != nil {
		return err
	}
	b := m.Scale()
	m = m.Instrumented(in.o.Instrument)
	spec.Sample = func(src *noise.Source, side int) float64 {
		return release1(src, m, side)
	}
	spec.Events = tails(0, 1, b)
	return nil
}

func gaussianSpec(in instance, spec *Spec) error {
	claimed, err := mechanism.NewGaussian(in.eps, in.delta, in.l2, 1, mechanism.CalibrateAnalytic)
	if err != nil {
		return err
	}
	m, err := mechanism.NewGaussian(in.built, in.delta, in.l2, 1, mechanism.CalibrateAnalytic)
	if err != nil {
		return err
	}
	m = m.Instrumented(in.o.Instrument)
	spec.Sample = func(src *noise.Source, side int) float64 {
		return release1(src, m, side)
	}
	spec.Events = gaussianLossEvents(0, 1, claimed.Sigma(), in.eps)
	spec.Samples = GaussianSamples
	return nil
}

func rrSpec(in instance, spec *Spec) error {
	m, err := mechanism.NewRandomizedResponse(in.built)
	if err != nil {
		return err
	}
	spec.Sample = func(src *noise.Source, side int) float64 {
		if m.Randomize(src, side == 0) {
			return 1
		}
		return 0
	}
	spec.Events = []Event{{Kind: Equals, T: 1}, {Kind: Equals, T: 0}}
	return nil
}

func krrSpec(in instance, spec *Spec) error {
	m, err := mechanism.NewKaryRR(in.built, in.o.Values)
	if err != nil {
		return err
	}
	spec.Sample = func(src *noise.Source, side int) float64 {
		v, err := m.Randomize(src, side) // missing (0) vs rating 1
		if err != nil {
			return math.Inf(1) // unreachable: 0 and 1 are valid
		}
		return float64(v)
	}
	for v := range in.o.Values + 1 {
		spec.Events = append(spec.Events, Event{Kind: Equals, T: float64(v)})
	}
	return nil
}

func modLaplaceSpec(in instance, spec *Spec) error {
	m, err := mechanism.NewModifiedLaplace(in.built)
	if err != nil {
		return err
	}
	if in.o.BoundedTime {
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
	return nil
}

func l2LaplaceSpec(in instance, spec *Spec) error {
	m, err := mechanism.NewL2Laplace(in.built, in.l2, in.o.Dim)
	if err != nil {
		return err
	}
	m = m.Instrumented(in.o.Instrument)
	dim := in.o.Dim
	spec.Statistic = "‖y‖₂ − ‖y − e₁‖₂"
	spec.Sample = func(src *noise.Source, side int) float64 {
		x := make([]float64, dim) // per call: the two sides run concurrently
		x[0] = float64(side)
		if err := m.Release(src, x); err != nil {
			return math.NaN()
		}
		return l2LaplaceStatistic(x)
	}
	for _, t := range l2LaplaceThresholds {
		spec.Events = append(spec.Events, Event{Kind: AtLeast, T: t}, Event{Kind: AtMost, T: -t})
	}
	return nil
}

// release1 is the mechanism's own Release — the code path every release
// takes — of the one-coordinate input side (0 or 1); NaN if it refuses.
func release1(src *noise.Source, m interface {
	Release(*noise.Source, []float64) error
}, side int) float64 {
	x := []float64{float64(side)}
	if err := m.Release(src, x); err != nil {
		return math.NaN()
	}
	return x[0]
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

// GaussianSamples is the number of samples per side of the gaussian audit
// (For's Spec.Samples): at it a Gaussian built for ε/0.9 (δ = 10⁻⁵, ε = 1)
// is caught at confidence 0.95. On its best event {L ≥ 0.85ε} the 0.9×
// Gaussian exceeds the claim by P₁ − e^ε·P₀ − δ ≈ 2.9·10⁻⁵ (P₁ ≈ 3.5·10⁻⁴,
// P₀ ≈ 1.1·10⁻⁴); at 6·10⁷ samples that clears the Bonferroni-corrected
// Clopper–Pearson bounds by ≈ 2 standard deviations on each of the two
// mirrored (nearly independent) events. Simulating the whole counting
// procedure on exact binomial counts, it was missed in 3 of 2·10⁴ runs
// at 6·10⁷ samples (25 at 5·10⁷; about half at 2·10⁷) with the five levels
// 0.80–1.00, and in 4 of 2·10⁴ with the seven of gaussianLossLevels. Its
// bound is then ≈ 1.04, and ≈ 0.93 for the correct Gaussian.
const GaussianSamples = 60_000_000

// gaussianLossLevels are the privacy-loss levels c of the gaussian events
// {L ≥ c·ε}.
// The levels 0.80–1.00 are where a Gaussian a few per cent under-noised
// exceeds the claim; 0.30 and 0.50 catch a grossly under-noised one, whose
// outputs rarely reach the far tail (with half the noise, δ = 10⁻⁵ and
// ε = 1, P₁ ≈ 7·10⁻⁹ < δ at c = 0.8, while at c = 0.3 P₁ ≈ 0.024 against
// P₀ ≈ 0.006: ln(P₁/P₀) ≈ 1.4).
var gaussianLossLevels = []float64{0.30, 0.50, 0.80, 0.85, 0.90, 0.95, 1.00}

// gaussianLossEvents returns {L(y) ≥ c·ε} and its mirror image for each
// c in gaussianLossLevels, where L(y) = Δ(y − (lo+hi)/2)/σ² is the
// privacy loss of Gaussian noise σ between the inputs lo and hi (Δ = hi −
// lo), and its mirror {y ≤ (lo+hi)/2 − cεσ²/Δ} is {−L ≥ c·ε}.
func gaussianLossEvents(lo, hi, sigma, eps float64) []Event {
	mid, d := (lo+hi)/2, hi-lo
	var ev []Event
	for _, c := range gaussianLossLevels {
		off := c * eps * sigma * sigma / d
		ev = append(ev, Event{Kind: AtLeast, T: mid + off}, Event{Kind: AtMost, T: mid - off})
	}
	return ev
}

// l2LaplaceThresholds are the t of the l2laplace events {stat ≥ t} and
// {stat ≤ −t}. On {stat ≥ t} the likelihood ratio lies in [e^{εt}, e^ε].
// In dimension 2 (numerical integration) ln(P₁/P₀) is 0.93 at t = 0.8 and
// 0.99 at t = 0.98 with the right noise, 1.03 and 1.10 with 10 % too
// little (true loss ε/0.9), on events of probability 0.03–0.29.
var l2LaplaceThresholds = []float64{0.80, 0.85, 0.90, 0.95, 0.98}

// l2LaplaceStatistic is ‖x‖₂ − ‖x − e₁‖₂, computed as
// (2x₀ − 1)/(‖x‖₂ + ‖x − e₁‖₂) to avoid cancellation far from the origin.
// For the ℓ2 Laplace of scale Δ/ε on the inputs 0 and e₁ the privacy loss
// of the output x (input e₁ against 0) is ε times it.
func l2LaplaceStatistic(x []float64) float64 {
	var n0, n1 float64
	for i, v := range x {
		n0 += v * v
		if i == 0 {
			v--
		}
		n1 += v * v
	}
	// The denominator is at least ‖e₁‖₂ = 1 (triangle inequality).
	return (2*x[0] - 1) / (math.Sqrt(n0) + math.Sqrt(n1))
}
