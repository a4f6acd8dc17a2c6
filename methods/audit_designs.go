package methods

import (
	"fmt"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// Audit designs (AuditDesigner) whose only purpose is a neighbouring pair
// that realises the sensitivity a method declares for its first release,
// so that the release check has power against an understated sensitivity
// (audit_raw.go): the same code, with the pair or a setting chosen for the
// audit's small data.

// auditCap is the weight cap of the count releases in the audit: the
// audit's canary rates 4 catalogue items on each side (8 in all, disjoint),
// so with cap 4 her capped counts move by √(2·4) — exactly the declared ℓ2
// sensitivity √(2·cap); with the default caps (20, 50) a user with 4 items
// reaches a fraction of it.
const auditCap = 4

// AuditDesign implements AuditDesigner: the counts released with cap 4.
func (c *DPPopularityConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Cap = auditCap
	return &AuditDesign{Config: &one}, nil
}

// auditCoverAll is a cover scale at which the Gram covers every item of
// the audit's catalogue whatever the budget (the plan is capped by the
// catalogue).
const auditCoverAll = 1e6

// AuditDesign implements AuditDesigner: the counts (dp-ease's first
// release) with cap 4, and the Gram over every catalogue item: its
// coordinates, keyed by item pair (mechanism.Draw.Keys), are then the same
// entries in every run in the order of that run's noised counts, so the
// pair's movement of the Gram is measured (√2·gram-norm, its declared
// sensitivity, with the per-user normalisation; √20 for the canary's 4
// items without it: FaultGramUnnormalised is caught).
func (c *DPEASEConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Cap, one.CoverScale = auditCap, auditCoverAll
	return &AuditDesign{Config: &one}, nil
}

// AuditDesign implements AuditDesigner: the counts (dp-ials' first
// release) with cap 4, and its initial factors' Gram over every catalogue
// item (as dp-ease's).
func (c *DPIALSConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Cap, one.CoverScale = auditCap, auditCoverAll
	return &AuditDesign{Config: &one}, nil
}

// AuditDesign implements AuditDesigner: dp-bias's sensitivity 2√(1 + γ²)
// needs a user whose every rating sits at least the clip away from her own
// mean (each centred rating clipped to ±1, on disjoint items on the two
// sides: ‖Δ‖² = 4 of the 4 + 4γ²; γ ≈ 0.045 weighs the mean block): the
// pair whose canary alternates 1 and 5 (MixedAuditPair) reaches 99.9 % of
// it, the default canary (all 1, all 5: centred, all 0) 71 %.
func (c *DPBiasConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	return &AuditDesign{Sides: MixedAuditPair}, nil
}

// AuditDesign implements AuditDesigner: dpsvd's Gram Σ x xᵀ of rows
// clipped to ‖x‖ ≤ L is released as its packed upper triangle with the
// Frobenius bound √2·L²; a row reaches it only when it sits on one item
// (off-diagonal entries count once in the packed release), which centring
// by the user's own mean forbids. The audit trains the uncentred variant
// (--center=false, the same code) on the pair whose canary rates one item,
// 5 = L, on each side: the Gram moves by exactly √2·L².
func (c *DPSVDConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Center = false
	return &AuditDesign{Config: &one, Sides: SingleAuditPair}, nil
}

// SignAuditPair is the audit's neighbouring pair for one-bit completion
// under the seed's relation (one rating's value changes): 12 users × 8
// catalogue items, 60 % observed in the audit's fixed pattern, every
// rating 5 or 1 so that its sign (above or below the scale's midpoint) is
// s_u·t_j for user signs s_u = ±1 (alternating) and item signs t_j = ±1
// (items 1–4 +1, 5–8 −1): a rank-one sign pattern. user1 rates item1 only,
// 1 on side 0 and 5 on side 1, so both sides' signs stay rank-one
// patterns.
//
// On such data the one-bit estimator's completed matrix is known exactly
// on the observed entries: the negative log-likelihood is a sum of terms
// −log h(y_ij·X_ij), each strictly decreasing in y_ij·X_ij ≤ α, so it is at
// least the sum at y_ij·X_ij = α for every observed entry, and that value is
// attained inside C = {‖X‖_* ≤ τ, ‖X‖_∞ ≤ α} by α·s·tᵀ (‖α·s·tᵀ‖_* =
// α·√(d1·d2), the default τ). Every minimiser therefore has X_ij = α·y_ij
// on Ω, and the entry user1 × item1 moves from −α to +α: by exactly 2α, the
// per-entry sensitivity onebit-outp's noise is calibrated to (the solver
// stops within its duality-gap tolerance of this optimum). For
// AuditDesign.Sides; relation must be the rating-value relation.
func SignAuditPair(relation string) (side [2]release.Input, err error) {
	if relation != privacy.RelationRatingValue {
		return side, fmt.Errorf("audit data: the sign pair is for the rating-value relation, not %q", relation)
	}
	const users, items = 12, 8
	ids, cat, scale, err := auditCatalogue(items)
	if err != nil {
		return side, err
	}
	for s := range 2 {
		b := ratings.NewBuilder(ratings.DupError)
		line := int64(0)
		for u := range users {
			for j := range items {
				if (u*7+j*3)%5 >= 3 || (u == 0 && j > 0) {
					continue
				}
				v := 5.0
				if (u%2 == 0) != (j < items/2) {
					v = 1
				}
				if u == 0 {
					v = float64(1 + 4*s) // the one changed rating
				}
				line++
				if err := b.Add(fmt.Sprintf("user%d", u+1), ids[j], v, line); err != nil {
					return side, fmt.Errorf("audit data: %w", err)
				}
			}
		}
		m, err := b.Build()
		if err != nil {
			return side, fmt.Errorf("audit data: %w", err)
		}
		side[s] = release.Input{Ratings: m, Declared: release.Declared{Scale: &scale, Catalogue: cat, Population: users}}
	}
	return side, nil
}
