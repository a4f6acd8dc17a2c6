package experiment

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/release"
)

// writeTopNData writes 150 users × 30 items in three taste groups (a user
// of group g gives 5 to the items of group g she rates, 2 or 4 to others)
// and a catalogue of the 30 items plus two nobody rated.
func writeTopNData(t *testing.T, dir string) {
	t.Helper()
	var b, c strings.Builder
	for u := range 150 {
		for i := range 30 {
			if (u*7+i*3)%4 == 0 {
				continue
			}
			r := 2 + 2*((u+i)%2)
			if i%3 == u%3 {
				r = 5
			}
			fmt.Fprintf(&b, "u%d\ti%d\t%d\n", u, i, r)
		}
	}
	for i := range 32 {
		fmt.Fprintf(&c, "i%d\tItem %d\n", i, i)
	}
	for name, text := range map[string]string{"ratings.tsv": b.String(), "items.tsv": c.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func tinyTopN(log *slog.Logger) TopNSpec {
	return TopNSpec{Name: "topn-test", Title: "tiny top-N", Path: "ratings.tsv", Format: "tsv", Items: "items.tsv",
		Scale: release.Scale{Min: 1, Max: 5}, Positive: 4, MinPositives: 5, Val: 10, Test: 20, SplitSeed: 1,
		Methods:  []TopNMethod{{Method: "als", Params: map[string]any{"rank": 3}}, {Method: "dp-bias"}, {Method: "no-such-method"}},
		Epsilons: []float64{1, 4}, Seeds: 2, Ks: []int{5}, Jobs: 2, Log: log}
}

func TestRunTopN(t *testing.T) {
	dataDir, out := t.TempDir(), t.TempDir()
	writeTopNData(t, dataDir)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := RunTopN(context.Background(), tinyTopN(log), dataDir, out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "method=no-such-method") {
		t.Errorf("no note of the skipped method in the log:\n%s", logs.String())
	}
	names := topNMetricNames([]int{5, 20, 100})
	runs, err := readTopNResults(filepath.Join(out, "results.csv"), names)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1+2*2 { // als once, dp-bias at two ε × two seeds
		t.Fatalf("%d runs recorded", len(runs))
	}
	for _, r := range runs {
		for _, set := range topNSets {
			for _, n := range names {
				v := r.Metrics[set][n]
				if v < 0 || (!strings.HasPrefix(n, "popularity") && v > 1) {
					t.Fatalf("%s %s %s = %v", r.Label, set, n, v)
				}
			}
		}
		if r.Metrics["test"]["recall@20"] == 0 {
			t.Errorf("%s found nothing on planted tastes", r.Label)
		}
	}
	// The first seed and the non-private model trained alone (their
	// CPU-seconds recorded), the second seed beside another (not); every
	// run keeps its model's report.
	for _, r := range runs {
		if timed := r.Seed == 0; timed == math.IsNaN(r.CPUSeconds) || (timed && r.CPUSeconds < 0) {
			t.Errorf("%s ε = %g seed %d: CPU-seconds %v", r.Label, r.Epsilon, r.Seed, r.CPUSeconds)
		}
		if !strings.HasPrefix(r.Plan, "{") {
			t.Errorf("%s ε = %g seed %d: plan %q", r.Label, r.Epsilon, r.Seed, r.Plan)
		}
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Recall@20, test users", "### NDCG@100, validation users", "| dp-bias |", "| als |", "skipped: no-such-method", "fig-recall20.png", " ± "} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	for _, f := range []string{"fig-recall20.png", "fig-recall20.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// Re-running resumes: nothing is trained again, the files are the same.
	before, _ := os.ReadFile(filepath.Join(out, "results.csv"))
	logs.Reset()
	if err := RunTopN(context.Background(), tinyTopN(log), dataDir, out); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(out, "results.csv"))
	if !bytes.Equal(before, after) || strings.Contains(logs.String(), "top-N run") {
		t.Fatal("the second run trained again")
	}
	// A torn last line (a crash mid-write) is dropped and that run redone.
	os.WriteFile(filepath.Join(out, "results.csv"), before[:len(before)-10], 0o644)
	if err := RunTopN(context.Background(), tinyTopN(log), dataDir, out); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(out, "results.csv")); strings.Count(string(again), "\n") != strings.Count(string(before), "\n") {
		t.Fatalf("after a torn line: %d lines, want %d", strings.Count(string(again), "\n"), strings.Count(string(before), "\n"))
	}
	// A file written before the CPU-seconds and plan columns is read
	// (both unknown) and rewritten in the current layout before a run is
	// appended to it.
	var old bytes.Buffer
	for _, line := range strings.SplitAfter(strings.TrimSpace(string(before)), "\n")[:3] {
		rec, _ := csv.NewReader(strings.NewReader(line)).Read()
		w := csv.NewWriter(&old)
		w.Write(rec[:len(rec)-2])
		w.Flush()
	}
	os.WriteFile(filepath.Join(out, "results.csv"), old.Bytes(), 0o644)
	if err := RunTopN(context.Background(), tinyTopN(log), dataDir, out); err != nil {
		t.Fatal(err)
	}
	upgraded, err := readTopNResults(filepath.Join(out, "results.csv"), names)
	if err != nil || len(upgraded) != len(runs) || !math.IsNaN(upgraded[0].CPUSeconds) || upgraded[0].Plan != "" {
		t.Fatalf("upgraded results: %d runs (want %d), first %+v, err %v", len(upgraded), len(runs), upgraded[0], err)
	}
	// Other cut-offs do not mix with the recorded runs.
	other := tinyTopN(log)
	other.Ks = []int{7}
	if err := RunTopN(context.Background(), other, dataDir, out); err == nil || !strings.Contains(err.Error(), "header") {
		t.Fatalf("other cut-offs: %v", err)
	}
}

func TestRunTopNErrors(t *testing.T) {
	dataDir := t.TempDir()
	writeTopNData(t, dataDir)
	log := slog.New(slog.DiscardHandler)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		edit func(*TopNSpec)
		ctx  context.Context
		msg  string
	}{
		{"no registered method", func(s *TopNSpec) { s.Methods = []TopNMethod{{Method: "nope"}} }, context.Background(), "none of the methods"},
		{"missing file", func(s *TopNSpec) { s.Path = "none.tsv" }, context.Background(), "none.tsv"},
		{"missing catalogue", func(s *TopNSpec) { s.Items = "none-items.tsv" }, context.Background(), "none-items.tsv"},
		{"too many held-out users", func(s *TopNSpec) { s.Val, s.Test = 100, 100 }, context.Background(), "cannot hold out"},
		{"bad parameter", func(s *TopNSpec) { s.Methods = []TopNMethod{{Method: "als", Params: map[string]any{"no_such": 1}}} }, context.Background(), "no_such"},
		{"cancelled", func(s *TopNSpec) {}, cancelled, "canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tinyTopN(log)
			tc.edit(&s)
			err := RunTopN(tc.ctx, s, dataDir, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one naming %q", err, tc.msg)
			}
		})
	}
}

