package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asMain is the environment variable under which the test binary runs
// privrec-beam's main instead of the tests.
const asMain = "PRIVREC_BEAM_AS_MAIN"

// sandbox is one run of privrec-beam with its own temporary directory
// (TMPDIR), home and working directory, so that every file it leaves is
// found.
type sandbox struct {
	root, out, work string
}

func newSandbox(t *testing.T) *sandbox {
	root := t.TempDir()
	for _, d := range []string{"tmp", "home", "cwd", "out"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return &sandbox{root: root, out: filepath.Join(root, "out", "m.model"), work: filepath.Join(root, "work")}
}

// command is privrec-beam with args in the sandbox (this test binary
// re-executed as the command).
func (b *sandbox) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Dir = filepath.Join(b.root, "cwd")
	cmd.Env = append(os.Environ(), asMain+"=1", "TMPDIR="+filepath.Join(b.root, "tmp"), "HOME="+filepath.Join(b.root, "home"))
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// files lists the sandbox's files (relative paths) with their modes.
func (b *sandbox) files(t *testing.T) map[string]fs.FileMode {
	out := map[string]fs.FileMode{}
	err := filepath.WalkDir(b.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.root, path)
		out[rel] = info.Mode().Perm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// population writes a small ratings file (users × a few items each), a
// copy with one malformed line near its end, and the catalogue.
func population(t *testing.T) (good, bad, items string) {
	dir := t.TempDir()
	var b strings.Builder
	for u := range 3000 {
		for j := range 1 + u%9 {
			fmt.Fprintf(&b, "u%d\ti%d\t%d\n", u, (u+3*j)%40, 1+(u+j)%5)
		}
	}
	good, bad, items = filepath.Join(dir, "good.tsv"), filepath.Join(dir, "bad.tsv"), filepath.Join(dir, "items.txt")
	var cat strings.Builder
	for j := range 40 {
		fmt.Fprintf(&cat, "i%d\n", j)
	}
	for path, text := range map[string]string{good: b.String(), bad: b.String() + "u9999\ti1\tfive\n", items: cat.String()} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return good, bad, items
}

// TestExitLeavesNoSums runs privrec-beam (this binary re-executed as the
// command) to every kind of end — success, a refused flag, a refused row,
// SIGINT and SIGTERM while its second pipeline runs — without and with
// --work, each in a sandbox whose TMPDIR, HOME and working directory are
// its own. Whatever the end, no file holding an un-noised sum (nor any
// other file) is left outside --work and the model it was asked for;
// what --work holds is mode 0600 in a 0700 directory; a refused flag
// creates no --work. (Deterministic but for the signal's timing: it is
// sent when the first of dp-ease's two pipelines has logged its end, and
// the run must then end unsuccessfully.)
func TestExitLeavesNoSums(t *testing.T) {
	if testing.Short() {
		t.Skip("runs privrec-beam 8 times on Prism (-short skips it)")
	}
	good, bad, items := population(t)
	common := []string{"--format", "tsv", "--items", items, "--scale", "1:5", "--seed", "2", "--experiment"}
	for _, tc := range []struct {
		name    string
		args    []string
		work    bool
		signal  os.Signal
		ok      bool
		stderr  string // the first line of stderr holds it
		written bool   // the run gets to write to --work
	}{
		{name: "success", args: []string{"--method", "dp-ease", "--data", good}, ok: true},
		{name: "success --work", args: []string{"--method", "dp-popularity", "--data", good}, work: true, ok: true, written: true},
		{name: "refused --epsilon 0 --work", args: []string{"--method", "dp-ease", "--data", good, "--epsilon", "0"}, work: true, stderr: "ε = 0"},
		{name: "refused row", args: []string{"--method", "dp-ease", "--data", bad}, stderr: bad + ":"},
		{name: "refused row --work", args: []string{"--method", "dp-ease", "--data", bad}, work: true, stderr: bad + ":", written: true},
		{name: "SIGINT", args: []string{"--method", "dp-ease", "--data", good}, signal: os.Interrupt, stderr: "interrupted"},
		{name: "SIGTERM", args: []string{"--method", "dp-ease", "--data", good}, signal: syscall.SIGTERM, stderr: "interrupted"},
		{name: "SIGTERM --work", args: []string{"--method", "dp-ease", "--data", good}, work: true, signal: syscall.SIGTERM, stderr: "interrupted", written: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSandbox(t)
			args := append(append(slices.Clone(tc.args), common...), "--out", b.out)
			if tc.work {
				args = append(args, "--work", b.work)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			stderr, err := runSandboxed(t, b.command(ctx, args...), tc.signal)
			first := errorLine(stderr)
			if tc.ok != (err == nil) || tc.stderr != "" && !strings.Contains(first, tc.stderr) {
				t.Fatalf("exit %v, error line %q (want success %v, %q in it); stderr:\n%s", err, first, tc.ok, tc.stderr, stderr)
			}
			left := b.files(t)
			for f, mode := range left {
				switch {
				case f == "out/m.model" && tc.ok:
				case tc.work && strings.HasPrefix(f, "work/"):
					if mode != 0o600 {
						t.Errorf("%s has mode %v, want 0600", f, mode)
					}
				default:
					t.Errorf("left %s (mode %v)", f, mode)
				}
			}
			if tc.work {
				info, err := os.Stat(b.work)
				switch {
				case !tc.written && err == nil:
					t.Errorf("--work %s was created by a run refused before any pipeline", b.work)
				case tc.written && err != nil:
					t.Errorf("--work: %v", err)
				case tc.written && info.Mode().Perm() != 0o700:
					t.Errorf("--work has mode %v, want 0700", info.Mode().Perm())
				}
			}
		})
	}
}

// errorLine is the first line of the command's error on stderr (after
// the pipelines' log lines).
func errorLine(stderr string) string {
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "privrec-beam: ") {
			return strings.TrimSuffix(line, "\n")
		}
	}
	return ""
}

