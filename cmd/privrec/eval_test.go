package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalWorstItemsTitles: eval --worst-items names the items by title,
// from the model's catalogue (fw trained with --items) or from --items
// given to eval (a bias model, which keeps no titles).
func TestEvalWorstItemsTitles(t *testing.T) {
	dir := t.TempDir()
	held := func(u, i int) bool { return (u*7+i)%4 == 0 }
	train := writeRatings(t, dir, "train.tsv", func(u, i int) bool { return !held(u, i) })
	test := writeRatings(t, dir, "test.tsv", held)
	catPath := writeTitledCatalogue(t, dir)
	fwModel, biasModel := filepath.Join(dir, "fw.model"), filepath.Join(dir, "bias.model")
	for _, args := range [][]string{
		{"train", "--data", train, "--format", "movielens-100k", "--method", "fw", "--iterations", "3", "--items", catPath, "--out", fwModel},
		{"train", "--data", train, "--format", "movielens-100k", "--method", "bias", "--out", biasModel},
	} {
		if _, errs, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
	}
	for _, tc := range []struct {
		name  string
		args  []string
		title bool
	}{
		{"titles from the model", []string{"--model", fwModel}, true},
		{"titles from --items", []string{"--model", biasModel, "--items", catPath}, true},
		{"no titles", []string{"--model", biasModel}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"eval", "--data", test, "--format", "movielens-100k", "--worst-items", "3", "--min-ratings", "2"}, tc.args...)
			out, errs, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("eval exit %d: %s", code, errs)
			}
			if !strings.Contains(out, "Worst 3 items by held-out RMSE") {
				t.Fatalf("no worst-items list:\n%s", out)
			}
			if got := strings.Count(out, "Film number "); tc.title && got != 3 || !tc.title && got != 0 {
				t.Errorf("%d titles in:\n%s", got, out)
			}
			jout, errs, code := runCLI(t, append(args, "--json")...)
			if code != 0 {
				t.Fatalf("eval --json exit %d: %s", code, errs)
			}
			var rep struct {
				Worst []struct {
					Item, Title string
					N           int
					RMSE        float64
				} `json:"worst_items"`
			}
			if err := json.Unmarshal([]byte(jout), &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Worst) != 3 {
				t.Fatalf("worst_items = %+v", rep.Worst)
			}
			for k, w := range rep.Worst {
				if w.N < 2 || (k > 0 && w.RMSE > rep.Worst[k-1].RMSE) {
					t.Errorf("worst_items not sorted or below --min-ratings: %+v", rep.Worst)
				}
				if tc.title && w.Title != "Film number "+w.Item+" (1999)" {
					t.Errorf("item %s titled %q", w.Item, w.Title)
				}
			}
		})
	}
}

// TestRecommendTitlesFromItems: recommend names the items of a model that
// carries no titles from --items.
func TestRecommendTitlesFromItems(t *testing.T) {
	dir := t.TempDir()
	train := writeRatings(t, dir, "train.tsv", func(u, i int) bool { return true })
	catPath := writeTitledCatalogue(t, dir)
	mpath := filepath.Join(dir, "bias.model")
	if _, errs, code := runCLI(t, "train", "--data", train, "--format", "movielens-100k", "--method", "bias", "--out", mpath); code != 0 {
		t.Fatalf("train exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		items bool
		want  int
	}{{false, 0}, {true, 3}} {
		args := []string{"recommend", "--model", mpath, "--user", "1", "-k", "3"}
		if tc.items {
			args = append(args, "--items", catPath)
		}
		out, errs, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("recommend exit %d: %s", code, errs)
		}
		if got := strings.Count(out, "Film number "); got != tc.want {
			t.Errorf("--items %v: %d titles in:\n%s", tc.items, got, out)
		}
	}
}

// writeTitledCatalogue writes a catalogue of items 1…12 with titles
// ("Film number i (1999)") into dir and returns its path.
func writeTitledCatalogue(t *testing.T, dir string) string {
	t.Helper()
	var cat strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&cat, "%d\tFilm number %d (1999)\n", i, i)
	}
	path := filepath.Join(dir, "items.tsv")
	if err := os.WriteFile(path, []byte(cat.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
