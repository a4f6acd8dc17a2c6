package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
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
	register(&command{name: "demo", summary: "the main job on embedded data: a private recommender, its guarantee, accuracy and a privacy–accuracy plot", run: runDemo})
	// The demo's sweep reads the embedded restaurant ratings.
	experiment.RegisterGenerator("demo-restaurant", func(ctx context.Context, d experiment.DataSpec, seed uint64, _ string) (*experiment.Split, error) {
		m, err := datasets.Restaurant(ctx, "rating")
		if err != nil {
			return nil, err
		}
		cat, err := restaurantCatalogue()
		if err != nil {
			return nil, err
		}
		train, test := transform.HoldOut(m, 0.2, seed)
		return &experiment.Split{Train: train, Test: test, Items: cat.IDs()}, nil
	})
}

const demoSynopsis = `
The main job in about a minute, on data shipped inside privrec: the UCI
restaurant–consumer ratings (138 people × 130 restaurants, CC BY 4.0) and a
synthetic rating matrix. For each it trains a private model at a sensible
default ε, prints its privacy guarantee in plain words, its accuracy beside
a non-private model's, and example recommendations; then it sweeps ε on the
restaurant data and writes a privacy–accuracy plot (PNG and SVG) with a
Markdown report into --out.

The models shown use crypto/rand noise, as a release would (pass --seed for
repeatable numbers); the sweep uses seeded noise, as experiments do.`

// demoScenario is one private-vs-non-private comparison; the first whose
// methods are registered is used.
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
		eps: 2, metric: "rmse", what: "the root-mean-square error of predicted ratings (0–2) on held-out ratings"},
	{private: "onebit-inp", baseline: "onebit-clear", params: map[string]any{"threshold": 1.5, "max_iter": 100}, baseParams: map[string]any{"threshold": 1.5, "max_iter": 100},
		eps: 4, metric: "accuracy", what: "how often it predicts correctly whether a held-out rating is a 2 (\"liked\") — seed 000's task"},
}

