package mechanism

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
)

// ---- binary randomized response (seed 000, InP) ---------------------------

// RandomizedResponse flips a ±1 rating: +1 becomes −1 with probability p1,
// −1 becomes +1 with probability p2. Its ε is computed from the
// probabilities actually realised by the sampler (noise.RealizedBernoulli)
// as max |ln| over the four likelihood ratios:
// (1−p1)/p2, p1/(1−p2) and their inverses.
//
// Seed 000's Theorem 1 states ε-DP under 1 − p2·e^ε ≤ p1 ≤ (1 − p2)·e^ε,
// which bounds only two of the four ratios (P(+1|+1)/P(+1|−1) and
// P(−1|+1)/P(−1|−1)); e.g. p1 = 0.01, p2 = 0.5 satisfies it at ε = 1 but is
// only ln 50 ≈ 3.9-DP. NewRandomizedResponseClaimed keeps the paper's ε as
// ClaimedEpsilon in that case.
type RandomizedResponse struct {
	p1, p2 float64
	eps    float64
	g      privacy.Guarantee
	inst   *Instrument
}

// NewRandomizedResponse is the symmetric mechanism p1 = p2 = 1/(1+e^ε),
// ε-DP per rating.
func NewRandomizedResponse(eps float64) (*RandomizedResponse, error) {
	if err := accountant.CheckEpsilon(eps); err != nil {
		return nil, err
	}
	p := 1 / (1 + math.Exp(eps))
	return NewAsymmetricRR(p, p)
}

// NewAsymmetricRR is the mechanism with flip probabilities p1 (for +1) and
// p2 (for −1), each in (0, 1) with p1 + p2 < 1 (otherwise the output
// carries no information or inverts it); its ε is computed exactly.
func NewAsymmetricRR(p1, p2 float64) (*RandomizedResponse, error) {
	for _, p := range []float64{p1, p2} {
		if math.IsNaN(p) || !(p > 0 && p < 1) {
			return nil, fmt.Errorf("%w: flip probability %v must be in (0, 1)", accountant.ErrInvalid, p)
		}
	}
	if !(p1+p2 < 1) {
		return nil, fmt.Errorf("%w: p1 + p2 = %v must be below 1", accountant.ErrInvalid, p1+p2)
	}
	m := &RandomizedResponse{p1: p1, p2: p2}
	m.eps = rrEpsilon(noise.RealizedBernoulli(p1), noise.RealizedBernoulli(p2))
	m.g = pureGuarantee(m.eps, privacy.UnitEntry, privacy.Local,
		fmt.Sprintf("Binary randomized response on each observed sign (flip +1 w.p. %.4g, −1 w.p. %.4g).", p1, p2))
	return m, nil
}

// NewRandomizedResponseClaimed builds the asymmetric mechanism for a paper
// that claims claimedEps by seed 000's Theorem 1; the guarantee carries
// the exact ε and, when it differs, the claim and why.
func NewRandomizedResponseClaimed(p1, p2, claimedEps float64) (*RandomizedResponse, error) {
	if err := accountant.CheckEpsilon(claimedEps); err != nil {
		return nil, err
	}
	if !Theorem1Holds(p1, p2, claimedEps) {
		return nil, fmt.Errorf("%w: p1 = %v, p2 = %v violate seed 000's Theorem 1 condition at ε = %v", accountant.ErrInvalid, p1, p2, claimedEps)
	}
	m, err := NewAsymmetricRR(p1, p2)
	if err != nil {
		return nil, err
	}
	if m.eps > claimedEps*(1+1e-12) {
		m.g.ClaimedEpsilon = claimedEps
		m.g.Note += fmt.Sprintf(" The source paper's Theorem 1 claims ε = %g, but its condition bounds only two of the four likelihood ratios; the exact ε is %.4g.", claimedEps, m.eps)
	}
	return m, nil
}

// Theorem1Holds is seed 000's condition 1 − p2·e^ε ≤ p1 ≤ (1 − p2)·e^ε
// (necessary, not sufficient, for ε-DP; see RandomizedResponse), with a
// relative tolerance of 1e-12 for float rounding at the boundary (the
// symmetric p = 1/(1+e^ε) sits exactly on it). It only checks a paper's
// claim; guarantees are computed exactly from the probabilities.
func Theorem1Holds(p1, p2, eps float64) bool {
	e := math.Exp(eps)
	const tol = 1e-12
	return 1-p2*e <= p1*(1+tol) && p1 <= (1-p2)*e*(1+tol)
}

// rrEpsilon is max |ln| of the likelihood ratios, rounded up.
func rrEpsilon(q1, q2 float64) float64 {
	r := math.Max(math.Abs(math.Log((1-q1)/q2)), math.Abs(math.Log(q1/(1-q2))))
	return up(r)
}

// Name implements Mechanism.
func (m *RandomizedResponse) Name() string { return "rr" }

