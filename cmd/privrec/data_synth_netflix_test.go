package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// privrec data synth --setup netflix writes the training and held-out
// ratings in one pass: together exactly the ratings asked for, on the
// integer scale, the held-out share near --holdout, the same files for the
// same seed; bad settings exit 2 and write neither file.
func TestDataSynthNetflix(t *testing.T) {
	dir := t.TempDir()
	train, test := filepath.Join(dir, "train.tsv"), filepath.Join(dir, "test.tsv")
	args := []string{"data", "synth", "--setup", "netflix", "--users", "2000", "--items", "150", "--interactions", "40000",
		"--factors", "4", "--holdout", "0.1", "--seed", "4", "--out", train, "--test", test, "--json"}
	stdout, errs, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep synthReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("bad JSON %q: %v", stdout, err)
	}
	if rep.Ratings+rep.TestRatings != 40000 || rep.Min != 1 || rep.Max != 5 {
		t.Fatalf("report %+v", rep)
	}
	// Binomial(40000, 0.1): 4.5 standard deviations (a false failure in
	// about 7·10⁻⁶ of seeds).
	if d := math.Abs(float64(rep.TestRatings) - 4000); d > 4.5*60 {
		t.Errorf("%d held out, want 4000 ± 270", rep.TestRatings)
	}
	tr, te := readTSV(t, train), readTSV(t, test)
	if tr.Len() != rep.Ratings || te.Len() != rep.TestRatings {
		t.Fatalf("files hold %d and %d ratings, the report says %d and %d", tr.Len(), te.Len(), rep.Ratings, rep.TestRatings)
	}
	before, _ := os.ReadFile(test)
	if _, errs, code := runCLI(t, args...); code != 0 {
		t.Fatalf("rerun exit %d: %s", code, errs)
	}
	if after, _ := os.ReadFile(test); string(before) != string(after) {
		t.Fatal("same seed wrote a different test file")
	}
	bt, bte := filepath.Join(dir, "bad.tsv"), filepath.Join(dir, "bad.test.tsv")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"holdout without test", []string{"--users", "100", "--interactions", "2000"}},
		{"test without holdout", []string{"--holdout", "0", "--test", bte}},
		{"holdout 1", []string{"--holdout", "1", "--test", bte}},
		{"test is out", []string{"--test", bt}},
		{"truth", []string{"--test", bte, "--truth", filepath.Join(dir, "t.tsv")}},
		{"flag of another setup", []string{"--test", bte, "--obs", "0.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCLI(t, append([]string{"data", "synth", "--setup", "netflix", "--out", bt}, tc.args...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, errs)
			}
			for _, p := range []string{bt, bte} {
				if _, err := os.Stat(p); err == nil {
					t.Fatalf("%s written despite errors", p)
				}
			}
		})
	}
}
