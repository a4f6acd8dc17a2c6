package service

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Serve serves the API on ln until ctx ends (SIGTERM or SIGINT in
// `privrec serve`), then shuts down gracefully: it stops accepting, lets
// requests in flight finish (their writes commit and are acknowledged)
// for up to grace, and stops the writer. A request still uploading its
// body at grace/2 gets an answer — 503 with Retry-After, nothing stored —
// rather than a dropped connection; what still runs at grace (a write
// waiting on the database) is cut off. A requested shutdown returns nil
// even then: it did what was asked. It does not close the store.
func Serve(ctx context.Context, srv *Server, ln net.Listener, grace time.Duration) error {
	ln, guard, err := srv.guardListener(ln)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	active := map[net.Conn]struct{}{}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       srv.opt.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(srv.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnState: func(c net.Conn, st http.ConnState) {
			guard.state(c, st)
			mu.Lock()
			defer mu.Unlock()
			if st == http.StateActive {
				active[c] = struct{}{}
			} else {
				delete(active, c)
			}
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		srv.Close()
		return err
	case <-ctx.Done():
	}
	srv.log.Info("shutting down", "grace", grace.String())
	srv.stopping.Store(true)
	// A body still arriving at grace/2 is cut: its read fails, and the
	// handler's answer becomes 503 with Retry-After (see recorder).
	cut := time.Now().Add(grace / 2)
	mu.Lock()
	for c := range active {
		c.SetReadDeadline(cut)
	}
	mu.Unlock()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		mu.Lock()
		n := len(active)
		mu.Unlock()
		srv.log.Warn("the grace period is over: closing the connections still active", "connections", n)
		err = hs.Close()
	}
	srv.Close()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	srv.log.Info("stopped")
	return err
}
