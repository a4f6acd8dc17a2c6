package experiment

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunTopNPopulations(t *testing.T) {
	dataDir, out := t.TempDir(), t.TempDir()
	writeTopNData(t, dataDir)
	log := slog.New(slog.DiscardHandler)
	a := tinyTopN(log)
	a.Methods = []TopNMethod{{Method: "popularity"}, {Method: "dp-popularity"}, {Method: "dp-ease"}}
	b := a
	b.Name, b.SplitSeed = "topn-test-b", 2
	missing := a
	missing.Name = "topn-not-run"
	if err := RunTopNPopulations(context.Background(), []TopNSpec{a, b}, TopNSubset{}, dataDir, out); err != nil {
		t.Fatal(err)
	}
	// A population not run yet is named as such.
	if err := writePopulationsReport(out, []TopNSpec{a, b, missing}); err != nil {
		t.Fatal(err)
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### tiny top-N", "| dp-ease | 4 |", "fig-populations-recall20.png", "topn-test: dp-ease non-decreasing in ε within 0.005",
		"topn-test-b: dp-ease ≥ dp-popularity at every ε", "Not run yet: topn-not-run", "covered items", " ± "} {
		if !bytes.Contains(report, []byte(want)) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	for _, f := range []string{"fig-populations-recall20.png", "fig-populations-recall20.svg", "topn-test/results.csv", "topn-test-b/population.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// A subset runs in the populations that have its methods only; one
	// that none has is refused.
	c := a
	c.Name, c.Path, c.Methods = "topn-test-c", "none.tsv", []TopNMethod{{Method: "popularity"}}
	if err := RunTopNPopulations(context.Background(), []TopNSpec{a, c}, TopNSubset{Methods: []string{"dp-ease"}}, dataDir, out); err != nil {
		t.Errorf("a subset read a population without its methods: %v", err)
	}
	if err := RunTopNPopulations(context.Background(), []TopNSpec{a, c}, TopNSubset{Methods: []string{"ials"}}, dataDir, out); err == nil {
		t.Error("a method in no population's grid was taken")
	}
	if err := writePopulationsReport(t.TempDir(), []TopNSpec{a}); err == nil {
		t.Error("a report of no results was written")
	}
}

// TestPopulationChecks: the checks fail where the numbers do (a drop of
// more than 0.005, a cell below dp-popularity, a ratio short of its
// target) and pass where they hold.
func TestPopulationChecks(t *testing.T) {
	run := func(label string, eps, recall, cpu float64) *topNRun {
		return &topNRun{Label: label, Epsilon: eps, CPUSeconds: cpu, Metrics: map[string]map[string]float64{"test": {"recall@20": recall}}}
	}
	nan := math.NaN()
	p := populationResult{
		spec:    TopNSpec{Name: "topn-netflix-480k", Epsilons: []float64{1, 8, 16}},
		ms:      []TopNMethod{{Method: "ease"}, {Method: "ials"}, {Method: "dp-popularity"}, {Method: "dp-ease"}},
		private: map[string]bool{"dp-popularity": true, "dp-ease": true},
		runs: []*topNRun{run("ease", nan, 0.20, 50), run("ials", nan, 0.21, 900),
			run("dp-popularity", 1, 0.12, nan), run("dp-popularity", 8, 0.12, nan), run("dp-popularity", 16, 0.12, nan),
			run("dp-ease", 1, 0.191, nan), run("dp-ease", 8, 0.195, nan), run("dp-ease", 16, 0.11, nan)},
	}
	got := map[string]bool{}
	for _, c := range populationChecks(p) {
		got[c.what] = c.met
	}
	want := map[string]bool{
		"topn-netflix-480k: dp-ease non-decreasing in ε within 0.005": false, // 0.195 → 0.11
		"topn-netflix-480k: dp-ease ≥ dp-popularity at every ε":       false, // 0.11 < 0.12 at 16
		"topn-netflix-480k: dp-ease ε = 1 ≥ 0.95 × ease":              true,  // 0.191 ≥ 0.19
		"topn-netflix-480k: dp-ease ε = 8 ≥ 0.98 × ease":              false, // 0.195 < 0.196
		"topn-netflix-480k: ials ≥ ease":                              true,
		"topn-netflix-480k: ials training ≤ 800 CPU-s":                false,
	}
	for what, met := range want {
		if m, ok := got[what]; !ok || m != met {
			t.Errorf("%s: met %v (present %v), want %v", what, m, ok, met)
		}
	}
	if len(got) != len(want) {
		t.Errorf("checks %v, want %v", got, want)
	}
}

func TestPopulationReproductions(t *testing.T) {
	for _, name := range []string{"topn-populations", "topn-netflix-480k-core"} {
		r, err := LookupReproduction(name)
		if err != nil {
			t.Fatal(err)
		}
		if r.IsSweep() || len(r.Files()) == 0 {
			t.Errorf("%s: sweep %v, files %v", name, r.IsSweep(), r.Files())
		}
		if _, ok := r.CheckData(t.TempDir()).(*MissingDataError); !ok {
			t.Errorf("%s without data: no missing-data error", name)
		}
	}
	// The core grid shares the full grid's name (its noise seeds and results.csv).
	core, full := netflixCoreSpec(true), topNSpecs["topn-netflix-480k"](true)
	if core.Name != full.Name || core.SplitSeed != full.SplitSeed || len(core.Epsilons) != 2 || core.Seeds != 3 {
		t.Errorf("core grid %+v", core)
	}
	if got := strings.Join(topNPopulations, ","); !strings.Contains(got, "topn-jester1") {
		t.Errorf("populations %s", got)
	}
}

// TestPopulationNotRun: the table names the grid's cells without a run
// and those short of their seeds.
func TestPopulationNotRun(t *testing.T) {
	run := func(label string, eps float64, seed int) *topNRun {
		return &topNRun{Label: label, Epsilon: eps, Seed: seed, Metrics: map[string]map[string]float64{"test": {"recall@20": 0.1}}}
	}
	p := populationResult{
		spec:    TopNSpec{Name: "g", Epsilons: []float64{0.5, 1, 8}, Seeds: 2},
		ms:      []TopNMethod{{Method: "ease"}, {Method: "ials"}, {Method: "dp-popularity"}, {Method: "dp-ease"}, {Method: "dp-ials"}},
		private: map[string]bool{"dp-popularity": true, "dp-ease": true, "dp-ials": true},
		runs: []*topNRun{run("ease", math.NaN(), 0), run("dp-popularity", 0.5, 0), run("dp-popularity", 0.5, 1),
			run("dp-popularity", 1, 0), run("dp-popularity", 1, 1), run("dp-popularity", 8, 0), run("dp-popularity", 8, 1),
			run("dp-ease", 1, 0), run("dp-ease", 8, 0), run("dp-ease", 8, 1)},
	}
	want := "ials; dp-ease at ε = 0.5; dp-ease at ε = 1 (1 of 2 seeds); dp-ials"
	if got := strings.Join(p.notRun(), "; "); got != want {
		t.Errorf("not run: %s, want %s", got, want)
	}
}
