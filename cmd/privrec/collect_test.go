package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/ldp"
)

// writeLines writes one line per string.
func writeLines(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// catalogueFile lists items 1…13 of writeRatings' data (item 13 is never
// rated).
func catalogueFile(t *testing.T, dir string) string {
	var ids []string
	for i := 1; i <= 13; i++ {
		ids = append(ids, fmt.Sprint(i))
	}
	return writeLines(t, dir, "items.txt", ids...)
}

// TestCollectTrainEval: collect a file as the clients would, train on the
// collect file itself (ratingio skips its '#' header; the header gives the
// mechanism, ε, scale and population), evaluate on the true ratings.
func TestCollectTrainEval(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(int, int) bool { return true })
	items := catalogueFile(t, dir)
	for _, mech := range []string{"laplace", "rr"} {
		z := filepath.Join(dir, mech+".tsv")
		out, errb, code := runCLI(t, "collect", "--mechanism", mech, "--epsilon", "4", "--data", data, "--format", "tsv",
			"--scale", "1:5", "--items", items, "--seed", "3", "--experiment", "--out", z, "--json")
		if code != 0 {
			t.Fatalf("collect %s: exit %d: %s", mech, code, errb)
		}
		var rep struct {
			Reported, Users, Items int64
			Levels                 int
			Sampler                string
			Guarantee              struct{ Epsilon float64 }
			Simulation             struct{ Kept, Invented int64 }
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("collect --json: %v\n%s", err, out)
		}
		wantLevels := map[string]int{"laplace": 0, "rr": 5}[mech]
		if rep.Reported != rep.Simulation.Kept+rep.Simulation.Invented || rep.Levels != wantLevels || rep.Guarantee.Epsilon < 4 ||
			rep.Users != 30 || rep.Items != 13 || rep.Sampler != "fixed-time" {
			t.Errorf("collect %s report %+v", mech, rep)
		}
		mdl := filepath.Join(dir, mech+".model")
		args := []string{"train", "--data", z, "--format", "tsv", "--method", "ldp-" + mech, "--debias", "--seed", "1", "--out", mdl, "--json"}
		if mech == "rr" {
			// Named explicitly, with the catalogue; for laplace the --data
			// file's own header is used.
			args = append(args, "--collected", z, "--items", items)
		}
		out, errb, code = runCLI(t, args...)
		if code != 0 {
			t.Fatalf("train ldp-%s on the collect file: exit %d: %s", mech, code, errb)
		}
		var tr struct {
			Guarantee struct {
				Notion, Unit, Relation string
				Epsilon                float64
			}
			PerRatingEpsilon float64 `json:"per_rating_epsilon"`
			Clients          int
			Shrink           struct{ Weights []float64 }
		}
		if err := json.Unmarshal([]byte(out), &tr); err != nil {
			t.Fatalf("train --json: %v\n%s", err, out)
		}
		// Per rating: the cell's 4 and the mean report's 13·4/7 (the
		// default --mean-epsilon: an eighth of the report); per user: 13
		// cells and the mean report, 13·4·8/7.
		if tr.Guarantee.Notion != "local" || tr.Guarantee.Unit != "user" || tr.Guarantee.Relation == "" || tr.PerRatingEpsilon < 4+52.0/7*(1-1e-12) ||
			tr.Guarantee.Epsilon < 52*8/7.0*(1-1e-12) || tr.Guarantee.Epsilon > 52*8/7.0*(1+1e-9) || tr.Clients != 30 || tr.Shrink.Weights == nil {
			t.Errorf("train ldp-%s report %s", mech, out)
		}
		if _, errb, code := runCLI(t, "eval", "--model", mdl, "--data", data, "--format", "tsv"); code != 0 {
			t.Fatalf("eval ldp-%s: exit %d: %s", mech, code, errb)
		}
	}
}

