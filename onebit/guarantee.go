package onebit

import (
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
)

// The guarantee arithmetic of the five mechanisms, in one place.
// TODO(privacy): switch to privacy/mechanism (RandomizedResponse, Laplace)
// and privacy/accountant (basic composition) once they land; the formulas
// below are the standard ones those packages implement.

// omegaNote is common to every mechanism: the seed's neighbouring relation
// changes the value of one observed sign; which entries are observed (Ω) is
// treated as public and is stored in the model (seen items).
const omegaNote = "Neighbouring datasets differ in the value of one observed rating; which (user, item) pairs were rated is treated as public and is stored in the model."

// rrEpsilon is the exact privacy loss of flipping +1 with probability p1 and
// −1 with probability p2: the largest log-ratio of the two output
// distributions, both ways round.
func rrEpsilon(p1, p2 float64) float64 {
	r := math.Max(math.Max((1-p1)/p2, p2/(1-p1)), math.Max(p1/(1-p2), (1-p2)/p1))
	return math.Log(r)
}

// InPGuarantee is input perturbation's guarantee: randomised response on
// each observed sign, then post-processing. It is proven for the exact
// loss of the flip probabilities. Theorem 1's condition 1−p2e^ε ≤ p1 ≤
// (1−p2)e^ε bounds only two of the four likelihood ratios (e.g. p1 = 0,
// p2 = ½ satisfies it for every ε yet an output −1 reveals the input), so
// the code enforces all four.
func InPGuarantee(eps, p1, p2 float64) (privacy.Guarantee, error) {
	loss := rrEpsilon(p1, p2)
	if !(loss <= eps*(1+1e-12)) {
		return privacy.Guarantee{}, fmt.Errorf("onebit: flip probabilities p1 = %g, p2 = %g give privacy loss %.4g > ε = %g (all four ratios (1−p1)/p2, p2/(1−p1), p1/(1−p2), (1−p2)/p1 must be ≤ e^ε; Theorem 1's condition checks only two)", p1, p2, loss, eps)
	}
	return privacy.Guarantee{Epsilon: eps, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven,
		Note: fmt.Sprintf("Input perturbation: each observed sign is flipped (p1 = %.4g for +1, p2 = %.4g for −1), which is ε-DP randomised response; everything after is post-processing. %s", p1, p2, omegaNote)}, nil
}

// ObjPGuarantee is objective perturbation's: as claimed by the seed, not
// proven. The seed's proof (Theorem 2) equates gradients at the optimum,
// but the optimum is constrained to C, where the gradient need not vanish
// (the noise-to-output map is then many-to-one); it ignores the Jacobian of
// that map (which differs between neighbours for the probit link); the
// objective has no strongly convex term, so the minimiser need not be
// unique; only the entries of Ω are perturbed while all d1·d2 outputs are
// released; and SPG returns an approximate minimiser. Chaudhuri et al.'s
// theorem, which this mimics, needs none of these gaps.
func ObjPGuarantee(eps, delta float64) privacy.Guarantee {
	return privacy.Guarantee{Epsilon: math.Inf(1), ClaimedEpsilon: eps, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.AsClaimed,
		Note: fmt.Sprintf("Objective perturbation with the seed's calibration (noise density ∝ exp(−ε|H|/Δ), Δ = %.4g). No ε is proven: the seed's argument assumes a zero gradient at an exact, unique, unconstrained minimiser and ignores the Jacobian of the noise-to-output map; here the minimiser is constrained to the nuclear-norm and max-norm ball and approximate. %s", delta, omegaNote)}
}

// GraPGuarantee is gradient perturbation's: K Laplace releases of the
// clamped gradient on Ω, each with L1 sensitivity delta1 (one changed sign
// moves one gradient entry by at most 2C, or by the link's Δ unclamped) and
// scale K·delta1/ε, so each is (ε/K)-DP and basic composition gives ε.
// The solver's steps use only the perturbed gradients (no line search, no
// data-dependent stopping), so the iterates are post-processing.
func GraPGuarantee(eps float64, k int, delta1, scale float64) (privacy.Guarantee, error) {
	// Each step releases the clamped gradient plus lattice Laplace noise;
	// one changed sign moves one gradient entry by ≤ Δ1, and the rounding
	// to the lattice is priced by mechanism.LaplaceEpsilon (Δ1 + g over the
	// effective scale). Basic composition over the k steps.
	per, err := mechanism.LaplaceEpsilon(delta1, scale, 1)
	if err != nil {
		return privacy.Guarantee{}, fmt.Errorf("onebit: GraP accounting: %w", err)
	}
	total, err := accountant.BasicComposition(slices.Repeat([]float64{per}, k)...)
	if err != nil {
		return privacy.Guarantee{}, fmt.Errorf("onebit: GraP accounting: %w", err)
	}
	g := privacy.Guarantee{Epsilon: total, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven,
		Note: fmt.Sprintf("Gradient perturbation: %d iterations, each adding lattice Laplace noise of scale %.4g (≈ %d·%.4g/ε) to the clamped gradient on the observed entries (L1 sensitivity %.4g per iteration), composed by basic composition; steps use only the noisy gradients. %s", k, scale, k, delta1, delta1, omegaNote)}
	if total > eps {
		g.ClaimedEpsilon = eps
	}
	return g, nil
}

// OutPGuarantee is output perturbation's. The seed adds Laplace noise of
// scale 2α/ε to each of the d1·d2 entries of M̂ and claims ε: that is the
// per-entry calibration. One changed sign can move every entry of M̂ (each
// by at most 2α), so the L1 sensitivity of the whole matrix is at most
// min(2α·d1·d2, 2τ·√(d1·d2)) (‖A‖₁ ≤ √(d1d2)‖A‖_F ≤ √(d1d2)‖A‖_* and both
// estimates lie in the τ-ball), and the provable ε is that over 2α/ε.
func OutPGuarantee(eps, alpha, tau float64, d1, d2 int) privacy.Guarantee {
	n := float64(d1) * float64(d2)
	sens := math.Min(2*alpha*n, 2*tau*math.Sqrt(n))
	// Lattice Laplace on all d1·d2 entries: mechanism.LaplaceEpsilon prices
	// the rounding ((Δ + d1·d2·g)/b, rounded up); no bound if it fails.
	proven, err := mechanism.LaplaceEpsilon(sens, 2*alpha/eps, d1*d2)
	if err != nil {
		proven = math.Inf(1)
	}
	return privacy.Guarantee{Epsilon: proven, ClaimedEpsilon: eps, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven,
		Note: fmt.Sprintf("Output perturbation: Laplace noise of scale 2α/ε = %.4g on every entry of the completed %d × %d matrix, as in the seed, which claims ε = %g. That calibration protects one entry of the output, but one changed rating can move all %d entries, so the whole released matrix is only %.4g-DP (L1 sensitivity ≤ %.4g). %s",
			2*alpha/eps, d1, d2, eps, d1*d2, proven, sens, omegaNote)}
}

// ClearGuarantee is the non-private baseline's.
func ClearGuarantee() privacy.Guarantee {
	return privacy.NoPrivacy(privacy.UnitEntry, "One-bit completion without noise (the seed's Clear baseline).")
}
