package jointdp

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
)

// Noise calibrations for the Gaussian releases of DPFW and DPSVD.
const (
	// CalPaper uses the paper's σ = L²·√(64·T·ln(1/δ))/ε for every
	// release; the guarantee printed is what the accountant proves for it.
	CalPaper = "paper"
	// CalZCDP uses equal σ_t calibrated by the zCDP accountant so that the
	// T releases together are exactly the requested (ε, δ).
	CalZCDP = "zcdp"
	// CalDecay rescales σ per iteration (σ_t ∝ 1/√t: less noise as the
	// residual shrinks), as the seed's experiments do, with the same total
	// zCDP budget as CalZCDP.
	CalDecay = "zcdp-decay"
)

// noisePlan is the per-release noise and the guarantee it gives.
type noisePlan struct {
	Sigmas    []float64
	Guarantee privacy.Guarantee
	Rho       float64
}

// planGaussian calibrates T Gaussian releases of ℓ2 sensitivity sens (under
// replace-one-user neighbours) to the requested (ε, δ) with the chosen
// calibration, and states the guarantee that the accountant proves.
// paperSigma is the paper's per-release σ (used by CalPaper).
func planGaussian(cal string, eps, delta float64, T int, sens, paperSigma float64) (noisePlan, error) {
	if err := accountant.CheckEpsilon(eps); err != nil {
		return noisePlan{}, fmt.Errorf("jointdp: %w", err)
	}
	if err := accountant.CheckDelta(delta); err != nil {
		return noisePlan{}, fmt.Errorf("jointdp: %w", err)
	}
	if T < 1 {
		return noisePlan{}, fmt.Errorf("jointdp: %d releases", T)
	}
	var sig []float64
	switch cal {
	case CalPaper:
		sig = make([]float64, T)
		for t := range sig {
			sig[t] = paperSigma
		}
	case CalZCDP, "":
		s, err := accountant.GaussianSigmaForTarget(eps, delta, T, sens)
		if err != nil {
			return noisePlan{}, fmt.Errorf("jointdp: calibrating σ: %w", err)
		}
		sig = make([]float64, T)
		for t := range sig {
			sig[t] = s
		}
	case CalDecay:
		w := make([]float64, T)
		for t := range w {
			w[t] = 1 / math.Sqrt(float64(t+1))
		}
		s, err := accountant.ScheduleSigmas(eps, delta, sens, w)
		if err != nil {
			return noisePlan{}, fmt.Errorf("jointdp: calibrating σ schedule: %w", err)
		}
		sig = s
	default:
		return noisePlan{}, fmt.Errorf("jointdp: unknown noise calibration %q (want %s, %s or %s)", cal, CalPaper, CalZCDP, CalDecay)
	}
	rho, err := accountant.ScheduleRho(sens, sig)
	if err != nil {
		return noisePlan{}, fmt.Errorf("jointdp: accounting: %w", err)
	}
	proven, err := accountant.ZCDPToApprox(rho, delta)
	if err != nil {
		return noisePlan{}, fmt.Errorf("jointdp: accounting: %w", err)
	}
	g := privacy.Guarantee{
		Epsilon: proven, Delta: delta, Rho: rho,
		Unit: privacy.UnitUser, Notion: privacy.Joint, Status: privacy.Proven,
	}
	if cal == CalPaper && math.Abs(proven-eps) > 1e-9*eps {
		g.ClaimedEpsilon = eps
	}
	return noisePlan{Sigmas: sig, Guarantee: g, Rho: rho}, nil
}
