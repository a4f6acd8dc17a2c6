package methods

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/audit"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// The whole-artefact audit trains a method many times on two neighbouring
// inputs under the method's own neighbouring relation and looks at
// everything it makes public — the public artefact's bytes, decoded into
// fields, and the train report:
//
//  (a) a field that is the same in every run on one input (the privacy
//      noise varies between runs; the non-private randomness does not)
//      but different on the neighbour is an exact function of the private
//      data outside the noised values: a leak;
//  (b) a canary user ID or item ID that appears in the neighbour's data
//      must not appear in anything public;
//  (c) the released values give an empirical lower bound on ε: the field
//      whose distribution differs most between the sides (chosen on pilot
//      runs) is sampled again on fresh runs and bounded with Clopper–Pearson
//      confidence intervals (package privacy/audit).

// Canary IDs planted in the neighbouring input.
const (
	CanaryUser = "canary-user-7f3a"
	CanaryItem = "canary-item-9b1c"
)

// AuditOptions control a whole-artefact audit.
type AuditOptions struct {
	// Epsilon and Delta are the budget the method is trained with. Epsilon
	// 0 picks it: 1 for pure-ε methods, AuditZCDPEpsilon for zCDP ones
	// (Delta 0 means 10⁻⁵).
	Epsilon, Delta float64
	// Runs is the number of trainings per side for the field comparison
	// (default 16).
	Runs int
	// Samples is the number of trainings per side for each ε lower bound
	// (default AuditSamples; 0 keeps the default, negative skips the
	// bounds).
	Samples int
	// Confidence of the lower bound (default 0.95).
	Confidence float64
	// Seed fixes the audit's randomness (non-private randomness and the
	// noise streams); 0 draws one.
	Seed uint64
	// Prepare, when set, turns each side's raw input into what the method
	// trains on, with the run's noise source. Unset, it is the method's own
	// device step (DevicePrepare: the local-DP collection of ldp-laplace
	// and ldp-rr at the audited ε — divided by NoiseFactor for the audited
	// runs; none for the other methods).
	Prepare func(ctx context.Context, in release.Input, src *noise.Source) (release.Input, func(), error)
	// NoiseFactor (0 means 1) is passed to every audited training as
	// Env.NoiseFactor: below 1 the method adds too little noise while
	// claiming its budget, which the audit must catch (the claim comes
	// from a probe run with the right noise).
	NoiseFactor float64
	// DeltaPrime is the δ' at which a zCDP claim is tested (default
	// AuditDeltaPrime).
	DeltaPrime float64
	// SensitivityFactor (0 means 1) is passed to every audited training as
	// Env.SensitivityFactor: below 1 every release is calibrated for that
	// fraction of its sensitivity while the method claims its budget,
	// which the audit must catch from the sensitivity it derives.
	SensitivityFactor float64
	// Fault, when set, is passed to every audited training as Env.Fault:
	// a safeguard of the method's analysis removed while it claims its
	// budget, which the audit must catch.
	Fault AuditFault
	// ReleaseRuns, when positive, is the number of runs per side of the
	// release check instead of the planned one (audit.PlanShift).
	ReleaseRuns int
	// ReleaseBudget bounds the time the release check's planned runs may
	// take, at the speed of the comparison runs (a full training each):
	// 0 means auditReleaseBudget, negative no bound. A claim that needs
	// more runs than the budget allows is "no power".
	ReleaseBudget time.Duration
}

// auditReleaseBudget is the default AuditOptions.ReleaseBudget: a release
// made after a full training (output perturbation) at ε = 8 would need
// ≈ 10⁵ trainings per side.
const auditReleaseBudget = 5 * time.Minute

// AuditReport is the finding of a whole-artefact audit.
type AuditReport struct {
	Method         string  `json:"method"`
	Relation       string  `json:"relation"`
	ClaimedEpsilon float64 `json:"claimed_epsilon"`
	Delta          float64 `json:"delta,omitempty"`
	ClaimedRho     float64 `json:"claimed_rho,omitempty"`
	// TrainedEpsilon is the ε the method was trained with; NoiseFactor the
	// factor its noise was multiplied by (1: as released).
	TrainedEpsilon float64 `json:"trained_epsilon"`
	NoiseFactor    float64 `json:"noise_factor"`
	// TestedEpsilon and TestedDelta are the claim the lower bound is
	// compared with: the guarantee's (ε, δ), the point (ε'(ρ, δ'), δ') of
	// its zCDP ρ, or a method's declared per-pair claim (AuditDesign).
	TestedEpsilon float64 `json:"tested_epsilon"`
	TestedDelta   float64 `json:"tested_delta,omitempty"`
	Runs          int     `json:"runs"`
	// Fields is the number of public fields compared; Noised how many of
	// them varied with the noise.
	Fields int `json:"fields"`
	Noised int `json:"noised_fields"`
	// Differences lists public fields, fixed under the noise, that differ
	// between the neighbours (a leak).
	Differences []string `json:"differences"`
	// Canaries lists places a canary ID appears in public output.
	Canaries []string `json:"canaries"`
	// The ε lower bound from the released values.
	Statistic         string  `json:"statistic,omitempty"`
	EpsilonLowerBound float64 `json:"epsilon_lower_bound"`
	Event             string  `json:"event,omitempty"`
	Confidence        float64 `json:"confidence"`
	Samples           int     `json:"samples"`
	// NoGuarantee is set for a method whose guarantee has status none: it
	// claims nothing about the data, so its un-noised fields and the
	// data-level bound are not violations; only its noise is audited (the
	// release check).
	NoGuarantee bool `json:"no_guarantee,omitempty"`
	// Proven says the guarantee's status is proven: the release check then
	// needs power against an understated sensitivity.
	Proven bool `json:"proven"`
	// ReleaseCheck is the check of the noise of every release against its
	// mechanism's own claim (nil when the method made no additive release).
	ReleaseCheck *ReleaseCheck `json:"release_check,omitempty"`
	// SensitivityFactor is the factor the sensitivity every release was
	// calibrated for was multiplied by (1: as released).
	SensitivityFactor float64 `json:"sensitivity_factor"`
	// Unsampled says why the data-level bound was not sampled: no outcome
	// of the runs planned could exceed the claim tested (empty: sampled,
	// or skipped by Samples < 0).
	Unsampled string `json:"unsampled,omitempty"`
	// Fault is the safeguard removed in the audited trainings (AuditFault;
	// empty: none).
	Fault string `json:"fault,omitempty"`
	// NoPower lists why the audit could not have caught a method that
	// under-noises by half or calibrates to half its sensitivity (its pair
	// does not reach the declared sensitivity, its release's coordinates
	// vary between runs, its claim cannot be contradicted with the runs
	// afforded). An audit with no power is not a pass: `privrec audit`
	// exits non-zero.
	NoPower   []string `json:"no_power"`
	Violation bool     `json:"violation"`
	Seconds   float64  `json:"seconds"`
}

