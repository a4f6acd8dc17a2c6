package onebit

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
)

// The mechanisms of the four private variants, calibrated once from the
// budget before the solver sees the data. Every noise scale and flip
// probability comes from a privacy/mechanism value, every ε from that
// value's Guarantee (composed by privacy/accountant where a run releases
// several times); nothing here computes an ε by its own arithmetic.
//
// The neighbouring relation is the seed's: one observed rating's value
// (hence its sign) changes; which (user, item) pairs were rated is public
// (privacy.RelationRatingValue), so the pattern Ω, the users, the items
// and the shape d1 × d2 are public.

// entrySensitivity is an ℓ1 sensitivity under the seed's relation.
func entrySensitivity(v float64) mechanism.Sensitivity {
	return mechanism.Sensitivity{Value: v, Norm: mechanism.L1, Relation: mechanism.ReplaceOne, Unit: privacy.UnitEntry}
}

// Plan is one private run's mechanism, built by Calibrate.
type Plan struct {
	Mechanism Mechanism
	// RR is InP's randomized response on each observed sign.
	RR *mechanism.RandomizedResponse
	// Laplace is ObjP's noise on the objective's linear term, GraP's noise
	// on each of its Steps gradient releases, or OutP's noise on the
	// completed matrix.
	Laplace *mechanism.Laplace
	// Steps is GraP's K; Clamp its C (≤ 0: no clamping).
	Steps int
	Clamp float64
	// Sensitivity is the ℓ1 sensitivity the Laplace noise is calibrated to
	// (ObjP's Δ, GraP's Δ1, OutP's per-entry 2α).
	Sensitivity float64
	// Guarantee covers everything the run releases.
	Guarantee privacy.Guarantee
}

// Calibrate builds the mechanism of cfg for a d1 × d2 problem with n
// observed entries (all public under the seed's relation). It does not
// look at the signs.
func Calibrate(cfg Config, d1, d2, n int) (*Plan, error) {
	eps := cfg.Epsilon
	if !(eps >= accountant.MinEpsilon) || math.IsInf(eps, 0) {
		return nil, fmt.Errorf("onebit: ε = %g must be finite and at least 2⁻⁵⁰", eps)
	}
	if d1 <= 0 || d2 <= 0 || n <= 0 {
		return nil, fmt.Errorf("onebit: empty %d × %d problem with %d observations", d1, d2, n)
	}
	opt := cfg.Solver
	if opt.Link == nil {
		return nil, errors.New("onebit: no link function")
	}
	switch cfg.Mechanism {
	case InP:
		return inpPlan(eps, cfg.P1, cfg.P2)
	case ObjP:
		return objpPlan(eps, opt.Link, opt.Alpha, n)
	case GraP:
		return grapPlan(eps, cfg.Iterations, cfg.Clamp, opt.Link, opt.Alpha, n)
	case OutP:
		return outpPlan(eps, opt.Alpha, opt.Tau, d1, d2)
	case Clear:
		return nil, errors.New("onebit: Clear adds no noise; there is nothing to calibrate")
	}
	return nil, fmt.Errorf("onebit: unknown mechanism %q (want clear, inp, objp, grap or outp)", cfg.Mechanism)
}

// inpPlan is input perturbation: randomised response on each observed sign
// (symmetric p = 1/(1+e^ε) when p1 = p2 = 0), then post-processing. Its ε
// is the exact loss of the realised flip probabilities. Theorem 1's
// condition 1−p2e^ε ≤ p1 ≤ (1−p2)e^ε bounds only two of the four
// likelihood ratios (e.g. p1 = 0.01, p2 = ½ satisfies it at ε = 1 yet is
// only ln 50-DP), so flip probabilities whose exact loss exceeds the
// requested ε are refused.
func inpPlan(eps, p1, p2 float64) (*Plan, error) {
	var rr *mechanism.RandomizedResponse
	var err error
	if p1 == 0 && p2 == 0 {
		rr, err = mechanism.NewRandomizedResponse(eps)
	} else {
		rr, err = mechanism.NewAsymmetricRR(p1, p2)
	}
	if err != nil {
		return nil, fmt.Errorf("onebit: InP flip probabilities (--p1 %g, --p2 %g): %w", p1, p2, err)
	}
	g := rr.Guarantee()
	if !(g.Epsilon <= eps*(1+1e-12)) {
		return nil, fmt.Errorf("onebit: flip probabilities p1 = %g, p2 = %g give privacy loss %.4g > ε = %g (all four ratios (1−p1)/p2, p2/(1−p1), p1/(1−p2), (1−p2)/p1 must be ≤ e^ε; Theorem 1's condition checks only two)", p1, p2, g.Epsilon, eps)
	}
	q1, q2 := rr.FlipProbabilities()
	// The curator flips the signs (the seed's setting), so the notion is
	// central; randomised response is also local, which is stronger.
	g.Notion, g.Relation = privacy.Central, privacy.RelationRatingValue
	g.Note = fmt.Sprintf("Input perturbation: each observed sign is flipped (p1 = %.4g for +1, p2 = %.4g for −1) by randomised response, ε computed exactly from the realised probabilities; everything after is post-processing.", q1, q2)
	return &Plan{Mechanism: InP, RR: rr, Guarantee: g}, nil
}

