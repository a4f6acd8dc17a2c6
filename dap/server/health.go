package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/privrec/privrec/service"
)

// Health, as the central server answers it (package service):
//
//   - GET /livez: the process is up and serving HTTP; it never touches
//     the database.
//   - GET /readyz: the aggregator can durably take a write now: a
//     heartbeat row is committed as a report is, and the database's file
//     system has at least MinFreeBytes free. 503 with Retry-After
//     otherwise (a full disk, a read-only or failing file system).
//
// The heartbeat's outcome is cached for a second, so probing cannot make
// the server write more than once a second.
type readiness struct {
	s       *Server
	mu      sync.Mutex
	checked time.Time
	err     error
}

type health struct {
	Status string `json:"status"`
	Role   string `json:"role,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, health{Status: "alive", Role: s.cfg.Role.String()})
}

func (s *Server) readyHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := s.ready.check(r.Context()); err != nil {
		s.log.Warn("not ready", "err", err)
		w.Header().Set("Retry-After", retryAfter)
		writeJSON(w, http.StatusServiceUnavailable, health{Status: "unavailable", Role: s.cfg.Role.String(),
			Error: "the database cannot durably accept a write right now (out of space, or failing)"})
		return
	}
	writeJSON(w, http.StatusOK, health{Status: "ok", Role: s.cfg.Role.String()})
}

func (r *readiness) check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.checked.IsZero() && now.Sub(r.checked) < time.Second {
		return r.err
	}
	r.err = r.s.roomToWrite()
	if r.err == nil {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		r.err = r.s.st.heartbeat(hctx, now)
		cancel()
	}
	r.checked = time.Now()
	return r.err
}

// roomToWrite refuses (errUnavailable) when the database's file system
// has less than MinFreeBytes free: an upload, enrolment or aggregation
// job is refused before anything is written, rather than failing half
// way with the disk full.
func (s *Server) roomToWrite() error {
	if s.cfg.MinFreeBytes < 0 || s.st.path == "" { // PostgreSQL: its server watches its own disk
		return nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(s.st.path, &fs); err != nil {
		return fmt.Errorf("%w: the database's file system: %v", errUnavailable, err)
	}
	free := int64(fs.Bavail) * int64(fs.Bsize)
	if free < s.cfg.MinFreeBytes {
		return fmt.Errorf("%w: %d bytes free on the database's file system, below the %d kept free (--min-free-disk): out of space", errUnavailable, free, s.cfg.MinFreeBytes)
	}
	return nil
}

// limiter admits enrolments (service.Limiter: a token bucket per key).
type limiter = service.Limiter

func newLimiter(rate float64, burst int) *limiter { return service.NewLimiter(rate, burst) }

// clientAddr is the request's remote address without the port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
