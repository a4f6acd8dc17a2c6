package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestDataSynth(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name                  string
		args                  []string
		users, items, ratings int
		truthMax              float64
	}{
		{"onebit defaults", []string{"--setup", "onebit"}, 100, 100, 1500, 1},
		{"onebit logistic alpha 2", []string{"--setup", "onebit", "--link", "logistic", "--alpha", "2", "--users", "30", "--items", "20", "--obs", "0.5"}, 30, 20, 300, 2},
		{"jointdp small", []string{"--setup", "jointdp", "--users", "200", "--items", "40", "--per-user", "8"}, 200, 40, 1600, 1},
		{"ldp levels", []string{"--setup", "ldp", "--users", "50", "--items", "40", "--rank", "2", "--obs", "0.25", "--levels", "5"}, 50, 40, 500, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outPath, truthPath := filepath.Join(dir, tc.name+".tsv"), filepath.Join(dir, tc.name+".truth.tsv")
			args := append([]string{"data", "synth", "--seed", "5", "--out", outPath, "--truth", truthPath, "--json"}, tc.args...)
			out, errs, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep synthReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("bad JSON %q: %v", out, err)
			}
			if rep.Users != tc.users || rep.Items != tc.items || rep.Ratings != tc.ratings || (tc.truthMax > 0 && math.Abs(rep.TruthMax-tc.truthMax) > 1e-9) || rep.TruthMax > 5 {
				t.Fatalf("report %+v", rep)
			}
			obs := readTSV(t, outPath)
			truth := readTSV(t, truthPath)
			if obs.Len() != tc.ratings || truth.Len() != tc.users*tc.items {
				t.Fatalf("observed %d ratings, truth %d entries", obs.Len(), truth.Len())
			}
			// The truth is aligned with the observed IDs.
			if aligned, dropped := truth.Align(obs); dropped != 0 || aligned.Len() != obs.Len() {
				t.Fatalf("observed ratings outside the truth: %d dropped", dropped)
			}
			before, _ := os.ReadFile(outPath)
			if _, errs, code := runCLI(t, args...); code != 0 {
				t.Fatalf("rerun exit %d: %s", code, errs)
			}
			after, _ := os.ReadFile(outPath)
			if string(before) != string(after) {
				t.Fatal("same seed wrote different data")
			}
		})
	}
}

func TestDataSynthErrors(t *testing.T) {
	dir := t.TempDir()
	o, tr := filepath.Join(dir, "o.tsv"), filepath.Join(dir, "t.tsv")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no setup", []string{"--out", o}},
		{"unknown setup", []string{"--setup", "tensor", "--out", o}},
		{"no out", []string{"--setup", "onebit"}},
		{"flag of another setup", []string{"--setup", "jointdp", "--link", "probit", "--out", o}},
		{"levels for onebit", []string{"--setup", "onebit", "--levels", "5", "--out", o}},
		{"obs > 1", []string{"--setup", "onebit", "--obs", "2", "--out", o}},
		{"levels 1", []string{"--setup", "ldp", "--levels", "1", "--out", o}},
		{"bad link", []string{"--setup", "onebit", "--link", "cauchy", "--out", o}},
		{"same files", []string{"--setup", "onebit", "--out", o, "--truth", o}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCLI(t, append([]string{"data", "synth"}, tc.args...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, errs)
			}
		})
	}
	// A generator error (per-user above items) exits 1; nothing is written.
	_, errs, code := runCLI(t, "data", "synth", "--setup", "jointdp", "--items", "10", "--per-user", "11", "--out", o, "--truth", tr)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	for _, p := range []string{o, tr} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s written despite errors", p)
		}
	}
}