// objpPlan is objective perturbation: Σ_Ω H_k X_k is added to the
// objective, H with density ∝ exp(−ε‖H‖₁/Δ) (independent Laplace entries
// of scale Δ/ε, drawn by a Laplace mechanism calibrated to Δ on the |Ω|
// coordinates). Its ε is as claimed by the seed, not proven: the seed's
// proof (Theorem 2) equates gradients at the optimum, but the optimum is
// constrained to C, where the gradient need not vanish (the
// noise-to-output map is then many-to-one); it ignores the Jacobian of
// that map (which differs between neighbours for the probit link); the
// objective has no strongly convex term, so the minimiser need not be
// unique; only the entries of Ω are perturbed while all d1·d2 outputs are
// released; and SPG returns an approximate minimiser. Chaudhuri et al.'s
// theorem, which this mimics, needs none of these gaps. The guarantee
// carries the claimed ε with status as-claimed.
func objpPlan(eps float64, link Link, alpha float64, n int) (*Plan, error) {
	delta, err := ObjDelta(link, alpha)
	if err != nil {
		return nil, err
	}
	if !(delta > 0) || math.IsInf(delta, 0) {
		return nil, fmt.Errorf("onebit: ObjP needs a finite α for the %s link (its noise is calibrated to α)", link.Name())
	}
	lap, err := mechanism.NewLaplace(eps, entrySensitivity(delta), n)
	if err != nil {
		return nil, fmt.Errorf("onebit: ObjP noise: %w", err)
	}
	g := ObjPGuarantee(eps, delta)
	return &Plan{Mechanism: ObjP, Laplace: lap, Sensitivity: delta, Guarantee: g}, nil
}

// ObjPGuarantee is objective perturbation's guarantee: the seed's ε, as
// claimed (see objpPlan for why nothing is proven).
func ObjPGuarantee(eps, delta float64) privacy.Guarantee {
	return privacy.Guarantee{Epsilon: eps, ClaimedEpsilon: eps, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.AsClaimed,
		Relation: privacy.RelationRatingValue,
		Note:     fmt.Sprintf("Objective perturbation with the seed's calibration (noise density ∝ exp(−ε‖H‖₁/Δ), Δ = %.4g). No ε is proven; ε is the seed's claim: its argument assumes a zero gradient at an exact, unique, unconstrained minimiser and ignores the Jacobian of the noise-to-output map; here the minimiser is constrained to the nuclear-norm and max-norm ball and approximate.", delta)}
}

// grapPlan is gradient perturbation: K releases of the clamped gradient on
// Ω plus Laplace noise. One changed sign moves one gradient entry by at
// most 2C (or by the link's Δ unclamped): ℓ1 sensitivity Δ1. The budget is
// split evenly (the largest per-step ε whose K-fold basic composition is
// ≤ ε), one Laplace mechanism is built for that share, and the K releases
// are composed by the accountant. The solver's steps use only the
// perturbed gradients (no line search, no data-dependent stopping), so the
// iterates are post-processing.
func grapPlan(eps float64, k int, c float64, link Link, alpha float64, n int) (*Plan, error) {
	if k <= 0 {
		k = 10
	}
	if c == 0 {
		c = 0.5
	}
	var delta1 float64
	if c > 0 {
		delta1 = 2 * c
	} else {
		d, err := ObjDelta(link, alpha)
		if err != nil {
			return nil, err
		}
		delta1 = d
	}
	if !(delta1 > 0) || math.IsInf(delta1, 0) {
		return nil, fmt.Errorf("onebit: GraP without a clamp needs a finite α for the %s link (its noise is calibrated to α)", link.Name())
	}
	per, err := evenShare(eps, k)
	if err != nil {
		return nil, fmt.Errorf("onebit: GraP budget: %w", err)
	}
	lap, err := mechanism.NewLaplace(per, entrySensitivity(delta1), n)
	if err != nil {
		return nil, fmt.Errorf("onebit: GraP noise: %w", err)
	}
	g, err := accountant.Compose(0, slices.Repeat([]privacy.Guarantee{lap.Guarantee()}, k)...)
	if err != nil {
		return nil, fmt.Errorf("onebit: GraP accounting: %w", err)
	}
	g.Relation = privacy.RelationRatingValue
	g.Note = fmt.Sprintf("Gradient perturbation: %d iterations, each adding lattice Laplace noise of scale %.4g (ε = %.4g per iteration) to the clamped gradient on the observed entries (ℓ1 sensitivity %.4g per iteration), composed by basic composition; steps use only the noisy gradients.", k, lap.Scale(), per, delta1)
	if g.Epsilon > eps {
		g.ClaimedEpsilon = eps
	}
	return &Plan{Mechanism: GraP, Laplace: lap, Steps: k, Clamp: c, Sensitivity: delta1, Guarantee: g}, nil
}

