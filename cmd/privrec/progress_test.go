package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeClock advances by step on every reading.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time {
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		private bool
		want    []string // substrings of the output, in order
		not     []string
	}{
		{name: "non-private shows the objective", private: false,
			want: []string{"\rfw: iteration 1/4  objective 0.5  ETA 3s", "\rfw: iteration 2/4  objective 0.25  ETA 2s", "\rfw: iteration 4/4  objective 0.0625  done in 4s\n"}},
		{name: "private shows no objective", private: true,
			want: []string{"\rfw: iteration 1/4  ETA 3s", "\rfw: iteration 4/4  done in 4s\n"}, not: []string{"objective"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			clk := &fakeClock{t: time.Unix(0, 0), step: time.Second}
			p := newProgressLine(&b, "fw", tc.private, clk.now) // start at 0 s
			v := 1.0
			for i := 1; i <= 4; i++ {
				v /= 2
				p.Status(i, 4, "objective", v) // reported at 1, 2, 3, 4 s
			}
			p.finish() // the line is already ended: no second newline
			out := b.String()
			pos := 0
			for _, w := range tc.want {
				k := strings.Index(out[pos:], w)
				if k < 0 {
					t.Fatalf("output %q lacks %q after position %d", out, w, pos)
				}
				pos += k + len(w)
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("output %q contains %q", out, w)
				}
			}
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
				t.Errorf("output %q: want exactly one final newline", out)
			}
		})
	}
}

func TestProgressLineThrottleAndFinish(t *testing.T) {
	var b bytes.Buffer
	clk := &fakeClock{t: time.Unix(0, 0), step: 10 * time.Millisecond}
	p := newProgressLine(&b, "als", false, clk.now)
	for i := 1; i <= 50; i++ {
		p.Progress(i, 100) // 10 ms apart: throttled to one line per 250 ms
	}
	if n := strings.Count(b.String(), "\r"); n < 1 || n > 3 {
		t.Errorf("%d updates in 0.5 s of 10 ms iterations, want 1–3: %q", n, b.String())
	}
	if strings.Contains(b.String(), "\n") {
		t.Fatalf("line ended before the run did: %q", b.String())
	}
	p.finish() // the run stopped early (converged): end the line
	if !strings.HasSuffix(b.String(), "\n") {
		t.Errorf("finish left the line open: %q", b.String())
	}
	// A shorter line blanks the rest of a longer one.
	b.Reset()
	p = newProgressLine(&b, "x", false, clk.now)
	p.Status(1, 1000, "change", 0.123456789)
	p.every = 0
	p.Progress(2, 1000)
	lines := strings.Split(strings.TrimPrefix(b.String(), "\r"), "\r")
	if len(lines) != 2 || len(lines[1]) < len(strings.TrimRight(lines[0], " ")) {
		t.Errorf("second line does not cover the first: %q", b.String())
	}
}

func TestFmtDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "0s"}, {1400 * time.Millisecond, "1s"}, {65 * time.Second, "1m05s"}, {3723 * time.Second, "1h02m03s"}, {-time.Second, "0s"}} {
		if got := fmtDuration(tc.d); got != tc.want {
			t.Errorf("fmtDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestTrainProgressQuiet: train on a terminal shows a progress line on
// stderr, and with --json (or off a terminal) nothing besides logs.
func TestTrainProgressQuiet(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "train.tsv", func(u, i int) bool { return true })
	var prog bytes.Buffer
	oldOut, oldTerm := progressOut, progressTerminal
	t.Cleanup(func() { progressOut, progressTerminal = oldOut, oldTerm })
	progressOut = &prog
	var cat strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&cat, "%d\n", i)
	}
	catPath := filepath.Join(dir, "items.txt")
	if err := os.WriteFile(catPath, []byte(cat.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		private  bool
		terminal bool
		json     bool
		want     bool
	}{
		{"terminal", false, true, false, true},
		{"terminal --json", false, true, true, false},
		{"not a terminal", false, false, false, false},
		{"private method on a terminal", true, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog.Reset()
			progressTerminal = func() bool { return tc.terminal }
			args := []string{"train", "--data", data, "--format", "movielens-100k", "--method", "fw", "--iterations", "3",
				"--out", filepath.Join(dir, "fw.model")}
			if tc.private {
				args = []string{"train", "--data", data, "--format", "movielens-100k", "--method", "dpfw", "--iterations", "3",
					"--epsilon", "1", "--items", catPath, "--out", filepath.Join(dir, "dpfw.model"), "--user-state", filepath.Join(dir, "users")}
			}
			if tc.json {
				args = append(args, "--json")
			}
			_, errs, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("train exit %d: %s", code, errs)
			}
			if errs != "" {
				t.Errorf("stderr besides the progress output: %q", errs)
			}
			got := prog.String()
			switch {
			case tc.want && tc.private:
				// The iteration count only: no training objective of
				// the private data.
				if !strings.Contains(got, "dpfw: iteration 3/3  done in ") || strings.Contains(got, "objective") || !strings.HasSuffix(got, "\n") {
					t.Errorf("progress output %q", got)
				}
			case tc.want:
				if !strings.Contains(got, "fw: iteration 3/3  objective ") || !strings.HasSuffix(got, "\n") {
					t.Errorf("progress output %q", got)
				}
			case got != "":
				t.Errorf("progress written although quiet: %q", got)
			}
		})
	}
}
