package mechanism

import (
	"fmt"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
)

// L2Laplace is the ℓ2 "vector Laplace" mechanism of seeds 000 (ObjP) and
// 004 (GP, OP): noise with density ∝ exp(−ε‖κ‖₂/Δ₂), ε-DP for a query of
// ℓ2 sensitivity Δ₂. Its sampler is continuous (Gamma radius, normal
// direction, in floating point; the output is rounded to a lattice), so
// the guarantee is the textbook one in exact arithmetic: it is not
// hardened against floating-point attacks like Laplace and Gaussian are
// (see docs/PRIVACY.md).
type L2Laplace struct {
	eps, scale float64
	sens       Sensitivity
	dim        int
	inst       *Instrument
}

// NewL2Laplace calibrates the vector Laplace for ε-DP on an ℓ2 sensitivity,
// for vectors of dimension dim.
func NewL2Laplace(eps float64, sens Sensitivity, dim int) (*L2Laplace, error) {
	if err := needNorm(sens, L2, "ℓ2 Laplace"); err != nil {
		return nil, err
	}
	if err := accountant.CheckEpsilon(eps); err != nil {
		return nil, err
	}
	if dim < 1 {
		return nil, fmt.Errorf("%w: dimension %d", accountant.ErrInvalid, dim)
	}
	return &L2Laplace{eps: eps, scale: up(sens.Value / eps), sens: sens, dim: dim}, nil
}

// Name implements Mechanism.
func (m *L2Laplace) Name() string { return "l2laplace" }

// Scale is Δ₂/ε.
func (m *L2Laplace) Scale() float64 { return m.scale }

// Guarantee implements Mechanism: ε-DP, central.
func (m *L2Laplace) Guarantee() privacy.Guarantee {
	return pureGuarantee(m.eps, m.sens.Unit, privacy.Central,
		fmt.Sprintf("ℓ2 vector Laplace mechanism, ℓ2 sensitivity %g (%s), dimension %d; sampled in floating point (not hardened against precision attacks).", m.sens.Value, m.sens.Relation, m.dim))
}

// GuaranteeFor implements Mechanism: dε.
func (m *L2Laplace) GuaranteeFor(d int) (privacy.Guarantee, error) {
	return groupPure(m.Guarantee(), d)
}

// Release adds one noise vector to x (len(x) must equal the dimension).
func (m *L2Laplace) Release(src *noise.Source, x []float64) error {
	if len(x) != m.dim {
		return fmt.Errorf("%w: vector of length %d, mechanism dimension %d", ErrData, len(x), m.dim)
	}
	if err := checkFinite(x); err != nil {
		return err
	}
	clean := m.inst.before(x)
	b := m.scale * m.inst.additive()
	noise.AddL2Laplace(src, x, b)
	return m.inst.tap(Draw{Mechanism: "l2laplace", Clean: clean, Noised: x, Scale: b, Sensitivity: m.sens.Value * m.inst.sensFactor(), Epsilon: m.eps})
}
