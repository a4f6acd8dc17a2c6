package ldp

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// The per-cell randomizers are privacy/mechanism's ModifiedLaplace
// (lattice-snapped exact Laplace noise) and KaryRR, which carry and
// validate their own guarantees; this file applies them to whole vectors
// over the item set and describes their output for the service.

// ModifiedLaplace is the modified Laplace mechanism of seed 003
// (Definition 2) on ratings normalised to [−1, 1].
type ModifiedLaplace struct {
	eps   float64
	scale Scale
	keep  float64 // q = e^{ε/2}/(e^{ε/2}+1)
	b     float64 // Laplace scale 2/ε
	mech  *mechanism.ModifiedLaplace
}

// NewModifiedLaplace returns the mechanism for per-rating ε on the rating
// scale sc (only Min and Max are used).
func NewModifiedLaplace(eps float64, sc Scale) (*ModifiedLaplace, error) {
	if err := checkEpsilon(eps); err != nil {
		return nil, err
	}
	if err := sc.validate(); err != nil {
		return nil, err
	}
	mech, err := mechanism.NewModifiedLaplace(eps)
	if err != nil {
		return nil, fmt.Errorf("ldp: %w", err)
	}
	// The client path: the Laplace part comes from the bounded-time
	// sampler (noise.SnapLaplaceFixedTime), the same law with a running
	// time that does not grow with the noise, so a device whose per-value
	// timing is observed does not leak |noise| (and with the output, the
	// rating).
	return &ModifiedLaplace{eps: eps, scale: sc, keep: mech.Zeta(), b: mech.Scale(), mech: mech.BoundedTime()}, nil
}

// Sampler implements Randomizer: the Laplace noise comes from the
// bounded-time sampler.
func (m *ModifiedLaplace) Sampler() string { return SamplerFixedTime }

// Mechanism implements Randomizer.
func (m *ModifiedLaplace) Mechanism() Mechanism { return Laplace }

// Epsilon implements Randomizer.
func (m *ModifiedLaplace) Epsilon() float64 { return m.eps }

// Scale implements Randomizer.
func (m *ModifiedLaplace) Scale() Scale { return m.scale }

// Units implements Randomizer.
func (m *ModifiedLaplace) Units() string { return "normalised" }

// KeepProbability is q = e^{ε/2}/(e^{ε/2}+1): the probability that a rating
// is kept and that a missing cell stays missing.
func (m *ModifiedLaplace) KeepProbability() float64 { return m.keep }

// NoiseScale is the Laplace scale 2/ε.
func (m *ModifiedLaplace) NoiseScale() float64 { return m.b }

// Cell randomizes one cell: x is a normalised rating in [−1, 1] or Missing.
func (m *ModifiedLaplace) Cell(s *noise.Source, x float64) (float64, error) {
	v, present, err := m.mech.Randomize(s, x, !IsMissing(x))
	if err != nil {
		return 0, err
	}
	if !present {
		return Missing, nil
	}
	return v, nil
}

// Randomize implements Randomizer.
func (m *ModifiedLaplace) Randomize(s *noise.Source, in, out []float64) error {
	if len(out) != len(in) {
		return fmt.Errorf("ldp: output length %d, want %d", len(out), len(in))
	}
	for j, v := range in {
		x := Missing
		if !IsMissing(v) {
			if math.IsInf(v, 0) || v < m.scale.Min || v > m.scale.Max {
				return fmt.Errorf("ldp: item %d: rating %v outside the scale [%v, %v]", j, v, m.scale.Min, m.scale.Max)
			}
			x = math.Max(-1, math.Min(1, m.scale.Normalise(v)))
		}
		r, err := m.Cell(s, x)
		if err != nil {
			return fmt.Errorf("ldp: item %d: %w", j, err)
		}
		out[j] = r
	}
	return nil
}

// PerRating implements Randomizer.
func (m *ModifiedLaplace) PerRating() privacy.Guarantee { return m.mech.Guarantee() }

// PerUser implements Randomizer.
func (m *ModifiedLaplace) PerUser(n int) privacy.Guarantee {
	g, err := m.mech.UserGuarantee(n)
	if err != nil {
		return guarantees("Modified Laplace mechanism (seed 003, Theorem 1)", m.eps, n, true)
	}
	return g
}

// Model implements Randomizer.
func (m *ModifiedLaplace) Model() OutputModel {
	w := m.scale.Max - m.scale.Min
	return OutputModel{
		PresentRated: m.keep, PresentMissing: 1 - m.keep,
		MeanRatedA: 0, MeanRatedB: 1, MeanMissing: 0,
		NoiseVar: 2 * m.b * m.b, NoiseVarMissing: 2 * m.b * m.b,
		ToReportA: -1 - 2*m.scale.Min/w, ToReportB: 2 / w,
	}
}

