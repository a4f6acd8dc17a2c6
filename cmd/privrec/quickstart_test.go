//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickStart extracts the bash block under the heading "### name" of a
// document.
func quickStart(t *testing.T, doc []byte, name string) string {
	t.Helper()
	re := regexp.MustCompile("(?s)\n### " + regexp.QuoteMeta(name) + "\n.*?```bash\n(.*?)```")
	m := re.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/SERVICE.md has no ```bash block under ### %s", name)
	}
	return string(m[1])
}

// TestServiceQuickStarts runs docs/SERVICE.md's quick starts as written,
// with bash, in an empty directory: `privrec` on PATH is this test binary
// acting as privrec (TestMain), PORT a free port. The local one must
// publish and recommend with predicted ratings; the central one must
// publish dp-ease over six people and be warned in publish and recommend,
// and recommend must show a ranking.
func TestServiceQuickStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick starts' servers and clients (about 60 processes)")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash: the quick starts are bash")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "SERVICE.md"))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "privrec")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want []string
		not  []string
	}{
		{"Local mode", []string{"ε = 4; you have spent 4 of your budget 8", `"device_spent": 8`, "spent ε = 8 of 8", "Published release 1 (ldp-rr)", "predicted rating"}, []string{"WARNING"}},
		{"Central mode", []string{"as you entered them, are with the operator", "ε = 0 of your budget ε = 8 at δ = 1e-6", "WARNING: too few users for this ε",
			"with 6 users", "Releases charged you ε = ", "a ranking, best first", "WARNING: only 2 item(s) are modelled"}, []string{"predicted rating", "randomize"}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			script := quickStart(t, doc, tc.name)
			dir := t.TempDir()
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), envAsPrivrec+"=1",
				"PORT="+strconv.Itoa(freePort(t)), "HOME="+dir, "PRIVREC_LEDGER_DIR="+filepath.Join(dir, "ledgers"), "PRIVREC_LEDGER=", "PRIVREC_TOKEN=")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the server it starts in the background is stopped with it
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var runErr error
			select {
			case runErr = <-done:
			case <-time.After(3 * time.Minute):
				runErr = context.DeadlineExceeded
			}
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group
			if runErr != nil {
				t.Fatalf("the %s quick start failed: %v\n%s", tc.name, runErr, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the %s quick start does not print %q:\n%s", tc.name, w, out.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("the %s quick start prints %q:\n%s", tc.name, w, out.String())
				}
			}
		})
	}
}
