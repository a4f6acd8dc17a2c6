package onebit

import (
	"fmt"
	"math"
)

// Link is the probability function h of the one-bit model: an observed sign
// is +1 with probability h(x) and −1 with probability 1 − h(x), where x is
// the latent matrix entry.
type Link interface {
	// Name is "logit", "probit" or a description of an adjusted link.
	Name() string
	// H is h(x); HC is 1 − h(x), computed without cancellation.
	H(x float64) float64
	HC(x float64) float64
	// Deriv is h'(x).
	Deriv(x float64) float64
	// Loss is the negative log-likelihood of sign y (±1) at x and its
	// derivative in x, stable for large |x| (no overflow, no log of 0).
	Loss(x, y float64) (f, g float64)
}

// Logistic is h(x) = 1/(1 + e^−x).
type Logistic struct{}

// Name implements Link.
func (Logistic) Name() string { return "logit" }

// H implements Link.
func (Logistic) H(x float64) float64 { return sigmoid(x) }

// HC implements Link.
func (Logistic) HC(x float64) float64 { return sigmoid(-x) }

// Deriv implements Link.
func (Logistic) Deriv(x float64) float64 { s := sigmoid(x); return s * (1 - s) }

// Loss implements Link: −log h(yx) = softplus(−yx).
func (Logistic) Loss(x, y float64) (float64, float64) {
	u := -y * x
	return softplus(u), -y * sigmoid(u)
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// softplus is log(1 + e^u) without overflow.
func softplus(u float64) float64 {
	return math.Max(u, 0) + math.Log1p(math.Exp(-math.Abs(u)))
}

// Probit is h(x) = Φ(x/σ), the Gaussian noise model with scale σ.
type Probit struct{ Sigma float64 }

// Name implements Link.
func (p Probit) Name() string { return "probit" }

// H implements Link.
func (p Probit) H(x float64) float64 { return normCDF(x / p.Sigma) }

// HC implements Link.
func (p Probit) HC(x float64) float64 { return normCDF(-x / p.Sigma) }

// Deriv implements Link.
func (p Probit) Deriv(x float64) float64 { return normPDF(x/p.Sigma) / p.Sigma }

// Loss implements Link: −log Φ(yx/σ), through erfc and, far in the tail,
// the continued fraction of Mills' ratio.
func (p Probit) Loss(x, y float64) (float64, float64) {
	z := y * x / p.Sigma
	return -logNormCDF(z), -y / p.Sigma * invMills(z)
}

// ObjDelta is the seed's bound on Δ = sup_{|x|≤α} h'/h + h'/(1−h), the
// sensitivity of one sign flip in the likelihood gradient: exactly 1 for the
// logistic link; 2h'(0)/h(−α) for the probit link (valid: h' ≤ h'(0), and
// h(1−h) ≥ h(−α)/2 on [−α, α]).
func ObjDelta(l Link, alpha float64) (float64, error) {
	switch l := l.(type) {
	case Logistic:
		return 1, nil
	case Probit:
		return 2 * l.Deriv(0) / l.H(-alpha), nil
	}
	return 0, fmt.Errorf("onebit: no sensitivity bound for link %s", l.Name())
}

const sqrt2 = math.Sqrt2

func normPDF(z float64) float64 { return math.Exp(-z*z/2) / math.Sqrt(2*math.Pi) }

func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/sqrt2) }

// millsTail is R(t) = Φ(−t)/φ(t) for large t > 0, by its continued fraction
// 1/(t + 1/(t + 2/(t + 3/(t + …)))); 60 terms are exact to rounding for t ≥ 5.
func millsTail(t float64) float64 {
	f := t
	for n := 60; n >= 1; n-- {
		f = t + float64(n)/f
	}
	return 1 / f
}

// logNormCDF is log Φ(z) for any z.
func logNormCDF(z float64) float64 {
	switch {
	case z > 0:
		return math.Log1p(-0.5 * math.Erfc(z/sqrt2))
	case z > -20:
		return math.Log(0.5 * math.Erfc(-z/sqrt2))
	default:
		return -z*z/2 - 0.5*math.Log(2*math.Pi) + math.Log(millsTail(-z))
	}
}

// invMills is φ(z)/Φ(z) for any z.
func invMills(z float64) float64 {
	if z > -20 {
		return normPDF(z) / normCDF(z)
	}
	return 1 / millsTail(-z)
}

// Flipped is the adjusted link of input perturbation: a sign drawn from h is
// flipped with probability P1 if it is +1 and P2 if it is −1, so the
// released sign is +1 with probability c(x) = h(x)(1−P1) + (1−h(x))P2.
type Flipped struct {
	Base   Link
	P1, P2 float64
}

// NewFlipped checks 0 ≤ P1, P2 and P1 + P2 < 1 (otherwise the flipped signs
// carry no information about x, or reversed information).
func NewFlipped(base Link, p1, p2 float64) (Flipped, error) {
	if !(p1 >= 0 && p2 >= 0 && p1+p2 < 1) {
		return Flipped{}, fmt.Errorf("onebit: flip probabilities p1 = %g, p2 = %g need p1, p2 ≥ 0 and p1 + p2 < 1", p1, p2)
	}
	return Flipped{Base: base, P1: p1, P2: p2}, nil
}

// Name implements Link.
func (f Flipped) Name() string {
	return fmt.Sprintf("%s flipped (p1=%g, p2=%g)", f.Base.Name(), f.P1, f.P2)
}

// H implements Link: c(x) = P2 + (1−P1−P2)h(x).
func (f Flipped) H(x float64) float64 { return f.P2 + (1-f.P1-f.P2)*f.Base.H(x) }

// HC implements Link: 1 − c(x) = P1 + (1−P1−P2)(1−h(x)).
func (f Flipped) HC(x float64) float64 { return f.P1 + (1-f.P1-f.P2)*f.Base.HC(x) }

// Deriv implements Link.
func (f Flipped) Deriv(x float64) float64 { return (1 - f.P1 - f.P2) * f.Base.Deriv(x) }

// Loss implements Link. With P1 = P2 = 0 it defers to the base link (whose
// loss is stable far in the tails); otherwise c stays in [P2, 1−P1] and the
// logarithms are safe.
func (f Flipped) Loss(x, y float64) (float64, float64) {
	if f.P1 == 0 && f.P2 == 0 {
		return f.Base.Loss(x, y)
	}
	d := f.Deriv(x)
	if y > 0 {
		c := f.H(x)
		return -math.Log(c), -d / c
	}
	c := f.HC(x)
	return -math.Log(c), d / c
}
