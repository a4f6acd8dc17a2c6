package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/internal/testtier"
)

func TestExperimentCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sweep.json")
	os.WriteFile(cfg, []byte(`{
  "name": "cli",
  "datasets": [{"name": "small", "source": "lowrank-synthetic",
    "params": {"users": 60, "items": 40, "rank": 2, "obs": 0.3, "levels": 5, "holdout": 0.2},
    "scale": [1, 5], "method_params": {"damping": 5}}],
  "methods": [{"method": "bias", "params": {"damping": "20"}}, {"method": "global-mean"}],
  "epsilons": [1],
  "runs": 2,
  "metric": "rmse"
}`), 0o644)
	out := filepath.Join(dir, "out")
	// Off a terminal, progress comes as whole lines without carriage
	// returns; on one, a line rewritten in place.
	var prog bytes.Buffer
	oldOut, oldTerm := progressOut, progressTerminal
	t.Cleanup(func() { progressOut, progressTerminal = oldOut, oldTerm })
	progressOut, progressTerminal = &prog, func() bool { return false }
	stdout, stderr, code := runCLI(t, "experiment", "--config", cfg, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(prog.String(), "\r") || !strings.Contains(prog.String(), "experiment cli: 4/4 runs (100%)") {
		t.Errorf("progress off a terminal: %q", prog.String())
	}
	prog.Reset()
	progressTerminal = func() bool { return true }
	if _, stderr, code := runCLI(t, "experiment", "--config", cfg, "--out", filepath.Join(dir, "out-tty")); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(prog.String(), "\rexperiment cli: 4/4 runs") {
		t.Errorf("progress on a terminal: %q", prog.String())
	}
	if !strings.Contains(stdout, "report.md") {
		t.Fatalf("stdout %q", stdout)
	}
	res, _ := os.ReadFile(filepath.Join(out, "results.csv"))
	if n := strings.Count(string(res), "\n"); n != 5 {
		t.Fatalf("results.csv has %d lines, want header + 4 runs", n)
	}
	for _, f := range []string{"results.csv", "summary.csv", "report.md", "fig-small.png", "fig-small.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// Resuming does nothing new.
	_, stderr, code = runCLI(t, "experiment", "--config", cfg, "--out", out)
	res2, _ := os.ReadFile(filepath.Join(out, "results.csv"))
	if code != 0 || string(res2) != string(res) {
		t.Fatalf("resume: exit %d, %s; results changed: %v", code, stderr, string(res2) != string(res))
	}
	// A config typo is an error naming the field; so is an unknown method parameter.
	os.WriteFile(cfg, []byte(`{"name": "x", "epsilon": [1]}`), 0o644)
	if _, stderr, code = runCLI(t, "experiment", "--config", cfg, "--out", out); code != 1 || !strings.Contains(stderr, "epsilon") {
		t.Fatalf("typo: exit %d, %s", code, stderr)
	}
	os.WriteFile(cfg, []byte(`{"name": "x", "datasets": [{"name": "s", "source": "lowrank-synthetic", "params": {"users": 20, "items": 10}}],
  "methods": [{"method": "bias", "params": {"dampign": 5}}], "metric": "rmse"}`), 0o644)
	if _, stderr, code = runCLI(t, "experiment", "--config", cfg, "--out", filepath.Join(dir, "typo")); code != 1 || !strings.Contains(stderr, `"dampign"`) {
		t.Fatalf("unknown parameter: exit %d, %s", code, stderr)
	}
}

func TestReproduceCommand(t *testing.T) {
	stdout, _, code := runCLI(t, "reproduce", "--list")
	if code != 0 {
		t.Fatalf("list exit %d", code)
	}
	for _, name := range []string{"000-fig1", "000-fig2", "000-fig3", "000-fig4", "000-fig5", "000-clear-speed",
		"001-fig2a", "001-fig2b", "001-fig2c", "001-table-synthetic", "001-table-ml1m", "001-table-jester", "001-gram-signal",
		"003-rmse", "003-ml100k", "004-fig2", "004-fig3", "004-fig4", "dpals-ml1m", "dpals-jester", "dpals-synthetic"} {
		if !strings.Contains(stdout, name) {
			t.Errorf("--list lacks %s", name)
		}
	}
	if _, stderr, code := runCLI(t, "reproduce", "no-such"); code != 2 || !strings.Contains(stderr, "unknown reproduction") {
		t.Errorf("unknown name: exit %d, %s", code, stderr)
	}
	// A missing data file is named, with where to get it.
	_, stderr, code := runCLI(t, "reproduce", "000-fig2", "--data-dir", t.TempDir(), "--out", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "u1.base") || !strings.Contains(stderr, "grouplens.org") {
		t.Errorf("missing data: exit %d, %s", code, stderr)
	}
	stdout, _, code = runCLI(t, "reproduce", "000-fig3", "--print-config")
	if code != 0 || !strings.Contains(stdout, `"name": "000-fig3-quick"`) || !strings.Contains(stdout, `"scale": [`) ||
		!strings.Contains(stdout, `"method_params"`) || !strings.Contains(stdout, `"threshold": 1.5`) {
		t.Errorf("print-config: exit %d, %s", code, stdout)
	}
	// A measurement that is not a sweep: no config; missing data named.
	if _, stderr, code := runCLI(t, "reproduce", "001-gram-signal", "--print-config"); code != 2 || !strings.Contains(stderr, "not a sweep") {
		t.Errorf("measurement print-config: exit %d, %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "reproduce", "001-gram-signal", "--data-dir", t.TempDir(), "--out", t.TempDir()); code != 1 || !strings.Contains(stderr, "ratings.tsv") {
		t.Errorf("measurement missing data: exit %d, %s", code, stderr)
	}
	// Part of a top-N grid: what the grid lacks, or a subset of a
	// measurement that runs as a whole, is refused before anything is read
	// or written.
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct{ args, msg string }{
		{"topn-ml100k --scale paper --epsilons 3", "ε = 3 is not in the grid"},
		{"topn-ml100k --methods ease,nope", `method "nope" is not in the grid`},
		{"topn-ml100k --seeds 1", "noise seed 1 is not in the grid"}, // quick: one seed
		{"topn-ml100k --seeds x", `"x" is not a noise seed index`},
		{"topn-ml100k --epsilons 0", `"0" is not an ε > 0`},
		{"001-gram-signal --methods ease", "runs as a whole"},
	} {
		_, stderr, code := runCLI(t, append(append([]string{"reproduce"}, strings.Fields(tc.args)...), "--data-dir", t.TempDir(), "--out", out)...)
		if code != 2 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("reproduce %s: exit %d, %s", tc.args, code, stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused subset created the output directory")
	}
}

// The quick scale of dpals-synthetic (1 000 generated users) runs end to
// end: every method of issue 13's comparison trains and is scored (about
// 3 CPU-s).
func TestReproduceDPALSSyntheticQuick(t *testing.T) {
	testtier.Long(t) // trains 13 models
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "reproduce", "dpals-synthetic", "--out", dir, "--workers", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| dpals | 8 |", "| dpals --steps 2 | 8 |", "| dp-bias | 8 |", "| dpfw | 8 |", "| dpsvd | 8 |", "| mm | 8 |", "| als (non-private) |", "| global mean (non-private) |"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(string(rep), "Runs recorded: 14 of 14;") {
		t.Errorf("not every run was recorded:\n%s", rep)
	}
}

// Without --data-dir the data directory comes from PRIVREC_DATA_DIR, and
// without either, relative dataset paths are relative to the working
// directory (there is no other default).
func TestReproduceDataDirEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PRIVREC_DATA_DIR", dir)
	_, stderr, code := runCLI(t, "reproduce", "000-fig2", "--out", t.TempDir())
	if want := filepath.Join(dir, "ml-100k", "u1.base"); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("PRIVREC_DATA_DIR=%s: exit %d, want %s named: %s", dir, code, want, stderr)
	}
	// The flag wins over the variable.
	other := t.TempDir()
	_, stderr, code = runCLI(t, "reproduce", "000-fig2", "--data-dir", other, "--out", t.TempDir())
	if want := filepath.Join(other, "ml-100k", "u1.base"); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("--data-dir %s: exit %d, want %s named: %s", other, code, want, stderr)
	}
	t.Setenv("PRIVREC_DATA_DIR", "")
	_, stderr, code = runCLI(t, "reproduce", "000-fig2", "--out", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "PRIVREC_DATA_DIR is not set") {
		t.Errorf("no data dir: exit %d, %s", code, stderr)
	}
	stdout, stderr, _ := runCLI(t, "reproduce", "--help")
	if !strings.Contains(stdout+stderr, "PRIVREC_DATA_DIR") {
		t.Errorf("reproduce --help does not name PRIVREC_DATA_DIR:\n%s%s", stdout, stderr)
	}
}
