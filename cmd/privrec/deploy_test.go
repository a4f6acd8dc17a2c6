package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDeployConfigs: the configuration files in deploy/ name only serve's
// flags with values they accept: serving them (with the catalogue and
// database swapped for temporary ones) fails only because no collection
// was created there, never on a line of the file.
func TestDeployConfigs(t *testing.T) {
	dir := t.TempDir()
	items := filepath.Join(dir, "items.txt")
	must(t, os.WriteFile(items, []byte("a\nb\n"), 0o644))
	for _, f := range []string{"serve.conf", "container.conf"} {
		path := filepath.Join("..", "..", "deploy", f)
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"serve", "--config", path, "--items", items, "--db", "sqlite:" + filepath.Join(dir, f+".db")}, &out, &errb)
		if code == 0 || strings.Contains(errb.String(), f+":") || !strings.Contains(errb.String(), "no collection") {
			t.Errorf("%s: exit %d: %s", f, code, errb.String())
		}
	}
}

// TestSystemdUnit validates deploy/privrec.service with systemd-analyze
// verify where systemd is installed (its ExecStart binary swapped for an
// executable that exists here).
func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit is not verified here")
	}
	b, err := os.ReadFile("../../deploy/privrec.service")
	must(t, err)
	exe, err := os.Executable()
	must(t, err)
	unit := strings.ReplaceAll(string(b), "ExecStart=/usr/local/bin/privrec ", "ExecStart="+exe+" ")
	if unit == string(b) {
		t.Fatal("the unit's ExecStart does not run /usr/local/bin/privrec")
	}
	path := filepath.Join(t.TempDir(), "privrec.service")
	must(t, os.WriteFile(path, []byte(unit), 0o644))
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestDockerfile: docker cannot run in CI here (no daemon), so the recipe
// is checked for what can go stale: its Go version is go.mod's, and the
// files it copies exist.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../../deploy/Dockerfile")
	must(t, err)
	mod, err := os.ReadFile("../../go.mod")
	must(t, err)
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVer == nil || !bytes.Contains(b, []byte("FROM golang:"+string(goVer[1])+"-")) {
		t.Errorf("the Dockerfile does not build with go.mod's Go %s", goVer[1])
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY (deploy/\S+)`).FindAllSubmatch(b, -1) {
		if _, err := os.Stat(filepath.Join("..", "..", string(m[1]))); err != nil {
			t.Errorf("the Dockerfile copies %s: %v", m[1], err)
		}
	}
}
