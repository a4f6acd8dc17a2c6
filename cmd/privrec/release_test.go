package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
)

// The honest-release contract on the command line: declared facts are
// required where a method needs them, a refused run writes nothing, the
// public model file holds no user, no fingerprint and no data statistic,
// each user's own state goes to --user-state, and recommend works from the
// public model plus her state or her own ratings.
func TestJointReleaseOnTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	held := func(u, i int) bool { return (u*7+i)%5 == 0 }
	train := writeRatings(t, dir, "train.tsv", func(u, i int) bool { return !held(u, i) })
	test := writeRatings(t, dir, "test.tsv", held)
	items := filepath.Join(dir, "items.txt")
	var cat strings.Builder
	for i := 1; i <= 12; i++ {
		cat.WriteString(strconv.Itoa(i) + "\tItem number " + strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(items, []byte(cat.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	mpath, states := filepath.Join(dir, "m.model"), filepath.Join(dir, "users")
	base := []string{"train", "--data", train, "--format", "movielens-100k", "--method", "dp-bias", "--epsilon", "2", "--out", mpath}

	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"no user-state", append(base, "--scale", "1:5", "--items", items), "--user-state"},
		{"no scale", append(base, "--items", items, "--user-state", states), "--scale"},
		{"no catalogue", append(base, "--scale", "1:5", "--user-state", states), "--items"},
		{"bad catalogue", append(base, "--scale", "1:5", "--items", filepath.Join(dir, "missing.txt"), "--user-state", states), "--items"},
	}
	for _, r := range refusals {
		_, errs, code := runCLI(t, r.args...)
		if code == 0 || !strings.Contains(errs, r.want) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal naming %s", r.name, code, errs, r.want)
		}
		if _, err := os.Stat(mpath); err == nil {
			t.Fatalf("%s: a refused run wrote the model", r.name)
		}
		if _, err := os.Stat(states); err == nil {
			t.Fatalf("%s: a refused run wrote user states", r.name)
		}
	}

	out, errs, code := runCLI(t, append(base, "--scale", "1:5", "--items", items, "--user-state", states, "--json")...)
	if code != 0 {
		t.Fatalf("train exit %d: %s", code, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"users", "ratings", "train_ratings", "train_users", "rmse", "train_rmse"} {
		if _, ok := rep[k]; ok {
			t.Errorf("train report prints %s, a fact of the private data", k)
		}
	}
	raw, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"fingerprint", "data_mean", "data_min", "data_max", `"users"`} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("public model file holds %s", leak)
		}
	}
	if st, err := model.LoadUserStates(states); err != nil || len(st.States) != 30 {
		t.Errorf("user states: %v, want 30 (%v)", st, err)
	}
	if files, _ := filepath.Glob(filepath.Join(states, "*")); len(files) != 2 {
		t.Errorf("state directory holds %v, want the index and one directory of shards", files)
	}

	if _, errs, code := runCLI(t, "eval", "--model", mpath, "--data", test, "--format", "movielens-100k"); code == 0 || !strings.Contains(errs, "--user-state") {
		t.Errorf("eval without states: exit %d %s", code, errs)
	}
	if _, errs, code := runCLI(t, "eval", "--model", mpath, "--data", test, "--format", "movielens-100k", "--user-state", states); code != 0 {
		t.Errorf("eval with states: exit %d %s", code, errs)
	}
	fromState, errs, code := runCLI(t, "recommend", "--model", mpath, "--user", "7", "--user-state", states, "-k", "3", "--json")
	if code != 0 {
		t.Fatalf("recommend from state: %s", errs)
	}
	fromRatings, errs, code := runCLI(t, "recommend", "--model", mpath, "--user", "7", "--ratings", train, "--format", "movielens-100k", "-k", "3", "--json")
	if code != 0 {
		t.Fatalf("recommend from ratings: %s", errs)
	}
	if fromState != fromRatings {
		t.Errorf("fold-in on her own ratings differs from her stored state:\n%s\n%s", fromState, fromRatings)
	}
	if !strings.Contains(fromState, "Item number") {
		t.Errorf("recommendations without catalogue titles: %s", fromState)
	}
	if _, errs, code := runCLI(t, "recommend", "--model", mpath, "--user", "7"); code == 0 || !strings.Contains(errs, "holds no users") {
		t.Errorf("recommend without her part: exit %d %s", code, errs)
	}

	// Her state is bound to the model it was trained with: another run
	// (here at another ε) refuses it instead of recommending from it.
	m8, states8 := filepath.Join(dir, "m8.model"), filepath.Join(dir, "users8")
	if _, errs, code := runCLI(t, "train", "--data", train, "--format", "movielens-100k", "--method", "dp-bias", "--epsilon", "8",
		"--scale", "1:5", "--items", items, "--out", m8, "--user-state", states8); code != 0 {
		t.Fatalf("second training: %s", errs)
	}
	for _, args := range [][]string{
		{"recommend", "--model", m8, "--user", "7", "--user-state", states},
		{"eval", "--model", m8, "--data", test, "--format", "movielens-100k", "--user-state", states},
		{"predict", "--model", m8, "--data", test, "--format", "movielens-100k", "--user-state", states},
	} {
		if out, errs, code := runCLI(t, args...); code != 1 || !strings.Contains(errs, "written with another dp-bias model") || out != "" {
			t.Errorf("%s with another run's states: exit %d, stdout %q, stderr %q", args[0], code, out, errs)
		}
	}
	if _, errs, code := runCLI(t, "recommend", "--model", m8, "--user", "7", "--user-state", states8); code != 0 {
		t.Errorf("recommend with its own states: %s", errs)
	}
}

func TestAuditMethodCommand(t *testing.T) {
	out, errs, code := runCLI(t, "audit", "--method", "dpals", "--epsilon", "1", "--runs", "4", "--samples", "100", "--seed", "3", "--json")
	if code != 0 {
		t.Fatalf("audit dp-bias: exit %d: %s %s", code, out, errs)
	}
	var r struct {
		Method      string
		Relation    string
		Violation   bool
		Differences []string
		Canaries    []string
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Method != "dpals" || r.Violation || len(r.Differences) != 0 || len(r.Canaries) != 0 || r.Relation == "" {
		t.Errorf("audit report %+v", r)
	}
	if _, errs, code := runCLI(t, "audit", "--method", "bias"); code == 0 || !strings.Contains(errs, "no guarantee") {
		t.Errorf("auditing a non-private method: exit %d %s", code, errs)
	}
}
