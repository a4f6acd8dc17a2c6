package service

import (
	"context"
	"crypto/tls"
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
	defer srv.Close()
	return ServeHandler(ctx, srv.Handler(), ln, HTTPOptions{MaxConns: srv.opt.MaxConns, IdleTimeout: srv.opt.IdleTimeout, TLS: srv.opt.TLS,
		ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, Grace: grace, Log: srv.log,
		OnShutdown: func() { srv.stopping.Store(true) }})
}

// HTTPOptions are the HTTP side of a server that ServeHandler runs: the
// connection cap (0: the descriptor limit minus FDReserve, ConnLimit),
// the idle keep-alive timeout (0: DefaultIdleTimeout), TLS (nil: plain
// HTTP), the read and write timeouts of a request (0: none), the grace
// of a shutdown, the log, and a function called when the shutdown
// begins.
type HTTPOptions struct {
	MaxConns                  int
	IdleTimeout               time.Duration
	TLS                       *tls.Config
	ReadTimeout, WriteTimeout time.Duration
	Grace                     time.Duration
	Log                       *slog.Logger
	OnShutdown                func()
}

// ServeHandler serves h on ln until ctx ends with the central server's
// operations (the two aggregators use it too): at most MaxConns
// connections, the longest-idle one shed when full, malformed HTTP
// answered in JSON, header, read, write and idle timeouts, and a
// graceful shutdown — accepting stops, a body still arriving at grace/2
// is cut, requests in flight finish for up to grace, then the remaining
// connections are closed.
func ServeHandler(ctx context.Context, h http.Handler, ln net.Listener, o HTTPOptions) error {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	ln, guard, err := guardListener(ln, o.MaxConns, o.TLS)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	active := map[net.Conn]struct{}{}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn),
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
		return err
	case <-ctx.Done():
	}
	o.Log.Info("shutting down", "grace", o.Grace.String())
	if o.OnShutdown != nil {
		o.OnShutdown()
	}
	// A body still arriving at grace/2 is cut: its read fails, and the
	// handler's answer becomes 503 with Retry-After (see recorder).
	cut := time.Now().Add(o.Grace / 2)
	mu.Lock()
	for c := range active {
		c.SetReadDeadline(cut)
	}
	mu.Unlock()
	sctx, cancel := context.WithTimeout(context.Background(), o.Grace)
	defer cancel()
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		mu.Lock()
		n := len(active)
		mu.Unlock()
		o.Log.Warn("the grace period is over: closing the connections still active", "connections", n)
		err = hs.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	o.Log.Info("stopped")
	return err
}
