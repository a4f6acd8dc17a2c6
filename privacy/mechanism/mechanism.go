// Package mechanism provides differential-privacy mechanisms that carry
// their guarantee: each knows its neighbour relation, its sensitivity and
// that sensitivity's norm, and its output measure, validates every
// argument, draws its noise from privacy/noise (lattice-snapped, exact
// integer noise for Laplace and Gaussian) and answers Guarantee() — the
// privacy.Guarantee it provably gives — and GuaranteeFor(d) for inputs at
// distance d.
//
// Central mechanisms: Laplace (ℓ1, pure ε), Gaussian (ℓ2; zCDP, classic or
// analytic calibration), L2Laplace (ℓ2, pure ε, seeds 000 and 004).
// Local randomizers (one rating at a time, for the client library):
// RandomizedResponse (binary, symmetric or asymmetric, seed 000), KaryRR
// (k-ary randomized response with a "missing" category, seed 003) and
// ModifiedLaplace (seed 003).
package mechanism

import (
	"errors"
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
)

// Relation is the neighbour relation a sensitivity is measured under.
type Relation string

const (
	// ReplaceOne: neighbours differ by replacing one unit (a rating, or a
	// user's ratings) with another.
	ReplaceOne Relation = "replace-one"
	// AddRemoveOne: neighbours differ by adding or removing one unit.
	AddRemoveOne Relation = "add-remove-one"
)

// Norm is the norm a sensitivity is measured in.
type Norm string

const (
	// L1 is Σ|Δᵢ| (Laplace).
	L1 Norm = "l1"
	// L2 is √ΣΔᵢ² (Gaussian, ℓ2 Laplace).
	L2 Norm = "l2"
	// LInf is max|Δᵢ|.
	LInf Norm = "linf"
)

// Sensitivity is how much a query can change between neighbours: Value in
// the given Norm, under Relation, where neighbours differ in one Unit.
type Sensitivity struct {
	Value    float64
	Norm     Norm
	Relation Relation
	Unit     privacy.Unit
}

// Validate checks the sensitivity is finite, positive and fully specified.
func (s Sensitivity) Validate() error {
	if err := accountant.CheckSensitivity(s.Value); err != nil {
		return err
	}
	switch s.Norm {
	case L1, L2, LInf:
	default:
		return fmt.Errorf("%w: unknown sensitivity norm %q", accountant.ErrInvalid, s.Norm)
	}
	switch s.Relation {
	case ReplaceOne, AddRemoveOne:
	default:
		return fmt.Errorf("%w: unknown neighbour relation %q", accountant.ErrInvalid, s.Relation)
	}
	switch s.Unit {
	case privacy.UnitEntry, privacy.UnitUser:
	default:
		return fmt.Errorf("%w: unknown privacy unit %q", accountant.ErrInvalid, s.Unit)
	}
	return nil
}

// ErrNorm is returned when a sensitivity in the wrong norm is given to a
// mechanism (e.g. an ℓ2 sensitivity to Laplace): an error, never a silent
// conversion.
var ErrNorm = errors.New("sensitivity norm does not match the mechanism")

func needNorm(s Sensitivity, want Norm, mech string) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Norm != want {
		return fmt.Errorf("%w: %s needs an %s sensitivity, got %s", ErrNorm, mech, want, s.Norm)
	}
	return nil
}

// ErrData is wrapped by errors about released values (NaN, ±Inf, out of
// the declared range, too many coordinates).
var ErrData = errors.New("invalid input to a mechanism")

func checkFinite(x []float64) error {
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: element %d is %v", ErrData, i, v)
		}
	}
	return nil
}

// Mechanism is what every mechanism answers.
type Mechanism interface {
	// Name is a short identifier ("laplace", "gaussian", "rr", …).
	Name() string
	// Guarantee is what one release gives for neighbours at distance 1.
	Guarantee() privacy.Guarantee
	// GuaranteeFor is what one release gives for inputs that differ in d
	// units (group privacy); d ≥ 1.
	GuaranteeFor(d int) (privacy.Guarantee, error)
}

func checkDistance(d int) error {
	if d < 1 {
		return fmt.Errorf("%w: distance %d must be at least 1", accountant.ErrInvalid, d)
	}
	return nil
}

// up rounds a computed privacy cost one ulp toward +Inf.
func up(x float64) float64 { return math.Nextafter(x, math.Inf(1)) }

// pureGuarantee is an ε-DP guarantee.
func pureGuarantee(eps float64, unit privacy.Unit, notion privacy.Notion, note string) privacy.Guarantee {
	return privacy.Guarantee{Epsilon: eps, Unit: unit, Notion: notion, Status: privacy.Proven, Note: note}
}

// groupPure scales a pure-ε guarantee to distance d: dε.
func groupPure(g privacy.Guarantee, d int) (privacy.Guarantee, error) {
	if err := checkDistance(d); err != nil {
		return privacy.Guarantee{}, err
	}
	g.Epsilon = up(g.Epsilon * float64(d))
	if g.ClaimedEpsilon > 0 {
		g.ClaimedEpsilon *= float64(d)
	}
	return g, nil
}
