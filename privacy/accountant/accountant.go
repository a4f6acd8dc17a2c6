// Package accountant composes differential-privacy guarantees and converts
// between their measures: pure-ε basic composition, advanced composition,
// zero-concentrated DP (zCDP) with the simple and the tight conversion to
// (ε, δ), Rényi DP, and calibration of Gaussian noise for a target (ε, δ)
// over T releases or a schedule of unequal σ_t. A Budget refuses to be
// overspent.
//
// Every value computed in floating point is rounded toward the safe side:
// an ε or δ or ρ that is spent is rounded up, a σ that is calibrated is
// rounded up, so that rounding never makes a guarantee look better than it
// is. All functions validate their arguments (finite, positive, NaN
// rejected) and return an error rather than a meaningless number.
package accountant

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// MinEpsilon is the smallest ε accepted anywhere (smaller values are
// rejected as almost certainly a mistake, as in Google's DP library).
const MinEpsilon = 0x1p-50

// ErrInvalid is wrapped by every argument-validation error.
var ErrInvalid = errors.New("invalid privacy parameter")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

// up returns x rounded one ulp toward +Inf: used on every computed
// privacy cost so that floating-point rounding errs on the safe side.
func up(x float64) float64 { return math.Nextafter(x, math.Inf(1)) }

// addUp returns a + b rounded toward +Inf: exact when the float sum is
// exact (Knuth's TwoSum error term), one ulp up otherwise.
func addUp(a, b float64) float64 {
	s := a + b
	bb := s - a
	if e := (a - (s - bb)) + (b - bb); e > 0 {
		return up(s)
	}
	return s
}

// down returns x rounded one ulp toward −Inf.
func down(x float64) float64 { return math.Nextafter(x, math.Inf(-1)) }

// CheckEpsilon validates a pure-DP ε: finite and ≥ MinEpsilon.
func CheckEpsilon(eps float64) error {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < MinEpsilon {
		return invalid("ε = %v must be finite and at least 2^-50", eps)
	}
	return nil
}

// CheckDelta validates an approximate-DP δ: 0 < δ < 1.
func CheckDelta(delta float64) error {
	if math.IsNaN(delta) || !(delta > 0 && delta < 1) {
		return invalid("δ = %v must satisfy 0 < δ < 1", delta)
	}
	return nil
}

// CheckRho validates a zCDP ρ: finite and positive.
func CheckRho(rho float64) error {
	if math.IsNaN(rho) || math.IsInf(rho, 0) || !(rho > 0) {
		return invalid("ρ = %v must be finite and positive", rho)
	}
	return nil
}

// CheckSensitivity validates a sensitivity: finite and positive.
func CheckSensitivity(s float64) error {
	if math.IsNaN(s) || math.IsInf(s, 0) || !(s > 0) {
		return invalid("sensitivity %v must be finite and positive", s)
	}
	return nil
}

// ---- pure ε -------------------------------------------------------------

// BasicComposition returns the ε of running pure-ε mechanisms one after
// another on the same data: the sum, rounded up.
func BasicComposition(eps ...float64) (float64, error) {
	var s float64
	for _, e := range eps {
		if err := CheckEpsilon(e); err != nil {
			return 0, err
		}
		s = addUp(s, e)
	}
	return s, nil
}

// BasicApproxComposition returns (Σε, Σδ) for (ε, δ) mechanisms run in
// sequence (both rounded up).
func BasicApproxComposition(eps, delta []float64) (float64, float64, error) {
	if len(eps) != len(delta) {
		return 0, 0, invalid("%d ε values but %d δ values", len(eps), len(delta))
	}
	var se, sd float64
	for i := range eps {
		if err := CheckEpsilon(eps[i]); err != nil {
			return 0, 0, err
		}
		if delta[i] != 0 {
			if err := CheckDelta(delta[i]); err != nil {
				return 0, 0, err
			}
		}
		se = addUp(se, eps[i])
		if delta[i] > 0 {
			sd = addUp(sd, delta[i])
		}
	}
	return se, math.Min(sd, 1), nil
}

// AdvancedComposition is the k-fold advanced composition theorem (Dwork,
// Rothblum, Vadhan): k mechanisms each (ε₀, δ₀)-DP are together
// (ε₀√(2k ln(1/δ′)) + kε₀(e^ε₀ − 1), kδ₀ + δ′)-DP. δ₀ may be 0.
func AdvancedComposition(eps0, delta0 float64, k int, deltaPrime float64) (eps, delta float64, err error) {
	if err := CheckEpsilon(eps0); err != nil {
		return 0, 0, err
	}
	if delta0 != 0 {
		if err := CheckDelta(delta0); err != nil {
			return 0, 0, err
		}
	}
	if k < 1 {
		return 0, 0, invalid("k = %d compositions must be at least 1", k)
	}
	if err := CheckDelta(deltaPrime); err != nil {
		return 0, 0, err
	}
	kf := float64(k)
	eps = up(up(eps0*math.Sqrt(up(2*kf*up(math.Log(1/deltaPrime))))) + up(kf*eps0*up(math.Expm1(eps0))))
	delta = up(kf*delta0 + deltaPrime)
	if delta >= 1 {
		return 0, 0, invalid("composed δ = %v is not below 1", delta)
	}
	return eps, delta, nil
}