// runSandboxed runs cmd and returns its stderr. With sig, it sends sig
// once the first pipeline has logged its end ("beam pipeline done"),
// while the second runs.
func runSandboxed(t *testing.T, cmd *exec.Cmd, sig os.Signal) (string, error) {
	var stderr bytes.Buffer
	if sig == nil {
		cmd.Stderr = &stderr
		err := cmd.Run()
		return stderr.String(), err
	}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sent := false
	sc := bufio.NewScanner(pipe)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "beam pipeline done") && !sent {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			sent = true
		}
		stderr.WriteString(line + "\n")
	}
	err = cmd.Wait()
	if !sent {
		t.Fatalf("the run ended (%v) before its first pipeline logged its end", err)
	}
	return stderr.String(), err
}

// TestErrorsNameTheReason: a wrong --format, a directory as --data, a
// missing --format and an unknown flag each fail with an error whose
// first line names the reason (for the wrong format: the first refused
// row's file, line and reason, and the count), without the runner's flag
// dump, leaving nothing in the sandbox; --help lists privrec-beam's flags
// and then Beam's.
func TestErrorsNameTheReason(t *testing.T) {
	if testing.Short() {
		t.Skip("runs privrec-beam 5 times (-short skips it)")
	}
	dir := t.TempDir()
	dat, items := filepath.Join(dir, "ratings.dat"), filepath.Join(dir, "items.txt")
	var b, cat strings.Builder
	for u := range 200 {
		fmt.Fprintf(&b, "%d::%d::%d::978300760\n", u+1, u%17+1, 1+u%5)
	}
	for j := range 17 {
		fmt.Fprintf(&cat, "%d\n", j+1)
	}
	if err := os.WriteFile(dat, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(items, []byte(cat.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // in the error's first line
		help bool
	}{
		{"wrong --format", []string{"--data", dat, "--format", "tsv"}, []string{dat + ":1: ", "all 200 rows read from the start of " + dat + " refused"}, false},
		{"directory as --data", []string{"--data", dir, "--format", "movielens"}, []string{"--data " + dir + " is a directory"}, false},
		{"missing --format", []string{"--data", dat}, []string{"--format is required for files"}, false},
		{"unknown flag", []string{"--data", dat, "--formt", "tsv"}, []string{"flag provided but not defined: -formt"}, false},
		{"--help", []string{"--help"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSandbox(t)
			args := append([]string{"--method", "dp-popularity", "--items", items, "--out", sb.out}, tc.args...)
			cmd := sb.command(context.Background(), args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if left := sb.files(t); len(left) > 0 {
				t.Errorf("left %v", left)
			}
			if tc.help {
				own, runner, found := strings.Cut(stdout.String(), "Beam's flags")
				if err != nil || !found || !strings.Contains(own, "\n  -format ") || strings.Contains(own, "\n  -runner ") || !strings.Contains(runner, "\n  -runner ") {
					t.Errorf("--help: %v; stdout:\n%s", err, stdout.String())
				}
				return
			}
			first := errorLine(stderr.String())
			for _, w := range tc.want {
				if err == nil || !strings.Contains(first, w) {
					t.Errorf("exit %v, error line %q: want %q in it", err, first, w)
				}
			}
			if strings.Contains(first, "leave --format out") {
				t.Errorf("error line %q tells to leave --format out, which privrec-beam needs", first)
			}
			// Beyond the pipelines' log lines (time=…), the error alone
			// (with the next refused rows): no flag dump.
			var other []string
			for line := range strings.Lines(stderr.String()) {
				if !strings.HasPrefix(line, "time=") {
					other = append(other, line)
				}
			}
			if strings.Contains(stderr.String(), "-runner") || len(other) > 3 {
				t.Errorf("stderr is a flag dump or long:\n%s", stderr.String())
			}
		})
	}
}
