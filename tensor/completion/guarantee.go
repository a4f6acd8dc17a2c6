package completion

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
)

// ZCDPForEpsDelta is the largest ρ whose zCDP guarantee converts to
// (ε, δ)-DP by the simple bound ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016,
// Prop. 1.3): ρ = (√(ln(1/δ) + ε) − √(ln(1/δ)))².
//
// TODO(privacy-core): switch to privacy/accountant's calibration with the
// tight conversion once it lands (it allows a larger ρ, so less noise).
func ZCDPForEpsDelta(eps, delta float64) float64 {
	l := math.Log(1 / delta)
	r := math.Sqrt(l+eps) - math.Sqrt(l)
	// round toward the safe side (a smaller ρ means more noise): the
	// relative margin covers the floating-point error of this formula and
	// of EpsilonOfZCDP, so the reported ε never exceeds the requested one.
	return r * r * (1 - 1e-12)
}

// EpsilonOfZCDP converts ρ-zCDP to ε at δ by the same simple bound.
// TODO(privacy-core): privacy/accountant's tight conversion.
func EpsilonOfZCDP(rho, delta float64) float64 {
	return math.Nextafter(rho+2*math.Sqrt(rho*math.Log(1/delta)), math.Inf(1))
}

// Guarantee states what a trained configuration provably gives, for
// neighbouring datasets that differ in the value of one rating (the set of
// observed positions is treated as public: every mechanism here releases a
// model whose shape and update pattern depend on it). nTrain is the number
// of training entries.
//
//   - none: no noise, status none.
//   - IP: ε-DP, proven (each value clamped to [Lo, Hi], Laplace (Hi−Lo)/ε,
//     training is post-processing).
//   - GP, OP: the seed releases A, B (and the Tucker core) without noise,
//     so the full model has status none; the note gives the guarantee of C
//     alone: the seed's claim, and what can be proven.
//   - DP-SGD: (ε, δ) from ρ-zCDP, proven.
func (c Config) Guarantee(nTrain int) privacy.Guarantee {
	const who = "Neighbouring data differ in the value of one rating; which (user, item, day) positions are rated is treated as public."
	switch c.Mechanism {
	case IP:
		return privacy.Guarantee{Epsilon: c.Epsilon, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven,
			Note: fmt.Sprintf("Input perturbation: every training value is clamped to [%g, %g] and gets Laplace noise of scale %g/ε before training; the model is post-processing. %s", c.Lo, c.Hi, c.Hi-c.Lo, who)}
	case GP:
		steps := float64(c.Passes) * float64(nTrain)
		return privacy.Guarantee{Epsilon: math.Inf(1), Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.None,
			ClaimedEpsilon: c.Epsilon,
			Note: fmt.Sprintf("Gradient perturbation as seed 004 calibrates it: only C's gradient rows are clipped (m = %g) and noised (ℓ2 Laplace, Δ = 2m, per-step ε = %g); "+
				"the released A, B%s are computed without noise, so the model as a whole has no DP guarantee. "+
				"C alone: the seed claims ε = %g for the whole run, independent of the number of passes; that proof does not compose the %d passes. "+
				"Each pass visits the changed rating once, so counting passes gives ε = %d·%g = %g — but the un-noised A and B carry the change into every later step, "+
				"so what can be proven for C alone is basic composition over all %.0f noisy steps, ε = %.4g. %s",
				c.Clip, c.Epsilon, coreText(c), c.Epsilon, c.Passes, c.Passes, c.Epsilon, float64(c.Passes)*c.Epsilon, steps, steps*c.Epsilon, who)}
	case OP:
		return privacy.Guarantee{Epsilon: math.Inf(1), Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.None,
			ClaimedEpsilon: c.Epsilon,
			Note: fmt.Sprintf("Output perturbation as seed 004 calibrates it: ℓ2 Laplace noise with Δ = 2τLη = %g is added to the rows of C only; "+
				"the released A, B%s carry no noise, so the model as a whole has no DP guarantee. "+
				"C alone: the seed claims ε = %g from Wu et al.'s bound for convex permutation SGD, which does not apply (the tensor objective is not convex and C's updates depend on A and B, trained on the same data). "+
				"What can be proven with C's gradient rows clipped to L = %g: each of the %d training entries moves its row of C by at most 2Lη per visit, so C alone is (%d·ε = %.4g)-DP. %s",
				OPSensitivity(c), coreText(c), c.Epsilon, c.Clip, nTrain, nTrain, float64(nTrain)*c.Epsilon, who)}
	case DPSGD:
		rho := ZCDPForEpsDelta(c.Epsilon, c.Delta)
		return privacy.Guarantee{Epsilon: EpsilonOfZCDP(rho, c.Delta), Delta: c.Delta, Rho: rho, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven,
			Note: fmt.Sprintf("DP-SGD over all parameters: each entry's gradient clipped to %g, Gaussian noise σ = %.4g·%g on every parameter per batch, %d passes of disjoint batches, ρ = 2·passes/σ² zCDP. %s",
				c.Clip, DPSGDSigma(c.Passes, rho), c.Clip, c.Passes, who)}
	}
	return privacy.NoPrivacy(privacy.UnitEntry, "Non-private tensor completion: the factors are fitted to the raw ratings without noise.")
}

func coreText(c Config) string {
	if c.Kind == "tucker" {
		return " and the core tensor"
	}
	return ""
}