// TestCollectRefusesRawRatings (defect 3): ldp-laplace and ldp-rr refuse a
// --data file without a collect header instead of calling raw ratings
// "proven local DP" with ε from --epsilon.
// TestCollectCountsOnlyInExperiments (issue 23, defect 8): the exact
// counts of the true ratings (ratings, kept, removed, invented, outside
// the catalogue) are printed only for a seeded --experiment, labelled as
// not private; a real collection prints the facts of the reports only.
func TestCollectCountsOnlyInExperiments(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(int, int) bool { return true })
	items := catalogueFile(t, dir)
	z := filepath.Join(dir, "z.tsv")
	for _, c := range []struct {
		name       string
		extra      []string
		json, want bool
	}{
		{"private, JSON", nil, true, false},
		{"private, text", nil, false, false},
		{"experiment, JSON", []string{"--seed", "3", "--experiment"}, true, true},
		{"experiment, text", []string{"--seed", "3", "--experiment"}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"collect", "--mechanism", "rr", "--epsilon", "2", "--data", data, "--format", "tsv",
				"--scale", "1:5", "--items", items, "--out", z}, c.extra...)
			if c.json {
				args = append(args, "--json")
			}
			out, errb, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			if c.json {
				var rep map[string]any
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatal(err)
				}
				sim, ok := rep["simulation"].(map[string]any)
				if ok != c.want || (ok && (sim["private"] != false || sim["kept"] == nil)) {
					t.Fatalf("simulation counts %v (want them: %v)", rep["simulation"], c.want)
				}
				if rep["reported"] == nil || rep["users"] != float64(30) {
					t.Fatalf("the facts of the reports are missing: %v", rep)
				}
				return
			}
			if got := strings.Contains(out, "kept"); got != c.want || (got && !strings.Contains(out, "NOT PRIVATE")) {
				t.Fatalf("text output (counts wanted: %v):\n%s", c.want, out)
			}
		})
	}
}

func TestCollectRefusesRawRatings(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(int, int) bool { return true })
	for _, m := range []string{"ldp-laplace", "ldp-rr"} {
		_, errb, code := runCLI(t, "train", "--data", data, "--format", "tsv", "--scale", "1:5", "--method", m, "--epsilon", "2", "--out", filepath.Join(dir, "m.model"))
		if code == 0 || !strings.Contains(errb, "privrec collect") {
			t.Errorf("train %s on raw ratings: exit %d, stderr %q; want a refusal naming privrec collect", m, code, errb)
		}
	}
}

// TestCollectHeaderDeclared (defect 5): the header holds declared facts
// only. With the clients declared (--users), removing the only rating of
// a client, or of an item, does not change the header; the scale is the
// declared one even when the data use a narrower range.
func TestCollectHeaderDeclared(t *testing.T) {
	dir := t.TempDir()
	items := writeLines(t, dir, "items.txt", "a", "b", "rare")
	users := writeLines(t, dir, "users.txt", "ann", "bob", "solo")
	full := writeLines(t, dir, "full.tsv", "ann\ta\t2", "ann\tb\t3", "bob\ta\t3", "solo\trare\t4")
	less := writeLines(t, dir, "less.tsv", "ann\ta\t2", "ann\tb\t3", "bob\ta\t3")
	head := func(data string) string {
		z := filepath.Join(dir, "z.tsv")
		if _, errb, code := runCLI(t, "collect", "--mechanism", "rr", "--epsilon", "1", "--data", data, "--format", "tsv", "--cols", "user=0,item=1,rating=2",
			"--scale", "1:5", "--items", items, "--users", users, "--seed", "1", "--experiment", "--out", z); code != 0 {
			t.Fatalf("collect %s: exit %d: %s", data, code, errb)
		}
		b, err := os.ReadFile(z)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.SplitN(string(b), "\n", 6)[:5], "\n")
	}
	a, b := head(full), head(less)
	if a != b {
		t.Errorf("headers differ when solo's only rating (and item rare's) is removed:\n%s\nvs\n%s", a, b)
	}
	if !strings.Contains(a, "scale_min=1 scale_max=5 levels=5 users=3 items=3") {
		t.Errorf("header %q does not carry the declared scale, clients and catalogue", a)
	}
	// A user with ratings who is not a declared client is refused.
	notListed := writeLines(t, dir, "more.tsv", "ann\ta\t2", "eve\ta\t3")
	if _, errb, code := runCLI(t, "collect", "--mechanism", "rr", "--epsilon", "1", "--data", notListed, "--format", "tsv", "--cols", "user=0,item=1,rating=2",
		"--scale", "1:5", "--items", items, "--users", users, "--out", filepath.Join(dir, "y.tsv")); code == 0 || !strings.Contains(errb, "eve") {
		t.Errorf("collect with a user outside --users: exit %d, %s", code, errb)
	}
}

