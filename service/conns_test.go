package service_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// served is a server behind service.Serve on a loopback port (the
// connection guard and the malformed-HTTP rewriting are in Serve, not in
// the handler).
func served(t *testing.T, opt service.Options) (base string, st store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Create(ctx, storetest.URL(t, "sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := service.New(ctx, st, opt)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- service.Serve(sctx, srv, ln, 5*time.Second) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		st.Close()
	})
	return "http://" + ln.Addr().String(), st
}

// openFDs counts this process's open descriptors (Linux).
func openFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(es)
}

// TestIdleConnectionsDoNotStarveReports: 300 clients hold connections
// open (half kept alive after a request, half silent) against a server
// capped at 32 connections; reports on fresh connections still succeed
// promptly, and the server never holds more than its cap. Before the
// guard, idle connections were kept 120 s without bound and, under
// ulimit -n 1024, took the descriptors SQLite needed.
func TestIdleConnectionsDoNotStarveReports(t *testing.T) {
	opt := localOptions(t, 8)
	opt.Epsilon, opt.Budget = 1, 1e6
	opt.MaxConns = 32
	base, st := served(t, opt)
	addr := strings.TrimPrefix(base, "http://")
	before := openFDs(t)
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for k := range 300 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
		if k%2 == 0 {
			continue // silent: connected, nothing sent
		}
		// Kept alive after one request.
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", api.PathHealth)
	}
	ctx := context.Background()
	cl := client.New(base, "")
	cl.HTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if _, err := cl.Enroll(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range 20 {
		start := time.Now()
		if _, _, err := cl.Submit(ctx, api.Report{ID: fmt.Sprintf("r%d", k), Epsilon: 1, Values: make([]*float64, 8)}); err != nil {
			t.Fatalf("report %d with 300 idle connections: %v", k, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("report %d took %s behind idle connections", k, d)
		}
	}
	// The client's 300 sockets are ours too; the server's side may hold
	// at most 32 (plus the database's and the listener's descriptors).
	if extra := openFDs(t) - before - len(idle); extra > 32+8 {
		t.Fatalf("%d descriptors beyond the clients' own: the cap of 32 connections did not hold", extra)
	}
	u, err := st.UserByToken(ctx, service.TokenHash(cl.Token))
	if err != nil || u.Reports != 20 {
		t.Fatalf("stored %+v, %v", u, err)
	}
}

func TestConnLimit(t *testing.T) {
	n, err := service.ConnLimit()
	if err != nil {
		t.Fatal(err)
	}
	if n < 16 || n > service.MaxConnsCeiling {
		t.Fatalf("derived connection cap %d", n)
	}
}

// TestMalformedHTTP: requests net/http cannot parse get a JSON 400 (Go
// answers 505 for an unknown HTTP version and 501 for an unknown
// Transfer-Encoding), sent over raw TCP.
func TestMalformedHTTP(t *testing.T) {
	base, _ := served(t, localOptions(t, 4))
	addr := strings.TrimPrefix(base, "http://")
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"unknown version", "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", 400},
		{"version 2 in plain text", "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 400},
		{"unknown transfer encoding", "POST /v1/enroll HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
		{"no Host", "GET /healthz HTTP/1.1\r\n\r\n", 400},
		{"garbage request line", "HELLO\r\n\r\n", 400},
		{"bad header line", "GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400},
		{"headers too large", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("a", 40<<10) + "\r\n\r\n", 431},
		{"well-formed", "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(conn, c.req)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, c.status)
			}
			if c.status >= 400 && (resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), `"status":`)) {
				t.Fatalf("not a JSON error: %s %q", resp.Header.Get("Content-Type"), body)
			}
		})
	}
}