// ---- zCDP ---------------------------------------------------------------

// PureToZCDP returns the ρ of an ε-DP mechanism: ρ = ε²/2.
func PureToZCDP(eps float64) (float64, error) {
	if err := CheckEpsilon(eps); err != nil {
		return 0, err
	}
	return up(eps * eps / 2), nil
}

// GaussianRho returns the zCDP ρ = Δ₂²/(2σ²) of Gaussian noise of standard
// deviation sigma on a query of ℓ2 sensitivity sens.
func GaussianRho(sens, sigma float64) (float64, error) {
	if err := CheckSensitivity(sens); err != nil {
		return 0, err
	}
	if err := CheckSensitivity(sigma); err != nil {
		return 0, fmt.Errorf("σ: %w", err)
	}
	r := sens / sigma
	return up(up(r*r) / 2), nil
}

// GaussianSigmaForRho returns the smallest σ (rounded up) giving ρ-zCDP for
// ℓ2 sensitivity sens: σ = Δ₂/√(2ρ).
func GaussianSigmaForRho(sens, rho float64) (float64, error) {
	if err := CheckSensitivity(sens); err != nil {
		return 0, err
	}
	if err := CheckRho(rho); err != nil {
		return 0, err
	}
	return up(up(sens / down(math.Sqrt(down(2*rho))))), nil
}

// ZCDPCompose returns the ρ of running ρ_i-zCDP mechanisms in sequence: the
// sum, rounded up.
func ZCDPCompose(rhos ...float64) (float64, error) {
	var s float64
	for _, r := range rhos {
		if err := CheckRho(r); err != nil {
			return 0, err
		}
		s = addUp(s, r)
	}
	return s, nil
}

