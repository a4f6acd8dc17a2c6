package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logBuffer collects log lines (safe for concurrent handlers).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.SplitSeq(l.b.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// get fetches a path and returns the status and the Retry-After header.
func get(t *testing.T, s *testServer, path string) (int, string) {
	t.Helper()
	resp, err := s.ts.Client().Get(s.ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// wantStatus checks an error's HTTP status.
func wantStatus(t *testing.T, what string, err error, status int) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Status != status {
		t.Fatalf("%s: %v, want HTTP %d", what, err, status)
	}
}

// TestReadinessInjected: with every write failing (a store that fails as
// a full disk, a read-only file system or an I/O error would), /readyz
// and /healthz answer 503 with Retry-After while /livez stays 200;
// reports and enrolments get 503 unavailable with Retry-After (not 500);
// the repeated failure is logged once per interval with a count; when
// writes work again the server is ready again after the hold.
func TestReadinessInjected(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Create(ctx, storetest.URL(t, kind))
			if err != nil {
				t.Fatal(err)
			}
			f := &storetest.Faulty{Store: st}
			clk := newClock()
			logs := &logBuffer{}
			opt := localOptions(t, 4)
			opt.Epsilon, opt.Budget, opt.Now = 1, 100, clk.Now
			opt.Log = slog.New(slog.NewJSONHandler(logs, nil))
			s := serveStore(t, f, opt)
			c := s.client("")
			if _, err := c.Enroll(ctx); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{api.PathLive, api.PathReady, api.PathHealth} {
				if code, _ := get(t, s, p); code != http.StatusOK {
					t.Fatalf("%s = %d before any failure", p, code)
				}
			}
			f.Fail(errors.New("disk I/O error"))
			// The heartbeat is cached for a second: probes cannot make
			// the server write more often.
			if code, _ := get(t, s, api.PathReady); code != http.StatusOK {
				t.Fatalf("readyz within the cache interval = %d", code)
			}
			clk.Add(1100 * time.Millisecond)
			for _, p := range []string{api.PathReady, api.PathHealth} {
				if code, ra := get(t, s, p); code != http.StatusServiceUnavailable || ra == "" {
					t.Fatalf("%s with failing writes = %d (Retry-After %q), want 503 with Retry-After", p, code, ra)
				}
			}
			if code, _ := get(t, s, api.PathLive); code != http.StatusOK {
				t.Fatalf("livez with failing writes = %d, want 200: the process is up", code)
			}
			for k := range 30 {
				_, _, err := c.Submit(ctx, api.Report{ID: fmt.Sprintf("r%d", k), Epsilon: 1, Values: make([]*float64, 4)})
				wantStatus(t, "a report with failing writes", err, http.StatusServiceUnavailable)
				if e := err.(*api.Error); e.Code != api.CodeUnavailable {
					t.Fatalf("code %q, want unavailable", e.Code)
				}
			}
			_, err = s.client("").Enroll(ctx)
			wantStatus(t, "an enrolment with failing writes", err, http.StatusServiceUnavailable)
			if n := len(logs.lines(`"level":"ERROR"`)); n > 3 {
				t.Fatalf("%d ERROR lines for 30 failing reports, an enrolment and a probe; want one per kind per interval:\n%s", n, strings.Join(logs.lines("ERROR"), "\n"))
			}
			// After the interval, the next one logs how many were not.
			clk.Add(11 * time.Second)
			_, _, err = c.Submit(ctx, api.Report{ID: "late", Epsilon: 1, Values: make([]*float64, 4)})
			wantStatus(t, "a report after the interval", err, http.StatusServiceUnavailable)
			if l := logs.lines(`"repeated":29`); len(l) != 1 || !strings.Contains(l[0], "storing the report") {
				t.Fatalf("no line counting the 29 repeats: %q", logs.lines("storing the report"))
			}
			// Writes work again: a real write's failure holds readiness
			// off for 5 s even though the heartbeat would pass.
			f.Fail(nil)
			clk.Add(2 * time.Second)
			if code, _ := get(t, s, api.PathReady); code != http.StatusServiceUnavailable {
				t.Fatalf("readyz 2 s after a failed report = %d, want 503 (hold)", code)
			}
			clk.Add(4 * time.Second)
			if code, _ := get(t, s, api.PathReady); code != http.StatusOK {
				t.Fatalf("readyz once writes work = %d", code)
			}
			if _, _, err := c.Submit(ctx, api.Report{ID: "r0", Epsilon: 1, Values: make([]*float64, 4)}); err != nil {
				t.Fatal(err)
			}
			if err := st.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAmbiguousCommit: a report's transaction commits but its client
// gets 503 (the database failed after the commit); resubmitting with
// the same ID settles it — answered as a replay of the original, stored
// once, charged once. The reference client's SubmitRetry does exactly
// that.
func TestAmbiguousCommit(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Create(ctx, storetest.URL(t, kind))
			if err != nil {
				t.Fatal(err)
			}
			f := &storetest.Faulty{Store: st}
			opt := localOptions(t, 4)
			opt.Epsilon, opt.Budget = 1, 100
			s := serveStore(t, f, opt)
			c := s.client("")
			e, err := c.Enroll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rep := api.Report{ID: "ambiguous", Epsilon: 1, Values: make([]*float64, 4)}
			f.FailAfter(errors.New("I/O error after commit"))
			_, _, err = c.Submit(ctx, rep)
			wantStatus(t, "the ambiguous submission", err, http.StatusServiceUnavailable)
			u, _ := st.User(ctx, e.User)
			if u.Reports != 1 || u.Spent != store.Nano {
				t.Fatalf("after the ambiguous commit: %+v; the test needs it committed", u)
			}
			f.Fail(nil)
			ack, replayed, err := c.SubmitRetry(ctx, rep, 3)
			if err != nil || !replayed || ack.Spent != 1 {
				t.Fatalf("resubmission: %+v replayed=%v %v; want the original, replayed", ack, replayed, err)
			}
			// The client retries by itself across failures: armed again,
			// then disarmed while it backs off.
			rep2 := api.Report{ID: "retried", Epsilon: 1, Values: make([]*float64, 4)}
			f.FailAfter(errors.New("I/O error after commit"))
			go func() { time.Sleep(150 * time.Millisecond); f.Fail(nil) }()
			ack, replayed, err = c.SubmitRetry(ctx, rep2, 5)
			if err != nil || !replayed || ack.Spent != 2 {
				t.Fatalf("SubmitRetry across an ambiguous commit: %+v replayed=%v %v", ack, replayed, err)
			}
			u, _ = st.User(ctx, e.User)
			if u.Reports != 2 || u.Spent != 2*store.Nano {
				t.Fatalf("ledger %+v, want 2 reports charged once each", u)
			}
			if err := st.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tmpfs mounts a small tmpfs (root only; skips, saying why, elsewhere)
// and returns its directory.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("not root: the real full-disk and read-only file system test needs to mount a tmpfs (the injected-failure test covers the logic)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s): the injected-failure test covers the logic", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// TestReadinessDiskFull runs the server's SQLite file on a 2 MB tmpfs:
// when the disk fills, reports get 503 (never 500) and /readyz says 503;
// space freed, the server takes reports again. Every acknowledged report
// is stored, and the ledgers are exact.
func TestReadinessDiskFull(t *testing.T) {
	dir := tmpfs(t, "2m")
	ctx := context.Background()
	st, err := store.Create(ctx, "sqlite:"+filepath.Join(dir, "privrec.db"))
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	opt := localOptions(t, 200)
	opt.Epsilon, opt.Budget, opt.Now = 1, 1e6, clk.Now
	s := serveStore(t, st, opt)
	// Leave ~600 KB free.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1400<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	c := s.client("")
	if _, err := c.Enroll(ctx); err != nil {
		t.Fatal(err)
	}
	vals := make([]*float64, 200)
	for j := range vals {
		v := float64(1 + j%5)
		vals[j] = &v
	}
	acked, full := 0, false
	for k := 0; k < 5000 && !full; k++ {
		_, _, err := c.Submit(ctx, api.Report{ID: fmt.Sprintf("r%d", k), Epsilon: 1, Values: vals})
		switch {
		case err == nil:
			acked++
		default:
			wantStatus(t, "a report on a full disk", err, http.StatusServiceUnavailable)
			full = true
		}
	}
	if !full {
		t.Fatalf("the disk never filled after %d reports", acked)
	}
	if code, ra := get(t, s, api.PathReady); code != http.StatusServiceUnavailable || ra == "" {
		t.Fatalf("readyz on a full disk = %d (Retry-After %q)", code, ra)
	}
	if code, _ := get(t, s, api.PathLive); code != http.StatusOK {
		t.Fatalf("livez on a full disk = %d", code)
	}
	t.Logf("disk full after %d acknowledged reports", acked)
	os.Remove(filler)
	clk.Add(6 * time.Second)
	if code, _ := get(t, s, api.PathReady); code != http.StatusOK {
		t.Fatalf("readyz after freeing space = %d", code)
	}
	if _, _, err := c.Submit(ctx, api.Report{ID: "after", Epsilon: 1, Values: vals}); err != nil {
		t.Fatalf("a report after freeing space: %v", err)
	}
	acked++
	u, err := st.UserByToken(ctx, service.TokenHash(c.Token))
	if err != nil || u.Reports != int64(acked) {
		t.Fatalf("stored %d reports, acknowledged %d (%v)", u.Reports, acked, err)
	}
	if err := st.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// ext4Loop mounts a small ext4 file system from an image file on a loop
// device with errors=remount-ro (root only; skips, saying why,
// elsewhere). fsError makes ext4 report an error, as it does on an I/O
// error: the file system turns read-only under the open files.
func ext4Loop(t *testing.T) (dir string, fsError func()) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("not root: the ext4 error test needs a loop mount (the injected-failure test covers the logic)")
	}
	img := filepath.Join(t.TempDir(), "fs.img")
	dir = t.TempDir()
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v %s (the injected-failure test covers the logic)", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop,errors=remount-ro", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount an ext4 image here (%v: %s): the injected-failure test covers the logic", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	src, err := exec.Command("findmnt", "-n", "-o", "SOURCE", dir).Output()
	if err != nil {
		t.Skipf("findmnt: %v", err)
	}
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(strings.TrimSpace(string(src))), "trigger_fs_error")
	if _, err := os.Stat(trigger); err != nil {
		t.Skipf("this kernel cannot trigger an ext4 error (%v)", err)
	}
	return dir, func() {
		if err := os.WriteFile(trigger, []byte("privrec test\n"), 0o200); err != nil {
			t.Logf("trigger_fs_error: %v", err)
		}
	}
}

// TestReadinessExt4Error runs the server's SQLite file on ext4, then
// makes ext4 report an error (as on a disk I/O error), which turns it
// read-only under the open database: /readyz answers 503, reports get
// 503 (never 500), /livez stays 200, and what was acknowledged before is
// there.
func TestReadinessExt4Error(t *testing.T) {
	dir, fsError := ext4Loop(t)
	ctx := context.Background()
	path := filepath.Join(dir, "privrec.db")
	st, err := store.Create(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	opt := localOptions(t, 8)
	opt.Epsilon, opt.Budget, opt.Now = 1, 1e6, clk.Now
	s := serveStore(t, st, opt)
	c := s.client("")
	if _, err := c.Enroll(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range 20 {
		if _, _, err := c.Submit(ctx, api.Report{ID: fmt.Sprintf("r%d", k), Epsilon: 1, Values: make([]*float64, 8)}); err != nil {
			t.Fatal(err)
		}
	}
	if code, _ := get(t, s, api.PathReady); code != http.StatusOK {
		t.Fatalf("readyz before the error = %d", code)
	}
	fsError()
	clk.Add(2 * time.Second)
	if code, ra := get(t, s, api.PathReady); code != http.StatusServiceUnavailable || ra == "" {
		t.Fatalf("readyz after an ext4 error = %d (Retry-After %q)", code, ra)
	}
	_, _, err = c.Submit(ctx, api.Report{ID: "after", Epsilon: 1, Values: make([]*float64, 8)})
	wantStatus(t, "a report after an ext4 error", err, http.StatusServiceUnavailable)
	if code, _ := get(t, s, api.PathLive); code != http.StatusOK {
		t.Fatalf("livez after an ext4 error = %d", code)
	}
	u, err := st.UserByToken(ctx, service.TokenHash(c.Token))
	if err != nil || u.Reports != 20 {
		t.Fatalf("after the error: %+v, %v; want the 20 acknowledged reports", u, err)
	}
}
