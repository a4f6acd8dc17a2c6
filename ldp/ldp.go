// Package ldp is the client side of local-DP rating collection (seeds
// 002/003: Wenjie Zheng, "Two Differentially Private Rating Collection
// Mechanisms for Recommender Systems"): each user transforms her own
// rating vector over the WHOLE item catalogue — missing entries included —
// on her device, before anything leaves it. What the device must know in advance is
// declared, never read from ratings: the rating scale (DeclaredScale), the
// catalogue every report covers, and who the clients are (CollectOver,
// Simulate, WithClients). Two per-rating randomizers are provided:
//
//   - ModifiedLaplace: ratings mapped from the data's scale to [−1, 1];
//     with probability q = e^{ε/2}/(e^{ε/2}+1) an observed rating x becomes
//     x + Lap(2/ε), otherwise it is removed; a missing entry stays missing
//     with probability q, otherwise it becomes a pure-noise rating Lap(2/ε).
//   - RandomizedResponse: k-ary randomized response over
//     W = {0 (missing), 1, …, d}: keep the value with probability
//     e^ε/(e^ε+d), otherwise report one of the d other values uniformly.
//
// Each randomizer is ε-DP per rating (one cell of the user's vector may
// change arbitrarily, including rated ↔ missing); a user's whole vector of
// n cells is n·ε-DP by basic composition. Both guarantees are reported.
//
// The modified Laplace noise is drawn by the bounded-time sampler
// (noise.SnapLaplaceFixedTime): a client's running time does not grow with
// the noise; randomized response draws the same values whether a rating is
// kept or replaced. The collect header records this (Header.Sampler).
//
// The randomizers depend only on the privacy packages (privacy, noise,
// mechanism, accountant) and ratings, so that a device can embed them. The
// service-side estimators live in ldp/recovery.
package ldp

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
)

// SamplerFixedTime names the client-side samplers whose running time does
// not depend on the noise drawn or on the rating (see Randomizer.Sampler).
const SamplerFixedTime = "fixed-time"

// Mechanism names a per-rating randomizer.
type Mechanism string

const (
	// Laplace is the modified Laplace mechanism (seed 003, Definition 2).
	Laplace Mechanism = "laplace"
	// RR is k-ary randomized response with "missing" as a value (Definition 3).
	RR Mechanism = "rr"
)

// ParseMechanism accepts "laplace" (or "modlaplace") and "rr" (or "krr").
func ParseMechanism(s string) (Mechanism, error) {
	switch s {
	case "laplace", "modlaplace", "modified-laplace":
		return Laplace, nil
	case "rr", "krr", "randomized-response":
		return RR, nil
	}
	return "", fmt.Errorf("unknown local-DP mechanism %q (want laplace or rr)", s)
}

// Missing marks a missing cell in the dense vectors Randomize reads and writes.
var Missing = math.NaN()

// IsMissing reports whether v marks a missing cell.
func IsMissing(v float64) bool { return math.IsNaN(v) }

// Scale is the rating scale of the original data. Levels > 0 declares a
// discrete scale of Levels values Min, Min+step, …, Max (needed by RR).
type Scale struct {
	Min, Max float64
	Levels   int
}

// Step is the spacing of a discrete scale (0 for a continuous one).
func (s Scale) Step() float64 {
	if s.Levels < 2 {
		return 0
	}
	return (s.Max - s.Min) / float64(s.Levels-1)
}

func (s Scale) validate() error {
	if math.IsNaN(s.Min) || math.IsNaN(s.Max) || math.IsInf(s.Min, 0) || math.IsInf(s.Max, 0) || !(s.Min < s.Max) {
		return fmt.Errorf("ldp: rating scale [%v, %v] must be finite with min < max", s.Min, s.Max)
	}
	if s.Levels < 0 || s.Levels == 1 {
		return fmt.Errorf("ldp: a discrete scale needs at least 2 levels, got %d", s.Levels)
	}
	return nil
}

// DeclaredScale builds the scale the clients are told in advance from the
// declared range [lo, hi] (--scale) and, for randomized response, the
// number of levels d (--levels): 0 means d = hi − lo + 1 (step 1) when lo
// and hi are integers. Nothing is read from any rating. The modified
// Laplace mechanism needs no levels and refuses them.
func DeclaredScale(lo, hi float64, levels int, m Mechanism) (Scale, error) {
	sc := Scale{Min: lo, Max: hi}
	if err := sc.validate(); err != nil {
		return sc, err
	}
	switch m {
	case Laplace:
		if levels != 0 {
			return sc, fmt.Errorf("ldp: --levels applies to randomized response only (the modified Laplace mechanism takes any value in [%g, %g])", lo, hi)
		}
	case RR:
		switch {
		case levels == 0 && lo == math.Trunc(lo) && hi == math.Trunc(hi) && hi-lo < 1<<20:
			levels = int(hi-lo) + 1
		case levels == 0:
			return sc, fmt.Errorf("ldp: randomized response needs the number of rating levels: the scale [%g, %g] has non-integer ends, pass --levels d", lo, hi)
		case levels < 2:
			return sc, fmt.Errorf("ldp: --levels must be ≥ 2, got %d", levels)
		}
		sc.Levels = levels
	default:
		return sc, fmt.Errorf("ldp: unknown mechanism %q", m)
	}
	return sc, nil
}

