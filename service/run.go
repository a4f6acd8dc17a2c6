package service

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves the API on ln until ctx ends (SIGTERM or SIGINT in
// `privrec serve`), then shuts down gracefully: it stops accepting,
// lets requests in flight finish (their writes commit and are
// acknowledged) for up to grace, and stops the writer. It does not close
// the store.
func Serve(ctx context.Context, srv *Server, ln net.Listener, grace time.Duration) error {
	ln, guard, err := srv.guardListener(ln)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       srv.opt.IdleTimeout,
		ConnState:         guard.state,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(srv.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
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
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err = hs.Shutdown(sctx)
	srv.Close()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	srv.log.Info("stopped")
	return err
}
