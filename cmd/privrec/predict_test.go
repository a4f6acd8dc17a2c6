package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPredict: predictions for (user, item) pairs, as TSV and JSON, from a
// model that holds its users and from a joint-DP model with the users'
// own states (bound to it) or their histories folded in; bad pairs are
// errors naming their line.
func TestPredict(t *testing.T) {
	dir := t.TempDir()
	held := func(u, i int) bool { return (u*7+i)%5 == 0 }
	train := writeRatings(t, dir, "train.tsv", func(u, i int) bool { return !held(u, i) })
	test := writeRatings(t, dir, "test.tsv", held)
	items := filepath.Join(dir, "items.txt")
	var cat strings.Builder
	for i := 1; i <= 12; i++ {
		cat.WriteString(strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(items, []byte(cat.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bias, dp, states := filepath.Join(dir, "bias.model"), filepath.Join(dir, "dp.model"), filepath.Join(dir, "users")
	for _, args := range [][]string{
		{"train", "--data", train, "--method", "bias", "--out", bias},
		{"train", "--data", train, "--method", "dp-bias", "--epsilon", "2", "--scale", "1:5", "--items", items, "--out", dp, "--user-state", states},
	} {
		if _, errs, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: %s", args, errs)
		}
	}
	nTest := strings.Count(string(mustRead(t, test)), "\n")

	out, errs, code := runCLI(t, "predict", "--model", bias, "--data", test)
	if code != 0 {
		t.Fatalf("predict: %s", errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "user\titem\tprediction" || len(lines) != nTest+1 {
		t.Fatalf("TSV: %d lines, header %q; want %d", len(lines), lines[0], nTest+1)
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		v, err := strconv.ParseFloat(f[2], 64)
		if len(f) != 3 || err != nil || v < 1 || v > 5 {
			t.Fatalf("TSV line %q", l)
		}
	}

	// Joint DP: from her stored state, or from her history folded in —
	// the same numbers.
	fromStates, errs, code := runCLI(t, "predict", "--model", dp, "--data", test, "--user-state", states, "--json")
	if code != 0 {
		t.Fatalf("predict --user-state: %s", errs)
	}
	fromHistory, errs, code := runCLI(t, "predict", "--model", dp, "--data", test, "--history", train, "--json")
	if code != 0 {
		t.Fatalf("predict --history: %s", errs)
	}
	var a, b struct {
		Predictions []struct {
			User, Item string
			Prediction float64
		}
	}
	if json.Unmarshal([]byte(fromStates), &a) != nil || json.Unmarshal([]byte(fromHistory), &b) != nil || len(a.Predictions) != nTest || len(b.Predictions) != nTest {
		t.Fatalf("JSON: %d and %d predictions, want %d", len(a.Predictions), len(b.Predictions), nTest)
	}
	for k := range a.Predictions {
		if math.Abs(a.Predictions[k].Prediction-b.Predictions[k].Prediction) > 1e-9 {
			t.Fatalf("pair %d: state %v, history %v", k, a.Predictions[k], b.Predictions[k])
		}
	}

	bad := filepath.Join(dir, "bad.tsv")
	os.WriteFile(bad, []byte("user\titem\n1\t2\n1\t99\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--model", bias, "--data", bad}, 1, "bad.tsv:3: item \"99\" is not in the model's catalogue"},
		{[]string{"--model", dp, "--data", test}, 2, "holds no users"},
		{[]string{"--model", dp, "--data", test, "--user-state", states, "--history", train}, 2, "not both"},
		{[]string{"--model", bias, "--data", test, "--user-state", states}, 1, "come from a dp-bias training, the model from bias"},
		{[]string{"--model", bias}, 2, "--data PAIRS"},
	} {
		out, errs, code := runCLI(t, append([]string{"predict"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