// ReleaseCheck is the finding of the release check (audit_raw.go): a
// run's first additive release against its own claim, at the sensitivity
// the audit derives from the neighbouring pair and the test point planned
// from the claim.
type ReleaseCheck struct {
	// Release is the release's position among a run's draws, Mechanism its
	// noise and Dim its coordinates.
	Release   int    `json:"release"`
	Mechanism string `json:"mechanism"`
	Dim       int    `json:"dim"`
	// DeclaredSensitivity is the Δ its mechanism was calibrated for;
	// RealisedSensitivity how far the audit's pair moves it (null when its
	// coordinates vary between runs); DerivedSensitivity the larger of the
	// two, the one tested; Reach realised over declared.
	DeclaredSensitivity float64  `json:"declared_sensitivity"`
	RealisedSensitivity *float64 `json:"realised_sensitivity"`
	DerivedSensitivity  float64  `json:"derived_sensitivity"`
	Reach               float64  `json:"reach"`
	// ClaimedRho or ClaimedEpsilon is the release's own claim; Group the K
	// of the test (the pair is shifted by K·Δ̂, the claim K²ρ or Kε);
	// TestedEpsilon and TestedDelta the point of the group claim tested.
	ClaimedRho     float64 `json:"claimed_rho,omitempty"`
	ClaimedEpsilon float64 `json:"claimed_epsilon,omitempty"`
	Group          int     `json:"group"`
	TestedEpsilon  float64 `json:"tested_epsilon"`
	TestedDelta    float64 `json:"tested_delta,omitempty"`
	// Runs is the number of samples per side, from Trainings runs per
	// side (every coordinate of a Laplace or Gaussian release is a sample:
	// their noise is independent across coordinates), and Margin the
	// planned margin (standard deviations) against the release with half
	// its noise.
	Runs              int     `json:"runs"`
	Trainings         int     `json:"trainings"`
	Margin            float64 `json:"margin"`
	EpsilonLowerBound float64 `json:"epsilon_lower_bound"`
	Event             string  `json:"event"`
	Violation         bool    `json:"violation"`
}

// auditData returns the two neighbouring inputs for a relation: 12
// ordinary users × 8 catalogue items on the declared scale 1:5, and the
// canary user (whose ratings the neighbour replaces or adds), with one
// rating of an item outside the catalogue.
func auditData(relation string) (side [2]release.Input, err error) {
	return auditPair(relation, canaryDefault)
}

// canaryKind is the canary's ratings in an audit pair.
type canaryKind int

const (
	// canaryDefault: items 1–4 rated 1 (side 0), items 5–8 rated 5 (side 1).
	canaryDefault canaryKind = iota
	// canaryMixed: the same items, ratings alternating 1 and 5.
	canaryMixed
	// canarySingle: item 1 rated 5 (side 0), item 5 rated 5 (side 1).
	canarySingle
)

// MixedAuditPair is the audit's neighbouring pair with the canary's
// ratings alternating 1 and 5 (her mean at the scale's midpoint, her
// centred ratings at ±2) instead of all 1 (side 0) and all 5 (side 1): the
// worst case for methods that centre each user's ratings, for which the
// default canary's centred ratings are all 0. For AuditDesign.Sides.
func MixedAuditPair(relation string) ([2]release.Input, error) {
	return auditPair(relation, canaryMixed)
}

// SingleAuditPair is the audit's neighbouring pair with a canary who rates
// one catalogue item, 5, on each side (item1 against item5): the worst case
// of a statistic of uncentred rows clipped in ℓ2 whose release is a packed
// upper triangle (a row spread over several items fills the off-diagonal
// entries, which count once there: it reaches less of a Frobenius bound).
// For AuditDesign.Sides.
func SingleAuditPair(relation string) ([2]release.Input, error) {
	return auditPair(relation, canarySingle)
}

// auditPair builds the pair of auditData with the canary's ratings of the
// given kind.
func auditPair(relation string, kind canaryKind) (side [2]release.Input, err error) {
	const users, items = 12, 8
	mixed := kind == canaryMixed
	// rates says whether the canary rates catalogue item j on side s.
	rates := func(s, j int) bool {
		switch {
		case kind == canarySingle:
			return j == 4*s
		case relation == privacy.RelationUserAddRemove:
			return true
		}
		return (j < items/2) == (s == 0)
	}
	ids, cat, scale, err := auditCatalogue(items)
	if err != nil {
		return side, err
	}
	// canary is the canary's rating of catalogue item j: v, or with mixed
	// v on even and 6 − v on odd items.
	canary := func(v float64, j int) float64 {
		switch {
		case kind == canarySingle:
			return 5
		case mixed && j%2 == 1:
			return 6 - v
		}
		return v
	}
	build := func(s int) (*ratings.Matrix, error) {
		b := ratings.NewBuilder(ratings.DupError)
		line := int64(0)
		add := func(u, it string, v float64) error { line++; return b.Add(u, it, v, line) }
		for u := range users {
			for j := range items {
				if (u*7+j*3)%5 < 3 { // 60 % observed, a fixed pattern
					v := float64(1 + (u+2*j)%5)
					if relation == privacy.RelationRatingValue && u == 0 && j == 0 && s == 1 {
						v = 6 - v // the one changed rating: 1 ↔ 5 at worst
					}
					if err := add(fmt.Sprintf("user%d", u+1), ids[j], v); err != nil {
						return nil, err
					}
				}
			}
		}
		switch relation {
		case privacy.RelationRatingValue:
		case privacy.RelationUserAddRemove:
			if s == 1 {
				if err := addCanary(add, ids, s, rates, canary); err != nil {
					return nil, err
				}
			}
		default: // replace-one-user (and local reports): the canary's ratings change
			if err := addCanary(add, ids, s, rates, canary); err != nil {
				return nil, err
			}
		}
		return b.Build()
	}
	for s := range 2 {
		m, err := build(s)
		if err != nil {
			return side, fmt.Errorf("audit data: %w", err)
		}
		side[s] = release.Input{Ratings: m, Declared: release.Declared{Scale: &scale, Catalogue: cat, Population: users + 1}}
	}
	return side, nil
}

