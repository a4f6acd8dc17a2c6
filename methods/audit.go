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
	"github.com/privrec/privrec/privacy/audit"
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
	// Epsilon and Delta are the budget the method is trained with.
	Epsilon, Delta float64
	// Runs is the number of trainings per side for the field comparison
	// (default 16).
	Runs int
	// Samples is the number of trainings per side for the ε lower bound
	// (default 400; 0 keeps the default, negative skips the bound).
	Samples int
	// Confidence of the lower bound (default 0.95).
	Confidence float64
	// Seed fixes the audit's randomness (non-private randomness and the
	// noise streams); 0 draws one.
	Seed uint64
	// Prepare, when set, turns each side's raw input into what the method
	// trains on, with the run's noise source. Unset, it is the method's own
	// device step (DevicePrepare: the local-DP collection of ldp-laplace
	// and ldp-rr at the audited ε; none for the other methods).
	Prepare func(ctx context.Context, in release.Input, src *noise.Source) (release.Input, func(), error)
}

// AuditReport is the finding of a whole-artefact audit.
type AuditReport struct {
	Method         string  `json:"method"`
	Relation       string  `json:"relation"`
	ClaimedEpsilon float64 `json:"claimed_epsilon"`
	Delta          float64 `json:"delta,omitempty"`
	Runs           int     `json:"runs"`
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
	Violation         bool    `json:"violation"`
	Seconds           float64 `json:"seconds"`
}

// auditData returns the two neighbouring inputs for a relation: 12
// ordinary users × 8 catalogue items on the declared scale 1:5, and the
// canary user (whose ratings the neighbour replaces or adds), with one
// rating of an item outside the catalogue.
func auditData(relation string) (side [2]release.Input, err error) {
	const users, items = 12, 8
	ids := make([]string, items)
	for j := range ids {
		ids[j] = fmt.Sprintf("item%d", j+1)
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		return side, err
	}
	scale := release.Scale{Min: 1, Max: 5}
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
				for j := range items {
					if err := add(CanaryUser, ids[j], 5); err != nil {
						return nil, err
					}
				}
				if err := add(CanaryUser, CanaryItem, 5); err != nil {
					return nil, err
				}
			}
		default: // replace-one-user (and local reports): the canary's ratings change
			if s == 0 {
				for j := range items / 2 {
					if err := add(CanaryUser, ids[j], 1); err != nil {
						return nil, err
					}
				}
			} else {
				for j := items / 2; j < items; j++ {
					if err := add(CanaryUser, ids[j], 5); err != nil {
						return nil, err
					}
				}
				if err := add(CanaryUser, CanaryItem, 5); err != nil {
					return nil, err
				}
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

// Audit runs the whole-artefact audit of a method with its config.
func Audit(ctx context.Context, name string, cfg Config, o AuditOptions) (*AuditReport, error) {
	start := time.Now()
	if o.Runs <= 0 {
		o.Runs = 16
	}
	if o.Samples == 0 {
		o.Samples = 400
	}
	if o.Confidence == 0 {
		o.Confidence = 0.95
	}
	if o.Prepare == nil {
		o.Prepare = DevicePrepare(name, o.Epsilon)
	}
	if o.Runs < 2 {
		return nil, fmt.Errorf("audit: need at least 2 runs per side")
	}
	if o.Seed == 0 {
		o.Seed = noise.Secure().Uint64() | 1
	}
	// One probe run finds the method's relation.
	probe, err := auditData(privacy.RelationUserReplace)
	if err != nil {
		return nil, err
	}
	train := func(ctx context.Context, in release.Input, src *noise.Source) (*release.Release, error) {
		if o.Prepare != nil {
			prepared, done, err := o.Prepare(ctx, in, src.Split())
			if err != nil {
				return nil, err
			}
			defer done()
			in = prepared
		}
		env := Env{Epsilon: o.Epsilon, Delta: o.Delta, Noise: src, Rand: noise.Seeded(o.Seed), Seed: o.Seed, Workers: 1}
		return Train(ctx, name, cfg, in, env)
	}
	r0, err := train(ctx, probe[0], noise.Seeded(o.Seed^0x70726f6265))
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	g := r0.Guarantee
	if !g.Private() {
		return nil, fmt.Errorf("audit: %s gives no guarantee (status %s); there is nothing to audit", name, g.Status)
	}
	rel := g.Relation
	if rel == "" {
		return nil, fmt.Errorf("audit: %s's guarantee states no neighbouring relation", name)
	}
	sides, err := auditData(rel)
	if err != nil {
		return nil, err
	}
	rep := &AuditReport{Method: name, Relation: rel, ClaimedEpsilon: g.Epsilon, Delta: g.Delta, Runs: o.Runs,
		Confidence: o.Confidence, Differences: []string{}, Canaries: []string{}}
	canaries := []string{CanaryUser, CanaryItem}
	if rel == privacy.RelationLocalReport {
		// Local DP: the population is public and each client's report,
		// sent under her ID, is public; the canary user is a client on
		// both inputs. Only the item outside the catalogue must not appear.
		canaries = []string{CanaryItem}
	}
	var runs [2][]map[string]string
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for s := range 2 {
		runs[s] = make([]map[string]string, o.Runs)
		wg.Go(func() {
			for k := range o.Runs {
				r, err := train(ctx, sides[s], noise.Seeded(o.Seed^uint64(1000*s+k+1)))
				var f map[string]string
				var raw []byte
				if err == nil {
					f, raw, err = publicFields(r)
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				runs[s][k] = f
				for _, c := range canaries {
					if bytes.Contains(raw, []byte(c)) {
						place := fmt.Sprintf("%q in the public output of input %d", c, s)
						if !slices.Contains(rep.Canaries, place) {
							rep.Canaries = append(rep.Canaries, place)
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
	// (c) ε lower bound on the most separated noised field.
	if o.Samples > 0 && len(cands) > 0 {
		sort.Slice(cands, func(a, b int) bool {
			if cands[a].score != cands[b].score {
				return cands[a].score > cands[b].score
			}
			return cands[a].key < cands[b].key
		})
		key := cands[0].key
		rep.Statistic = key
		sample := func(src *noise.Source, s int) float64 {
			r, err := train(ctx, sides[s], src.Split())
			if err != nil {
				return math.NaN()
			}
			f, _, err := publicFields(r)
			if err != nil {
				return math.NaN()
			}
			x, err := parseFloat(f[key])
			if err != nil {
				return math.NaN()
			}
			return x
		}
		pilot := make([]float64, 0, 2*o.Runs)
		for s := range 2 {
			for _, f := range runs[s] {
				if x, err := parseFloat(f[key]); err == nil {
					pilot = append(pilot, x)
				}
			}
		}
		spec := audit.Spec{Mechanism: name, ClaimedEpsilon: g.Epsilon, Delta: g.Delta, Sample: sample, Events: quantileEvents(pilot)}
		res, err := audit.Run(ctx, spec, o.Samples, o.Confidence, noise.Seeded(o.Seed^0x6c6f776572))
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		rep.EpsilonLowerBound, rep.Event, rep.Samples = res.EpsilonLowerBound, res.Event, o.Samples
	}
	rep.Violation = len(rep.Differences) > 0 || len(rep.Canaries) > 0 || rep.EpsilonLowerBound > rep.ClaimedEpsilon
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
