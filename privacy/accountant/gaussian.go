package accountant

import "math"

// normCDF is Φ, computed with erfc for accuracy in the tails.
func normCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// AnalyticGaussianDelta returns the exact δ(ε) of the Gaussian mechanism with
// noise σ on ℓ2 sensitivity sens (Balle & Wang 2018, Theorem 8):
//
//	δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).
//
// The subtraction is evaluated so that it does not cancel catastrophically
// (the second term via exp(ε + ln Φ(·))); the result is rounded up.
func AnalyticGaussianDelta(eps, sens, sigma float64) (float64, error) {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < 0 {
		return 0, invalid("ε = %v must be finite and non-negative", eps)
	}
	if err := CheckSensitivity(sens); err != nil {
		return 0, err
	}
	if err := CheckSensitivity(sigma); err != nil {
		return 0, err
	}
	a := sens / (2 * sigma)
	b := eps * sigma / sens
	d := normCDF(a-b) - math.Exp(eps+math.Log(normCDF(-a-b)))
	if d < 0 {
		d = 0
	}
	// Φ and exp are accurate to a few ulps; add a relative margin of 1e-9
	// and an absolute one of 1e-300 so the value is never underestimated.
	return math.Min(1, up(d*(1+1e-9)+1e-300)), nil
}

// AnalyticGaussianSigma returns the smallest σ (to a relative 1e-10, rounded
// up) for which Gaussian noise on ℓ2 sensitivity sens is (ε, δ)-DP by the
// analytic calibration of Balle & Wang (2018). It is valid for every ε > 0,
// unlike the classic formula.
func AnalyticGaussianSigma(eps, delta, sens float64) (float64, error) {
	if err := CheckEpsilon(eps); err != nil {
		return 0, err
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	if err := CheckSensitivity(sens); err != nil {
		return 0, err
	}
	// δ(σ) is decreasing in σ. Bracket, then bisect; keep hi feasible.
	lo, hi := sens*1e-6, sens
	for {
		d, err := AnalyticGaussianDelta(eps, sens, hi)
		if err != nil {
			return 0, err
		}
		if d <= delta {
			break
		}
		lo, hi = hi, hi*2
		if hi > sens*1e12 {
			return 0, invalid("no σ reaches ε = %v, δ = %v", eps, delta)
		}
	}
	for hi-lo > 1e-10*hi {
		mid := (lo + hi) / 2
		d, err := AnalyticGaussianDelta(eps, sens, mid)
		if err != nil {
			return 0, err
		}
		if d <= delta {
			hi = mid
		} else {
			lo = mid
		}
	}
	return up(hi), nil
}

// ClassicGaussianSigma returns σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth,
// Theorem A.1), rounded up. That theorem is proven only for ε < 1; for
// ε ≥ 1 this returns an error — use AnalyticGaussianSigma.
func ClassicGaussianSigma(eps, delta, sens float64) (float64, error) {
	if err := CheckEpsilon(eps); err != nil {
		return 0, err
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	if err := CheckSensitivity(sens); err != nil {
		return 0, err
	}
	if eps >= 1 {
		return 0, invalid("the classic Gaussian calibration is proven only for ε < 1 (got %v); use the analytic one", eps)
	}
	return ClassicGaussianSigmaUnchecked(eps, delta, sens), nil
}

// ClassicGaussianSigmaUnchecked is the classic formula without the ε < 1
// condition, for reproducing papers that use it outside its proof; a
// guarantee derived from it for ε ≥ 1 must be marked as-claimed.
func ClassicGaussianSigmaUnchecked(eps, delta, sens float64) float64 {
	return up(sens * up(math.Sqrt(up(2*up(math.Log(1.25/delta))))) / down(eps))
}