// evenShare is the largest per-step ε (at most ε/k) whose k-fold basic
// composition, as the accountant rounds it, is ≤ ε.
func evenShare(eps float64, k int) (float64, error) {
	per := eps / float64(k)
	for range 64 {
		total, err := accountant.BasicComposition(slices.Repeat([]float64{per}, k)...)
		if err != nil {
			return 0, err
		}
		if total <= eps {
			return per, nil
		}
		per = math.Nextafter(per, 0)
	}
	return 0, fmt.Errorf("%w: no even split of ε = %g into %d steps", accountant.ErrInvalid, eps, k)
}

// outpPlan is output perturbation. The seed adds Laplace noise of scale
// 2α/ε to each of the d1·d2 entries of M̂ and claims ε: the per-entry
// calibration (ℓ1 sensitivity 2α of one entry), which is how the Laplace
// mechanism is built. One changed sign can move every entry of M̂ (each by
// at most 2α), so the ℓ1 sensitivity of the whole matrix is at most
// min(2α·d1·d2, 2τ·√(d1·d2)) (‖A‖₁ ≤ √(d1d2)‖A‖_F ≤ √(d1d2)‖A‖_* and both
// estimates lie in the τ-ball); the proven ε of the released matrix is
// that sensitivity priced at the mechanism's scale (lattice rounding
// included). The guarantee carries the proven ε and the per-entry ε as the
// claim.
func outpPlan(eps, alpha, tau float64, d1, d2 int) (*Plan, error) {
	lap, err := newOutPLaplace(eps, alpha, d1*d2)
	if err != nil {
		return nil, err
	}
	if !(tau > 0) || math.IsInf(tau, 0) {
		return nil, fmt.Errorf("onebit: OutP needs a finite τ, got %g", tau)
	}
	n := float64(d1) * float64(d2)
	sens := math.Min(2*alpha*n, 2*tau*math.Sqrt(n))
	proven, err := mechanism.LaplaceEpsilon(sens, lap.Scale(), d1*d2)
	if err != nil {
		return nil, fmt.Errorf("onebit: OutP accounting: %w", err)
	}
	g := privacy.Guarantee{Epsilon: proven, ClaimedEpsilon: eps, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven,
		Relation: privacy.RelationRatingValue,
		Note: fmt.Sprintf("Output perturbation: Laplace noise of scale %.4g (2α/ε) on every entry of the completed %d × %d matrix, as in the seed, which claims ε = %g. That calibration protects one entry of the output, but one changed rating can move all %d entries, so the whole released matrix is only %.4g-DP (ℓ1 sensitivity ≤ %.4g).",
			lap.Scale(), d1, d2, eps, d1*d2, proven, sens)}
	return &Plan{Mechanism: OutP, Laplace: lap, Sensitivity: 2 * alpha, Guarantee: g}, nil
}

// newOutPLaplace is the seed's per-entry calibration: ℓ1 sensitivity 2α
// (every entry lies in [−α, α]), n coordinates released.
func newOutPLaplace(eps, alpha float64, n int) (*mechanism.Laplace, error) {
	if !(alpha > 0) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("onebit: OutP needs a finite α > 0 (its noise is calibrated to α), got %g", alpha)
	}
	lap, err := mechanism.NewLaplace(eps, entrySensitivity(2*alpha), n)
	if err != nil {
		return nil, fmt.Errorf("onebit: OutP noise: %w", err)
	}
	return lap, nil
}

// ClearGuarantee is the non-private baseline's.
func ClearGuarantee() privacy.Guarantee {
	return privacy.NoPrivacy(privacy.UnitEntry, "One-bit completion without noise (the seed's Clear baseline).")
}
