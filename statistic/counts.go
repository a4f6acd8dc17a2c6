package statistic

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
)

const kindCounts = "counts"

// Counts is the statistic of weighted item counts: a user with n items
// (n ≥ 1) adds the same weight w(n) to each of her items' coordinates.
//
// With Cap > 0 (the capped counts of the top-N models), w(n) =
// min(1, √(Cap/n)): her part has ℓ2 norm √n·w(n) ≤ √Cap and users with
// at most Cap items count fully. With Cap = 0 (the unit-norm counts of
// dp-bias and dpals), w(n) = 1/√n: her part has norm 1. Both are scaled a
// hair below (1 − 10⁻¹²) so that rounding cannot raise the norm.
//
// Sensitivity (one user's items replaced by any others): two parts x, x'
// have non-negative entries, so ⟨x, x'⟩ ≥ 0 and ‖x − x'‖² ≤ ‖x‖² + ‖x'‖²
// ≤ 2·Cap (2 for unit norm): Δ₂ = √(2·Cap), or √2.
type Counts struct {
	// Items is the number of catalogue items (the dimension).
	Items int `json:"items"`
	// Cap is the weight cap (0: unit-norm weights).
	Cap float64 `json:"cap,omitempty"`
}

// Kind implements Contribution.
func (c *Counts) Kind() string { return kindCounts }

// Weight is the weight w(n) of each of a user's n items.
func (c *Counts) Weight(n int) float64 {
	if n == 0 {
		return 0
	}
	if c.Cap == 0 {
		return 1 / math.Sqrt(float64(n)) * (1 - 1e-12)
	}
	return math.Min(1, math.Sqrt(c.Cap/float64(n))) * (1 - 1e-12)
}

// Sensitivity is the ℓ2 sensitivity under replacement (see Counts).
func (c *Counts) Sensitivity() mechanism.Sensitivity {
	v := math.Sqrt2
	if c.Cap != 0 {
		v = math.Sqrt(2 * c.Cap)
	}
	return mechanism.Sensitivity{Value: v, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
}

// Spec implements Contribution.
func (c *Counts) Spec() Spec {
	return Spec{Name: "the item counts", Dim: c.Items, Sensitivity: c.Sensitivity()}
}

// Contribute implements Contribution.
func (c *Counts) Contribute(r Row, add func(i int, x float64)) {
	w := c.Weight(len(r.Items))
	for _, j := range r.Items {
		add(int(j), w)
	}
}

// Validate checks the plan.
func (c *Counts) Validate() error {
	if c.Items < 1 || !(c.Cap >= 0) || math.IsInf(c.Cap, 0) {
		return fmt.Errorf("counts over %d items with cap %g", c.Items, c.Cap)
	}
	return nil
}