// FlipProbabilities returns (p1, p2).
func (m *RandomizedResponse) FlipProbabilities() (p1, p2 float64) { return m.p1, m.p2 }

// Guarantee implements Mechanism: ε-DP per rating, local.
func (m *RandomizedResponse) Guarantee() privacy.Guarantee { return m.g }

// GuaranteeFor implements Mechanism: dε (d ratings of one person).
func (m *RandomizedResponse) GuaranteeFor(d int) (privacy.Guarantee, error) {
	return groupPure(m.g, d)
}

// Randomize returns the released sign for a true sign (true = +1).
// A tap of an instrumented copy sees every sign (its error, which
// randomizing cannot return, is kept for Instrument.Err).
func (m *RandomizedResponse) Randomize(src *noise.Source, positive bool) bool {
	var out bool
	if positive {
		out = !noise.Bernoulli(src, m.p1)
	} else {
		out = noise.Bernoulli(src, m.p2)
	}
	if m.inst != nil && m.inst.Tap != nil {
		sign := func(b bool) float64 {
			if b {
				return 1
			}
			return -1
		}
		m.inst.keep(m.inst.Tap(Draw{Mechanism: "rr", Clean: []float64{sign(positive)}, Noised: []float64{sign(out)}, Flip: [2]float64{m.p1, m.p2}, Epsilon: m.g.Epsilon}))
	}
	return out
}

// OutputProbabilities returns P(output = +1 | input = +1) and
// P(output = +1 | input = −1) as realised by the sampler (for exact tests
// and for the adjusted link c(x) of seed 000).
func (m *RandomizedResponse) OutputProbabilities() (plusGivenPlus, plusGivenMinus float64) {
	return 1 - noise.RealizedBernoulli(m.p1), noise.RealizedBernoulli(m.p2)
}

// ---- k-ary randomized response with "missing" (seed 003) --------------------

// Missing is the category of a rating that was not given.
const Missing = 0

// KaryRR randomizes one rating over W = {0 (missing), 1, …, d}: it is kept
// with probability e^ε/(e^ε + d), otherwise replaced by one of the d other
// values uniformly. ε-DP per rating (the rating's value, including whether
// it exists, is protected); a user's vector over n items is nε-DP.
type KaryRR struct {
	d    int
	keep float64 // the probability passed to the sampler
	eps  float64 // exact, from the realised keep probability
}

// NewKaryRR builds the mechanism over {missing, 1..d}; d ≥ 1.
func NewKaryRR(eps float64, d int) (*KaryRR, error) {
	if err := accountant.CheckEpsilon(eps); err != nil {
		return nil, err
	}
	if d < 1 || d > 1<<20 {
		return nil, fmt.Errorf("%w: d = %d rating values must be in [1, 2^20]", accountant.ErrInvalid, d)
	}
	e := math.Exp(eps)
	keep := e / (e + float64(d))
	if math.IsInf(e, 0) {
		keep = 1
	}
	q := noise.RealizedBernoulli(keep)
	if q >= 1 {
		return nil, fmt.Errorf("%w: ε = %v is too large for randomized response to randomize at all", accountant.ErrInvalid, eps)
	}
	return &KaryRR{d: d, keep: keep, eps: up(math.Abs(math.Log(q * float64(d) / (1 - q))))}, nil
}

// Name implements Mechanism.
func (m *KaryRR) Name() string { return "krr" }

// Values returns d (ratings are 1..d, 0 is missing).
func (m *KaryRR) Values() int { return m.d }

// Guarantee implements Mechanism: ε-DP per rating, local.
func (m *KaryRR) Guarantee() privacy.Guarantee {
	return pureGuarantee(m.eps, privacy.UnitEntry, privacy.Local,
		fmt.Sprintf("k-ary randomized response over {missing, 1..%d} on every item (missing too).", m.d))
}

// GuaranteeFor implements Mechanism: dε.
func (m *KaryRR) GuaranteeFor(d int) (privacy.Guarantee, error) { return groupPure(m.Guarantee(), d) }

// UserGuarantee is the guarantee for one user's whole vector over n items:
// nε-DP (seed 003, Theorem 2), unit user.
func (m *KaryRR) UserGuarantee(n int) (privacy.Guarantee, error) {
	g, err := groupPure(m.Guarantee(), n)
	g.Unit = privacy.UnitUser
	return g, err
}

// OutputProbability is P(output = j | input = i) as realised.
func (m *KaryRR) OutputProbability(i, j int) float64 {
	q := noise.RealizedBernoulli(m.keep)
	if i == j {
		return q
	}
	return (1 - q) / float64(m.d)
}

// Randomize returns the released category for value (0 = missing, 1..d).
func (m *KaryRR) Randomize(src *noise.Source, value int) (int, error) {
	if value < 0 || value > m.d {
		return 0, fmt.Errorf("%w: rating category %d outside {0 (missing), 1..%d}", ErrData, value, m.d)
	}
	// Draw both the coin and the replacement every time, so that the work
	// done (and the time taken) does not reveal whether the rating was
	// kept — which, with the output, would reveal the rating.
	keep := noise.Bernoulli(src, m.keep)
	j := src.IntN(m.d) // one of the d others
	if j >= value {
		j++
	}
	if keep {
		return value, nil
	}
	return j, nil
}

