package service

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// Health has two questions, as load balancers and orchestrators ask them:
//
//   - liveness (GET /livez): is the process up and serving HTTP? It never
//     touches the database, so a database outage does not get a healthy
//     process restarted.
//   - readiness (GET /readyz; GET /healthz is the same): can the server
//     durably accept a report right now? It commits a write of a
//     heartbeat row in a transaction of its own, exactly as a report's is
//     committed (so a full disk, a read-only file system, I/O errors or an
//     unreachable PostgreSQL answer 503), and it is also not ready for
//     readyHold after any real write (a report's or an enrolment's
//     transaction) failed, since a heartbeat can succeed where a report
//     cannot (SQLite may reuse its WAL file where a report needs new
//     pages).
//
// The heartbeat's outcome is cached for readyTTL and concurrent probes
// share one check, so probing cannot make the server write more than once
// per readyTTL.
const (
	readyTTL  = time.Second
	readyHold = 5 * time.Second
	// retryAfter is the Retry-After of a 503 (seconds).
	retryAfter = "2"
)

// readiness holds the heartbeat cache and the last real write failure.
type readiness struct {
	st  store.Store
	now func() time.Time

	mu      sync.Mutex
	checked time.Time
	err     error

	// writeFailed is the unix nanoseconds of the last failed real write
	// (0: none); writeErr its error.
	writeFailed atomic.Int64
	writeErr    atomic.Pointer[error]
}

// wrote records the outcome of a real write transaction.
func (r *readiness) wrote(err error) {
	if err == nil {
		return
	}
	r.writeErr.Store(&err)
	r.writeFailed.Store(r.now().UnixNano())
}

// check answers whether a report can be durably accepted now (nil) or
// why not.
func (r *readiness) check(ctx context.Context) error {
	now := r.now()
	if t := r.writeFailed.Load(); t != 0 && now.Sub(time.Unix(0, t)) < readyHold {
		return *r.writeErr.Load()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.checked.IsZero() && now.Sub(r.checked) < readyTTL {
		return r.err
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	r.err = r.st.Heartbeat(hctx, now.UnixMilli())
	r.checked = r.now()
	return r.err
}

// health is the answer of the health endpoints.
type health struct {
	Status string `json:"status"`
	DB     string `json:"db,omitempty"`
	Mode   string `json:"mode,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (s *Server) getLive(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, health{Status: "alive"})
}

func (s *Server) getReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := s.ready.check(r.Context()); err != nil {
		s.errs.log(r.Context(), "readiness check: the database cannot take a write", err)
		quiet(w)
		w.Header().Set("Retry-After", retryAfter)
		// The cause stays in the log: a database error can name paths.
		writeJSON(w, http.StatusServiceUnavailable, health{Status: "unavailable", DB: s.st.Kind(),
			Error: "the database cannot durably accept a write right now"})
		return
	}
	writeJSON(w, http.StatusOK, health{Status: "ok", DB: s.st.Kind(), Mode: s.cfg.Mode})
}

// serverFault marks an error that is the server's own (a stored value it
// cannot decode), answered 500; every other failure at a handler is the
// database's, answered 503 with Retry-After.
type serverFault struct{ err error }

func (e serverFault) Error() string { return e.err.Error() }
func (e serverFault) Unwrap() error { return e.err }

// errLog logs repeated identical errors at most once per interval: the
// first at once, the others counted and reported with the next line
// after the interval ("repeated": how many were not logged), so a failing
// database costs one log line per interval per kind of error, not two per
// request.
type errLog struct {
	l     *slog.Logger
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	seen  map[string]*errSeen
}

type errSeen struct {
	last       time.Time
	suppressed int
}

func newErrLog(l *slog.Logger, every time.Duration, now func() time.Time) *errLog {
	return &errLog{l: l, every: every, now: now, seen: map[string]*errSeen{}}
}

// log logs what failed with err, unless the same was logged less than
// an interval ago.
func (e *errLog) log(ctx context.Context, what string, err error) {
	key := what + "\x00" + err.Error()
	now := e.now()
	e.mu.Lock()
	s, ok := e.seen[key]
	if ok && now.Sub(s.last) < e.every {
		s.suppressed++
		e.mu.Unlock()
		return
	}
	if !ok {
		if len(e.seen) >= 1024 {
			clear(e.seen)
		}
		s = &errSeen{}
		e.seen[key] = s
	}
	n := s.suppressed
	s.last, s.suppressed = now, 0
	e.mu.Unlock()
	attrs := []slog.Attr{slog.String("error", err.Error())}
	if n > 0 {
		attrs = append(attrs, slog.Int("repeated", n), slog.String("since", e.every.String()))
	}
	e.l.LogAttrs(ctx, slog.LevelError, what, attrs...)
}

// quiet tells the request log that the handler logged its failure
// already (rate-limited).
func quiet(w http.ResponseWriter) {
	if rec, ok := w.(*recorder); ok {
		rec.quiet = true
	}
}

// unavailable answers a database failure: 503 with Retry-After, the cause
// logged (rate-limited), not answered.
func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.errs.log(r.Context(), what, err)
	quiet(w)
	w.Header().Set("Retry-After", retryAfter)
	writeError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
		Message: what + " failed: the database cannot take it right now; retry in " + retryAfter + " s (a report resubmitted with the same id is never stored or charged twice)"})
}