// ZCDPToApproxSimple converts ρ-zCDP to (ε, δ)-DP with the simple bound of
// Bun & Steinke (2016): ε = ρ + 2√(ρ ln(1/δ)).
func ZCDPToApproxSimple(rho, delta float64) (float64, error) {
	if err := CheckRho(rho); err != nil {
		return 0, err
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	return up(rho + up(2*up(math.Sqrt(up(rho*up(-math.Log(delta))))))), nil
}

// ZCDPDelta returns the δ at which ρ-zCDP implies (ε, δ)-DP by the tight
// conversion of Canonne, Kamath & Steinke (2020):
//
//	δ = inf_{α>1} exp((α−1)(αρ−ε)) · (1−1/α)^α / (α−1).
//
// Every α gives a valid δ, so an imperfect numerical minimisation can only
// make the answer larger (safe); the result is rounded up and capped at 1.
func ZCDPDelta(rho, eps float64) (float64, error) {
	if err := CheckRho(rho); err != nil {
		return 0, err
	}
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < 0 {
		return 0, invalid("ε = %v must be finite and non-negative", eps)
	}
	logDelta := func(a float64) float64 {
		return (a-1)*(a*rho-eps) + a*math.Log1p(-1/a) - math.Log(a-1)
	}
	// The exponent is convex-ish in α; the unconstrained optimum of the
	// leading term is near α* = (ε+ρ)/(2ρ). Scan a log grid around it, then
	// refine by golden-section search.
	best, bestA := math.Inf(1), 0.0
	for a := 1 + 1e-9; a < 1e7; a *= 1.05 {
		v := logDelta(a)
		if v < best {
			best, bestA = v, a
		}
		if a > 1.1*((eps+rho)/(2*rho)+2) && v > best+50 {
			break
		}
	}
	// 90 golden-section steps shrink the bracket by 0.618^90 ≈ 2·10⁻¹⁹,
	// below float64 resolution.
	lo, hi := math.Max(1+1e-12, bestA/1.05), bestA*1.05
	const phi = 0.6180339887498949
	for range 90 {
		m1 := hi - phi*(hi-lo)
		m2 := lo + phi*(hi-lo)
		if logDelta(m1) < logDelta(m2) {
			hi = m2
		} else {
			lo = m1
		}
	}
	if v := logDelta((lo + hi) / 2); v < best {
		best = v
	}
	d := up(math.Exp(up(best + 1e-12)))
	return math.Min(d, 1), nil
}

// ZCDPToApprox converts ρ-zCDP to (ε, δ)-DP with the tight conversion: the
// smallest ε (found by bisection, returned from the safe end of the bracket)
// with ZCDPDelta(ρ, ε) ≤ δ.
func ZCDPToApprox(rho, delta float64) (float64, error) {
	return memo(&toApproxCache, [2]float64{rho, delta}, zcdpToApprox)
}

func zcdpToApprox(rho, delta float64) (float64, error) {
	if err := CheckRho(rho); err != nil {
		return 0, err
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	hi, err := ZCDPToApproxSimple(rho, delta) // always valid, so δ(hi) ≤ δ
	if err != nil {
		return 0, err
	}
	lo := 0.0
	for range 100 {
		mid := (lo + hi) / 2
		d, err := ZCDPDelta(rho, mid)
		if err != nil {
			return 0, err
		}
		if d <= delta {
			hi = mid
		} else {
			lo = mid
		}
		if hi-lo < 1e-12*hi {
			break
		}
	}
	return up(hi), nil
}

// RhoForApprox returns the largest ρ (rounded down) whose tight conversion
// gives (ε, δ)-DP: the zCDP budget equivalent to a target (ε, δ).
func RhoForApprox(eps, delta float64) (float64, error) {
	return memo(&rhoForCache, [2]float64{eps, delta}, rhoForApprox)
}

// The tight conversions cost about a millisecond each (nested numerical
// searches) and are pure functions of their two arguments; sweeps, audits
// and per-run calibrations ask for the same few values thousands of
// times, so both are memoised (bounded: cleared beyond 4096 entries).
var toApproxCache, rhoForCache memoTable

type memoTable struct {
	mu sync.Mutex
	m  map[[2]float64]float64
}

func memo(t *memoTable, key [2]float64, f func(a, b float64) (float64, error)) (float64, error) {
	t.mu.Lock()
	v, ok := t.m[key]
	t.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := f(key[0], key[1])
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	if t.m == nil || len(t.m) >= 4096 {
		t.m = make(map[[2]float64]float64)
	}
	t.m[key] = v
	t.mu.Unlock()
	return v, nil
}

func rhoForApprox(eps, delta float64) (float64, error) {
	if err := CheckEpsilon(eps); err != nil {
		return 0, err
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	// ZCDPToApprox(ρ, δ) ≤ ε exactly when ZCDPDelta(ρ, ε) ≤ δ (δ(ρ, ·) is
	// decreasing in ε, and increasing in ρ), so one bisection on ρ over
	// ZCDPDelta finds the boundary; nesting ZCDPToApprox's own bisection
	// inside it would cost ~40× more. The answer is then checked against
	// ZCDPToApprox itself and moved down until that check passes, so the
	// numerical shortcut can never make the budget larger.
	lo, hi := 0.0, eps // ε(ρ) ≥ ρ, so ρ ≤ ε
	for range 200 {
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			break
		}
		d, err := ZCDPDelta(mid, eps)
		if err != nil {
			return 0, err
		}
		if d <= delta {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-13*hi {
			break
		}
	}
	for range 64 {
		if lo == 0 {
			break
		}
		e, err := ZCDPToApprox(lo, delta)
		if err != nil {
			return 0, err
		}
		if e <= eps {
			return down(lo), nil
		}
		lo = down(lo * (1 - 1e-12))
	}
	return 0, invalid("no positive ρ reaches ε = %v at δ = %v", eps, delta)
}

// ---- Rényi DP -------------------------------------------------------------

// RDP is a Rényi-DP curve: ε(α) for orders α > 1.
type RDP func(alpha float64) float64

// GaussianRDP is the Rényi curve of Gaussian noise σ on ℓ2 sensitivity sens:
// ε(α) = αΔ₂²/(2σ²).
func GaussianRDP(sens, sigma float64) (RDP, error) {
	rho, err := GaussianRho(sens, sigma)
	if err != nil {
		return nil, err
	}
	return func(a float64) float64 { return up(a * rho) }, nil
}

// ZCDPRDP is the Rényi curve implied by ρ-zCDP: ε(α) = αρ.
func ZCDPRDP(rho float64) (RDP, error) {
	if err := CheckRho(rho); err != nil {
		return nil, err
	}
	return func(a float64) float64 { return up(a * rho) }, nil
}

// ComposeRDP returns the curve of running the given mechanisms in sequence
// (pointwise sum).
func ComposeRDP(curves ...RDP) RDP {
	return func(a float64) float64 {
		var s float64
		for _, c := range curves {
			s = up(s + c(a))
		}
		return s
	}
}

// DefaultOrders are the Rényi orders RDPToApprox minimises over.
var DefaultOrders = func() []float64 {
	var o []float64
	for a := 1.01; a < 10000; a *= 1.03 {
		o = append(o, a)
	}
	return o
}()

// RDPToApprox converts a Rényi curve to (ε, δ)-DP (Canonne, Kamath &
// Steinke 2020, Prop. 12 / Asoodeh et al.):
//
//	ε = min_α [ε(α) + ln(1−1/α) − (ln δ + ln α)/(α−1)].
//
// Each α gives a valid ε, so minimising over a finite set of orders
// (DefaultOrders when orders is nil) is safe; the result is rounded up and
// never below 0.
func RDPToApprox(curve RDP, delta float64, orders []float64) (float64, error) {
	if curve == nil {
		return 0, invalid("nil Rényi curve")
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	if orders == nil {
		orders = DefaultOrders
	}
	best := math.Inf(1)
	ld := math.Log(delta)
	for _, a := range orders {
		if !(a > 1) || math.IsInf(a, 0) {
			return 0, invalid("Rényi order %v must be finite and above 1", a)
		}
		e := curve(a) + math.Log1p(-1/a) - (ld+math.Log(a))/(a-1)
		if e < best {
			best = e
		}
	}
	if math.IsNaN(best) || math.IsInf(best, 0) {
		return 0, invalid("Rényi conversion gave %v", best)
	}
	return math.Max(0, up(best+1e-12)), nil
}

// ---- calibration -------------------------------------------------------------

// GaussianSigmaForTarget returns the smallest σ (rounded up) such that T
// releases of Gaussian noise σ on a query of ℓ2 sensitivity sens are
// together (ε, δ)-DP, accounted in zCDP (T·Δ²/(2σ²) ≤ ρ where ρ =
// RhoForApprox(ε, δ), tight conversion).
func GaussianSigmaForTarget(eps, delta float64, T int, sens float64) (float64, error) {
	if T < 1 {
		return 0, invalid("T = %d releases must be at least 1", T)
	}
	rho, err := RhoForApprox(eps, delta)
	if err != nil {
		return 0, err
	}
	return GaussianSigmaForRho(sens, down(rho/float64(T)))
}

// ScheduleSigmas calibrates unequal noise levels σ_t = c·w_t for T = len(w)
// Gaussian releases of ℓ2 sensitivity sens so that their total zCDP
// Σ Δ²/(2σ_t²) equals the ρ of the target (ε, δ) (tight conversion). Seed
// 001 rescales σ per Frank–Wolfe iteration this way: the weights give the
// shape of the schedule, the accountant fixes the scale. Weights must be
// finite and positive.
func ScheduleSigmas(eps, delta, sens float64, w []float64) ([]float64, error) {
	if len(w) == 0 {
		return nil, invalid("empty schedule")
	}
	rho, err := RhoForApprox(eps, delta)
	if err != nil {
		return nil, err
	}
	if err := CheckSensitivity(sens); err != nil {
		return nil, err
	}
	// Σ Δ²/(2c²w_t²) = ρ  ⇒  c = Δ·√(Σ 1/w_t² / (2ρ)).
	var s float64
	for i, x := range w {
		if math.IsNaN(x) || math.IsInf(x, 0) || !(x > 0) {
			return nil, invalid("schedule weight %d = %v must be finite and positive", i, x)
		}
		s = up(s + up(1/down(x*x)))
	}
	c := up(sens * up(math.Sqrt(up(s/down(2*rho)))))
	out := make([]float64, len(w))
	for i, x := range w {
		out[i] = up(c * x)
	}
	return out, nil
}

// ScheduleRho returns the total zCDP ρ of Gaussian releases with the given
// σ_t on ℓ2 sensitivity sens.
func ScheduleRho(sens float64, sigmas []float64) (float64, error) {
	var s float64
	for _, sg := range sigmas {
		r, err := GaussianRho(sens, sg)
		if err != nil {
			return 0, err
		}
		s = addUp(s, r)
	}
	return s, nil
}

// LaplaceRDP is the Rényi curve of the Laplace mechanism with ε = Δ₁/b
// (Mironov 2017, Prop. 6):
//
//	ε(α) = (1/(α−1)) · ln( α/(2α−1) · e^{(α−1)ε} + (α−1)/(2α−1) · e^{−αε} ),
//
// evaluated in log space and rounded up; it never exceeds ε.
func LaplaceRDP(eps float64) (RDP, error) {
	if err := CheckEpsilon(eps); err != nil {
		return nil, err
	}
	return func(a float64) float64 {
		// ln(p·e^x + q·e^y) with x = (α−1)ε, y = −αε, x > y.
		x, y := (a-1)*eps, -a*eps
		p, q := a/(2*a-1), (a-1)/(2*a-1)
		l := x + math.Log(p+q*math.Exp(y-x))
		return math.Min(eps, up(up(l)/(a-1)))
	}, nil
}
