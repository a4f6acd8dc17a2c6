package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCollectTrainEval: collect a file as the clients would, train on the
// collect file itself (ratingio skips its '#' header), evaluate on the
// true ratings.
func TestCollectTrainEval(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(int, int) bool { return true })
	for _, mech := range []string{"laplace", "rr"} {
		z := filepath.Join(dir, mech+".tsv")
		out, errb, code := runCLI(t, "collect", "--mechanism", mech, "--epsilon", "4", "--data", data, "--format", "tsv",
			"--scale", "1:5", "--seed", "3", "--experiment", "--out", z, "--json")
		if code != 0 {
			t.Fatalf("collect %s: exit %d: %s", mech, code, errb)
		}
		var rep struct {
			Reported, Kept, Invented int64
			Levels                   int
			Guarantee                struct{ Epsilon float64 }
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("collect --json: %v\n%s", err, out)
		}
		if rep.Reported != rep.Kept+rep.Invented || rep.Levels != 5 || rep.Guarantee.Epsilon < 4 {
			t.Errorf("collect %s report %+v", mech, rep)
		}
		mdl := filepath.Join(dir, mech+".model")
		args := []string{"train", "--data", z, "--format", "tsv", "--method", "ldp-" + mech, "--debias", "--seed", "1", "--out", mdl}
		if mech == "rr" {
			// Named explicitly; for laplace the --data file's own header is used.
			args = append(args, "--collected", z)
		}
		if _, errb, code := runCLI(t, args...); code != 0 {
			t.Fatalf("train ldp-%s on the collect file: exit %d: %s", mech, code, errb)
		}
		if _, errb, code := runCLI(t, "eval", "--model", mdl, "--data", data, "--format", "tsv"); code != 0 {
			t.Fatalf("eval ldp-%s: exit %d: %s", mech, code, errb)
		}
	}
}

func TestCollectUsage(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(int, int) bool { return true })
	z := filepath.Join(dir, "z.tsv")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--epsilon", "1", "--data", data, "--out", z}, "--mechanism"},
		{[]string{"--mechanism", "rr", "--data", data, "--out", z}, "--epsilon"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data}, "--out"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--seed", "2"}, "--experiment"},
		{[]string{"--mechanism", "rr", "--epsilon", "1", "--data", data, "--out", z, "--scale", "5:1"}, "--scale"},
	} {
		_, errb, code := runCLI(t, append([]string{"collect", "--format", "tsv"}, tc.args...)...)
		if code != 2 || !strings.Contains(errb, tc.want) {
			t.Errorf("collect %v: exit %d, stderr %q; want exit 2 mentioning %s", tc.args, code, errb, tc.want)
		}
	}
}
