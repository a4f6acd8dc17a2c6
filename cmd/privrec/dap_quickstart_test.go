package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDapQuickstart runs docs/aggregation-quickstart.sh — the quick start
// of docs/AGGREGATION.md, which quotes it verbatim — with this test
// binary as privrec on the PATH: two role servers, a dp-popularity task
// made by privrec dap task create, four devices contributing, collect,
// the model published, and privrec dap recommend giving a device her
// list.
func TestDapQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick start: two servers and a dozen privrec commands")
	}
	script, err := os.ReadFile("../../docs/aggregation-quickstart.sh")
	must(t, err)
	doc, err := os.ReadFile("../../docs/AGGREGATION.md")
	must(t, err)
	body := string(script)[strings.Index(string(script), "set -euo pipefail"):]
	if !strings.Contains(string(doc), body) {
		t.Error("docs/AGGREGATION.md does not quote docs/aggregation-quickstart.sh verbatim (from set -euo pipefail on)")
	}
	bin := t.TempDir()
	exe, err := os.Executable()
	must(t, err)
	must(t, os.Symlink(exe, filepath.Join(bin, "privrec")))
	work := t.TempDir()
	abs, err := filepath.Abs("../../docs/aggregation-quickstart.sh")
	must(t, err)
	cmd := exec.Command("bash", abs)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), envAsPrivrec+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start failed: %v\n%s", err, out)
	}
	for _, want := range []string{"task pop-1-counts created", "charged ρ", "task pop-1-counts released", "model pop published", " 1. ", " 3. "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the quick start's output lacks %q:\n%s", want, out)
		}
	}
}
