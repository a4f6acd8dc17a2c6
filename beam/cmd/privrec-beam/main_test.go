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
)

func TestMain(m *testing.M) {
	beam.Init()
	os.Exit(m.Run())
}

// TestRunWritesModelAndReport: the command trains dp-popularity on Prism
// from a gzip-less TSV through a glob, applies --param, writes the model
// file with the seed and ε in it, and prints a JSON report that says a
// re-run is a second release. (One run: the command uses the process's
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
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"--method", "dp-popularity", "--data", filepath.Join(dir, "part-*.tsv"), "--format", "tsv",
		"--items", filepath.Join(dir, "items.txt"), "--epsilon", "1", "--seed", "3", "--experiment", "--param", "cap=5",
		"--out", out, "--json"}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report %q: %v", stdout.String(), err)
	}
	if rep["engine"] != "beam" || rep["pipelines"] != 1.0 || !strings.Contains(rep["rerun"].(string), "new release") {
		t.Errorf("report %v", rep)
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
