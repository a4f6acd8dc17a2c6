package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
)

func readTSV(t *testing.T, path string) *ratings.Matrix {
	t.Helper()
	m, err := ratingio.ReadFile(path, ratingio.Options{Format: "tsv"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pairs returns the (user, item) → rating map of a matrix by external IDs.
func pairs(m *ratings.Matrix) map[[2]string]float32 {
	out := map[[2]string]float32{}
	m.All(func(e ratings.Entry) bool {
		out[[2]string{m.Users.Name(e.User), m.Items.Name(e.Item)}] = e.Value
		return true
	})
	return out
}

func TestDataSplit(t *testing.T) {
	dir := t.TempDir()
	in := writeRatings(t, dir, "all.tsv", func(u, i int) bool { return true })
	all := pairs(readTSV(t, in))
	for _, tc := range []struct {
		name      string
		args      []string
		wantTest  func(n int) bool
		wantTrain int
	}{
		{"holdout", []string{"--holdout", "0.25"}, func(n int) bool { return n == 60 }, 180},
		{"per-user", []string{"--per-user", "2"}, func(n int) bool { return n == 60 }, 180},
		{"top-items and cap", []string{"--top-items", "6", "--cap", "3", "--holdout", "0.5"}, func(n int) bool { return n == 45 }, 45},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, te := filepath.Join(dir, tc.name+".train"), filepath.Join(dir, tc.name+".test")
			args := append([]string{"data", "split", "--in", in, "--format", "movielens-100k", "--seed", "3", "--train", tr, "--test", te, "--json"}, tc.args...)
			out, errs, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep splitReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("bad JSON %q: %v", out, err)
			}
			train, test := pairs(readTSV(t, tr)), pairs(readTSV(t, te))
			if !tc.wantTest(len(test)) || len(train) != tc.wantTrain || rep.TestRatings != len(test) || rep.TrainRating != len(train) {
				t.Fatalf("train %d test %d (report %d/%d)", len(train), len(test), rep.TrainRating, rep.TestRatings)
			}
			for k, v := range test {
				if _, dup := train[k]; dup || all[k] != v {
					t.Fatalf("test rating %v = %v: in train too, or not the input's %v", k, v, all[k])
				}
			}
			for k, v := range train {
				if all[k] != v {
					t.Fatalf("train rating %v = %v, input %v", k, v, all[k])
				}
			}
			// Deterministic: the same command gives the same files.
			before, _ := os.ReadFile(te)
			if _, errs, code := runCLI(t, args...); code != 0 {
				t.Fatalf("rerun exit %d: %s", code, errs)
			}
			after, _ := os.ReadFile(te)
			if string(before) != string(after) {
				t.Fatal("same seed wrote a different split")
			}
		})
	}
}

func TestDataSplitErrors(t *testing.T) {
	dir := t.TempDir()
	in := writeRatings(t, dir, "all.tsv", func(u, i int) bool { return true })
	bad := filepath.Join(dir, "bad.tsv")
	if err := os.WriteFile(bad, []byte("1\t1\t3\t5\n1\t2\tfour\t6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, te := filepath.Join(dir, "o.train"), filepath.Join(dir, "o.test")
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"neither", []string{"--in", in, "--train", tr, "--test", te}, 2},
		{"both", []string{"--in", in, "--holdout", "0.1", "--per-user", "1", "--train", tr, "--test", te}, 2},
		{"frac 1", []string{"--in", in, "--holdout", "1", "--train", tr, "--test", te}, 2},
		{"k 0", []string{"--in", in, "--per-user", "0", "--train", tr, "--test", te}, 2},
		{"no test", []string{"--in", in, "--holdout", "0.1", "--train", tr}, 2},
		{"same file", []string{"--in", in, "--holdout", "0.1", "--train", tr, "--test", tr}, 2},
		{"overwrite input", []string{"--in", in, "--holdout", "0.1", "--train", in, "--test", te}, 2},
		{"missing input", []string{"--in", filepath.Join(dir, "none"), "--holdout", "0.1", "--train", tr, "--test", te}, 1},
		{"malformed input", []string{"--in", bad, "--format", "tsv", "--holdout", "0.1", "--train", tr, "--test", te}, 1},
		{"unwritable output", []string{"--in", in, "--holdout", "0.1", "--train", tr, "--test", filepath.Join(dir, "nodir", "x")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCLI(t, append([]string{"data", "split"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errs)
			}
			for _, p := range []string{tr, te} {
				if _, err := os.Stat(p); err == nil {
					t.Fatalf("%s was written despite the error", p)
				}
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".privrec-*"))
			if len(left) > 0 {
				t.Fatalf("temporary files left: %v", left)
			}
		})
	}
}

func TestDataSplitHelp(t *testing.T) {
	for _, sub := range []string{"split", "synth"} {
		out, errs, code := runCLI(t, "data", sub, "--help")
		text := out + errs
		if code != 0 || !strings.Contains(text, "Example:") || !strings.Contains(text, "privrec data "+sub) {
			t.Errorf("data %s --help: exit %d, output %q", sub, code, text)
		}
	}
}
