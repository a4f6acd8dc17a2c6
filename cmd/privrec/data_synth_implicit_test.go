package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// privrec data synth --setup implicit writes exactly the interactions
// asked for, the same file for the same seed, and refuses bad settings
// (exit 2, nothing written).
func TestDataSynthImplicit(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "i.tsv")
	args := []string{"data", "synth", "--setup", "implicit", "--users", "500", "--items", "80", "--interactions", "6000",
		"--rank", "4", "--pop-exponent", "1.1", "--activity-spread", "0.7", "--taste", "0.6", "--seed", "3", "--out", out, "--json"}
	stdout, errs, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep synthReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("bad JSON %q: %v", stdout, err)
	}
	if rep.Users != 500 || rep.Ratings != 6000 || rep.Items > 80 {
		t.Fatalf("report %+v", rep)
	}
	m := readTSV(t, out)
	if m.Len() != 6000 || m.NumUsers() != 500 {
		t.Fatalf("file holds %d interactions of %d users", m.Len(), m.NumUsers())
	}
	before, _ := os.ReadFile(out)
	if _, errs, code := runCLI(t, args...); code != 0 {
		t.Fatalf("rerun exit %d: %s", code, errs)
	}
	after, _ := os.ReadFile(out)
	if string(before) != string(after) {
		t.Fatal("same seed wrote different data")
	}
	bad := filepath.Join(dir, "bad.tsv")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"truth", []string{"--truth", filepath.Join(dir, "t.tsv")}},
		{"too few interactions", []string{"--users", "100", "--interactions", "50"}},
		{"too many interactions", []string{"--users", "10", "--items", "10", "--interactions", "1000"}},
		{"taste above 1", []string{"--taste", "2"}},
		{"flag of another setup", []string{"--obs", "0.5"}},
		{"rank above items", []string{"--items", "5", "--rank", "10", "--users", "10", "--interactions", "20"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCLI(t, append([]string{"data", "synth", "--setup", "implicit", "--out", bad}, tc.args...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, errs)
			}
			if _, err := os.Stat(bad); err == nil {
				t.Fatal("written despite errors")
			}
		})
	}
}
