package jointdp

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
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
// replace-one-user neighbours), each of dim noised coordinates, to the
// requested (ε, δ) with the chosen calibration, and states the guarantee
// that the accountant proves. paperSigma is the paper's per-release σ
// (used by CalPaper).
//
// The noise is lattice Gaussian (privacy/noise): the input is rounded to a
// grid g before integer noise is added, which can move neighbours apart by
// up to √dim·g more than sens. The accounting therefore uses
// mechanism.GaussianRho (Δ + √dim·g, the effective σ), and the calibrated
// σ_t are scaled up until that exact ρ is within the target.
func planGaussian(cal string, eps, delta float64, T int, sens, paperSigma float64, dim int) (noisePlan, error) {
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
	rho, err := latticeRho(sens, sig, dim)
	if err != nil {
		return noisePlan{}, err
	}
	if cal != CalPaper {
		// The textbook ρ the calibration aimed at; the lattice rounding
		// adds a relative ~√dim·2^-27, so a few rescalings settle it.
		target, err := accountant.ScheduleRho(sens, sig)
		if err != nil {
			return noisePlan{}, fmt.Errorf("jointdp: accounting: %w", err)
		}
		for i := 0; rho > target; i++ {
			if i == 64 {
				return noisePlan{}, fmt.Errorf("jointdp: lattice Gaussian calibration did not converge")
			}
			f := math.Sqrt(rho/target) * (1 + 1e-12)
			for t := range sig {
				sig[t] *= f
			}
			if rho, err = latticeRho(sens, sig, dim); err != nil {
				return noisePlan{}, err
			}
		}
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

// latticeRho is the zCDP ρ of lattice Gaussian releases of ℓ2 sensitivity
// sens with standard deviations sigmas, each over dim coordinates, with the
// rounding to the lattice accounted (mechanism.GaussianRho), composed.
func latticeRho(sens float64, sigmas []float64, dim int) (float64, error) {
	rhos := make([]float64, len(sigmas))
	for t, sg := range sigmas {
		r, err := mechanism.GaussianRho(sens, sg, dim)
		if err != nil {
			return 0, fmt.Errorf("jointdp: accounting: %w", err)
		}
		rhos[t] = r
	}
	rho, err := accountant.ZCDPCompose(rhos...)
	if err != nil {
		return 0, fmt.Errorf("jointdp: accounting: %w", err)
	}
	return rho, nil
}

// symCoords is the number of coordinates noised in an n × n symmetric
// release (the upper triangle, diagonal included).
func symCoords(n int) int { return n * (n + 1) / 2 }
