package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeInteractions writes n users × 20 items: user u rates item i
// when (u·7 + i) % 3 != 0, with rating 1 + (u + i) % 5.
func writeInteractions(t *testing.T, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for u := 1; u <= n; u++ {
		for i := 1; i <= 20; i++ {
			if (u*7+i)%3 != 0 {
				fmt.Fprintf(&b, "%d\t%d\t%d\n", u, i, 1+(u+i)%5)
			}
		}
	}
	p := filepath.Join(dir, "ratings.tsv")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDataSplitUsers(t *testing.T) {
	dir := t.TempDir()
	in := writeInteractions(t, dir, 60)
	all := pairs(readTSV(t, in))
	for _, tc := range []struct {
		name      string
		args      []string
		val, test int
		minValue  float32
	}{
		{"every rating", []string{"--users", "10,15"}, 10, 15, 1},
		{"positives", []string{"--users", "5,5", "--positive", "4", "--min-positives", "3", "--target-frac", "0.5"}, 5, 5, 4},
		{"no validation", []string{"--users", "0,8", "--positive", "3"}, 0, 8, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			args := append([]string{"data", "split", "--in", in, "--format", "tsv", "--seed", "4", "--out", out, "--json"}, tc.args...)
			stdout, errs, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep userSplitReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("bad JSON %q: %v", stdout, err)
			}
			users := map[string]map[string]bool{}
			total := 0
			for _, f := range userSplitFiles {
				users[f] = map[string]bool{}
				if tc.val == 0 && strings.HasPrefix(f, "validation") {
					if _, err := os.Stat(filepath.Join(out, f)); err == nil {
						t.Fatalf("%s written for 0 validation users", f)
					}
					continue
				}
				m := pairs(readTSV(t, filepath.Join(out, f)))
				for k, v := range m {
					if all[k] != v || v < tc.minValue {
						t.Fatalf("%s: rating %v = %v (input %v, want ≥ %v)", f, k, v, all[k], tc.minValue)
					}
					users[f][k[0]] = true
				}
				total += len(m)
			}
			if total != rep.Interactions {
				t.Fatalf("files hold %d ratings, the report says %d interactions", total, rep.Interactions)
			}
			if len(users[splitValHistory]) != tc.val || len(users[splitTestHistory]) != tc.test || len(users[splitTestTargets]) != tc.test ||
				rep.TestTargets.Users != tc.test || (tc.val > 0 && rep.ValidationHistory.Users != tc.val) {
				t.Fatalf("held out %d validation and %d test users, want %d and %d", len(users[splitValHistory]), len(users[splitTestHistory]), tc.val, tc.test)
			}
			for u := range users[splitTrainFile] {
				if users[splitTestHistory][u] || users[splitValHistory][u] || users[splitTestTargets][u] {
					t.Fatalf("training user %s is held out", u)
				}
			}
			for u := range users[splitValHistory] {
				if users[splitTestHistory][u] {
					t.Fatalf("user %s held out twice", u)
				}
			}
			// Deterministic.
			before, _ := os.ReadFile(filepath.Join(out, splitTestTargets))
			if _, errs, code := runCLI(t, args...); code != 0 {
				t.Fatalf("rerun: %s", errs)
			}
			after, _ := os.ReadFile(filepath.Join(out, splitTestTargets))
			if string(before) != string(after) {
				t.Fatal("the same seed wrote another split")
			}
		})
	}
	// The text output names the files.
	stdout, errs, code := runCLI(t, "data", "split", "--in", in, "--users", "3,3", "--seed", "1", "--out", filepath.Join(dir, "text"))
	if code != 0 || !strings.Contains(stdout, splitTestTargets) {
		t.Fatalf("exit %d: %s%s", code, stdout, errs)
	}
}

func TestDataSplitUsersErrors(t *testing.T) {
	dir := t.TempDir()
	in := writeInteractions(t, dir, 20)
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bad users", []string{"--users", "10"}, 2, "--users"},
		{"negative users", []string{"--users", "-1,3"}, 2, "--users"},
		{"no test users", []string{"--users", "3,0"}, 2, "--users"},
		{"no out", []string{"--users", "2,2", "--out", ""}, 2, "--out"},
		{"with holdout", []string{"--users", "2,2", "--holdout", "0.1"}, 2, "--holdout"},
		{"with train", []string{"--users", "2,2", "--train", filepath.Join(dir, "t")}, 2, "--train"},
		{"frac 1", []string{"--users", "2,2", "--target-frac", "1"}, 2, "--target-frac"},
		{"min 1", []string{"--users", "2,2", "--min-positives", "1"}, 2, "--min-positives"},
		{"positive above the scale", []string{"--users", "2,2", "--positive", "6", "--scale", "1:5"}, 2, "--positive 6"},
		{"positive above every rating", []string{"--users", "2,2", "--positive", "9"}, 1, "--positive 9"},
		{"too many users", []string{"--users", "10,10"}, 1, "cannot hold out"},
		{"positive without users", []string{"--holdout", "0.1", "--positive", "4", "--train", filepath.Join(dir, "a"), "--test", filepath.Join(dir, "b")}, 2, "--users"},
		{"missing input", []string{"--users", "2,2", "--in", filepath.Join(dir, "none")}, 1, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"data", "split", "--in", in, "--format", "tsv", "--out", out}, tc.args...)
			_, errs, code := runCLI(t, args...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Fatalf("exit %d (want %d), message %q should name %q", code, tc.code, errs, tc.msg)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s was created despite the error", out)
			}
			for _, p := range []string{"t", "a", "b"} {
				if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
					t.Fatalf("%s was written", p)
				}
			}
		})
	}
	// An unwritable --out leaves nothing behind.
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, []byte("x"), 0o644)
	if _, _, code := runCLI(t, "data", "split", "--in", in, "--users", "2,2", "--out", filepath.Join(blocker, "sub")); code != 1 {
		t.Fatalf("unwritable --out: exit %d", code)
	}
}

func TestParseUserCounts(t *testing.T) {
	for _, tc := range []struct {
		in        string
		val, test int
		ok        bool
	}{
		{"600,600", 600, 600, true}, {" 0 , 5 ", 0, 5, true}, {"50,50", 50, 50, true},
		{"600", 0, 0, false}, {"1,0", 0, 0, false}, {"-1,2", 0, 0, false}, {"a,b", 0, 0, false},
		{"1,2,3", 0, 0, false}, {",", 0, 0, false}, {"", 0, 0, false}, {"1.5,2", 0, 0, false},
	} {
		v, te, err := parseUserCounts(tc.in)
		if (err == nil) != tc.ok || v != tc.val || te != tc.test {
			t.Errorf("parseUserCounts(%q) = %d, %d, %v", tc.in, v, te, err)
		}
	}
}

func FuzzParseUserCounts(f *testing.F) {
	for _, s := range []string{"600,600", "0,1", "1,0", "-1,1", "x", "1,,2", " 3 ,4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, te, err := parseUserCounts(s)
		if err == nil && (v < 0 || te < 1) {
			t.Fatalf("parseUserCounts(%q) = %d, %d", s, v, te)
		}
	})
}
