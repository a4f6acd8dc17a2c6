package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/release"
)

// heldOutFixture splits 60 users' interactions (ratings ≥ 3) into
// training users and 8 + 8 held-out users, and trains a bias model (on
// the declared 1–5 scale) on the training users.
func heldOutFixture(t *testing.T) (dir, in, split, modelPath string) {
	t.Helper()
	dir = t.TempDir()
	in = writeInteractions(t, dir, 60)
	split = filepath.Join(dir, "split")
	modelPath = filepath.Join(dir, "bias.model")
	for _, args := range [][]string{
		{"data", "split", "--in", in, "--users", "8,8", "--positive", "3", "--min-positives", "4", "--seed", "2", "--out", split},
		{"train", "--data", filepath.Join(split, splitTrainFile), "--method", "bias", "--scale", "1:5", "--out", modelPath},
	} {
		if _, errs, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
	}
	return dir, in, split, modelPath
}

func TestEvalHeldOut(t *testing.T) {
	dir, _, split, modelPath := heldOutFixture(t)
	hist, tgt := filepath.Join(split, splitTestHistory), filepath.Join(split, splitTestTargets)
	train := filepath.Join(split, splitTrainFile)
	for _, tc := range []struct {
		name string
		args []string
		ks   []int
	}{
		{"defaults", nil, []int{10, 20, 50, 100}},
		{"ks, train check, popularity", []string{"-k", "5,2", "--train", train, "--popularity-from", train}, []int{5, 2}},
		{"positive rule", []string{"-k", "3", "--positive", "4"}, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"eval", "--model", modelPath, "--history", hist, "--targets", tgt, "--json"}, tc.args...)
			out, errs, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep struct {
				Users    int                `json:"users"`
				Recall   map[string]float64 `json:"recall"`
				NDCG     map[string]float64 `json:"ndcg"`
				Coverage map[string]float64 `json:"coverage"`
				MRR      float64            `json:"mrr"`
				Ks       []int              `json:"ks"`
				Method   string             `json:"method"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("bad JSON %q: %v", out, err)
			}
			if rep.Users == 0 || rep.Users > 8 || rep.Method != "bias" || len(rep.Ks) != len(tc.ks) {
				t.Fatalf("report %+v", rep)
			}
			for _, k := range tc.ks {
				key := itoa(k)
				r, ok := rep.Recall[key]
				if !ok || r < 0 || r > 1 || rep.NDCG[key] < 0 || rep.NDCG[key] > 1 || rep.Coverage[key] <= 0 {
					t.Fatalf("@%d: recall %v ndcg %v coverage %v", k, r, rep.NDCG[key], rep.Coverage[key])
				}
			}
			// The table names every k.
			text, errs, code := runCLI(t, args[:len(args)-len(tc.args)-1]...)
			if code != 0 || !strings.Contains(text, "Recall@k") || !strings.Contains(text, "MRR") {
				t.Fatalf("table (exit %d): %s%s", code, text, errs)
			}
		})
	}
	// --data and --history together: both reports.
	test := writeRatings(t, dir, "test.tsv", func(u, i int) bool { return u > 100 || (u+i)%4 == 0 })
	out, errs, code := runCLI(t, "eval", "--model", modelPath, "--data", test, "--format", "tsv", "--history", hist, "--targets", tgt, "--json", "-k", "5")
	if code != 0 || !strings.Contains(out, `"random_split"`) || !strings.Contains(out, `"held_out"`) {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	// The old random-split path still takes -k N and -k 0.
	for _, k := range []string{"5", "0"} {
		if out, errs, code := runCLI(t, "eval", "--model", modelPath, "--data", test, "--format", "tsv", "-k", k); code != 0 || !strings.Contains(out, "RMSE") {
			t.Fatalf("-k %s: exit %d: %s%s", k, code, out, errs)
		}
	}
}

func itoa(k int) string {
	b, _ := json.Marshal(k)
	return string(b)
}

func TestEvalHeldOutErrors(t *testing.T) {
	dir, in, split, modelPath := heldOutFixture(t)
	hist, tgt := filepath.Join(split, splitTestHistory), filepath.Join(split, splitTestTargets)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	histBytes, _ := os.ReadFile(hist)
	unknown := write("unknown.tsv", string(histBytes)+"59\t999\t5\n")
	empty := write("empty.tsv", "")
	trainBytes, _ := os.ReadFile(filepath.Join(split, splitTrainFile))
	firstTrain, _, _ := strings.Cut(string(trainBytes), "\t") // a training user
	onlyTrain := write("train-user.tsv", firstTrain+"\t1\t5\n"+firstTrain+"\t2\t4\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  []string
	}{
		{"unknown history item", []string{"--history", unknown, "--targets", tgt}, 1, []string{"unknown.tsv:", `item "999"`, "--unknown-items skip"}},
		{"empty history", []string{"--history", empty, "--targets", tgt}, 1, []string{"--history", "empty.tsv", "empty file"}},
		{"positive above the scale", []string{"--history", hist, "--targets", tgt, "--positive", "6"}, 2, []string{"--positive 6", "maximum 5"}},
		{"user in train and held out", []string{"--history", hist, "--targets", tgt, "--train", in}, 1, []string{"--history", "also in the training file", "ratings.tsv:"}},
		{"user of the model", []string{"--history", onlyTrain, "--targets", tgt}, 1, []string{"train-user.tsv", "training users"}},
		{"history without targets", []string{"--history", hist}, 2, []string{"--targets"}},
		{"bad -k", []string{"--history", hist, "--targets", tgt, "-k", "10,x"}, 2, []string{"-k"}},
		{"repeated -k", []string{"--history", hist, "--targets", tgt, "-k", "10,10"}, 2, []string{"twice"}},
		{"train without history", []string{"--data", tgt, "--train", in}, 2, []string{"--train belongs"}},
		{"bad unknown-items", []string{"--history", hist, "--targets", tgt, "--unknown-items", "drop"}, 2, []string{"--unknown-items"}},
		{"several k with --data", []string{"--data", tgt, "-k", "5,10"}, 2, []string{"one cut-off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, append([]string{"eval", "--model", modelPath}, tc.args...)...)
			if code != tc.code || out != "" {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %s", code, tc.code, out, errs)
			}
			for _, m := range tc.msg {
				if !strings.Contains(errs, m) {
					t.Errorf("message %q does not name %q", errs, m)
				}
			}
		})
	}
	// --unknown-items skip scores the users anyway.
	if _, errs, code := runCLI(t, "eval", "--model", modelPath, "--history", unknown, "--targets", tgt, "--unknown-items", "skip"); code != 0 {
		t.Fatalf("--unknown-items skip: exit %d: %s", code, errs)
	}
}

func TestCheckPositive(t *testing.T) {
	sc := &release.Scale{Min: 1, Max: 5}
	for _, tc := range []struct {
		positive float64
		scale    *release.Scale
		ok       bool
	}{
		{4, sc, true}, {5, sc, true}, {1, sc, true}, {0, sc, true},
		{5.5, sc, false}, {6, nil, true}, {nan(), nil, false}, {inf(), sc, false},
	} {
		if err := checkPositive(tc.positive, tc.scale); (err == nil) != tc.ok {
			t.Errorf("checkPositive(%v, %v) = %v", tc.positive, tc.scale, err)
		}
	}
}

func FuzzParseKs(f *testing.F) {
	for _, s := range []string{"10", "10,20,50,100", " 5 , 7", "0", "-1", "1,1", "", ",", "9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ks, err := parseKs(s)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, k := range ks {
			if k < 1 || seen[k] {
				t.Fatalf("parseKs(%q) = %v", s, ks)
			}
			seen[k] = true
		}
	})
}

func nan() float64 { return math.NaN() }
func inf() float64 { return math.Inf(1) }

// TestTrainPositiveAboveScale: privrec train refuses a top-N method's
// --positive above the declared scale, before reading any data (skipped
// until a registered method has a positive parameter).
func TestTrainPositiveAboveScale(t *testing.T) {
	name := ""
	for _, m := range methods.All() {
		if methods.HasParam(m.New(), "positive") {
			name = m.Name
			break
		}
	}
	if name == "" {
		t.Skip("no registered method has a positive parameter yet")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "m.model")
	_, errs, code := runCLI(t, "train", "--method", name, "--epsilon", "1", "--data", filepath.Join(dir, "none.tsv"), "--scale", "1:5", "--positive", "6", "--out", out)
	if code != 2 || !strings.Contains(errs, "--positive 6") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a model was written")
	}
}

func TestConfigNumber(t *testing.T) {
	type inner struct {
		P []float64 `flag:"positive"`
	}
	type cfg struct {
		inner
		L float64   `flag:"lambda"`
		S string    `flag:"name"`
		M []float64 `flag:"many"`
	}
	c := &cfg{inner: inner{P: []float64{4}}, L: 2.5, S: "x", M: []float64{1, 2}}
	for _, tc := range []struct {
		name string
		want float64
		ok   bool
	}{{"positive", 4, true}, {"lambda", 2.5, true}, {"name", 0, false}, {"many", 0, false}, {"absent", 0, false}} {
		if got, ok := configNumber(c, tc.name); ok != tc.ok || got != tc.want {
			t.Errorf("%s: %v %v", tc.name, got, ok)
		}
	}
	if _, ok := configNumber(cfg{}, "lambda"); ok {
		t.Error("a struct value (not a pointer) was read")
	}
}

// TestEvalHeldOutPopularitySource: popularity@k is counted in
// --popularity-from, else in --train, else in the histories.
func TestEvalHeldOutPopularitySource(t *testing.T) {
	_, _, split, modelPath := heldOutFixture(t)
	hist, tgt, train := filepath.Join(split, splitTestHistory), filepath.Join(split, splitTestTargets), filepath.Join(split, splitTrainFile)
	pop := func(extra ...string) float64 {
		t.Helper()
		out, errs, code := runCLI(t, append([]string{"eval", "--model", modelPath, "--history", hist, "--targets", tgt, "-k", "5", "--json"}, extra...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var rep struct {
			Popularity map[string]float64 `json:"popularity"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Popularity["5"]
	}
	fromTrain := pop("--popularity-from", train)
	if got := pop("--train", train); got != fromTrain {
		t.Errorf("--train alone: popularity %v, --popularity-from the same file %v", got, fromTrain)
	}
	if got := pop("--train", train, "--popularity-from", hist); got == fromTrain {
		t.Errorf("--popularity-from did not win over --train (%v)", got)
	}
	if got := pop(); got == fromTrain || got <= 0 {
		t.Errorf("histories: popularity %v (training counts %v)", got, fromTrain)
	}
}