// RandomizedResponse is k-ary randomized response over
// W = {0 (missing), 1, …, d} (seed 003, Definition 3).
type RandomizedResponse struct {
	eps   float64
	scale Scale
	d     int
	keep  float64 // e^ε/(e^ε+d)
	mech  *mechanism.KaryRR
}

// NewRandomizedResponse returns the mechanism for per-rating ε on the
// discrete scale sc (d = sc.Levels values).
func NewRandomizedResponse(eps float64, sc Scale) (*RandomizedResponse, error) {
	if err := checkEpsilon(eps); err != nil {
		return nil, err
	}
	if err := sc.validate(); err != nil {
		return nil, err
	}
	if sc.Levels < 2 {
		return nil, fmt.Errorf("ldp: randomized response needs a discrete rating scale (levels ≥ 2)")
	}
	mech, err := mechanism.NewKaryRR(eps, sc.Levels)
	if err != nil {
		return nil, fmt.Errorf("ldp: %w", err)
	}
	return &RandomizedResponse{eps: eps, scale: sc, d: sc.Levels, keep: mech.OutputProbability(1, 1), mech: mech}, nil
}

// Mechanism implements Randomizer.
func (m *RandomizedResponse) Mechanism() Mechanism { return RR }

// Epsilon implements Randomizer.
func (m *RandomizedResponse) Epsilon() float64 { return m.eps }

// Scale implements Randomizer.
func (m *RandomizedResponse) Scale() Scale { return m.scale }

// Units implements Randomizer.
func (m *RandomizedResponse) Units() string { return "levels" }

// Sampler implements Randomizer: mechanism.KaryRR draws the keep coin and
// the replacement value for every cell, kept or not, so its work does not
// depend on the outcome.
func (m *RandomizedResponse) Sampler() string { return SamplerFixedTime }

// KeepProbability is e^ε/(e^ε+d).
func (m *RandomizedResponse) KeepProbability() float64 { return m.keep }

// Cell randomizes one value w ∈ {0, …, d} (0 = missing) and returns the
// reported value in the same coding.
func (m *RandomizedResponse) Cell(s *noise.Source, w int) (int, error) {
	return m.mech.Randomize(s, w)
}

// Randomize implements Randomizer: reports are 1-based levels (Missing for 0).
func (m *RandomizedResponse) Randomize(s *noise.Source, in, out []float64) error {
	if len(out) != len(in) {
		return fmt.Errorf("ldp: output length %d, want %d", len(out), len(in))
	}
	for j, v := range in {
		w := 0
		if !IsMissing(v) {
			k, err := m.scale.Level(v)
			if err != nil {
				return fmt.Errorf("item %d: %w", j, err)
			}
			w = k
		}
		r, err := m.Cell(s, w)
		if err != nil {
			return fmt.Errorf("ldp: item %d: %w", j, err)
		}
		if r == 0 {
			out[j] = Missing
		} else {
			out[j] = float64(r)
		}
	}
	return nil
}

// PerRating implements Randomizer.
func (m *RandomizedResponse) PerRating() privacy.Guarantee { return m.mech.Guarantee() }

// PerUser implements Randomizer.
func (m *RandomizedResponse) PerUser(n int) privacy.Guarantee {
	g, err := m.mech.UserGuarantee(n)
	if err != nil {
		return guarantees(fmt.Sprintf("Randomized response over {missing, 1…%d} (seed 003, Theorem 2)", m.d), m.eps, n, true)
	}
	return g
}

// Model implements Randomizer (report units: levels 1…d).
func (m *RandomizedResponse) Model() OutputModel {
	d := float64(m.d)
	b := (1 - m.keep) / d // probability of each other value
	S := d * (d + 1) / 2  // sum of the levels
	// Variance of the report given present, at the middle level.
	mid := (d + 1) / 2
	mean := (b*S + (m.keep-b)*mid) / (1 - b)
	var v float64
	for k := 1.0; k <= d; k++ {
		p := b
		if k == mid {
			p = m.keep
		}
		v += p / (1 - b) * (k - mean) * (k - mean)
	}
	return OutputModel{
		PresentRated: 1 - b, PresentMissing: 1 - m.keep,
		MeanRatedA: b * S / (1 - b), MeanRatedB: (m.keep - b) / (1 - b),
		MeanMissing: mid,
		NoiseVar:    v, NoiseVarMissing: (d*d - 1) / 12,
		ToReportA: 1 - m.scale.Min/m.scale.Step(), ToReportB: 1 / m.scale.Step(),
	}
}
