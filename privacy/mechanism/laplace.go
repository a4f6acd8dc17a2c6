package mechanism

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
)

// LaplaceEpsilon is the ε that lattice Laplace noise of (requested) scale
// b gives on a query of ℓ1 sensitivity sens whose neighbours differ in at
// most m coordinates, accounting for the lattice rounding:
// ε = (Δ + m·g)/b_eff with g = noise.LaplaceGrid(b) and b_eff =
// noise.EffectiveLaplaceScale(b). Rounded up.
func LaplaceEpsilon(sens, scale float64, m int) (float64, error) {
	if err := accountant.CheckSensitivity(sens); err != nil {
		return 0, err
	}
	if err := accountant.CheckSensitivity(scale); err != nil {
		return 0, fmt.Errorf("scale: %w", err)
	}
	if m < 1 {
		return 0, fmt.Errorf("%w: %d coordinates", accountant.ErrInvalid, m)
	}
	g := noise.LaplaceGrid(scale)
	return up(up(sens+up(float64(m)*g)) / noise.EffectiveLaplaceScale(scale)), nil
}

// LaplaceScale returns the smallest requested scale b (to within the
// lattice fixed point) for which LaplaceEpsilon(sens, b, m) ≤ eps.
func LaplaceScale(eps, sens float64, m int) (float64, error) {
	if err := accountant.CheckEpsilon(eps); err != nil {
		return 0, err
	}
	if err := accountant.CheckSensitivity(sens); err != nil {
		return 0, err
	}
	if m < 1 {
		return 0, fmt.Errorf("%w: %d coordinates", accountant.ErrInvalid, m)
	}
	b := sens / eps
	for range 64 {
		e, err := LaplaceEpsilon(sens, b, m)
		if err != nil {
			return 0, err
		}
		if e <= eps {
			return b, nil
		}
		// Grow b to cover the rounding: b = (Δ + m·g)/ε, then nudge.
		nb := up(up(sens+up(float64(m)*noise.LaplaceGrid(b))) / eps)
		if nb <= b {
			nb = math.Nextafter(b, math.Inf(1)) * (1 + 1e-15)
		}
		b = nb
	}
	return 0, fmt.Errorf("%w: Laplace calibration did not converge for ε=%v Δ=%v m=%d", accountant.ErrInvalid, eps, sens, m)
}

// Laplace is the Laplace mechanism on the lattice: pure ε-DP for a query of
// ℓ1 sensitivity Δ released as up to Dim coordinates.
type Laplace struct {
	eps, scale float64
	sens       Sensitivity
	dim        int
	inst       *Instrument
}

// NewLaplace calibrates Laplace noise for ε-DP. sens must be an ℓ1
// sensitivity; dim is the number of coordinates released (an upper bound
// on how many can differ between neighbours; it prices the lattice
// rounding, at most dim·2^-39·ε).
func NewLaplace(eps float64, sens Sensitivity, dim int) (*Laplace, error) {
	if err := needNorm(sens, L1, "Laplace"); err != nil {
		return nil, err
	}
	b, err := LaplaceScale(eps, sens.Value, dim)
	if err != nil {
		return nil, err
	}
	return &Laplace{eps: eps, scale: b, sens: sens, dim: dim}, nil
}

// Name implements Mechanism.
func (m *Laplace) Name() string { return "laplace" }

// Scale is the requested noise scale (the noise added has scale
// noise.EffectiveLaplaceScale(Scale()) ≥ Scale()).
func (m *Laplace) Scale() float64 { return m.scale }

// Guarantee implements Mechanism: ε-DP, central.
func (m *Laplace) Guarantee() privacy.Guarantee {
	return pureGuarantee(m.eps, m.sens.Unit, privacy.Central,
		fmt.Sprintf("Laplace mechanism, ℓ1 sensitivity %g (%s), lattice-snapped exact discrete Laplace noise of scale %.4g.", m.sens.Value, m.sens.Relation, m.scale))
}

// GuaranteeFor implements Mechanism: dε.
func (m *Laplace) GuaranteeFor(d int) (privacy.Guarantee, error) { return groupPure(m.Guarantee(), d) }

// Release adds the noise to x in place. It refuses NaN/±Inf and more than
// Dim coordinates (x is left unchanged then); an instrumented copy's tap
// sees x after the noise and may return an error of its own.
func (m *Laplace) Release(src *noise.Source, x []float64) error {
	if len(x) > m.dim {
		return fmt.Errorf("%w: %d coordinates released but the mechanism was calibrated for %d", ErrData, len(x), m.dim)
	}
	if err := checkFinite(x); err != nil {
		return err
	}
	clean := m.inst.before(x)
	b := m.scale * m.inst.additive()
	noise.AddLaplace(src, x, b)
	return m.inst.tap(Draw{Mechanism: "laplace", Clean: clean, Noised: x, Scale: b, Sensitivity: m.sens.Value * m.inst.sensFactor(), Epsilon: m.eps})
}

// ReleaseScalar returns x plus noise.
func (m *Laplace) ReleaseScalar(src *noise.Source, x float64) (float64, error) {
	v := []float64{x}
	if err := m.Release(src, v); err != nil {
		return 0, err
	}
	return v[0], nil
}
