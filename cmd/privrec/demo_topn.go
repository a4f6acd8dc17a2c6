package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/plots"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/synth"
	"github.com/privrec/privrec/transform"
)

// The demo's first part: a film-streaming service's viewing histories
// (synthetic implicit feedback, generated on the spot), the most-popular
// list, non-private EASE and dp-ease at a few ε, Recall@20 on held-out
// viewers, one viewer's top 10 from the private and the non-private
// model, the guarantee in plain words and a plot of Recall@20 against ε.

// demoTopNConfig sizes the first part.
type demoTopNConfig struct {
	Users, Items int
	PerUser      int // mean films watched per viewer
	HeldOut      int // viewers held out and scored
	// Epsilons is the sweep (nil: only the shown model's ε).
	Epsilons []float64
	// Epsilon is the ε of the private model whose list is shown.
	Epsilon float64
	// Seed, when set, seeds the shown model's noise too (the sweep's is
	// always seeded).
	Seed uint64
	// Out is where the plot goes ("": no plot).
	Out string
	// Progress, when set, hears after each model trained and scored.
	Progress func(done, total int)
}

const (
	demoK         = 20 // Recall@demoK
	demoListLen   = 10
	demoDelta     = 1e-6
	demoPopSeed   = 1 // the population and its split
	demoPrivateMe = "dp-ease"
	demoBaseline  = "ease"
	demoFloor     = "popularity"
)

// demoTopNResult is the first part's --json output.
type demoTopNResult struct {
	Users        int    `json:"users"`
	Items        int    `json:"items"`
	Genres       int    `json:"genres"`
	Interactions int    `json:"interactions"`
	HeldOut      int    `json:"held_out_users"`
	Metric       string `json:"metric"`
	// Popularity and NonPrivate are the most-popular list's and ease's
	// Recall@20; Sweep dp-ease's at each ε (seeded noise).
	Popularity float64     `json:"popularity"`
	NonPrivate float64     `json:"non_private"`
	Sweep      []demoPoint `json:"sweep,omitempty"`
	// Private is the model whose list is shown, Plain its guarantee in
	// plain words.
	Private demoPoint  `json:"private"`
	Plain   string     `json:"guarantee_in_words"`
	Person  demoPerson `json:"person"`
	Plot    string     `json:"plot,omitempty"`
}

// demoPoint is one private model's Recall@20.
type demoPoint struct {
	Epsilon   float64           `json:"epsilon"`
	Recall    float64           `json:"recall"`
	Guarantee privacy.Guarantee `json:"guarantee"`
}

// demoPerson is one held-out viewer's two top-10 lists.
type demoPerson struct {
	User       string         `json:"user"`
	Watched    int            `json:"watched"`
	Genres     string         `json:"genres"`
	Private    []demoListItem `json:"private"`
	NonPrivate []demoListItem `json:"non_private"`
	Shared     int            `json:"on_both_lists"`
}

// demoListItem is a recommended film; Later marks one of the viewer's
// held-out films (she watched it; the model did not see it).
type demoListItem struct {
	Title string `json:"title"`
	Later bool   `json:"watched_later"`
}

// demoData is the generated population, split.
type demoData struct {
	cfg    synth.ImplicitConfig
	split  *transform.UserSplit
	decl   release.Declared
	genre  []int32
	titles []string
	n      int // interactions
}

// title is item id's title in the declared catalogue.
func (d *demoData) title(id string) string {
	if k, ok := d.decl.Catalogue.Index(id); ok && d.titles != nil {
		return d.titles[k]
	}
	return id
}

func demoPopulation(ctx context.Context, c demoTopNConfig) (*demoData, error) {
	cfg := synth.ImplicitDefaults()
	cfg.Users, cfg.Items, cfg.Rank = c.Users, c.Items, len(demoGenres)
	cfg.Interactions = int64(c.Users) * int64(c.PerUser)
	m, err := synth.ImplicitMatrix(ctx, cfg, demoPopSeed)
	if err != nil {
		return nil, fmt.Errorf("demo population: %w", err)
	}
	cat, genre, err := demoFilms(cfg, demoPopSeed)
	if err != nil {
		return nil, err
	}
	split, err := transform.SplitUsers(m, 0, c.HeldOut, 0.2, demoPopSeed)
	if err != nil {
		return nil, fmt.Errorf("demo population: %w", err)
	}
	// Declared public: the catalogue, the number of training viewers and
	// the scale of a "watched" event.
	decl := release.Declared{Catalogue: cat, Population: c.Users - c.HeldOut, Scale: &release.Scale{Min: 0, Max: 1}}
	return &demoData{cfg: cfg, split: split, decl: decl, genre: genre, titles: cat.Titles(), n: m.Len()}, nil
}

