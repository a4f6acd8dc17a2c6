package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A top-N method has no RMSE: dap simulate's lines leave it out rather
// than print "RMSE NaN" (issue 40).
func TestPrintSimLeavesOutMissingMetrics(t *testing.T) {
	nan := jsonFloat(math.NaN())
	topN := simResult{Method: "dp-ease", Seed: 1,
		Central:        simMetrics{RMSE: nan, Recall: 0.25},
		CentralHalfRho: simMetrics{RMSE: nan, Recall: 0.2},
		DAP:            simMetrics{RMSE: nan, Recall: nan}}
	rating := simResult{Method: "dp-bias", Seed: 1,
		Central:        simMetrics{RMSE: 0.9, Recall: 0.1},
		CentralHalfRho: simMetrics{RMSE: 0.95, Recall: 0.1},
		DAP:            simMetrics{RMSE: 0.91, Recall: 0.1}}
	var b bytes.Buffer
	printSim(&b, &topN)
	printSim(&b, &rating)
	printSimMeans(&b, []simResult{topN, rating})
	out := b.String()
	if strings.Contains(out, "NaN") {
		t.Errorf("NaN printed:\n%s", out)
	}
	for _, want := range []string{"dp-ease seed 1: central Recall@20 0.2500 (", "two aggregators not scored (",
		"dp-bias seed 1: central RMSE 0.9000 Recall@20 0.1000", "dp-ease, mean of 1: central Recall@20 0.2500;"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The command's name is said once: packages that prefix their errors with
// their own name (client, dap) do not make it "privrec client: client:".
func TestErrorPrefixSaidOnce(t *testing.T) {
	for _, tc := range []struct{ name, msg, want string }{
		{"client", "client: GET /v1/me: refused", "GET /v1/me: refused"},
		{"dap", "dap: dap: task: bad", "task: bad"},
		{"serve", "serve: listen tcp: bad port", "listen tcp: bad port"},
		{"train", "dp-ease: no ratings", "dp-ease: no ratings"},
		{"dap", "dapper: x", "dapper: x"},
	} {
		if got := errorText(tc.name, errors.New(tc.msg)); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.name, tc.msg, got, tc.want)
		}
	}
	_, stderr, code := runCLI(t, "client", "--server", "http://127.0.0.1:1", "--token", "t", "status")
	if code != 1 || !strings.HasPrefix(stderr, "privrec client: GET /v1/me") || strings.Contains(stderr, "client: client:") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// --out naming a directory is refused before training, naming the
// directory and no temporary file, and nothing is written.
func TestTrainOutDirectoryRefused(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(u, i int) bool { return true })
	outDir := filepath.Join(dir, "models")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(dir, "ledger.json")
	_, stderr, code := runCLI(t, "train", "--data", data, "--format", "tsv", "--method", "bias", "--out", outDir, "--ledger", ledger)
	if code != 2 || !strings.Contains(stderr, "--out "+outDir+" is a directory") || strings.Contains(stderr, ".privrec-") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
		t.Errorf("written into the directory: %v", entries)
	}
	if _, err := os.Stat(ledger); !os.IsNotExist(err) {
		t.Errorf("the ledger was written: %v", err)
	}
}