// Level returns the 1-based level of v on a discrete scale, or an error when
// v is not on the grid (nothing is silently rounded).
func (s Scale) Level(v float64) (int, error) {
	if s.Levels < 2 {
		return 0, fmt.Errorf("ldp: scale [%v, %v] is not discrete", s.Min, s.Max)
	}
	if math.IsNaN(v) || v < s.Min-1e-9 || v > s.Max+1e-9 {
		return 0, fmt.Errorf("ldp: rating %v outside the scale [%v, %v]", v, s.Min, s.Max)
	}
	k := (v - s.Min) / s.Step()
	r := math.Round(k)
	if math.Abs(k-r) > 1e-6 {
		return 0, fmt.Errorf("ldp: rating %v is not one of the %d levels of [%v, %v]", v, s.Levels, s.Min, s.Max)
	}
	return int(r) + 1, nil
}

// Value maps a 1-based level back to the rating scale.
func (s Scale) Value(level int) float64 { return s.Min + float64(level-1)*s.Step() }

// Normalise maps v linearly from [Min, Max] onto [−1, 1].
func (s Scale) Normalise(v float64) float64 { return 2*(v-s.Min)/(s.Max-s.Min) - 1 }

// Denormalise maps [−1, 1] back onto [Min, Max].
func (s Scale) Denormalise(x float64) float64 { return (x+1)/2*(s.Max-s.Min) + s.Min }

// Randomizer transforms one user's rating vector over the whole item set.
// It is safe for concurrent use; the randomness comes from the Source.
type Randomizer interface {
	// Mechanism names the randomizer.
	Mechanism() Mechanism
	// Epsilon is the per-rating ε.
	Epsilon() float64
	// Scale is the original rating scale.
	Scale() Scale
	// Randomize reads in (length n, original scale, Missing for a missing
	// cell) and writes the report to out (same length, Missing for a
	// missing report). The report is in the mechanism's units: [−1, 1]
	// plus noise for Laplace, 1-based levels for RR (see Units).
	Randomize(s *noise.Source, in, out []float64) error
	// Units says in which units Randomize reports values.
	Units() string
	// Sampler names how the noise is drawn (SamplerFixedTime: a running
	// time that does not depend on the noise or the rating); it is
	// recorded in the collect header.
	Sampler() string
	// PerRating is the guarantee for any one cell of the vector.
	PerRating() privacy.Guarantee
	// PerUser is the guarantee for a whole vector of n cells.
	PerUser(n int) privacy.Guarantee
	// Model describes the output distribution, for debiased recovery.
	Model() OutputModel
}

// OutputModel summarises a randomizer's output distribution for the
// service: with the true cell either rated θ (in report units) or missing,
//
//	P(report present | rated)   = PresentRated
//	P(report present | missing) = PresentMissing
//	E[report | present, rated θ] = MeanRatedA + MeanRatedB·θ
//	E[report | present, missing] = MeanMissing
//	Var(report | present, …) ≈ Var (the noise variance, for ρ choices)
//
// All mechanisms here are affine in θ, which is what debiasing needs.
type OutputModel struct {
	PresentRated, PresentMissing float64
	MeanRatedA, MeanRatedB       float64
	MeanMissing                  float64
	// NoiseVar is the variance a present report adds around its mean, for a
	// rated cell (Laplace: 2·(2/ε)²; RR: computed at the middle level), and
	// NoiseVarMissing the variance of a present report at a missing cell.
	NoiseVar, NoiseVarMissing float64
	// ToReport maps an original rating to report units (affine).
	ToReportA, ToReportB float64
}

// ToReport maps a rating on the original scale to report units.
func (o OutputModel) ToReport(v float64) float64 { return o.ToReportA + o.ToReportB*v }

// FromReport maps report units back to the original scale.
func (o OutputModel) FromReport(x float64) float64 { return (x - o.ToReportA) / o.ToReportB }

// New returns the randomizer for a mechanism. RR needs a discrete scale.
func New(m Mechanism, eps float64, sc Scale) (Randomizer, error) {
	switch m {
	case Laplace:
		return NewModifiedLaplace(eps, sc)
	case RR:
		return NewRandomizedResponse(eps, sc)
	}
	return nil, fmt.Errorf("ldp: unknown mechanism %q", m)
}

func checkEpsilon(eps float64) error {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < 0x1p-50 {
		return fmt.Errorf("ldp: ε must be finite and positive, got %v", eps)
	}
	if eps > 700 {
		return fmt.Errorf("ldp: ε = %v is too large to compute e^ε", eps)
	}
	return nil
}

// perUserEpsilon composes n per-rating ε-DP cells by basic composition
// (privacy/accountant, rounded up); +Inf when that fails, so an error never
// looks like privacy. Used only when the mechanism's own UserGuarantee fails.
func perUserEpsilon(eps float64, n int) float64 {
	e := make([]float64, max(n, 1))
	for i := range e {
		e[i] = eps
	}
	v, err := accountant.BasicComposition(e...)
	if err != nil {
		return math.Inf(1)
	}
	return v
}

func guarantees(name string, eps float64, n int, perUser bool) privacy.Guarantee {
	if !perUser {
		return privacy.Guarantee{Epsilon: eps, Unit: privacy.UnitEntry, Notion: privacy.Local, Status: privacy.Proven,
			Note: fmt.Sprintf("%s, applied on the user's device to every cell of her vector (rated or missing); one cell may change arbitrarily, including rated ↔ missing.", name)}
	}
	return privacy.Guarantee{Epsilon: perUserEpsilon(eps, n), Unit: privacy.UnitUser, Notion: privacy.Local, Status: privacy.Proven,
		ClaimedEpsilon: 0,
		Note:           fmt.Sprintf("%s: per-rating ε = %g composed over the user's whole vector of n = %d items (basic composition, n·ε).", name, eps, n)}
}
