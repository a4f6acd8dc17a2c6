package methods

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

// AuditDesign implements AuditDesigner: the counts (dp-ease's first
// release) with cap 4.
func (c *DPEASEConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Cap = auditCap
	return &AuditDesign{Config: &one}, nil
}

// AuditDesign implements AuditDesigner: the counts (dp-ials' first
// release) with cap 4.
func (c *DPIALSConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Cap = auditCap
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