// demoTrainTopN trains a top-N method on the training viewers and scores
// it on the held-out ones.
func demoTrainTopN(ctx context.Context, d *demoData, name string, eps float64, src *noise.Source, seed uint64) (*model.Model, demoPoint, error) {
	cfg, err := methods.Configure(name, nil)
	if err != nil {
		return nil, demoPoint{}, err
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rel, err := methods.Train(ctx, name, cfg, release.Input{Ratings: d.split.Train, Declared: d.decl},
		methods.Env{Epsilon: eps, Delta: demoDelta, Noise: src, Rand: noise.Seeded(seed), Seed: seed, Log: quiet})
	if err != nil {
		return nil, demoPoint{}, err
	}
	m := rel.Model()
	rep, err := methods.EvaluateHeldOut(ctx, m, d.split.TestHistory, d.split.TestTargets, methods.HeldOutOptions{Ks: []int{demoK}})
	if err != nil {
		return nil, demoPoint{}, fmt.Errorf("%s: %w", name, err)
	}
	return m, demoPoint{Epsilon: eps, Recall: rep.Recall[demoK], Guarantee: rel.Guarantee}, nil
}

// demoStreaming runs the first part, printing to w.
func demoStreaming(ctx context.Context, w io.Writer, c demoTopNConfig) (*demoTopNResult, error) {
	d, err := demoPopulation(ctx, c)
	if err != nil {
		return nil, err
	}
	res := &demoTopNResult{Users: c.Users, Items: c.Items, Genres: len(demoGenres), Interactions: d.n, HeldOut: c.HeldOut,
		Metric: fmt.Sprintf("recall@%d", demoK)}
	fmt.Fprintf(w, "1. A film-streaming service: %s viewers, %s films in %d genres, %s films watched\n",
		thousands(c.Users), thousands(c.Items), len(demoGenres), thousands(d.n))
	fmt.Fprintf(w, "   (synthetic, generated now: a few films are watched by many, and each viewer has a favourite\n")
	fmt.Fprintf(w, "   genre). %s viewers are held out of training; each one's list is computed from 80 %% of her\n", thousands(c.HeldOut))
	fmt.Fprintf(w, "   history and scored on the other 20 %%: Recall@%d, the share of her hidden films in her top %d.\n\n", demoK, demoK)

	done, total := 0, 3+len(c.Epsilons)
	step := func() {
		if done++; c.Progress != nil {
			c.Progress(done, total)
		}
	}
	_, popPt, err := demoTrainTopN(ctx, d, demoFloor, 1, noise.Seeded(1), 1)
	if err != nil {
		return nil, err
	}
	step()
	ease, easePt, err := demoTrainTopN(ctx, d, demoBaseline, 1, noise.Seeded(1), 1)
	if err != nil {
		return nil, err
	}
	step()
	res.Popularity, res.NonPrivate = popPt.Recall, easePt.Recall
	for k, eps := range c.Epsilons {
		seed := uint64(100 + k)
		_, pt, err := demoTrainTopN(ctx, d, demoPrivateMe, eps, noise.Seeded(seed^0x6e6f697365), seed)
		if err != nil {
			return nil, err
		}
		res.Sweep = append(res.Sweep, pt)
		step()
	}
	src := noise.Secure()
	if c.Seed != 0 {
		src = noise.Seeded(c.Seed)
	}
	priv, privPt, err := demoTrainTopN(ctx, d, demoPrivateMe, c.Epsilon, src, 7)
	if err != nil {
		return nil, err
	}
	step()
	res.Private = privPt
	demoRecallTable(w, res)

	res.Plain = plainGuarantee(privPt.Guarantee, "viewer", "watched")
	fmt.Fprintf(w, "   The guarantee of %s at ε = %s, in plain words:\n     %s\n\n", demoPrivateMe, num(c.Epsilon), wrap(res.Plain, "   ", 92))

	person, err := demoLists(d, priv, ease)
	if err != nil {
		return nil, err
	}
	res.Person = person
	demoPrintLists(w, person, c.Epsilon)

	if c.Out != "" && len(res.Sweep) > 0 {
		png, err := demoPlot(c.Out, res)
		if err != nil {
			return nil, err
		}
		res.Plot = png
		fmt.Fprintf(w, "   Plot of Recall@%d against ε: %s\n", demoK, png)
	}
	return res, nil
}

// demoRecallTable prints Recall@20 of the three methods.
func demoRecallTable(w io.Writer, res *demoTopNResult) {
	fmt.Fprintf(w, "   Recall@%d on %s held-out viewers (higher is better):\n", demoK, thousands(res.HeldOut))
	fmt.Fprintf(w, "     %-34s %.3f\n", "most popular films (non-private)", res.Popularity)
	fmt.Fprintf(w, "     %-34s %.3f\n", "ease (non-private)", res.NonPrivate)
	pts := res.Sweep
	note := "seeded noise, one model per ε"
	if len(pts) == 0 {
		pts, note = []demoPoint{res.Private}, "one model"
	}
	var eps, rec []string
	for _, p := range pts {
		eps = append(eps, fmt.Sprintf("%-6s", num(p.Epsilon)))
		rec = append(rec, fmt.Sprintf("%-6.3f", p.Recall))
	}
	fmt.Fprintf(w, "     %-34s %s\n", "dp-ease (private) at ε =", strings.TrimSpace(strings.Join(eps, "  ")))
	fmt.Fprintf(w, "     %-34s %s\n", "", strings.TrimSpace(strings.Join(rec, "  ")))
	msg := "dp-ease: " + note + "."
	if gain := res.NonPrivate - res.Popularity; gain > 0 {
		var kept []string
		for _, p := range pts {
			kept = append(kept, fmt.Sprintf("%.0f %%", 100*(p.Recall-res.Popularity)/gain))
		}
		msg += fmt.Sprintf(" Of what ease gains over the most popular list, dp-ease keeps %s at ε = %s.",
			joinAnd(kept), joinAnd(epsList(pts)))
	}
	fmt.Fprintf(w, "   %s\n\n", wrap(msg, "   ", 94))
}

func epsList(pts []demoPoint) []string {
	var out []string
	for _, p := range pts {
		out = append(out, num(p.Epsilon))
	}
	return out
}

// joinAnd joins "a, b and c".
func joinAnd(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// plainGuarantee says a user-level guarantee in a newcomer's words when it
// is a proven one under the replace-one-user relation (what dp-ease
// gives); anything else is said as privacy.Guarantee says it.
func plainGuarantee(g privacy.Guarantee, who, did string) string {
	if g.Status != privacy.Proven || g.Unit != privacy.UnitUser || g.Relation != privacy.RelationUserReplace || g.Reproducible {
		return g.String()
	}
	s := fmt.Sprintf("replace everything one %s %s by anything else, and the probability of any published model "+
		"changes by at most a factor e^ε = %s", who, did, num(math.Exp(g.Epsilon)))
	if g.Delta > 0 {
		s += fmt.Sprintf(", except with probability δ = %.3g", g.Delta)
	}
	s += fmt.Sprintf(" (ε = %s; proven, user-level). The number of %ss and the catalogue are public; which films a %s %s is not. "+
		"The model holds film weights only: a %s's list is computed from it and her own history, on her side.",
		num(g.Epsilon), who, who, did, who)
	return s
}

// demoLists picks a held-out viewer and lists her top 10 from both models.
func demoLists(d *demoData, priv, base *model.Model) (demoPerson, error) {
	h, tg := d.split.TestHistory, d.split.TestTargets
	var u int32 = -1
	for v := range int32(h.NumUsers()) {
		if h.UserCount(v) >= 20 && tg.UserCount(v) >= 5 {
			u = v
			break
		}
	}
	if u < 0 {
		return demoPerson{}, fmt.Errorf("demo: no held-out viewer with 20 films in her history")
	}
	id := h.Users.Name(u)
	items, vals := h.UserRatings(u)
	later := map[string]bool{}
	tItems, _ := tg.UserRow(u)
	for _, it := range tItems {
		later[tg.Items.Name(it)] = true
	}
	p := demoPerson{User: id, Watched: len(items), Genres: demoGenreMix(h, u, d.genre)}
	list := func(m *model.Model) ([]demoListItem, map[string]bool, error) {
		st, err := m.FoldInUser(id, items, vals)
		if err != nil {
			return nil, nil, fmt.Errorf("demo: viewer %s: %w", id, err)
		}
		var out []demoListItem
		set := map[string]bool{}
		for _, r := range m.RecommendFor(st, demoListLen) {
			out = append(out, demoListItem{Title: d.title(r.Item), Later: later[r.Item]})
			set[r.Item] = true
		}
		return out, set, nil
	}
	var a, b map[string]bool
	var err error
	if p.Private, a, err = list(priv); err != nil {
		return p, err
	}
	if p.NonPrivate, b, err = list(base); err != nil {
		return p, err
	}
	for it := range a {
		if b[it] {
			p.Shared++
		}
	}
	return p, nil
}

// demoGenreMix is "17 sci-fi, 4 comedy, 3 drama, …" for user u of m.
func demoGenreMix(m *ratings.Matrix, u int32, genre []int32) string {
	count := make([]int, len(demoGenres))
	cols, _ := m.UserRow(u)
	for _, it := range cols {
		var j int
		fmt.Sscan(m.Items.Name(it), &j)
		if j >= 1 && j <= len(genre) {
			count[genre[j-1]]++
		}
	}
	order := make([]int, len(count))
	for g := range order {
		order[g] = g
	}
	sort.SliceStable(order, func(a, b int) bool { return count[order[a]] > count[order[b]] })
	var parts []string
	for _, g := range order[:3] {
		if count[g] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[g], demoGenres[g]))
		}
	}
	return strings.Join(parts, ", ") + ", …"
}