// auditCatalogue is the audit pairs' public facts: the catalogue item1 …
// itemN and the declared scale 1:5.
func auditCatalogue(items int) ([]string, *model.Catalogue, release.Scale, error) {
	ids := make([]string, items)
	for j := range ids {
		ids[j] = fmt.Sprintf("item%d", j+1)
	}
	cat, err := model.NewCatalogue(ids, nil)
	return ids, cat, release.Scale{Min: 1, Max: 5}, err
}

// addCanary adds the canary's ratings on side s: of each catalogue item
// she rates there, canary(1, j) on side 0 and canary(5, j) on side 1 (5 on
// both for a single-item canary), and on side 1 her rating of the item
// outside the catalogue.
func addCanary(add func(u, it string, v float64) error, ids []string, s int, rates func(s, j int) bool, canary func(v float64, j int) float64) error {
	for j := range ids {
		if !rates(s, j) {
			continue
		}
		v := canary(float64(1+4*s), j)
		if err := add(CanaryUser, ids[j], v); err != nil {
			return err
		}
	}
	if s == 1 {
		return add(CanaryUser, CanaryItem, 5)
	}
	return nil
}

// publicFields decodes what a release makes public into named scalar
// fields, and returns the raw public bytes (for the canary search).
func publicFields(r *release.Release) (map[string]string, []byte, error) {
	var buf bytes.Buffer
	if err := r.Public.Write(&buf); err != nil {
		return nil, nil, fmt.Errorf("writing the public artefact: %w", err)
	}
	raw := slices.Clone(buf.Bytes())
	fields := map[string]string{}
	_, meta, arrays, err := model.ReadContainer(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the public artefact back: %w", err)
	}
	var header any
	if err := json.Unmarshal(meta, &header); err != nil {
		return nil, nil, err
	}
	flatten("model", header, fields)
	for name, a := range arrays {
		switch {
		case a.F64 != nil:
			for i, x := range a.F64 {
				fields[fmt.Sprintf("array %s[%d]", name, i)] = fmt.Sprint(x)
			}
		case a.I64 != nil:
			for i, x := range a.I64 {
				fields[fmt.Sprintf("array %s[%d]", name, i)] = fmt.Sprint(x)
			}
		case a.I32 != nil:
			for i, x := range a.I32 {
				fields[fmt.Sprintf("array %s[%d]", name, i)] = fmt.Sprint(x)
			}
		}
	}
	rep, err := json.Marshal(map[string]any{"report": r.Report, "guarantee": r.Guarantee})
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the report: %w", err)
	}
	var rv any
	if err := json.Unmarshal(rep, &rv); err != nil {
		return nil, nil, err
	}
	flatten("", rv, fields)
	return fields, append(raw, rep...), nil
}

func flatten(prefix string, v any, out map[string]string) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(join(k), e, out)
		}
	case []any:
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
		}
	default:
		out[prefix] = fmt.Sprint(x)
	}
}

// AuditSamples is the default number of trainings per side for each ε
// lower bound: at it, with confidence 1 − 10⁻⁴, every private method with
// half its noise is caught (TestAuditEveryPrivateMethod; the single ℓ2
// Laplace releases of the tensor GP/OP variants need twice as many).
const AuditSamples = 1200

// AuditZCDPEpsilon is the ε (at δ = AuditOptions.Delta, default 10⁻⁵) a
// zCDP method is trained with when AuditOptions.Epsilon is 0: ρ ≈ 0.75,
// where a lower bound on the claim's (ε', δ') point at δ' = AuditDeltaPrime
// needs the fewest runs (a few hundred per side for one Gaussian release
// of full sensitivity; at ε = 1, ρ ≈ 0.02, it would need ≈ 10⁴).
const AuditZCDPEpsilon = 6

// AuditDeltaPrime is the δ' at which a zCDP claim ρ is tested by default:
// the method claims (ε'(ρ, δ'), δ')-DP for every δ' (the tight conversion,
// accountant.ZCDPToApprox), and at δ' = 0.1 the events that contradict a
// 2× under-noised release have probabilities of 0.1–0.7, which a few
// hundred runs resolve, while at the stated δ = 10⁻⁵ they sit in a tail
// that would need 10⁵ runs.
const AuditDeltaPrime = 0.3

