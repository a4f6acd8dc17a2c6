package experiment

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTopNItemFeatures: the public item features are read for the
// catalogue's items through the ID map (a line of an item the map lacks
// skipped, each line in its own form), as they are without a map, and a
// broken map or line is an error naming the file and line.
func TestTopNItemFeatures(t *testing.T) {
	for _, tc := range []struct {
		name, features, ids string
		catalogue           []string
		want                [][]string // each catalogue item's features, the intercept left out
		skipped             int
		err                 string
	}{
		{"movies.dat through the map", "10::A (1995)::Comedy\n20::B (1971)::Drama|War\n30::C (2000)::Horror\n",
			"item_index\tmovie_id\n1\t10\n2\t20\n", []string{"1", "2"},
			[][]string{{"genre:Comedy", "years:1995-1999", "genre:Comedy|1990s"},
				{"genre:Drama", "genre:War", "years:1970-1974", "genre:Drama|1970s", "genre:War|1970s"}}, 1, ""},
		{"tsv through the map", "10\tx,y\n20\tz\n", "h\th\n7\t20\n", []string{"7"}, [][]string{{"z"}}, 1, ""},
		{"no map", "1\tx\n", "", []string{"1"}, [][]string{{"x"}}, 0, ""},
		{"bad map line", "10\tx\n", "h\th\n1 10\n", []string{"1"}, nil, 0, "ids.tsv:2"},
		{"bad features line", "10 x\n", "h\th\n1\t10\n", []string{"1"}, nil, 0, "features.dat:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			s := TopNSpec{Name: "f", Features: "features.dat"}
			if err := os.WriteFile(filepath.Join(dataDir, "features.dat"), []byte(tc.features), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.ids != "" {
				s.FeatureIDs = "ids.tsv"
				if err := os.WriteFile(filepath.Join(dataDir, "ids.tsv"), []byte(tc.ids), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := s.itemFeatures(dataDir, tc.catalogue)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Skipped != tc.skipped {
				t.Errorf("%d lines skipped, want %d", f.Skipped, tc.skipped)
			}
			for j, want := range tc.want {
				var got []string
				for _, k := range f.Of[j][1:] { // after the intercept
					got = append(got, f.Names[k])
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("item %s: features %q, want %q", tc.catalogue[j], got, want)
				}
			}
		})
	}
}

// TestRunTopNWithFeatures: a reproduction with public item features
// gives them to the method that takes them (dp-features' plan counts the
// features: the intercept and the three groups), and none to the others.
func TestRunTopNWithFeatures(t *testing.T) {
	dataDir, out := t.TempDir(), t.TempDir()
	writeTopNData(t, dataDir)
	var b strings.Builder
	for i := range 32 {
		fmt.Fprintf(&b, "i%d\tgroup%d\n", i, i%3)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "features.tsv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := tinyTopN(slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Features = "features.tsv"
	s.Methods = []TopNMethod{{Method: "popularity"}, {Method: "dp-features"}}
	s.Epsilons, s.Seeds = []float64{1}, 1
	if err := RunTopN(context.Background(), s, dataDir, out); err != nil {
		t.Fatal(err)
	}
	runs, err := readTopNResults(filepath.Join(out, "results.csv"), topNMetricNames([]int{5, 20, 100}))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs recorded, want 2", len(runs))
	}
	for _, r := range runs {
		if r.Label == "dp-features" && !strings.Contains(r.Plan, `"features":4`) {
			t.Errorf("dp-features' plan %s does not count the intercept and 3 public features", r.Plan)
		}
	}
}
