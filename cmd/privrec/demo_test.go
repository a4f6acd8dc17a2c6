package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/synth"
)

// The demo on its smallest population: the streaming part leads (three
// methods, a person's two lists, the guarantee in plain words, one plot),
// the seed papers' part follows, and the numbers are sane where the truth
// is known: on a population with genre taste EASE beats the most-popular
// list clearly, and dp-ease at ε = 8 beats it too. Seeded noise: the
// figures are fixed: at 5 000 viewers × 300 films, Recall@20 0.372
// (popular), 0.516 (ease), 0.476 (dp-ease at ε = 8) — well clear of the
// 0.05 margins asserted.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	var prog bytes.Buffer
	oldOut, oldTerm := progressOut, progressTerminal
	t.Cleanup(func() { progressOut, progressTerminal = oldOut, oldTerm })
	progressOut, progressTerminal = &prog, func() bool { return true }
	stdout, stderr, code := runCLI(t, "demo", "--users", "5000", "--films", "300", "--out", dir, "--seed", "3")
	progressTerminal = func() bool { return false }
	if !strings.Contains(prog.String(), "privrec demo: models: iteration 8/8") {
		t.Errorf("progress on a terminal: %q", prog.String())
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"1. A film-streaming service: 5000 viewers, 300 films in 16 genres",
		"most popular films (non-private)", "ease (non-private)", "dp-ease (private) at ε =", "0.5     1       2       4       8",
		"Viewer ", "dp-ease at ε = 1 (private)", "✓: a film she watched", "recall-vs-epsilon.png",
		"2. The seed papers", "ldp-rr at ε = 2 per rating and her mean rating at ε = 16: ε = 276 per person",
		"dpsvd at ε = 1 per user", "seeded noise"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	if i, j := strings.Index(stdout, "film-streaming"), strings.Index(stdout, "seed papers"); i < 0 || j < i {
		t.Error("the streaming part does not lead")
	}
	// One plot, and nothing else written.
	files, _ := os.ReadDir(dir)
	if len(files) != 1 || files[0].Name() != "recall-vs-epsilon.png" {
		t.Errorf("--out holds %v, want the one plot", files)
	}
	if st, err := os.Stat(filepath.Join(dir, "recall-vs-epsilon.png")); err != nil || st.Size() < 5000 {
		t.Errorf("plot: %v", err)
	}

	stdout, stderr, code = runCLI(t, "demo", "--users", "5000", "--films", "300", "--no-sweep", "--epsilon", "8", "--seed", "3", "--json")
	if code != 0 {
		t.Fatalf("demo --json: exit %d: %s", code, stderr)
	}
	var res demoResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, stdout)
	}
	s := res.Streaming
	if s == nil || len(s.Sweep) != 0 || s.Users != 5000 || s.Items != 300 || s.HeldOut != 2000 || s.Metric != "recall@20" || res.Plot != "" {
		t.Fatalf("demo --json --no-sweep: %+v", s)
	}
	if !(s.NonPrivate > s.Popularity+0.05) || !(s.Private.Recall > s.Popularity+0.05) {
		t.Errorf("popularity %.3f, ease %.3f, dp-ease at ε = 8 %.3f", s.Popularity, s.NonPrivate, s.Private.Recall)
	}
	g := s.Private.Guarantee
	if g.Status != privacy.Proven || g.Unit != privacy.UnitUser || g.Relation != privacy.RelationUserReplace ||
		math.Abs(g.Epsilon-8) > 1e-6 || !g.Reproducible {
		t.Errorf("the shown model's guarantee: %+v", g)
	}
	p := s.Person
	if len(p.Private) != 10 || len(p.NonPrivate) != 10 || p.Watched < 20 || !strings.Contains(p.Private[0].Title, "(") {
		t.Errorf("lists: %+v", p)
	}
	r := res.Restaurants
	if r.Method != "ldp-rr" || r.EpsilonUnit != "rating" || r.Epsilon != 2 || math.Abs(r.Guarantee.Epsilon-276) > 1e-6 || r.NonPrivate == nil || res.Synthetic.Method == "" {
		t.Errorf("seed papers: %+v %+v", r, res.Synthetic)
	}

	for _, bad := range [][]string{{"--users", "100"}, {"--films", "20"}, {"--epsilon", "0"}} {
		_, stderr, code = runCLI(t, append([]string{"demo"}, bad...)...)
		if code != 2 || !strings.Contains(stderr, bad[0]+" "+bad[1]) {
			t.Errorf("%v: exit %d, %s", bad, code, stderr)
		}
	}
}

// The plain-words guarantee is given for what dp-ease proves and only for
// that; anything else is said as the Guarantee says it.
func TestPlainGuarantee(t *testing.T) {
	g := privacy.Guarantee{Epsilon: 1, Delta: 1e-6, Rho: 0.02, Unit: privacy.UnitUser, Notion: privacy.Joint,
		Status: privacy.Proven, Relation: privacy.RelationUserReplace}
	s := plainGuarantee(g, "viewer", "watched")
	for _, want := range []string{"replace everything one viewer watched", "e^ε = 2.718", "δ = 1e-06", "(ε = 1; proven, user-level)"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	for _, h := range []func(*privacy.Guarantee){
		func(g *privacy.Guarantee) { g.Unit = privacy.UnitEntry },
		func(g *privacy.Guarantee) { g.Status = privacy.AsClaimed },
		func(g *privacy.Guarantee) { g.Relation = privacy.RelationUserAddRemove },
		func(g *privacy.Guarantee) { g.Reproducible = true },
	} {
		o := g
		h(&o)
		if got := plainGuarantee(o, "viewer", "watched"); got != o.String() {
			t.Errorf("%+v said as %q", o, got)
		}
	}
}

// The generated catalogue: one distinct title per film, each with its
// genre, for the demo's population.
func TestDemoFilms(t *testing.T) {
	cfg := synth.ImplicitDefaults()
	cfg.Items, cfg.Rank = 5000, len(demoGenres)
	cat, genre, err := demoFilms(cfg, demoPopSeed)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for j, title := range cat.Titles() {
		if seen[title] {
			t.Fatalf("title %q twice", title)
		}
		seen[title] = true
		if !strings.HasSuffix(title, "("+demoGenres[genre[j]]+")") || !strings.HasPrefix(title, "The ") {
			t.Fatalf("film %d: %q (genre %s)", j, title, demoGenres[genre[j]])
		}
	}
	if len(demoNouns) != len(demoGenres) {
		t.Fatalf("%d genres, %d noun lists", len(demoGenres), len(demoNouns))
	}
	cfg.Rank = 8
	if _, _, err := demoFilms(cfg, 1); err == nil {
		t.Error("8 genres named by a 16-genre list")
	}
}