func TestCollectUsage(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(int, int) bool { return true })
	items := catalogueFile(t, dir)
	z := filepath.Join(dir, "z.tsv")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--epsilon", "1", "--data", data, "--out", z, "--scale", "1:5", "--items", items}, "--mechanism"},
		{[]string{"--mechanism", "rr", "--data", data, "--out", z, "--scale", "1:5", "--items", items}, "--epsilon"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--scale", "1:5", "--items", items}, "--out"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--seed", "2", "--scale", "1:5", "--items", items}, "--experiment"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--scale", "5:1", "--items", items}, "--scale"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--items", items}, "--scale"},
		{[]string{"--mechanism", "laplace", "--epsilon", "1", "--data", data, "--out", z, "--scale", "1:5"}, "--items"},
		{[]string{"--mechanism", "laplace", "--epsilon", "1", "--data", data, "--out", z, "--scale", "1:5", "--items", items, "--levels", "5"}, "--levels"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--scale", "0.5:5", "--items", items}, "--levels"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--scale", "1:5", "--items", items, "--mean-epsilon", "-1"}, "--mean-epsilon"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--scale", "1:5", "--items", items, "--mean-epsilon", "NaN"}, "--mean-epsilon"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--scale", "1:5", "--items", items, "--mean-epsilon", "1e9"}, "--mean-epsilon"},
	} {
		_, errb, code := runCLI(t, append([]string{"collect", "--format", "tsv"}, tc.args...)...)
		if code != 2 || !strings.Contains(errb, tc.want) {
			t.Errorf("collect %v: exit %d, stderr %q; want exit 2 mentioning %s", tc.args, code, errb, tc.want)
		}
		if _, err := os.Stat(z); err == nil {
			t.Fatalf("collect %v wrote %s", tc.args, z)
		}
	}
	// --mean-epsilon 0: no mean report, the header says none.
	if _, errb, code := runCLI(t, "collect", "--format", "tsv", "--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z,
		"--scale", "1:5", "--items", items, "--mean-epsilon", "0"); code != 0 {
		t.Fatalf("--mean-epsilon 0: exit %d: %s", code, errb)
	}
	if b, err := os.ReadFile(z); err != nil || strings.Contains(string(b), "mean_epsilon") || strings.Contains(string(b), ldp.MeanPrefix) {
		t.Errorf("--mean-epsilon 0 wrote mean reports (%v)", err)
	}
}

// TestAuditMethodLDP: `privrec audit --method ldp-rr` simulates the devices
// (each run collects the side's ratings, then trains on the reports) and
// finds no violation. The lower bound is at confidence 1 − 10⁻⁶ (false
// failure ≤ 10⁻⁶); un-noised differences and canaries are deterministic.
func TestAuditMethodLDP(t *testing.T) {
	out, errb, code := runCLI(t, "audit", "--method", "ldp-rr", "--epsilon", "1", "--debias", "--max-rank", "4",
		"--runs", "10", "--samples", "30", "--confidence", "0.999999", "--seed", "11", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb, out)
	}
	var rep struct {
		Relation  string
		Violation bool
		Noised    int `json:"noised_fields"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Violation || !strings.Contains(rep.Relation, "report") || rep.Noised == 0 {
		t.Errorf("audit of ldp-rr: %s", out)
	}
}

// TestCollectWarnsUselessEpsilon: a per-rating ε too small for any
// collection is collected as asked, with a warning saying what it costs.
func TestCollectWarnsUselessEpsilon(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(int, int) bool { return true })
	items := catalogueFile(t, dir)
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	for _, tc := range []struct {
		eps  string
		warn bool
	}{{"0.001", true}, {"2", false}} {
		logs.Reset()
		_, errb, code := runCLI(t, "collect", "--mechanism", "rr", "--epsilon", tc.eps, "--data", data, "--format", "tsv",
			"--scale", "1:5", "--items", items, "--out", filepath.Join(dir, "c.tsv"))
		if code != 0 {
			t.Fatalf("collect at ε = %s: %s", tc.eps, errb)
		}
		got := strings.Contains(logs.String(), "almost pure noise")
		if got != tc.warn || (got && !strings.Contains(logs.String(), "per report")) {
			t.Errorf("ε = %s: warning %v, want %v: %s", tc.eps, got, tc.warn, logs.String())
		}
	}
}
