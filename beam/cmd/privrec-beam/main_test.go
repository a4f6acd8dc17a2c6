package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/release"
)

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		// The test binary re-executed as privrec-beam itself: the same
		// main (flags, signals, exit status) as the built command.
		main()
		os.Exit(0)
	}
	beam.Init()
	os.Exit(m.Run())
}

// TestRunWritesModelAndReport: the command trains dp-popularity on Prism
// from a gzip-less TSV through a glob, applies --param, writes the model
// file with the seed and ε in it, records the release in the ledger
// (the second there) and prints a JSON report that says so. (One run: the command uses the process's
// flag set, as Beam's runner flags live there.)
func TestRunWritesModelAndReport(t *testing.T) {
	dir := t.TempDir()
	var data strings.Builder
	for u := range 50 {
		for j := range 1 + u%7 {
			data.WriteString("u" + itoa(u) + "\ti" + itoa((u+j)%12) + "\t" + itoa(1+(u+j)%5) + "\n")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "part-1.tsv"), []byte(data.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var items strings.Builder
	for j := range 12 {
		items.WriteString("i" + itoa(j) + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "items.txt"), []byte(items.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "pop.model")
	// The ledger already holds one release of this data (as privrec train
	// --ledger records it): this run is the second, and the report says so.
	ledger := filepath.Join(dir, "ledger.json")
	g := privacy.Guarantee{Epsilon: 1, Delta: 1e-6, Rho: 0.0243, Unit: privacy.UnitUser, Notion: privacy.Joint, Status: privacy.Proven}
	if _, err := release.RecordRelease(ledger, release.LedgerEntry{Method: "dp-popularity", Engine: "in-process", Guarantee: g}); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"--method", "dp-popularity", "--data", filepath.Join(dir, "part-*.tsv"), "--format", "tsv",
		"--items", filepath.Join(dir, "items.txt"), "--epsilon", "1", "--seed", "3", "--experiment", "--param", "cap=5",
		"--out", out, "--ledger", ledger, "--json"}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report %q: %v", stdout.String(), err)
	}
	if _, ok := rep["warnings"].([]any); !ok {
		t.Errorf("report without its warnings (privrec train's): %v", rep)
	}
	if rep["engine"] != "beam" || rep["pipelines"] != 1.0 || !strings.Contains(rep["rerun"].(string), "release 2 of this data") {
		t.Errorf("report %v", rep)
	}
	l, err := release.LoadLedger(ledger)
	if err != nil || len(l.Releases) != 2 || l.Releases[1].Engine != "beam" || !(l.Releases[1].Guarantee.Rho > 0) {
		t.Fatalf("ledger %+v (%v): want the Beam release recorded second, with its ρ", l, err)
	}
	if tot, _ := rep["ledger"].(map[string]any)["total"].(map[string]any); !(tot["rho"].(float64) > g.Rho) {
		t.Errorf("the ledger's total %v does not compose both releases", tot)
	}
	m, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Method != "dp-popularity" || m.Params["cap"] != 5.0 || m.Params["seed"] != 3.0 || len(m.ItemBias) != 12 {
		t.Errorf("model %s with params %v and %d item scores", m.Method, m.Params, len(m.ItemBias))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