func TestTopNReproductions(t *testing.T) {
	for _, name := range []string{"topn-ml1m", "topn-ml100k"} {
		r, err := LookupReproduction(name)
		if err != nil {
			t.Fatal(err)
		}
		if r.IsSweep() || len(r.Files()) < 2 {
			t.Errorf("%s: sweep %v, files %v", name, r.IsSweep(), r.Files())
		}
		err = r.CheckData(t.TempDir())
		if me, ok := err.(*MissingDataError); !ok || me.Hint == "" {
			t.Errorf("%s without data: %v", name, err)
		}
	}
}

// TestTopNSubsetJobs: a subset keeps the jobs of its methods, ε and
// seeds (ε and seeds restricting the private methods only) and refuses
// what the grid lacks.
func TestTopNSubsetJobs(t *testing.T) {
	s := TopNSpec{Name: "g", Methods: []TopNMethod{{Method: "popularity"}, {Method: "dp-popularity"}, {Method: "dp-ease"}},
		Epsilons: []float64{0.5, 1, 8}, Seeds: 3}
	private := map[string]bool{"dp-popularity": true, "dp-ease": true}
	jobs := func(only TopNSubset) string {
		s.Only = only
		alone, pooled := s.topNJobs(s.Methods, private)
		var out []string
		for _, j := range append(alone, pooled...) {
			out = append(out, fmt.Sprintf("%s/%g/%d", j.m.label(), j.eps, j.seed))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name string
		only TopNSubset
		want string
	}{
		{"methods", TopNSubset{Methods: []string{"popularity", "dp-ease"}, Epsilons: []float64{1}},
			"popularity/NaN/0 dp-ease/1/0 dp-ease/1/1 dp-ease/1/2"},
		{"first seed", TopNSubset{Methods: []string{"dp-ease"}, Seeds: []int{0}}, "dp-ease/0.5/0 dp-ease/1/0 dp-ease/8/0"},
		{"other seeds, pooled", TopNSubset{Epsilons: []float64{8}, Seeds: []int{1, 2}},
			"popularity/NaN/0 dp-popularity/8/1 dp-popularity/8/2 dp-ease/8/1 dp-ease/8/2"},
	} {
		if got := jobs(tc.only); got != tc.want {
			t.Errorf("%s: jobs %s, want %s", tc.name, got, tc.want)
		}
		if err := tc.only.check(s); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if got := strings.Count(jobs(TopNSubset{}), " ") + 1; got != 1+2*3*3 {
		t.Errorf("the whole grid: %d jobs", got)
	}
	for _, bad := range []TopNSubset{{Methods: []string{"ials"}}, {Epsilons: []float64{2}}, {Seeds: []int{3}}, {Seeds: []int{-1}}} {
		if err := bad.check(s); err == nil {
			t.Errorf("%+v: not refused", bad)
		}
	}
}

// TestRunTopNSubset: a run of part of the grid records only that part; a
// later run of the whole grid resumes from it, training only the rest;
// a subset outside the grid is refused before anything is read.
func TestRunTopNSubset(t *testing.T) {
	dataDir, out := t.TempDir(), t.TempDir()
	writeTopNData(t, dataDir)
	log := slog.New(slog.DiscardHandler)
	s := tinyTopN(log)
	s.Only = TopNSubset{Methods: []string{"dp-bias"}, Epsilons: []float64{4}, Seeds: []int{1}}
	if err := RunTopN(context.Background(), s, dataDir, out); err != nil {
		t.Fatal(err)
	}
	names := topNMetricNames([]int{5, 20, 100})
	runs, err := readTopNResults(filepath.Join(out, "results.csv"), names)
	if err != nil || len(runs) != 1 || runs[0].key() != "dp-bias|4|1" {
		t.Fatalf("subset run recorded %d runs (err %v)", len(runs), err)
	}
	first := *runs[0]
	// Nothing left of the subset: the report is rewritten without the data.
	if err := RunTopN(context.Background(), s, t.TempDir(), out); err != nil {
		t.Fatalf("a finished subset read the data again: %v", err)
	}
	s.Only = TopNSubset{}
	if err := RunTopN(context.Background(), s, dataDir, out); err != nil {
		t.Fatal(err)
	}
	if runs, err = readTopNResults(filepath.Join(out, "results.csv"), names); err != nil || len(runs) != 1+2*2 {
		t.Fatalf("after the whole grid: %d runs (err %v)", len(runs), err)
	}
	if runs[0].key() != first.key() || runs[0].Metrics["test"]["recall@20"] != first.Metrics["test"]["recall@20"] {
		t.Errorf("the subset's run was not kept: %+v", runs[0])
	}
	s.Only = TopNSubset{Epsilons: []float64{2}}
	if err := RunTopN(context.Background(), s, "no-such-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), "ε = 2 is not in the grid") {
		t.Errorf("ε outside the grid: %v", err)
	}
}
