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

// Audit runs the whole-artefact audit of a method with its config.
func Audit(ctx context.Context, name string, cfg Config, o AuditOptions) (*AuditReport, error) {
	start := time.Now()
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
	factor := o.NoiseFactor
	if factor == 0 {
		factor = 1
	}
	if math.IsNaN(factor) || math.IsInf(factor, 0) || factor <= 0 {
		return nil, fmt.Errorf("audit: noise factor %v must be positive and finite", factor)
	}
	sfactor := o.SensitivityFactor
	if sfactor == 0 {
		sfactor = 1
	}
	if math.IsNaN(sfactor) || math.IsInf(sfactor, 0) || sfactor <= 0 {
		return nil, fmt.Errorf("audit: sensitivity factor %v must be positive and finite", sfactor)
	}
	if !(o.DeltaPrime > 0 && o.DeltaPrime < 1) {
		return nil, fmt.Errorf("audit: δ' = %v must be in (0, 1)", o.DeltaPrime)
	}
	if o.Runs < 2 {
		return nil, fmt.Errorf("audit: need at least 2 runs per side")
	}
	if o.Seed == 0 {
		o.Seed = noise.Secure().Uint64() | 1
	}
	if err := o.Fault.check(name); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if m, err := Lookup(name); err == nil && !m.Private {
		return nil, fmt.Errorf("audit: %s is a non-private baseline: it gives no guarantee, there is nothing to audit", name)
	}
	auto := o.Epsilon == 0
	if auto {
		o.Epsilon = 1
	}
	// prepare is the device step at the (possibly under-noised) per-rating
	// ε; honest is the one the claim comes from.
	prepare, honest := o.Prepare, o.Prepare
	if o.Prepare == nil {
		prepare, honest = DevicePrepare(name, o.Epsilon/factor), DevicePrepare(name, o.Epsilon)
	}
	var design *AuditDesign // set below, once the claim is known
	type runOut struct {
		r        *release.Release
		prepared release.Input
		draws    []mechanism.Draw
	}
	// run trains once on in with the privacy noise from src, the audit's
	// noise factor f and its sensitivity factor (f = 0: the honest probe,
	// both factors 1) and a tap; stopAfter > 0 stops the training after that
	// many draws, prepOnly after the device step.
	run := func(ctx context.Context, in release.Input, src *noise.Source, f float64, prep PrepareFunc, stopAfter int, prepOnly bool) (runOut, error) {
		var out runOut
		if prepOnly && design != nil && design.Device != nil {
			prepared, err := design.Device(ctx, in, src.Split(), o.Epsilon/f)
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
		sf, fault := sfactor, o.Fault
		if f == 0 { // the honest probe
			sf, fault = 1, NoFault
		}
		env := Env{Epsilon: o.Epsilon, Delta: o.Delta, Noise: src, Rand: noise.Seeded(o.Seed), Seed: o.Seed, Workers: 1,
			NoiseFactor: f, SensitivityFactor: sf, Fault: fault, Tap: rec.tap}
		r, err := Train(ctx, name, cfg, in, env)
		out.r, out.draws = r, rec.draws
		if err != nil && rec.complete() {
			err = nil // stopped by the tap after its last draw
		}
		return out, err
	}
	// A probe run finds the method's relation and its claim (with the
	// honest noise).
	probeData, err := auditData(privacy.RelationUserReplace)
	if err != nil {
		return nil, err
	}
	probe := func() (privacy.Guarantee, error) {
		p, err := run(ctx, probeData[0], noise.Seeded(o.Seed^0x70726f6265), 0, honest, 0, false)
		if err != nil {
			return privacy.Guarantee{}, fmt.Errorf("audit: %w", err)
		}
		return p.r.Guarantee, nil
	}
	g, err := probe()
	if err != nil {
		return nil, err
	}
	if auto && g.Rho > 0 {
		o.Epsilon = AuditZCDPEpsilon
		if o.Prepare == nil {
			prepare, honest = DevicePrepare(name, o.Epsilon/factor), DevicePrepare(name, o.Epsilon)
		}
		if g, err = probe(); err != nil {
			return nil, err
		}
	}
	// A method that gives no guarantee (status none: the GP and OP tensor
	// variants release some factors un-noised) claims nothing about the
	// data, so only its noise is audited: the release check, against the
	// claims of the mechanisms it draws from.
	noClaim := !g.Private()
	rel := g.Relation
	if rel == "" {
		if !noClaim {
			return nil, fmt.Errorf("audit: %s's guarantee states no neighbouring relation", name)
		}
		rel = privacy.RelationUserReplace
	}
	if d, ok := cfg.(AuditDesigner); ok {
		if design, err = d.AuditDesign(o.Epsilon, o.Delta); err != nil {
			return nil, fmt.Errorf("audit: %s: %w", name, err)
		}
	}
	if design != nil && design.Config != nil {
		cfg = design.Config // the runs (and the probe) train this one from here on
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("audit: %s's audited configuration: %w", name, err)
		}
		if g, err = probe(); err != nil {
			return nil, err
		}
	}
	var sides [2]release.Input
	if design != nil && design.Sides != nil {
		sides, err = design.Sides(rel)
	} else {
		sides, err = auditData(rel)
	}
	if err != nil {
		return nil, err
	}
	rep := &AuditReport{Method: name, Relation: rel, ClaimedEpsilon: g.Epsilon, Delta: g.Delta, ClaimedRho: g.Rho,
		TrainedEpsilon: o.Epsilon, NoiseFactor: factor, Runs: o.Runs,
		Confidence: o.Confidence, Differences: []string{}, Canaries: []string{}, NoPower: []string{}}
	canaries := []string{CanaryUser, CanaryItem}
	if rel == privacy.RelationLocalReport {
		// Local DP: the population is public and each client's report,
		// sent under her ID, is public; the canary user is a client on
		// both inputs. Only the item outside the catalogue must not appear.
		canaries = []string{CanaryItem}
	}
	pilots, dataSamples := o.Runs, o.Samples
	if design != nil && design.Statistic != nil && design.Prepared {
		// Device steps are cheap: more pilot values fix the events better,
		// and a large per-rating ε needs ≈ e^ε runs to be contradicted.
		dataSamples = preparedSamples(o.Samples, design.Epsilon)
		pilots = max(pilots, 64, dataSamples/8)
	}
	var runs [2][]map[string]string
	var draws [2][][]mechanism.Draw
	var pilotStat [2][]float64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for s := range 2 {
		runs[s] = make([]map[string]string, o.Runs)
		draws[s] = make([][]mechanism.Draw, o.Runs)
		wg.Go(func() {
			for k := range pilots {
				out, err := run(ctx, sides[s], noise.Seeded(o.Seed^uint64(1000*s+k+1)), factor, prepare, 0, k >= o.Runs)
				var f map[string]string
				var raw []byte
				if err == nil && k < o.Runs {
					f, raw, err = publicFields(out.r)
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				if design != nil && design.Statistic != nil {
					pilotStat[s] = append(pilotStat[s], design.Statistic(out.prepared, out.draws, out.r))
				}
				if k < o.Runs {
					runs[s][k], draws[s][k] = f, out.draws
					for _, c := range canaries {
						if bytes.Contains(raw, []byte(c)) {
							place := fmt.Sprintf("%q in the public output of input %d", c, s)
							if !slices.Contains(rep.Canaries, place) {
								rep.Canaries = append(rep.Canaries, place)
							}
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("audit: %w", firstErr)
	}
	// (a) fields fixed under the noise that differ between the sides.
	keys := map[string]bool{}
	for s := range 2 {
		for _, f := range runs[s] {
			for k := range f {
				keys[k] = true
			}
		}
	}
	ignore := func(k string) bool { return strings.HasPrefix(k, "guarantee.note") }
	type varying struct {
		key   string
		score float64
	}
	var cands []varying
	for k := range keys {
		if ignore(k) {
			continue
		}
		rep.Fields++
		fixed := [2]bool{true, true}
		val := [2]string{}
		present := [2]int{}
		for s := range 2 {
			for i, f := range runs[s] {
				v, ok := f[k]
				if ok {
					present[s]++
				}
				if i == 0 {
					val[s] = v
				} else if v != val[s] {
					fixed[s] = false
				}
			}
		}
		switch {
		case fixed[0] && fixed[1] && val[0] != val[1]:
			if present[0] == 0 || present[1] == 0 {
				rep.Differences = append(rep.Differences, fmt.Sprintf("%s: present on one input only", k))
			} else {
				rep.Differences = append(rep.Differences, fmt.Sprintf("%s: %s vs %s", k, short(val[0]), short(val[1])))
			}
		case !fixed[0] || !fixed[1]:
			rep.Noised++
			if sc, ok := separation(runs, k); ok {
				cands = append(cands, varying{k, sc})
			}
		}
	}
	sort.Strings(rep.Differences)
	sort.Strings(rep.Canaries)
	// (c) ε lower bound, on the claim tested: the design's, or the point
	// (ε'(ρ, δ'), δ') of a zCDP claim, or the stated (ε, δ).
	rep.TestedEpsilon, rep.TestedDelta = g.Epsilon, g.Delta
	switch {
	case design != nil && design.Epsilon > 0:
		rep.TestedEpsilon, rep.TestedDelta = design.Epsilon, design.Delta
	case g.Rho > 0:
		e, err := accountant.ZCDPToApprox(g.Rho, o.DeltaPrime)
		if err != nil {
			return nil, fmt.Errorf("audit: converting ρ = %g: %w", g.Rho, err)
		}
		rep.TestedEpsilon, rep.TestedDelta = e, o.DeltaPrime
	}
	var sample func(src *noise.Source, s int) float64
	var events []audit.Event
	common := commonDraws(draws)
	switch raw := newRawStatistic(draws, common); {
	case design != nil && design.Statistic != nil:
		rep.Statistic = design.Name
		events = valueEvents(pilotStat)
		sample = func(src *noise.Source, s int) float64 {
			out, err := run(ctx, sides[s], src.Split(), factor, prepare, 0, design.Prepared)
			if err != nil {
				return math.NaN()
			}
			return design.Statistic(out.prepared, out.draws, out.r)
		}
	case raw != nil && raw.active > 0:
		rep.Statistic = fmt.Sprintf("log-likelihood ratio of the raw noised releases (%d draws, %d coordinates differing)", len(raw.mech), raw.active)
		for s := range 2 {
			for _, d := range draws[s] {
				pilotStat[s] = append(pilotStat[s], raw.of(d))
			}
		}
		events = rawEvents(pilotStat)
		n := len(raw.mech)
		sample = func(src *noise.Source, s int) float64 {
			out, err := run(ctx, sides[s], src.Split(), factor, prepare, n, false)
			if err != nil {
				return math.NaN()
			}
			return raw.of(out.draws)
		}
	case raw != nil:
		// Instrumented releases, none differing between the inputs:
		// objective perturbation's noise is drawn without looking at the
		// data (the privacy comes from the optimisation), so there is no raw
		// statistic of the data; its noise is audited by the release check.
		rep.Statistic = "none: no noised release depends on the data (the release check audits the noise)"
	case len(cands) > 0:
		// No instrumented release at all: the public field that differs
		// most (little power; a method can declare better: AuditDesigner).
		sort.Slice(cands, func(a, b int) bool {
			if cands[a].score != cands[b].score {
				return cands[a].score > cands[b].score
			}
			return cands[a].key < cands[b].key
		})
		key := cands[0].key
		rep.Statistic = key
		pilot := make([]float64, 0, 2*o.Runs)
		for s := range 2 {
			for _, f := range runs[s] {
				if x, err := parseFloat(f[key]); err == nil {
					pilot = append(pilot, x)
				}
			}
		}
		events = quantileEvents(pilot)
		sample = func(src *noise.Source, s int) float64 {
			out, err := run(ctx, sides[s], src.Split(), factor, prepare, 0, false)
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
		}
	}
	if noClaim {
		rep.NoGuarantee, rep.TestedEpsilon, rep.TestedDelta, rep.Statistic = true, 0, 0, ""
	}
	if o.Samples > 0 && sample != nil && !noClaim {
		if most := audit.MaxLowerBound(dataSamples, o.Confidence, len(events), rep.TestedDelta); most <= rep.TestedEpsilon {
			// No outcome of the runs could contradict the claim (onebit-outp's
			// whole-matrix ε): they are not made; the release check audits
			// the noise against its own claim.
			rep.Unsampled = fmt.Sprintf("%d trainings per side bound ε by at most %.3g, below the claim %.4g: not made", dataSamples, most, rep.TestedEpsilon)
			sample = nil
		}
	}
	if o.Samples > 0 && sample != nil && !noClaim {
		spec := audit.Spec{Mechanism: name, ClaimedEpsilon: rep.TestedEpsilon, Delta: rep.TestedDelta, Sample: sample, Events: events}
		res, err := audit.Run(ctx, spec, dataSamples, o.Confidence, noise.Seeded(o.Seed^0x6c6f776572))
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		rep.EpsilonLowerBound, rep.Event, rep.Samples = res.EpsilonLowerBound, res.Event, dataSamples
	}
	// (d) the release check (audit_raw.go): a run's first additive release
	// against its own claim, at the sensitivity derived from the pair.
	rc := newReleaseCheck(draws, common, design != nil && design.PerCoordinate)
	if rc != nil && noClaim {
		// A method that claims nothing about the data: only its noise is
		// audited, against its mechanism's declared sensitivity.
		rc.derived = rc.declared
	}
	if rc != nil && o.Samples >= 0 {
		rr, err := runReleaseCheck(ctx, rc, name, o, func(src *noise.Source) ([]mechanism.Draw, error) {
			out, err := run(ctx, sides[0], src.Split(), factor, prepare, rc.index+1, false)
			return out.draws, err
		})
		if err != nil {
			return nil, err
		}
		rep.ReleaseCheck = rr
	}
	rep.SensitivityFactor, rep.Fault, rep.Proven = sfactor, string(o.Fault), g.Status == privacy.Proven && !noClaim
	rep.NoPower = noPower(rc, rep.ReleaseCheck, g, noClaim)
	if rep.Unsampled != "" && rep.ReleaseCheck == nil {
		rep.NoPower = append(rep.NoPower, "the data-level bound: "+rep.Unsampled+", and no additive release to check")
	}
	rep.Violation = len(rep.Differences) > 0 || len(rep.Canaries) > 0 || rep.EpsilonLowerBound > rep.TestedEpsilon
	if noClaim {
		rep.Violation = false // un-noised fields are what status none says
	}
	rep.Violation = rep.Violation || (rep.ReleaseCheck != nil && rep.ReleaseCheck.Violation)
	if rep.Violation {
		rep.NoPower = []string{} // a violation found needs no power
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
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
