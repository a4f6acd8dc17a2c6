package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs privrec with args and returns stdout, stderr and the exit status.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// writeRatings writes a small tab-separated ratings file: 30 users × 12
// items, user u rates item i when (u+i) % 3 != 0 with a rating that has a
// user and an item effect, so a bias model beats the global mean.
func writeRatings(t *testing.T, dir, name string, keep func(u, i int) bool) string {
	t.Helper()
	var b strings.Builder
	for u := 1; u <= 30; u++ {
		for i := 1; i <= 12; i++ {
			if (u+i)%3 == 0 || !keep(u, i) {
				continue
			}
			r := 1 + (u % 3) + (i % 3)
			fmt.Fprintf(&b, "%d\t%d\t%d\t%d\n", u, i, r, 880000000+u*100+i)
		}
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTrainEvalRecommend(t *testing.T) {
	dir := t.TempDir()
	held := func(u, i int) bool { return (u*7+i)%5 == 0 }
	train := writeRatings(t, dir, "train.tsv", func(u, i int) bool { return !held(u, i) })
	test := writeRatings(t, dir, "test.tsv", held)
	mpath := filepath.Join(dir, "bias.model")

	out, errs, code := runCLI(t, "train", "--data", train, "--format", "movielens-100k", "--method", "bias", "--damping", "0", "--out", mpath, "--json")
	if code != 0 {
		t.Fatalf("train exit %d: %s", code, errs)
	}
	var tr struct {
		Method    string
		Ratings   int
		Guarantee struct {
			Epsilon *float64
			Status  string
		}
	}
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatalf("train --json: %v\n%s", err, out)
	}
	// The report carries no exact counts of the private data.
	if tr.Method != "bias" || tr.Guarantee.Status != "none" || tr.Guarantee.Epsilon != nil || tr.Ratings != 0 {
		t.Errorf("train report = %+v", tr)
	}

	out, errs, code = runCLI(t, "eval", "--model", mpath, "--data", test, "--format", "movielens-100k", "--json")
	if code != 0 {
		t.Fatalf("eval exit %d: %s", code, errs)
	}
	var ev struct {
		N    int
		RMSE *float64
		NDCG *float64 `json:"ndcg_at_k"`
	}
	if err := json.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatal(err)
	}
	// Ratings are exactly 1 + user effect + item effect, so an undamped bias
	// model is close; the global mean is off by about 0.8 on average.
	if ev.N == 0 || ev.RMSE == nil || *ev.RMSE > 0.5 || ev.NDCG == nil {
		t.Errorf("eval = %+v (rmse %v)", ev, ev.RMSE)
	}

	out, errs, code = runCLI(t, "recommend", "--model", mpath, "--user", "4", "-k", "3", "--json")
	if code != 0 {
		t.Fatalf("recommend exit %d: %s", code, errs)
	}
	var rec struct {
		Recommendations []struct{ Item string }
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Recommendations) != 3 {
		t.Fatalf("got %d recommendations", len(rec.Recommendations))
	}
	for _, r := range rec.Recommendations {
		// user 4 rated, in training, every item i with (4+i)%3 != 0 that was not held out.
		var i int
		fmt.Sscan(r.Item, &i)
		if (4+i)%3 != 0 && !held(4, i) {
			t.Errorf("recommended item %s that user 4 rated in training", r.Item)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	train := writeRatings(t, dir, "train.tsv", func(u, i int) bool { return true })
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "Usage"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"unknown method", []string{"train", "--data", train, "--method", "nope", "--out", "x"}, 2, "unknown method"},
		{"missing out", []string{"train", "--data", train, "--method", "bias"}, 2, "--out is required"},
		{"missing model", []string{"eval", "--data", train}, 2, "--model is required"},
		{"bad scale", []string{"train", "--data", train, "--method", "bias", "--out", filepath.Join(dir, "m"), "--scale", "5:1"}, 2, "--scale"},
		{"missing file", []string{"train", "--data", filepath.Join(dir, "absent.tsv"), "--format", "tsv", "--method", "bias", "--out", filepath.Join(dir, "m")}, 1, "absent.tsv"},
		{"private method without --epsilon", []string{"train", "--data", train, "--method", "dp-bias", "--out", filepath.Join(dir, "m"), "--scale", "1:5"}, 2, "--epsilon is required for dp-bias"},
		{"negative --epsilon names the flag", []string{"train", "--data", train, "--method", "dp-bias", "--epsilon", "-1", "--out", filepath.Join(dir, "m")}, 2, "--epsilon -1: ε must be a finite number > 0"},
		{"bad --delta names the flag", []string{"train", "--data", train, "--method", "dp-bias", "--epsilon", "1", "--delta", "1", "--out", filepath.Join(dir, "m")}, 2, "--delta 1: δ must lie in [0, 1)"},
		{"no doubled method prefix", []string{"train", "--data", train, "--format", "movielens-100k", "--method", "dp-bias", "--epsilon", "1", "--scale", "1:5", "--user-state", filepath.Join(dir, "u"), "--out", filepath.Join(dir, "m")}, 1, "privrec train: dp-bias needs the item catalogue"},
		{"audit names the flag", []string{"audit", "--mechanism", "laplace", "--epsilon", "-1"}, 2, "--epsilon -1: ε must be a finite number > 0"},
		{"demo names the flag", []string{"demo", "--epsilon", "-1"}, 2, "--epsilon -1"},
		{"experiment without seed", []string{"train", "--data", train, "--format", "movielens-100k", "--method", "bias", "--out", filepath.Join(dir, "m"), "--experiment"}, 2, "--seed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d containing %q", code, errs, tc.code, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "m")); err == nil {
		t.Error("a failed command wrote a model")
	}
}

