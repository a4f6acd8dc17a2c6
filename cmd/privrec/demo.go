package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/privrec/privrec/datasets"
	"github.com/privrec/privrec/experiment"
	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/transform"
)

func init() {
	register(&command{name: "demo", summary: "the main job on embedded data: private recommendations for a film-streaming population, their guarantee, accuracy and a privacy–accuracy plot", run: runDemo})
}

const demoSynopsis = `
The main job in under a minute, on data made or shipped inside privrec.

1. A film-streaming service's viewing histories (synthetic implicit
   feedback, generated on the spot: 50 000 viewers, 600 films in 16
   genres, popular films watched far more, each viewer with a favourite
   genre). The most-popular list, non-private EASE and the private
   dp-ease at ε = 0.5 … 8 are scored on held-out viewers (Recall@20); one
   viewer's top 10 from the private model is printed beside the
   non-private one, with the guarantee in plain words; Recall@20 against
   ε is plotted into --out (recall-vs-epsilon.png).
2. The seed papers, briefly: local-DP randomized response on the UCI
   restaurant–consumer ratings (138 people, CC BY 4.0) and private SVD on
   a synthetic rank-one matrix, each beside a non-private model.

The models whose lists and guarantees are shown use crypto/rand noise, as a
release would (--seed makes them repeatable: an experiment, not a
release); the ε sweep uses seeded noise, as experiments do.`

// demoScenario is one private-vs-non-private comparison of the seed
// papers' part; the first whose methods are registered is used.
type demoScenario struct {
	private, baseline string
	params            map[string]any // for the private method
	baseParams        map[string]any
	collect           string           // local-DP collection before training
	declared          release.Declared // what the clients are told in advance (collect)
	eps               float64
	metric            string
	what              string // what the metric measures, in words
}

// Local-DP randomized response comes first on the restaurants: on this
// small matrix it is both fast and clearly better than guessing, while
// one-bit completion (seed 000) took minutes and was no better than the
// majority sign in our runs (docs/RESULTS.md).
var restaurantScenarios = []demoScenario{
	{private: "ldp-rr", baseline: "bias", collect: "rr", params: map[string]any{"debias": true},
		eps: 2, metric: "rmse", what: "RMSE of predicted ratings (0–2) on 20 % held-out ratings"},
	{private: "onebit-inp", baseline: "onebit-clear", params: map[string]any{"threshold": 1.5, "max_iter": 100}, baseParams: map[string]any{"threshold": 1.5, "max_iter": 100},
		eps: 4, metric: "accuracy", what: "accuracy of predicting whether a held-out rating is a 2 (\"liked\") — seed 000's task"},
}

var syntheticScenarios = []demoScenario{
	{private: "dpsvd", baseline: "fw", eps: 1, metric: "rmse", what: "RMSE on held-out ratings (the true ratings lie in [−1, 1])"},
	{private: "dpfw", baseline: "fw", eps: 1, metric: "rmse", what: "RMSE on held-out ratings (the true ratings lie in [−1, 1])"},
}

func pickScenario(ss []demoScenario) (demoScenario, error) {
	for _, s := range ss {
		if _, err := methods.Lookup(s.private); err != nil {
			continue
		}
		if _, err := methods.Lookup(s.baseline); err != nil {
			continue
		}
		return s, nil
	}
	var want []string
	for _, s := range ss {
		want = append(want, s.private+"+"+s.baseline)
	}
	return demoScenario{}, fmt.Errorf("none of the demo's methods are registered in this build (want one of %s; have %s)",
		strings.Join(want, ", "), strings.Join(methods.Names(), ", "))
}

func runDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("demo [--out DIR] [--epsilon E] [--users N] [--films N] [--seed S] [--no-sweep] [--json]", demoSynopsis, `  privrec demo
  privrec demo --out demo-eps2 --epsilon 2
  privrec demo --users 20000 --no-sweep --json`)
	outDir := fs.String("out", "privrec-demo", "directory for the plot")
	eps := fs.Float64("epsilon", 1, "ε of the private model whose top-10 list and guarantee are shown (user-level, δ = 10⁻⁶)")
	users := fs.Int("users", 50000, "viewers in the generated population (2 000 of them held out; at least 5 000)")
	films := fs.Int("films", 600, "films in the generated catalogue (100 to 5 000)")
	seed := fs.Uint64("seed", 0, "seed the privacy noise of the models shown too (repeatable numbers; an experiment, not a release)")
	noSweep := fs.Bool("no-sweep", false, "skip the ε sweep and its plot (the private model at --epsilon only)")
	jsonOut := fs.Bool("json", false, "print one JSON object (the results, the lists, where the plot is) instead of the text")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if !(*eps > 0) || math.IsInf(*eps, 0) {
		return usagef("--epsilon %v: ε must be a finite number > 0", *eps)
	}
	if *users < 5000 || *users > 10_000_000 {
		return usagef("--users %d: want 5 000 to 10 000 000 viewers (2 000 are held out for scoring)", *users)
	}
	if *films < 100 || *films > 5000 {
		return usagef("--films %d: want 100 to 5 000 films", *films)
	}
	start := time.Now()
	res := demoResult{}
	text := out
	if *jsonOut {
		text = io.Discard
	}
	fmt.Fprintln(text, "privrec demo — recommendations that keep the people in the data private")
	fmt.Fprintln(text)

	c := demoTopNConfig{Users: *users, Items: *films, PerUser: 40, HeldOut: 2000, Epsilon: *eps, Seed: *seed}
	if !*noSweep {
		c.Epsilons, c.Out = []float64{0.5, 1, 2, 4, 8}, *outDir
	}
	if !*jsonOut && progressTerminal() {
		// The models take most of the time: say how many are done.
		p := newProgressLine(progressOut, "privrec demo: models", false, nil)
		defer p.finish()
		c.Progress = p.Progress
	}
	var err error
	if res.Streaming, err = demoStreaming(ctx, text, c); err != nil {
		return err
	}
	res.Plot = res.Streaming.Plot
	if err := demoSeedPapers(ctx, text, &res, *seed); err != nil {
		return err
	}
	res.Seconds = time.Since(start).Seconds()
	if *jsonOut {
		return writeJSON(out, res)
	}
	fmt.Fprintf(text, "\nDone in %.0f s (the first `go run` also builds privrec: minutes). Next: privrec train --help, docs/topn.md, privrec reproduce --list.\n", res.Seconds)
	return nil
}

