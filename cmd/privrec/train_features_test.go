package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainItemFeatures: --item-features declares the catalogue's public
// features to the feature models (the report names them); a method that
// reads none, a file without --items and a bad line are refused before
// anything is written.
func TestTrainItemFeatures(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(u, i int) bool { return true })
	items := filepath.Join(dir, "items.tsv")
	feats := filepath.Join(dir, "movies.dat")
	bad := filepath.Join(dir, "bad.tsv")
	var cat, mov strings.Builder
	for i := 1; i <= 12; i++ {
		cat.WriteString(itoa(i) + "\n")
		genre := "Comedy"
		if i%2 == 0 {
			genre = "Drama|Romance"
		}
		mov.WriteString(itoa(i) + "::Film " + itoa(i) + " (1995)::" + genre + "\n")
	}
	for p, s := range map[string]string{items: cat.String(), feats: mov.String(), bad: "1\tx\n1\ty\n"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "f.model")
	train := func(method string, extra ...string) (string, string, int) {
		args := append([]string{"train", "--data", data, "--method", method, "--epsilon", "1", "--positive", "3", "--scale", "1:5",
			"--out", out, "--json"}, extra...)
		return runCLI(t, args...)
	}
	stdout, errs, code := train("dp-features", "--items", items, "--item-features", feats)
	if code != 0 {
		t.Fatalf("dp-features exit %d: %s", code, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if got := rep["features"]; got != float64(8) { // intercept, 3 genres, 1995-1999, the 3 genres in the 1990s
		t.Errorf("features %v, want 8 (report %s)", got, stdout)
	}
	if s, _ := rep["public_features"].(string); !strings.Contains(s, "declared public") || !strings.Contains(s, "genre:Romance") {
		t.Errorf("public_features %q should name the features and declare them public", s)
	}
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method string
		args   []string
		want   string
	}{
		{"dp-ease", []string{"--items", items, "--item-features", feats}, "dp-ease reads no item features"},
		{"dp-features", []string{"--item-features", feats}, "--item-features needs --items"},
		{"dp-features", []string{"--items", items, "--item-features", bad}, "bad.tsv:2: item \"1\" appears twice"},
	} {
		_, errs, code := train(tc.method, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s %v: exit %d, stderr %q; want a refusal naming %q", tc.method, tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s %v: a refused run wrote %s", tc.method, tc.args, out)
		}
	}
}
