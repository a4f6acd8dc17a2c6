package statistic

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
)

const kindBias = "bias"

// BiasMeanWeight is the weight γ of each user's mean in the global-mean
// coordinates of the bias statistics. It is small: every user's bias is
// fitted on her side against the global mean, which absorbs an error in
// it, while γ adds to the sensitivity of the whole release (2√(1 + γ²)).
const BiasMeanWeight = 0.05

// Bias is the statistic of dp-bias and dpals: per-item weighted sums of
// ratings centred at each user's own mean, per-item weighted counts, a
// global-mean pair and optionally per-item spreads.
//
// Layout (Items = n): S_j at j, C_j at n + j, the pair Σ γ·b_u, Σ γ at 2n
// and 2n + 1, and with Spread P_j at 2n + 2 + j.
//
// User u with n_u catalogue ratings, weights w_j ≥ 0 with Σ_j w_j² = 1
// (1/√n_u, or adaptive), own mean m_u, residuals a_j = clip(r_uj − m_u,
// ±R)/R ∈ [−1, 1] and b = (m_u − c)/h ∈ [−1, 1] (c, h the scale's
// midpoint and half-width) contributes x_u = (w_j·a_j per item ; w_j per
// item ; γ·b ; γ ; [w_j·√(1 − a_j²) per item]). So ‖x_u‖² ≤
// Σ_j w_j²(a_j² + 1 + 1 − a_j²) + γ²(b² + 1) ≤ 2 + 2γ² with or without
// the spread block. For two users u, u' every coordinate pair contributes
// w·w'(a·a' + 1 + √(1−a²)·√(1−a'²)) ≥ 0 (as a·a' ≥ −1) or γ²(b·b' + 1)
// ≥ 0, so ⟨x_u, x_u'⟩ ≥ 0 and ‖x_u − x_u'‖² ≤ ‖x_u‖² + ‖x_u'‖² ≤
// 4(1 + γ²): Δ₂ = 2√(1 + γ²) (the triangle inequality alone gives
// 2√(2 + 2γ²)). The counts and the spread come free: they add no
// sensitivity to the sums'.
type Bias struct {
	// Items is the number of catalogue items n.
	Items int `json:"items"`
	// Mid and Half are the declared scale's midpoint and half-width; the
	// ratings must already be clamped to the scale.
	Mid  float64 `json:"mid"`
	Half float64 `json:"half"`
	// Clip is the residual clip R (> 0).
	Clip float64 `json:"clip"`
	// ItemWeight, when not nil, gives each item a public weight g_j > 0:
	// user u then weighs her item j by g_j/√(Σ_{j'∈I_u} g_j'²) instead of
	// 1/√n_u (the adaptive weights of Krichene et al., "Multi-Task
	// Differential Privacy Under Distribution Skew", ICML 2023; still
	// Σ_j w_uj² ≤ 1 and w ≥ 0, so the sensitivity is unchanged).
	ItemWeight []float64 `json:"item_weight,omitempty"`
	// Spread adds the spread block P_j = Σ_u w_uj·√(1 − a_uj²): P_j/C_j is
	// near 1 for an item whose ratings sit at their users' means.
	Spread bool `json:"spread,omitempty"`
}

// Kind implements Contribution.
func (b *Bias) Kind() string { return kindBias }

// BiasDim is the number of coordinates of the bias statistics over n
// items (with the spread block or without).
func BiasDim(n int, spread bool) int {
	if spread {
		return 3*n + 2
	}
	return 2*n + 2
}

// BiasSensitivity is the ℓ2 sensitivity of the bias statistics under
// replacement (see Bias): 2√(1 + γ²).
func BiasSensitivity() mechanism.Sensitivity {
	return mechanism.Sensitivity{Value: 2 * math.Sqrt(1+BiasMeanWeight*BiasMeanWeight), Norm: mechanism.L2,
		Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
}

// Spec implements Contribution.
func (b *Bias) Spec() Spec {
	return Spec{Name: "the bias statistics", Dim: BiasDim(b.Items, b.Spread), Sensitivity: BiasSensitivity()}
}

// Contribute implements Contribution.
func (b *Bias) Contribute(r Row, add func(i int, x float64)) {
	items, vals := r.Items, r.Vals
	if len(items) == 0 {
		return
	}
	n, clip := b.Items, b.Clip
	var mean float64
	for _, x := range vals {
		mean += float64(x)
	}
	mean /= float64(len(vals))
	w := 1 / math.Sqrt(float64(len(items)))
	if b.ItemWeight != nil {
		var norm2 float64
		for _, j := range items {
			norm2 += b.ItemWeight[j] * b.ItemWeight[j]
		}
		// A hair below 1/‖g‖ so that rounding cannot raise Σ w² above 1.
		w = 1 / math.Sqrt(norm2) * (1 - 1e-12)
	}
	for k, j := range items {
		wj := w
		if b.ItemWeight != nil {
			wj *= b.ItemWeight[j]
		}
		a := math.Max(-clip, math.Min(clip, float64(vals[k])-mean)) / clip
		add(int(j), wj*a)
		add(n+int(j), wj)
		if b.Spread {
			add(2*n+2+int(j), wj*math.Sqrt(math.Max(0, 1-a*a)))
		}
	}
	add(2*n, BiasMeanWeight*math.Max(-1, math.Min(1, (mean-b.Mid)/b.Half)))
	add(2*n+1, BiasMeanWeight)
}

// Validate checks the plan.
func (b *Bias) Validate() error {
	switch {
	case b.Items < 1:
		return fmt.Errorf("bias statistics over %d items", b.Items)
	case !(b.Clip > 0) || math.IsInf(b.Clip, 0) || !(b.Half > 0) || math.IsInf(b.Half, 0) || math.IsNaN(b.Mid) || math.IsInf(b.Mid, 0):
		return fmt.Errorf("bias statistics: clip %g, half-width %g and midpoint %g must be finite (the first two > 0)", b.Clip, b.Half, b.Mid)
	case b.ItemWeight != nil && len(b.ItemWeight) != b.Items:
		return fmt.Errorf("bias statistics: %d item weights for %d items", len(b.ItemWeight), b.Items)
	}
	for j, g := range b.ItemWeight {
		if !(g > 0) || math.IsInf(g, 0) {
			return fmt.Errorf("bias statistics: item weight %d is %g, must be finite and > 0", j, g)
		}
	}
	return nil
}