// demoSeedPapers is the demo's second part: one comparison on the
// restaurant ratings and one on synthetic ratings, briefly.
func demoSeedPapers(ctx context.Context, w io.Writer, res *demoResult, seed uint64) error {
	rs, err := pickScenario(restaurantScenarios)
	if err != nil {
		return err
	}
	if rs.collect != "" {
		// Declared for the clients: the scale 0–2 and the catalogue of the
		// 130 restaurants (the data set's restaurant list, not the ratings).
		cat, err := restaurantCatalogue()
		if err != nil {
			return err
		}
		rs.declared = release.Declared{Scale: &release.Scale{Min: 0, Max: 2}, Catalogue: cat}
	}
	all, err := datasets.Restaurant(ctx, "rating")
	if err != nil {
		return err
	}
	train, test := transform.HoldOut(all, 0.2, 1)
	fmt.Fprintln(w, "2. The seed papers' methods, briefly (each beside a non-private model; docs/RESULTS.md has the reproductions).")
	fmt.Fprintf(w, "   %s\n", wrap(fmt.Sprintf("a. UCI restaurant ratings: %d people, %d restaurants, %d ratings 0–2 (%s); %s.",
		all.NumUsers(), all.NumItems(), all.Len(), datasets.Attribution, rs.what), "    ", 100))
	res.Restaurants, err = demoPair(ctx, w, rs, train, test, seed)
	if err != nil {
		return err
	}
	if rs.collect != "" {
		r := res.Restaurants
		than := "as good as the non-private one at this ε"
		if r.Private != nil && r.NonPrivate != nil && (*r.Private > *r.NonPrivate) == (r.Metric == "rmse") {
			than = "still worse than the non-private one; local DP needs many more people"
		}
		fmt.Fprintf(w, "      %s\n", wrap(fmt.Sprintf("Honestly: local DP randomizes all %d cells of a person's report on her device, so a "+
			"useful per-rating ε composes into a per-person ε of %s, which promises little, and with %d people the private model "+
			"is %s (docs/ldp.md).",
			rs.declared.Catalogue.Len(), num(r.Guarantee.Epsilon), all.NumUsers(), than), "    ", 96))
	}

	ss, err := pickScenario(syntheticScenarios)
	if err != nil {
		return err
	}
	spec := experiment.DataSpec{Name: "synthetic", Source: "rankone-synthetic",
		Params: map[string]float64{"users": 4000, "items": 100, "per_user": 30, "holdout": 0.1}}
	split, err := experiment.Generate(ctx, spec, 7, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "   %s\n", wrap(fmt.Sprintf("b. Synthetic rank-one ratings, %d users × %d items, %d each (seed 001's setup, smaller); %s.",
		split.Train.NumUsers(), split.Train.NumItems(), int(spec.Params["per_user"]), ss.what), "    ", 100))
	synthCat, err := model.NewCatalogue(split.Train.Items.Names(), nil)
	if err != nil {
		return err
	}
	ss.declared = release.Declared{Scale: &release.Scale{Min: -1, Max: 1}, Catalogue: synthCat}
	res.Synthetic, err = demoPair(ctx, w, ss, split.Train, split.Test, seed)
	return err
}

// demoResult is the demo's --json output.
type demoResult struct {
	Streaming   *demoTopNResult `json:"streaming"`
	Restaurants demoComparison  `json:"restaurants"`
	Synthetic   demoComparison  `json:"synthetic"`
	Plot        string          `json:"plot,omitempty"`
	Seconds     float64         `json:"seconds"`
}

// demoComparison is one private-vs-non-private comparison.
type demoComparison struct {
	Method string `json:"method"`
	// Epsilon is the ε asked of the method, per EpsilonUnit ("rating" or
	// "user"); the Guarantee may compose it into a larger per-user ε.
	Epsilon     float64           `json:"epsilon"`
	EpsilonUnit string            `json:"epsilon_unit"`
	Guarantee   privacy.Guarantee `json:"guarantee"`
	Metric      string            `json:"metric"`
	Private     *float64          `json:"private"`
	Baseline    string            `json:"baseline"`
	NonPrivate  *float64          `json:"non_private"`
}

// restaurantCatalogue is the list of the restaurants (placeID, name), in
// placeID order.
func restaurantCatalogue() (*model.Catalogue, error) {
	names, err := datasets.RestaurantNames()
	if err != nil {
		return nil, err
	}
	ids := slices.Sorted(maps.Keys(names))
	titles := make([]string, len(ids))
	for k, id := range ids {
		titles[k] = names[id]
	}
	return model.NewCatalogue(ids, titles)
}

type trained struct {
	rel    *release.Release
	metric float64
}

