package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Training progress goes to progressOut when progressTerminal says it is
// a terminal (tests replace both). Terminal detection is isTerminal's
// os.ModeCharDevice check: golang.org/x/term is not a dependency of the
// module, and the check needs no new one (a pipe or a file is not a
// character device, so redirected or captured stderr stays quiet).
var (
	progressOut      io.Writer = os.Stderr
	progressTerminal           = func() bool { return isTerminal(os.Stderr) }
)

// progressLine reports a long run on one terminal line, rewritten in place
// with \r: "NAME: iteration i/T  [objective v]  ETA d". The value is shown
// only for non-private methods (private is false): a private method's
// training objective is a statistic of the private data that no noise
// covers, so a private run shows the iteration count and the ETA only,
// whatever its solver passes. Updates are throttled to every so often
// except the last; done ≥ total ends the line, and finish ends a line
// left open by a run that stopped early.
type progressLine struct {
	mu      sync.Mutex // a solver may report from its worker goroutines
	w       io.Writer
	name    string
	private bool
	now     func() time.Time
	every   time.Duration

	start     time.Time // when the reporter was made (training started)
	first     time.Time // when the first iteration was reported
	firstDone int
	last      time.Time // when a line was last written
	width     int       // length of the last line written (to blank it)
	open      bool      // a line was written and not yet ended
}

func newProgressLine(w io.Writer, name string, private bool, now func() time.Time) *progressLine {
	if now == nil {
		now = time.Now
	}
	return &progressLine{w: w, name: name, private: private, now: now, every: 250 * time.Millisecond, start: now()}
}

// Progress reports iteration done of total (methods.Env.Progress).
func (p *progressLine) Progress(done, total int) { p.report(done, total, "", 0) }

// Status reports iteration done of total and the tracked value
// (methods.Env.Status); the value is dropped for private methods.
func (p *progressLine) Status(done, total int, what string, value float64) {
	if p.private {
		what = ""
	}
	p.report(done, total, what, value)
}

func (p *progressLine) report(done, total int, what string, value float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.now()
	if p.first.IsZero() {
		p.first, p.firstDone = t, done
	}
	final := total > 0 && done >= total
	if !final && !p.last.IsZero() && t.Sub(p.last) < p.every {
		return
	}
	p.last = t
	var b strings.Builder
	fmt.Fprintf(&b, "%s: iteration %d", p.name, done)
	if total > 0 {
		fmt.Fprintf(&b, "/%d", total)
	}
	if what != "" {
		fmt.Fprintf(&b, "  %s %.6g", what, value)
	}
	if final {
		fmt.Fprintf(&b, "  done in %s", fmtDuration(t.Sub(p.start)))
	} else if eta, ok := p.eta(t, done, total); ok {
		fmt.Fprintf(&b, "  ETA %s", fmtDuration(eta))
	}
	line := b.String()
	pad := ""
	if n := len([]rune(line)); n < p.width {
		pad = strings.Repeat(" ", p.width-n)
	}
	p.width = len([]rune(line))
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.open = true
	if final {
		fmt.Fprintln(p.w)
		p.open = false
	}
}

// eta estimates the time left from the time per iteration: measured
// between the first report and now when more than one iteration has been
// reported, else from the start (which then includes the set-up).
func (p *progressLine) eta(t time.Time, done, total int) (time.Duration, bool) {
	if total <= 0 || done <= 0 {
		return 0, false
	}
	var per time.Duration
	if done > p.firstDone {
		per = t.Sub(p.first) / time.Duration(done-p.firstDone)
	} else {
		per = t.Sub(p.start) / time.Duration(done)
	}
	return per * time.Duration(total-done), true
}

// finish ends a line left open (a run that stopped before its last
// iteration, e.g. converged early or failed).
func (p *progressLine) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}

// fmtDuration prints a duration in whole seconds (1h02m03s, 4m05s, 7s).
func fmtDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64((d + time.Second/2) / time.Second)
	switch {
	case s >= 3600:
		return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
	case s >= 60:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%ds", s)
}