var syntheticScenarios = []demoScenario{
	{private: "dpsvd", baseline: "fw", eps: 1, metric: "rmse", what: "the root-mean-square error on held-out ratings (the true ratings lie in [−1, 1])"},
	{private: "dpfw", baseline: "fw", eps: 1, metric: "rmse", what: "the root-mean-square error on held-out ratings (the true ratings lie in [−1, 1])"},
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
	fs := newFlags("demo [--out DIR] [--epsilon E] [--seed S]", demoSynopsis, `  privrec demo
  privrec demo --out demo-eps2 --epsilon 2`)
	outDir := fs.String("out", "privrec-demo", "directory for the plot and report")
	eps := fs.Float64("epsilon", 0, "ε of the private restaurant model (0: the scenario's default)")
	seed := fs.Uint64("seed", 0, "seed the privacy noise too (repeatable numbers; an experiment, not a release)")
	noSweep := fs.Bool("no-sweep", false, "skip the privacy–accuracy sweep and plot")
	jsonOut := fs.Bool("json", false, "print a JSON object (the two comparisons, the recommendations, where the plot is) instead of the text")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *eps < 0 || math.IsNaN(*eps) || math.IsInf(*eps, 0) {
		return usagef("--epsilon %v: ε must be a finite number > 0 (or 0 for the default)", *eps)
	}
	start := time.Now()
	res := demoResult{}
	text := out
	if *jsonOut {
		text = io.Discard
	}
	fmt.Fprintln(text, "privrec demo — recommendations that keep the people in the data private")
	fmt.Fprintln(text)

	// 1. Restaurants.
	rs, err := pickScenario(restaurantScenarios)
	if err != nil {
		return err
	}
	if *eps > 0 {
		rs.eps = *eps
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
	fmt.Fprintf(text, "1. Restaurant ratings: %d people rated %d restaurants in Mexico (%d ratings, 0–2).\n", all.NumUsers(), all.NumItems(), all.Len())
	fmt.Fprintf(text, "   Data: %s.\n", datasets.Attribution)
	fmt.Fprintf(text, "   20 %% of the ratings are held out; we measure %s.\n\n", rs.what)
	priv, cmp, err := demoPair(ctx, text, rs, train, test, *seed)
	if err != nil {
		return err
	}
	res.Restaurants = cmp
	names, _ := datasets.RestaurantNames()
	user := "U1077"
	if recs := recommendFrom(priv.rel, user, 3); recs != nil {
		var parts []string
		for i, r := range recs {
			n := names[r.Item]
			if n == "" {
				n = r.Item
			}
			parts = append(parts, fmt.Sprintf("%d. %s", i+1, n))
		}
		fmt.Fprintf(text, "   Top 3 for person %s from the private model: %s\n", user, strings.Join(parts, "   "))
		res.Restaurants.TopFor, res.Restaurants.Top = user, parts
	}
	fmt.Fprintln(text)

	// 2. Synthetic.
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
	fmt.Fprintf(text, "2. Synthetic ratings: a rank-one matrix, %d users × %d items, %d ratings per user (seed 001's setup, smaller).\n",
		split.Train.NumUsers(), split.Train.NumItems(), int(spec.Params["per_user"]))
	fmt.Fprintf(text, "   We measure %s.\n\n", ss.what)
	synthCat, err := model.NewCatalogue(split.Train.Items.Names(), nil)
	if err != nil {
		return err
	}
	ss.declared = release.Declared{Scale: &release.Scale{Min: -1, Max: 1}, Catalogue: synthCat}
	if _, res.Synthetic, err = demoPair(ctx, text, ss, split.Train, split.Test, *seed); err != nil {
		return err
	}
	fmt.Fprintln(text)

	// 3. Privacy–accuracy curve on the restaurants.
	if !*noSweep {
		cfg := &experiment.Config{
			Name: "demo", Title: "privrec demo: privacy vs accuracy on the restaurant ratings",
			Description: "The UCI restaurant–consumer ratings, a random 80/20 split per run; " + rs.what + ".",
			Datasets:    []experiment.DataSpec{{Name: "restaurants", Source: "demo-restaurant", Scale: []float64{0, 2}}},
			Methods: []experiment.MethodSpec{
				{Method: rs.baseline, Label: rs.baseline + " (non-private)", Params: rs.baseParams},
				{Method: rs.private, Params: rs.params, Collect: rs.collect},
			},
			Epsilons: []float64{0.5, 1, 2, 4, 8},
			Runs:     4,
			Metric:   rs.metric, LogX: true,
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		fmt.Fprintf(text, "3. Privacy–accuracy sweep: %s at ε ∈ {0.5, 1, 2, 4, 8}, %d random splits each …\n", rs.private, cfg.Runs)
		quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		if err := experiment.Run(ctx, cfg, experiment.Options{Out: *outDir, Log: quiet}); err != nil {
			return err
		}
		png := filepath.Join(*outDir, "privacy-accuracy.png")
		if err := copyFile(filepath.Join(*outDir, "fig-restaurants.png"), png); err != nil {
			return err
		}
		fmt.Fprintf(text, "   Plot: %s   Report: %s\n", png, filepath.Join(*outDir, "report.md"))
		res.Plot, res.Report = png, filepath.Join(*outDir, "report.md")
	}
	res.Seconds = time.Since(start).Seconds()
	if *jsonOut {
		return writeJSON(out, res)
	}
	fmt.Fprintf(text, "\nDone in %.0f s (the first `go run` also builds privrec: minutes). Next: privrec train --help, privrec reproduce --list.\n", res.Seconds)
	return nil
}

// demoResult is the demo's --json output.
type demoResult struct {
	Restaurants demoComparison `json:"restaurants"`
	Synthetic   demoComparison `json:"synthetic"`
	Plot        string         `json:"plot,omitempty"`
	Report      string         `json:"report,omitempty"`
	Seconds     float64        `json:"seconds"`
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
	TopFor      string            `json:"top_for,omitempty"`
	Top         []string          `json:"top,omitempty"`
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

// recommendFrom lists a user's top k from a release: from the public model
// when it holds its users, else from her own state.
func recommendFrom(rel *release.Release, user string, k int) []model.Recommendation {
	m := rel.Model()
	if m == nil {
		return nil
	}
	if u, ok := m.UserIndex(user); ok {
		return m.Recommend(u, k, nil)
	}
	if rel.PerUser != nil {
		if st, ok := rel.PerUser.Lookup(user); ok {
			return m.RecommendFor(st, k)
		}
	}
	return nil
}

// demoPair trains and scores the private and the non-private method of a
// scenario and prints them side by side: the ε asked of the private
// method, in its unit, then the guarantee it gives.
func demoPair(ctx context.Context, w io.Writer, s demoScenario, train, test *ratings.Matrix, seed uint64) (*trained, demoComparison, error) {
	noiseSrc := noise.Secure()
	if seed != 0 {
		noiseSrc = noise.Seeded(seed)
	}
	p, err := demoTrain(ctx, s.private, s.params, s.collect, s.declared, s.eps, train, test, noiseSrc, s.metric)
	if err != nil {
		return nil, demoComparison{}, err
	}
	b, err := demoTrain(ctx, s.baseline, s.baseParams, "", s.declared, s.eps, train, test, noiseSrc, s.metric)
	if err != nil {
		return nil, demoComparison{}, err
	}
	g := p.rel.Guarantee
	unit := "user"
	if s.collect != "" || g.Unit == privacy.UnitEntry {
		unit = "rating" // a local-DP collection randomizes each rating at ε
	}
	also := ""
	if s.collect != "" {
		// methods.LDPPrepare's clients also send their mean rating.
		also = fmt.Sprintf(", and each person's mean-rating report at ε = %s", num(ldp.DefaultMeanEpsilon(s.eps, s.declared.Catalogue.Len())))
	}
	fmt.Fprintf(w, "   Private model: %s at ε = %s per %s%s.\n   Guarantee: %s\n", s.private, num(s.eps), unit, also, wrap(g.String(), "   ", 100))
	name := map[string]string{"accuracy": "accuracy", "rmse": "RMSE"}[s.metric]
	fmt.Fprintf(w, "   %-8s private %.3f   non-private (%s) %.3f\n", name, p.metric, s.baseline, b.metric)
	return p, demoComparison{Method: s.private, Epsilon: s.eps, EpsilonUnit: unit, Guarantee: g, Metric: s.metric,
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

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("copying the plot: %w", err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		return fmt.Errorf("copying the plot: %w", err)
	}
	return nil
}