func TestHelpTeaches(t *testing.T) {
	for name := range commands {
		if name == "help" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			out, errs, code := runCLI(t, name, "--help")
			if code != 0 {
				t.Fatalf("%s --help exit %d: %s", name, code, errs)
			}
			if !strings.Contains(out+errs, "privrec") {
				t.Errorf("%s --help shows no example:\n%s%s", name, out, errs)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, _, code := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "privrec ") {
		t.Errorf("version: %d %q", code, out)
	}
	out, _, code = runCLI(t, "version", "--json")
	var v struct{ Version, Go string }
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version != version || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version --json: %d %q", code, out)
	}
}

// train --ledger: a second training on the same data is recorded as
// release 2 and the report composes both; a damaged ledger refuses the
// run before the model is written.
func TestTrainLedgerCountsReruns(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(u, i int) bool { return true })
	items := filepath.Join(dir, "items.txt")
	if err := os.WriteFile(items, []byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(dir, "ledger.json")
	args := func(out, led string) []string {
		return []string{"train", "--data", data, "--format", "movielens-100k", "--method", "dp-popularity", "--items", items,
			"--epsilon", "1", "--out", filepath.Join(dir, out), "--ledger", led, "--json"}
	}
	var rel []int
	for _, out := range []string{"a.model", "b.model"} {
		stdout, errs, code := runCLI(t, args(out, ledger)...)
		if code != 0 {
			t.Fatalf("train exit %d: %s", code, errs)
		}
		var rep struct {
			Ledger struct {
				Release  int
				Releases int
				Total    struct{ Rho float64 }
			}
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		rel = append(rel, rep.Ledger.Release)
		if rep.Ledger.Release == 2 && !(rep.Ledger.Total.Rho > 0.048) {
			t.Errorf("two releases of ε = 1 compose to ρ = %v", rep.Ledger.Total.Rho)
		}
	}
	if rel[0] != 1 || rel[1] != 2 {
		t.Errorf("releases numbered %v, want [1 2]", rel)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{"), 0o644)
	_, errs, code := runCLI(t, args("c.model", bad)...)
	if code == 0 || !strings.Contains(errs, "damaged") {
		t.Errorf("a damaged ledger: exit %d, %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.model")); err == nil {
		t.Error("the model was written although the ledger refused the release")
	}
}