// ---- modified Laplace with missing values (seed 003) ------------------------

// ModifiedLaplace randomizes one rating normalised to [−1, 1], or a missing
// one: with ζ ~ Bernoulli(e^{ε/2}/(e^{ε/2}+1)), an observed x becomes
// x + Lap(2/ε) if ζ, else missing; a missing rating stays missing if ζ,
// else becomes pure Lap(2/ε) noise. The Laplace part is lattice-snapped
// (±1 are lattice points, so rounding costs nothing). ε-DP per rating
// (computed exactly from the realised ζ and noise scale:
// max(2/b, |ln(ζ/(1−ζ))| + 1/b)); nε-DP for a user with n items.
type ModifiedLaplace struct {
	zeta, scale float64
	eps         float64
	bounded     bool
}

// BoundedTime returns a copy of the randomizer whose Laplace noise comes
// from noise.SnapLaplaceFixedTime: the same distribution (and guarantee),
// with a running time that does not grow with the noise — for clients
// whose per-value timing may be observed. It costs ≈ 10 µs of CPU per
// released rating instead of ≈ 100 ns.
func (m *ModifiedLaplace) BoundedTime() *ModifiedLaplace {
	c := *m
	c.bounded = true
	return &c
}

// NewModifiedLaplace builds the per-rating randomizer for ε.
func NewModifiedLaplace(eps float64) (*ModifiedLaplace, error) {
	if err := accountant.CheckEpsilon(eps); err != nil {
		return nil, err
	}
	h := math.Exp(eps / 2)
	zeta := h / (h + 1)
	if math.IsInf(h, 0) {
		zeta = 1
	}
	z := noise.RealizedBernoulli(zeta)
	if z >= 1 {
		return nil, fmt.Errorf("%w: ε = %v is too large for the modified Laplace mechanism", accountant.ErrInvalid, eps)
	}
	scale := 2 / eps
	b := noise.EffectiveLaplaceScale(scale)
	if noise.LaplaceGrid(scale) > 1 {
		return nil, fmt.Errorf("%w: ε = %v is too small for the modified Laplace lattice", accountant.ErrInvalid, eps)
	}
	e := math.Max(up(2/b), up(math.Abs(math.Log(z/(1-z)))+up(1/b)))
	return &ModifiedLaplace{zeta: zeta, scale: scale, eps: e}, nil
}

// Name implements Mechanism.
func (m *ModifiedLaplace) Name() string { return "modlaplace" }

// Guarantee implements Mechanism: ε-DP per rating, local.
func (m *ModifiedLaplace) Guarantee() privacy.Guarantee {
	return pureGuarantee(m.eps, privacy.UnitEntry, privacy.Local,
		"Modified Laplace mechanism on every item (missing too): ratings in [−1, 1], lattice-snapped exact discrete Laplace noise.")
}

// GuaranteeFor implements Mechanism: dε.
func (m *ModifiedLaplace) GuaranteeFor(d int) (privacy.Guarantee, error) {
	return groupPure(m.Guarantee(), d)
}

// UserGuarantee is nε-DP for one user's vector over n items (seed 003,
// Theorem 1), unit user.
func (m *ModifiedLaplace) UserGuarantee(n int) (privacy.Guarantee, error) {
	g, err := groupPure(m.Guarantee(), n)
	g.Unit = privacy.UnitUser
	return g, err
}

// Scale is the Laplace scale 2/ε requested from the sampler.
func (m *ModifiedLaplace) Scale() float64 { return m.scale }

// Zeta is the keep probability e^{ε/2}/(e^{ε/2}+1).
func (m *ModifiedLaplace) Zeta() float64 { return m.zeta }

// Randomize releases one rating: value in [−1, 1] when observed (ignored
// otherwise). It returns the released value and whether it is present.
func (m *ModifiedLaplace) Randomize(src *noise.Source, value float64, observed bool) (float64, bool, error) {
	if observed {
		if math.IsNaN(value) || value < -1 || value > 1 {
			return 0, false, fmt.Errorf("%w: rating %v outside [−1, 1]", ErrData, value)
		}
		if noise.Bernoulli(src, m.zeta) {
			return m.snap(src, value), true, nil
		}
		return 0, false, nil
	}
	if noise.Bernoulli(src, m.zeta) {
		return 0, false, nil
	}
	return m.snap(src, 0), true, nil
}

func (m *ModifiedLaplace) snap(src *noise.Source, x float64) float64 {
	if m.bounded {
		return noise.SnapLaplaceFixedTime(src, x, m.scale)
	}
	return noise.SnapLaplace(src, x, m.scale)
}