func demoPrintLists(w io.Writer, p demoPerson, eps float64) {
	fmt.Fprintf(w, "   Viewer %s (held out) watched %d films in her visible history: %s\n", p.User, p.Watched, p.Genres)
	left := fmt.Sprintf("dp-ease at ε = %s (private)", num(eps))
	fmt.Fprintf(w, "       %-44s %s\n", left, "ease (non-private)")
	mark := func(it demoListItem) string {
		if it.Later {
			return "✓ " + it.Title
		}
		return "  " + it.Title
	}
	for k := range max(len(p.Private), len(p.NonPrivate)) {
		var a, b string
		if k < len(p.Private) {
			a = mark(p.Private[k])
		}
		if k < len(p.NonPrivate) {
			b = mark(p.NonPrivate[k])
		}
		fmt.Fprintf(w, "   %2d. %-44s %s\n", k+1, a, b)
	}
	fmt.Fprintf(w, "   ✓: a film she watched that was hidden from the models. %d films are on both lists.\n\n", p.Shared)
}

// demoPlot draws Recall@20 against ε (log axis), with the non-private
// and most-popular lines, into dir/recall-vs-epsilon.png.
func demoPlot(dir string, res *demoTopNResult) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo plot: %w", err)
	}
	var xs, ys []float64
	for _, p := range res.Sweep {
		xs, ys = append(xs, p.Epsilon), append(ys, p.Recall)
	}
	f := plots.Figure{
		Title:  fmt.Sprintf("Recall@%d of %s held-out viewers (%s viewers × %s films, synthetic)", demoK, thousands(res.HeldOut), thousands(res.Users), thousands(res.Items)),
		XLabel: "ε of dp-ease (user-level, δ = 1e-6; log₂ scale)",
		YLabel: fmt.Sprintf("Recall@%d", demoK),
		LogX:   true,
		Series: []plots.Series{
			{Label: "dp-ease (private)", X: xs, Mean: ys},
			{Label: "ease (non-private)", X: []float64{xs[0]}, Mean: []float64{res.NonPrivate}, Flat: true},
			{Label: "most popular", X: []float64{xs[0]}, Mean: []float64{res.Popularity}, Flat: true},
		},
	}
	base := filepath.Join(dir, "recall-vs-epsilon")
	files, err := f.Save(base, "png")
	if err != nil {
		return "", fmt.Errorf("demo plot: %w", err)
	}
	return files[0], nil
}

// thousands writes n with thin spaces between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 10000 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteRune(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}