// demoPair trains and scores the private and the non-private method of a
// scenario and prints them side by side: the ε asked of the private
// method, in its unit, then the guarantee it gives, briefly.
func demoPair(ctx context.Context, w io.Writer, s demoScenario, train, test *ratings.Matrix, seed uint64) (demoComparison, error) {
	noiseSrc := noise.Secure()
	if seed != 0 {
		noiseSrc = noise.Seeded(seed)
	}
	p, err := demoTrain(ctx, s.private, s.params, s.collect, s.declared, s.eps, train, test, noiseSrc, s.metric)
	if err != nil {
		return demoComparison{}, err
	}
	b, err := demoTrain(ctx, s.baseline, s.baseParams, "", s.declared, s.eps, train, test, noiseSrc, s.metric)
	if err != nil {
		return demoComparison{}, err
	}
	g := p.rel.Guarantee
	unit := "user"
	if s.collect != "" || g.Unit == privacy.UnitEntry {
		unit = "rating" // a local-DP collection randomizes each rating at ε
	}
	also := ""
	if s.collect != "" {
		// methods.LDPPrepare's clients also send their mean rating.
		also = fmt.Sprintf(" and her mean rating at ε = %s", num(ldp.DefaultMeanEpsilon(s.eps, s.declared.Catalogue.Len())))
	}
	fmt.Fprintf(w, "      %s\n", wrap(fmt.Sprintf("%s at ε = %s per %s%s: %s.", s.private, num(s.eps), unit, also, shortGuarantee(g)), "    ", 94))
	name := map[string]string{"accuracy": "accuracy", "rmse": "RMSE"}[s.metric]
	fmt.Fprintf(w, "      %s: private %.3f, non-private (%s) %.3f.\n", name, p.metric, s.baseline, b.metric)
	return demoComparison{Method: s.private, Epsilon: s.eps, EpsilonUnit: unit, Guarantee: g, Metric: s.metric,
		Private: privacy.JSONNumber(p.metric), Baseline: s.baseline, NonPrivate: privacy.JSONNumber(b.metric)}, nil
}

func demoTrain(ctx context.Context, name string, params map[string]any, collect string, declared release.Declared, eps float64, train, test *ratings.Matrix, src *noise.Source, metric string) (*trained, error) {
	in := release.Input{Ratings: train, Declared: declared}
	if collect != "" {
		// The users of the training ratings are the clients; each
		// randomizes her vector over the declared catalogue and scale.
		mech, err := ldp.ParseMechanism(collect)
		if err != nil {
			return nil, err
		}
		collected, done, err := methods.LDPPrepare(mech, eps, 0)(ctx, in, src.Split())
		if err != nil {
			return nil, fmt.Errorf("local-DP collection: %w", err)
		}
		defer done()
		in = collected
	}
	cfg, err := methods.Configure(name, params)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rel, err := methods.Train(ctx, name, cfg, in, methods.Env{Epsilon: eps, Delta: 1e-6, Noise: src, Rand: noise.Seeded(1), Seed: 1, Log: quiet})
	if err != nil {
		return nil, err
	}
	m := rel.Model()
	if m == nil {
		return nil, fmt.Errorf("%s: the demo shows matrix models only", name)
	}
	rep, err := methods.EvaluateModel(ctx, m, test, methods.EvalOptions{States: rel.PerUser})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	v := math.NaN()
	switch {
	case metric == "accuracy" && rep.Accuracy != nil:
		v = *rep.Accuracy
	case metric == "rmse" && rep.RMSE != nil:
		v = *rep.RMSE
	}
	return &trained{rel: rel, metric: v}, nil
}

// shortGuarantee is a guarantee in one clause: "ε = 276 per user, local
// DP, proven".
func shortGuarantee(g privacy.Guarantee) string {
	if !g.Private() {
		return g.String()
	}
	s := "ε = " + num(g.Epsilon)
	if g.Delta > 0 {
		s += fmt.Sprintf(", δ = %.3g", g.Delta)
	}
	who := map[privacy.Unit]string{privacy.UnitEntry: "rating", privacy.UnitUser: "person"}[g.Unit]
	s += fmt.Sprintf(" per %s (all her ratings), %s DP, %s", who, g.Notion, g.Status)
	if g.Unit == privacy.UnitEntry {
		s = strings.Replace(s, " (all her ratings)", "", 1)
	}
	if g.Reproducible {
		s += " — seeded noise: an experiment, not a release"
	}
	return s
}

// wrap breaks text into lines of at most width runes, indenting the rest.
func wrap(s, indent string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		if i > 0 {
			if n+1+len([]rune(w)) > width {
				b.WriteString("\n" + indent + "  ")
				n = len(indent) + 2
			} else {
				b.WriteString(" ")
				n++
			}
		}
		b.WriteString(w)
		n += len([]rune(w))
	}
	return b.String()
}