// Audit runs the whole-artefact audit of a method with its config: it
// plans the audit (the claim, the relation and the method's design), builds
// the neighbouring pair, trains on each side, compares what the two sides
// make public (a), bounds ε from the released values (c), checks a
// release's noise against its own claim (d) and assembles the report.
func Audit(ctx context.Context, name string, cfg Config, o AuditOptions) (*AuditReport, error) {
	start := time.Now()
	a, err := planAudit(ctx, name, cfg, o)
	if err != nil {
		return nil, err
	}
	sides, err := a.neighbours()
	if err != nil {
		return nil, err
	}
	runs, err := a.compareRuns(ctx, sides)
	if err != nil {
		return nil, err
	}
	fields := compareFields(runs.fields)
	common := commonDraws(runs.draws)
	bound, err := a.boundEpsilon(ctx, a.dataStatistic(ctx, sides, runs, common, fields.mostSeparated))
	if err != nil {
		return nil, err
	}
	rc, rr, err := a.checkRelease(ctx, sides, runs.draws, common)
	if err != nil {
		return nil, err
	}
	rep := a.report(runs.canaries, fields, bound, rc, rr)
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// auditPlan is what an audit settles before its comparison runs: the
// options with their defaults, the method's claim (from a probe run with
// the honest noise), its relation and declared design, the claim the
// data-level bound is tested against, the canaries and the numbers of runs.
type auditPlan struct {
	name string
	// cfg is the configuration trained: the design's, when it declares one.
	cfg Config
	// o is the options with their defaults: NoiseFactor and
	// SensitivityFactor are set, Epsilon is the one trained with.
	o AuditOptions
	// prepare is the device step at the (possibly under-noised) per-rating
	// ε; honest is the one the claim comes from.
	prepare, honest PrepareFunc
	// probeInput is what the probe runs train on.
	probeInput release.Input
	design     *AuditDesign
	claim      privacy.Guarantee
	relation   string
	// noClaim is set for a method that gives no guarantee (status none: the
	// GP and OP tensor variants release some factors un-noised): it claims
	// nothing about the data, so only its noise is audited (the release
	// check, against the claims of the mechanisms it draws from).
	noClaim bool
	// testedEpsilon and testedDelta are the claim of the data-level bound
	// (0 when noClaim).
	testedEpsilon, testedDelta float64
	// canaries are the IDs that must not appear in public output.
	canaries []string
	// pilots is the number of comparison runs per side (the first o.Runs
	// trained, the rest device steps only); dataSamples the number of
	// sampling runs per side of the data-level bound.
	pilots, dataSamples int
}

// planAudit plans the audit of method name with its config: the options'
// defaults, the claim and relation from probe runs, the method's design.
func planAudit(ctx context.Context, name string, cfg Config, o AuditOptions) (*auditPlan, error) {
	o, err := withAuditDefaults(name, o)
	if err != nil {
		return nil, err
	}
	a := &auditPlan{name: name, cfg: cfg, o: o}
	auto := o.Epsilon == 0
	if auto {
		a.setEpsilon(1)
	} else {
		a.setEpsilon(o.Epsilon)
	}
	probeData, err := auditData(privacy.RelationUserReplace)
	if err != nil {
		return nil, err
	}
	a.probeInput = probeData[0]
	if err := a.probeClaim(ctx, auto); err != nil {
		return nil, err
	}
	if err := a.settleRelation(); err != nil {
		return nil, err
	}
	if err := a.adoptDesign(ctx); err != nil {
		return nil, err
	}
	if a.testedEpsilon, a.testedDelta, err = a.testedClaim(); err != nil {
		return nil, err
	}
	a.settleRuns()
	return a, nil
}

// withAuditDefaults fills in o's defaults (the noise and sensitivity
// factors included, and a seed drawn when it is 0) and refuses what cannot
// be audited: a factor that is not positive and finite, δ' outside (0, 1),
// fewer than 2 runs, a fault the method does not have, a non-private
// baseline.
func withAuditDefaults(name string, o AuditOptions) (AuditOptions, error) {
	if o.Runs <= 0 {
		o.Runs = 16
	}
	if o.Samples == 0 {
		o.Samples = AuditSamples
	}
	if o.Confidence == 0 {
		o.Confidence = 0.95
	}
	if o.Delta == 0 {
		o.Delta = 1e-5
	}
	if o.DeltaPrime == 0 {
		o.DeltaPrime = AuditDeltaPrime
	}
	var err error
	if o.NoiseFactor, err = auditFactor("noise", o.NoiseFactor); err != nil {
		return o, err
	}
	if o.SensitivityFactor, err = auditFactor("sensitivity", o.SensitivityFactor); err != nil {
		return o, err
	}
	if !(o.DeltaPrime > 0 && o.DeltaPrime < 1) {
		return o, fmt.Errorf("audit: δ' = %v must be in (0, 1)", o.DeltaPrime)
	}
	if o.Runs < 2 {
		return o, fmt.Errorf("audit: need at least 2 runs per side")
	}
	if o.Seed == 0 {
		o.Seed = noise.Secure().Uint64() | 1
	}
	if err := o.Fault.check(name); err != nil {
		return o, fmt.Errorf("audit: %w", err)
	}
	if m, err := Lookup(name); err == nil && !m.Private {
		return o, fmt.Errorf("audit: %s is a non-private baseline: it gives no guarantee, there is nothing to audit", name)
	}
	return o, nil
}

// auditFactor is a noise or sensitivity factor of the audited runs: 0
// means 1; it must be positive and finite.
func auditFactor(what string, f float64) (float64, error) {
	if f == 0 {
		f = 1
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, fmt.Errorf("audit: %s factor %v must be positive and finite", what, f)
	}
	return f, nil
}

// setEpsilon sets the ε the method is trained with, and the device steps
// at it (unless the options give their own).
func (a *auditPlan) setEpsilon(eps float64) {
	a.o.Epsilon = eps
	a.prepare, a.honest = a.o.Prepare, a.o.Prepare
	if a.o.Prepare == nil {
		a.prepare, a.honest = DevicePrepare(a.name, eps/a.o.NoiseFactor), DevicePrepare(a.name, eps)
	}
}

// probeClaim finds the method's claim from a probe run; with ε picked by
// the audit (auto), a zCDP method is probed again at AuditZCDPEpsilon.
func (a *auditPlan) probeClaim(ctx context.Context, auto bool) error {
	var err error
	if a.claim, err = a.probe(ctx); err != nil {
		return err
	}
	if auto && a.claim.Rho > 0 {
		a.setEpsilon(AuditZCDPEpsilon)
		if a.claim, err = a.probe(ctx); err != nil {
			return err
		}
	}
	return nil
}

// settleRelation takes the neighbouring relation from the claim: a method
// that claims nothing is audited under replace-one-user, a private one
// must state its relation.
func (a *auditPlan) settleRelation() error {
	a.noClaim = !a.claim.Private()
	a.relation = a.claim.Relation
	if a.relation == "" {
		if !a.noClaim {
			return fmt.Errorf("audit: %s's guarantee states no neighbouring relation", a.name)
		}
		a.relation = privacy.RelationUserReplace
	}
	return nil
}

// adoptDesign takes the method's declared audit (AuditDesigner), if any;
// a design's configuration is trained from here on, and its claim probed
// again.
func (a *auditPlan) adoptDesign(ctx context.Context) error {
	d, ok := a.cfg.(AuditDesigner)
	if !ok {
		return nil
	}
	design, err := d.AuditDesign(a.o.Epsilon, a.o.Delta)
	if err != nil {
		return fmt.Errorf("audit: %s: %w", a.name, err)
	}
	a.design = design
	if design == nil || design.Config == nil {
		return nil
	}
	a.cfg = design.Config
	if err := a.cfg.Validate(); err != nil {
		return fmt.Errorf("audit: %s's audited configuration: %w", a.name, err)
	}
	a.claim, err = a.probe(ctx)
	return err
}

// testedClaim is the claim the data-level bound is compared with: the
// design's, or the point (ε'(ρ, δ'), δ') of a zCDP claim, or the stated
// (ε, δ); none for a method that claims nothing.
func (a *auditPlan) testedClaim() (eps, delta float64, err error) {
	g := a.claim
	eps, delta = g.Epsilon, g.Delta
	switch {
	case a.design != nil && a.design.Epsilon > 0:
		eps, delta = a.design.Epsilon, a.design.Delta
	case g.Rho > 0:
		if eps, err = accountant.ZCDPToApprox(g.Rho, a.o.DeltaPrime); err != nil {
			return 0, 0, fmt.Errorf("audit: converting ρ = %g: %w", g.Rho, err)
		}
		delta = a.o.DeltaPrime
	}
	if a.noClaim {
		return 0, 0, nil
	}
	return eps, delta, nil
}

// settleRuns sets the canaries and the numbers of runs.
func (a *auditPlan) settleRuns() {
	a.canaries = []string{CanaryUser, CanaryItem}
	if a.relation == privacy.RelationLocalReport {
		// Local DP: the population is public and each client's report,
		// sent under her ID, is public; the canary user is a client on
		// both inputs. Only the item outside the catalogue must not appear.
		a.canaries = []string{CanaryItem}
	}
	a.pilots, a.dataSamples = a.o.Runs, a.o.Samples
	if d := a.design; d != nil && d.Statistic != nil && d.Prepared {
		// Device steps are cheap: more pilot values fix the events better,
		// and a large per-rating ε needs ≈ e^ε runs to be contradicted.
		a.dataSamples = preparedSamples(a.o.Samples, d.Epsilon)
		a.pilots = max(a.pilots, 64, a.dataSamples/8)
	}
}

// neighbours is the audit's pair of neighbouring inputs: the design's, or
// the default pair of the relation.
func (a *auditPlan) neighbours() ([2]release.Input, error) {
	if a.design != nil && a.design.Sides != nil {
		return a.design.Sides(a.relation)
	}
	return auditData(a.relation)
}

// auditRun is what the audit sees of one training: the release, the input
// the method trained on (after the device step) and the draws tapped.
type auditRun struct {
	r        *release.Release
	prepared release.Input
	draws    []mechanism.Draw
}

// probe trains once on the probe input with the honest noise: the
// method's claim.
func (a *auditPlan) probe(ctx context.Context) (privacy.Guarantee, error) {
	p, err := a.train(ctx, a.probeInput, noise.Seeded(a.o.Seed^0x70726f6265), 0, a.honest, 0, false)
	if err != nil {
		return privacy.Guarantee{}, fmt.Errorf("audit: %w", err)
	}
	return p.r.Guarantee, nil
}

// run trains once on in with the audited noise from src (the audit's
// noise and sensitivity factors and fault); stopAfter > 0 stops the
// training after that many draws, prepOnly after the device step.
func (a *auditPlan) run(ctx context.Context, in release.Input, src *noise.Source, stopAfter int, prepOnly bool) (auditRun, error) {
	return a.train(ctx, in, src, a.o.NoiseFactor, a.prepare, stopAfter, prepOnly)
}

// train trains once on in with the privacy noise from src, the noise
// factor f and the audit's sensitivity factor (f = 0: the honest probe,
// both factors 1 and no fault), the device step prep and a tap.
func (a *auditPlan) train(ctx context.Context, in release.Input, src *noise.Source, f float64, prep PrepareFunc, stopAfter int, prepOnly bool) (auditRun, error) {
	var out auditRun
	if prepOnly && a.design != nil && a.design.Device != nil {
		prepared, err := a.design.Device(ctx, in, src.Split(), a.o.Epsilon/f)
		out.prepared = prepared
		return out, err
	}
	if prep != nil {
		prepared, done, err := prep(ctx, in, src.Split())
		if err != nil {
			return out, err
		}
		defer done()
		in = prepared
	}
	out.prepared = in
	if prepOnly {
		return out, nil
	}
	rec := &tapRecorder{stopAfter: stopAfter}
	sf, fault := a.o.SensitivityFactor, a.o.Fault
	if f == 0 { // the honest probe
		sf, fault = 1, NoFault
	}
	env := Env{Epsilon: a.o.Epsilon, Delta: a.o.Delta, Noise: src, Rand: noise.Seeded(a.o.Seed), Seed: a.o.Seed, Workers: 1,
		NoiseFactor: f, SensitivityFactor: sf, Fault: fault, Tap: rec.tap}
	r, err := Train(ctx, a.name, a.cfg, in, env)
	out.r, out.draws = r, rec.draws
	if err != nil && rec.complete() {
		err = nil // stopped by the tap after its last draw
	}
	return out, err
}

// auditRuns is what the comparison runs saw on the two sides: the public
// fields and draws of the first o.Runs runs of each, the declared
// statistic of every pilot run, and where a canary ID appeared in public
// output (sorted).
type auditRuns struct {
	fields   [2][]map[string]string
	draws    [2][][]mechanism.Draw
	pilot    [2][]float64
	canaries []string
}

// compareRuns makes the comparison runs on both sides, one goroutine each.
func (a *auditPlan) compareRuns(ctx context.Context, sides [2]release.Input) (*auditRuns, error) {
	runs := &auditRuns{canaries: []string{}}
	var found [2][]string
	var errs [2]error
	var wg sync.WaitGroup
	for s := range 2 {
		runs.fields[s] = make([]map[string]string, a.o.Runs)
		runs.draws[s] = make([][]mechanism.Draw, a.o.Runs)
		wg.Go(func() { found[s], errs[s] = a.sideRuns(ctx, sides[s], s, runs) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	runs.canaries = append(append(runs.canaries, found[0]...), found[1]...)
	sort.Strings(runs.canaries)
	return runs, nil
}

// sideRuns makes the comparison runs on side s (input in), recording them
// in runs' entries for s, and returns where a canary ID appeared.
func (a *auditPlan) sideRuns(ctx context.Context, in release.Input, s int, runs *auditRuns) ([]string, error) {
	var found []string
	for k := range a.pilots {
		recorded := k < a.o.Runs
		out, err := a.run(ctx, in, noise.Seeded(a.o.Seed^uint64(1000*s+k+1)), 0, !recorded)
		if err != nil {
			return nil, err
		}
		var f map[string]string
		var raw []byte
		if recorded {
			if f, raw, err = publicFields(out.r); err != nil {
				return nil, err
			}
		}
		if a.design != nil && a.design.Statistic != nil {
			runs.pilot[s] = append(runs.pilot[s], a.design.Statistic(out.prepared, out.draws, out.r))
		}
		if recorded {
			runs.fields[s][k], runs.draws[s][k] = f, out.draws
			found = canaryPlaces(found, raw, a.canaries, s)
		}
	}
	return found, nil
}

// canaryPlaces adds to found each canary ID in raw, the public output of a
// run on side s, that is not there yet.
func canaryPlaces(found []string, raw []byte, canaries []string, s int) []string {
	for _, c := range canaries {
		if bytes.Contains(raw, []byte(c)) {
			place := fmt.Sprintf("%q in the public output of input %d", c, s)
			if !slices.Contains(found, place) {
				found = append(found, place)
			}
		}
	}
	return found
}

// fieldComparison is what comparing the runs' public fields found (a):
// how many fields were compared and how many varied with the noise, the
// fields fixed under the noise that differ between the sides (a leak,
// sorted), and the varying numeric field whose distribution differs most
// between the sides (empty: none).
type fieldComparison struct {
	fields, noised int
	differences    []string
	mostSeparated  string
}

// compareFields compares the public fields of the runs on the two sides
// (runs[s] those of side s).
func compareFields(runs [2][]map[string]string) fieldComparison {
	c := fieldComparison{differences: []string{}}
	type varying struct {
		key   string
		score float64
	}
	var cands []varying
	for k := range fieldKeys(runs) {
		if strings.HasPrefix(k, "guarantee.note") {
			continue
		}
		c.fields++
		v := fieldValuesOf(runs, k)
		switch {
		case v.fixed[0] && v.fixed[1] && v.val[0] != v.val[1]:
			if v.present[0] == 0 || v.present[1] == 0 {
				c.differences = append(c.differences, fmt.Sprintf("%s: present on one input only", k))
			} else {
				c.differences = append(c.differences, fmt.Sprintf("%s: %s vs %s", k, short(v.val[0]), short(v.val[1])))
			}
		case !v.fixed[0] || !v.fixed[1]:
			c.noised++
			if sc, ok := separation(runs, k); ok {
				cands = append(cands, varying{k, sc})
			}
		}
	}
	sort.Strings(c.differences)
	sort.Slice(cands, func(a, b int) bool {
		if cands[a].score != cands[b].score {
			return cands[a].score > cands[b].score
		}
		return cands[a].key < cands[b].key
	})
	if len(cands) > 0 {
		c.mostSeparated = cands[0].key
	}
	return c
}

// fieldKeys is the set of the fields of every run.
func fieldKeys(runs [2][]map[string]string) map[string]bool {
	keys := map[string]bool{}
	for s := range 2 {
		for _, f := range runs[s] {
			for k := range f {
				keys[k] = true
			}
		}
	}
	return keys
}

// fieldValues is one field over the runs of each side: whether it is the
// same in every run, its value in the first, and how many runs have it.
type fieldValues struct {
	fixed   [2]bool
	val     [2]string
	present [2]int
}

func fieldValuesOf(runs [2][]map[string]string, key string) fieldValues {
	v := fieldValues{fixed: [2]bool{true, true}}
	for s := range 2 {
		for i, f := range runs[s] {
			x, ok := f[key]
			if ok {
				v.present[s]++
			}
			if i == 0 {
				v.val[s] = x
			} else if x != v.val[s] {
				v.fixed[s] = false
			}
		}
	}
	return v
}

// dataStatistic is the statistic the data-level bound samples (c): its
// name in reports, the events counted (set on the comparison runs) and a
// value of one fresh run on side s (nil: nothing to sample).
type dataStatistic struct {
	name   string
	events []audit.Event
	sample func(src *noise.Source, s int) float64
}

// dataStatistic picks the statistic of the data-level bound: the design's
// declared one, or the log-likelihood ratio of the raw noised releases
// (their first common draws), or, when no release is instrumented, the
// public field that differs most between the sides (field).
func (a *auditPlan) dataStatistic(ctx context.Context, sides [2]release.Input, runs *auditRuns, common int, field string) dataStatistic {
	switch raw := newRawStatistic(runs.draws, common); {
	case a.design != nil && a.design.Statistic != nil:
		return a.declaredStatistic(ctx, sides, runs.pilot)
	case raw != nil && raw.active > 0:
		return a.rawReleaseStatistic(ctx, sides, raw, runs.draws)
	case raw != nil:
		// Instrumented releases, none differing between the inputs:
		// objective perturbation's noise is drawn without looking at the
		// data (the privacy comes from the optimisation), so there is no raw
		// statistic of the data; its noise is audited by the release check.
		return dataStatistic{name: "none: no noised release depends on the data (the release check audits the noise)"}
	case field != "":
		// No instrumented release at all: the public field that differs
		// most (little power; a method can declare better: AuditDesigner).
		return a.fieldStatistic(ctx, sides, runs.fields, field)
	}
	return dataStatistic{}
}

// declaredStatistic is the design's statistic, its events set on the
// pilot runs' values.
func (a *auditPlan) declaredStatistic(ctx context.Context, sides [2]release.Input, pilot [2][]float64) dataStatistic {
	d := a.design
	return dataStatistic{name: d.Name, events: valueEvents(pilot), sample: func(src *noise.Source, s int) float64 {
		out, err := a.run(ctx, sides[s], src.Split(), 0, d.Prepared)
		if err != nil {
			return math.NaN()
		}
		return d.Statistic(out.prepared, out.draws, out.r)
	}}
}

// rawReleaseStatistic is the log-likelihood ratio of the raw noised
// releases, its events set on the comparison runs' draws; a sampling run
// stops after its last release.
func (a *auditPlan) rawReleaseStatistic(ctx context.Context, sides [2]release.Input, raw *rawStatistic, draws [2][][]mechanism.Draw) dataStatistic {
	var pilot [2][]float64
	for s := range 2 {
		for _, d := range draws[s] {
			pilot[s] = append(pilot[s], raw.of(d))
		}
	}
	n := len(raw.mech)
	name := fmt.Sprintf("log-likelihood ratio of the raw noised releases (%d draws, %d coordinates differing)", n, raw.active)
	return dataStatistic{name: name, events: rawEvents(pilot), sample: func(src *noise.Source, s int) float64 {
		out, err := a.run(ctx, sides[s], src.Split(), n, false)
		if err != nil {
			return math.NaN()
		}
		return raw.of(out.draws)
	}}
}

// fieldStatistic is the public field key, its events at the quantiles of
// its values in the comparison runs.
func (a *auditPlan) fieldStatistic(ctx context.Context, sides [2]release.Input, fields [2][]map[string]string, key string) dataStatistic {
	pilot := make([]float64, 0, 2*a.o.Runs)
	for s := range 2 {
		for _, f := range fields[s] {
			if x, err := parseFloat(f[key]); err == nil {
				pilot = append(pilot, x)
			}
		}
	}
	return dataStatistic{name: key, events: quantileEvents(pilot), sample: func(src *noise.Source, s int) float64 {
		out, err := a.run(ctx, sides[s], src.Split(), 0, false)
		if err != nil {
			return math.NaN()
		}
		f, _, err := publicFields(out.r)
		if err != nil {
			return math.NaN()
		}
		x, err := parseFloat(f[key])
		if err != nil {
			return math.NaN()
		}
		return x
	}}
}

// dataBound is the data-level ε lower bound (c): the statistic sampled,
// the bound, the event that gave it and the runs per side, or why it was
// not sampled.
type dataBound struct {
	statistic  string
	lowerBound float64
	event      string
	samples    int
	unsampled  string
}

// boundEpsilon samples the statistic st on fresh runs of each side and
// bounds ε from it, unless the method claims nothing, the bounds are
// skipped (Samples < 0) or no outcome of the runs could contradict the
// claim.
func (a *auditPlan) boundEpsilon(ctx context.Context, st dataStatistic) (dataBound, error) {
	if a.noClaim {
		return dataBound{}, nil
	}
	b := dataBound{statistic: st.name}
	if a.o.Samples <= 0 || st.sample == nil {
		return b, nil
	}
	if most := audit.MaxLowerBound(a.dataSamples, a.o.Confidence, len(st.events), a.testedDelta); most <= a.testedEpsilon {
		// No outcome of the runs could contradict the claim (onebit-outp's
		// whole-matrix ε): they are not made; the release check audits
		// the noise against its own claim.
		b.unsampled = fmt.Sprintf("%d trainings per side bound ε by at most %.3g, below the claim %.4g: not made", a.dataSamples, most, a.testedEpsilon)
		return b, nil
	}
	spec := audit.Spec{Mechanism: a.name, ClaimedEpsilon: a.testedEpsilon, Delta: a.testedDelta, Sample: st.sample, Events: st.events}
	res, err := audit.Run(ctx, spec, a.dataSamples, a.o.Confidence, noise.Seeded(a.o.Seed^0x6c6f776572))
	if err != nil {
		return b, fmt.Errorf("audit: %w", err)
	}
	b.lowerBound, b.event, b.samples = res.EpsilonLowerBound, res.Event, a.dataSamples
	return b, nil
}

// checkRelease is the release check (d, audit_raw.go): a run's first
// additive release against its own claim, at the sensitivity derived from
// the pair (for a method that claims nothing, its mechanism's declared
// one). rc is nil when no run made an additive release, rr when the
// check's runs are skipped (Samples < 0).
func (a *auditPlan) checkRelease(ctx context.Context, sides [2]release.Input, draws [2][][]mechanism.Draw, common int) (rc *releaseCheck, rr *ReleaseCheck, err error) {
	rc = newReleaseCheck(draws, common, a.design != nil && a.design.PerCoordinate)
	if rc == nil {
		return nil, nil, nil
	}
	if a.noClaim {
		rc.derived = rc.declared
	}
	if a.o.Samples < 0 {
		return rc, nil, nil
	}
	rr, err = runReleaseCheck(ctx, rc, a.name, a.o, func(src *noise.Source) ([]mechanism.Draw, error) {
		out, err := a.run(ctx, sides[0], src.Split(), rc.index+1, false)
		return out.draws, err
	})
	if err != nil {
		return nil, nil, err
	}
	return rc, rr, nil
}

// report assembles the audit's report from its findings and gives the
// verdict: a leak, a canary or a bound above the claim (for a method that
// claims something), or a failed release check, is a violation; without
// one, noPower says what the audit could not have caught.
func (a *auditPlan) report(canaries []string, fields fieldComparison, bound dataBound, rc *releaseCheck, rr *ReleaseCheck) *AuditReport {
	g := a.claim
	rep := &AuditReport{Method: a.name, Relation: a.relation, ClaimedEpsilon: g.Epsilon, Delta: g.Delta, ClaimedRho: g.Rho,
		TrainedEpsilon: a.o.Epsilon, NoiseFactor: a.o.NoiseFactor, TestedEpsilon: a.testedEpsilon, TestedDelta: a.testedDelta,
		Runs: a.o.Runs, Fields: fields.fields, Noised: fields.noised, Differences: fields.differences, Canaries: canaries,
		Statistic: bound.statistic, EpsilonLowerBound: bound.lowerBound, Event: bound.event, Confidence: a.o.Confidence,
		Samples: bound.samples, NoGuarantee: a.noClaim, Proven: g.Status == privacy.Proven && !a.noClaim,
		ReleaseCheck: rr, SensitivityFactor: a.o.SensitivityFactor, Unsampled: bound.unsampled, Fault: string(a.o.Fault)}
	rep.NoPower = noPower(rc, rr, g, a.noClaim)
	if rep.Unsampled != "" && rr == nil {
		rep.NoPower = append(rep.NoPower, "the data-level bound: "+rep.Unsampled+", and no additive release to check")
	}
	// Un-noised fields are what status none says.
	rep.Violation = !a.noClaim && (len(rep.Differences) > 0 || len(rep.Canaries) > 0 || rep.EpsilonLowerBound > rep.TestedEpsilon)
	rep.Violation = rep.Violation || (rr != nil && rr.Violation)
	if rep.Violation {
		rep.NoPower = []string{} // a violation found needs no power
	}
	return rep
}

// separation scores how differently a numeric field is distributed on the
// two sides (difference of means over the pooled spread).
func separation(runs [2][]map[string]string, key string) (float64, bool) {
	var m, v [2]float64
	for s := range 2 {
		var xs []float64
		for _, f := range runs[s] {
			x, err := parseFloat(f[key])
			if err != nil {
				return 0, false
			}
			xs = append(xs, x)
		}
		for _, x := range xs {
			m[s] += x
		}
		m[s] /= float64(len(xs))
		for _, x := range xs {
			v[s] += (x - m[s]) * (x - m[s])
		}
		v[s] /= float64(len(xs))
	}
	sd := math.Sqrt((v[0]+v[1])/2) + 1e-12
	return math.Abs(m[0]-m[1]) / sd, true
}

func quantileEvents(pilot []float64) []audit.Event {
	slices.Sort(pilot)
	var ev []audit.Event
	if len(pilot) == 0 {
		return []audit.Event{{Kind: audit.IsMissing}}
	}
	for _, q := range []float64{0.1, 0.25, 0.5, 0.75, 0.9} {
		t := pilot[int(q*float64(len(pilot)-1))]
		ev = append(ev, audit.Event{Kind: audit.AtLeast, T: t}, audit.Event{Kind: audit.AtMost, T: t})
	}
	return ev
}

func parseFloat(s string) (float64, error) {
	var x float64
	_, err := fmt.Sscan(s, &x)
	return x, err
}

func short(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// runReleaseCheck plans and runs the release check rc; sample makes one run
// on the audit's first input and returns its draws.
func runReleaseCheck(ctx context.Context, rc *releaseCheck, name string, o AuditOptions, sample func(*noise.Source) ([]mechanism.Draw, error)) (*ReleaseCheck, error) {
	rr := &ReleaseCheck{Release: rc.index, Mechanism: rc.mech, Dim: rc.size, DeclaredSensitivity: rc.declared,
		DerivedSensitivity: rc.derived, Reach: rc.reach(), ClaimedRho: rc.law.Rho, ClaimedEpsilon: rc.law.Epsilon}
	if !math.IsNaN(rc.realised) {
		rr.RealisedSensitivity = &rc.realised
	}
	if budget := o.ReleaseBudget; budget >= 0 && o.ReleaseRuns <= 0 {
		// The runs a plan may use are capped by the release budget at the
		// speed of a few timed runs (a release made after a full training
		// costs one each).
		if budget == 0 {
			budget = auditReleaseBudget
		}
		const timed = 3
		t0 := time.Now()
		for i := range timed {
			if _, err := sample(noise.Seeded(o.Seed ^ 0x74696d6564 ^ uint64(i))); err != nil {
				return nil, fmt.Errorf("audit: %w", err)
			}
		}
		rc.perRun = max(time.Since(t0)/timed, time.Nanosecond)
		rc.maxRuns = int(min(float64(auditMaxReleaseRuns), float64(rc.pool)*float64(budget)/float64(rc.perRun)))
	}
	if err := rc.plan(o.Confidence, o.ReleaseRuns); err != nil {
		return rr, nil // no test point: noPower says so
	}
	d := rc.design
	rr.Group, rr.TestedEpsilon, rr.TestedDelta, rr.Runs, rr.Margin = d.Group, d.Epsilon, d.Delta, rc.runs, d.Margin
	rr.Trainings = rc.trainings(rc.runs)
	// Each side draws a training when its buffer of samples is empty (one
	// goroutine per side: audit.Run).
	var buf [2][]float64
	spec := audit.Spec{Mechanism: name + " release", ClaimedEpsilon: d.Epsilon, Delta: d.Delta, Events: d.Events(rc.law),
		Statistic: releaseStatName(rc),
		Sample: func(src *noise.Source, s int) float64 {
			if len(buf[s]) == 0 {
				draws, err := sample(src)
				if err != nil {
					return math.NaN()
				}
				buf[s] = rc.samples(buf[s], draws, s == 1)
			}
			y := buf[s][len(buf[s])-1]
			buf[s] = buf[s][:len(buf[s])-1]
			return y
		}}
	res, err := audit.Run(ctx, spec, rc.runs, o.Confidence, noise.Seeded(o.Seed^0x72656c65617365))
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	rr.EpsilonLowerBound, rr.Event, rr.Violation = res.EpsilonLowerBound, res.Event, res.Violation
	return rr, nil
}

// releaseStatName names the release check's statistic in reports.
func releaseStatName(rc *releaseCheck) string {
	if rc.mech == "rr" {
		return "the released sign"
	}
	return fmt.Sprintf("noise/Δ̂ of release %d", rc.index+1)
}

// noPower lists why the release check (rc, its finding rr) could not catch
// a method with half its noise or half its sensitivity: no test point with
// enough margin; for a proven guarantee, a release whose coordinates vary
// between runs or whose pair reaches less than auditReach of its declared
// sensitivity.
func noPower(rc *releaseCheck, rr *ReleaseCheck, g privacy.Guarantee, noClaim bool) []string {
	out := []string{}
	if rc == nil || rr == nil {
		return out // no additive release: the data-level bound audits the method
	}
	if !rc.power {
		why := ""
		if rc.perRun > 0 && rc.maxRuns < auditMaxReleaseRuns {
			why = fmt.Sprintf(" (the release budget at ≈ %s per run)", rc.perRun.Round(time.Millisecond))
		}
		out = append(out, fmt.Sprintf("release %d (%s): no test point reaches a margin of %d standard deviations against half the noise with at most %d samples per side (%d per run)%s",
			rc.index+1, rc.mech, audit.ShiftPowerMargin, rc.maxRuns, rc.pool, why))
	}
	if noClaim || g.Status != privacy.Proven || rc.mech == "rr" {
		return out // nothing proven about a sensitivity to check
	}
	switch {
	case math.IsNaN(rc.realised):
		out = append(out, fmt.Sprintf("release %d (%s): its coordinates vary between runs, so the pair's sensitivity cannot be measured", rc.index+1, rc.mech))
	case rc.reach() < auditReach:
		out = append(out, fmt.Sprintf("release %d (%s): the audit's pair moves it by %.4g, %.0f%% of the declared sensitivity %.4g (below %.0f%%): an understated sensitivity would not show",
			rc.index+1, rc.mech, rc.realised, 100*rc.reach(), rc.declared, 100*auditReach))
	}
	return out
}

// preparedSamples is the number of device runs per side of a declared
// statistic read on the devices' reports (AuditDesign.Prepared) for a
// per-rating claim eps: at least n, and 40·e^ε (at most 200 000) — to
// contradict a pure claim ε an event must be seen on one side with
// probability ≈ e^(−2ε) against ≈ 1 on the other when the noise is halved,
// which Clopper–Pearson bounds at confidence 1 − 10⁻⁴ resolve from
// ≈ 13·e^ε runs.
func preparedSamples(n int, eps float64) int {
	if n <= 0 || !(eps > 0) {
		return n
	}
	return max(n, int(math.Min(200000, math.Ceil(40*math.Exp(eps)))))
}
