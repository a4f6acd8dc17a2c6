package service_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// TestGracefulShutdown: the server's context ends (SIGTERM in privrec
// serve) while 16 clients submit; Serve returns, and every report that was
// acknowledged is stored and charged once.
func TestGracefulShutdown(t *testing.T) {
	ctx := context.Background()
	st, err := store.Create(ctx, storetest.URL(t, "sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	opt := localOptions(t, 8)
	opt.Epsilon, opt.Budget = 1, 1e6
	srv, err := service.New(ctx, st, opt)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- service.Serve(sctx, srv, ln, 10*time.Second) }()
	base := "http://" + ln.Addr().String()
	var mu sync.Mutex
	acked := map[string]string{} // report ID → token
	var wg sync.WaitGroup
	for g := range 16 {
		c := client.New(base, "")
		c.HTTP = &http.Client{Timeout: 10 * time.Second}
		if _, err := c.Enroll(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				id := fmt.Sprintf("g%d-%d", g, k)
				if _, _, err := c.Submit(ctx, api.Report{ID: id, Epsilon: 1, Values: make([]*float64, 8)}); err != nil {
					return // the server has stopped accepting
				}
				mu.Lock()
				acked[id] = c.Token
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	for id, tok := range acked {
		u, err := st.UserByToken(ctx, service.TokenHash(tok))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Report(ctx, u.ID, id); err != nil {
			t.Fatalf("acknowledged report %s missing after shutdown: %v", id, err)
		}
	}
	if err := st.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// serveFor runs Serve on a loopback port until the returned stop is
// called; stop returns Serve's error and how long it took to return.
func serveFor(t *testing.T, srv *service.Server, grace time.Duration) (addr string, stop func() (error, time.Duration)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- service.Serve(ctx, srv, ln, grace) }()
	return ln.Addr().String(), func() (error, time.Duration) {
		start := time.Now()
		cancel()
		select {
		case err := <-served:
			return err, time.Since(start)
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return")
			return nil, 0
		}
	}
}

// TestShutdownSlowUpload: a client uploading its report body slowly when
// the shutdown begins gets an answer — 503 with Retry-After, nothing
// stored — not a dropped connection, and Serve returns nil.
func TestShutdownSlowUpload(t *testing.T) {
	ctx := context.Background()
	st, err := store.Create(ctx, storetest.URL(t, "sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	opt := localOptions(t, 8)
	opt.Epsilon, opt.Budget = 1, 100
	srv, err := service.New(ctx, st, opt)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := serveFor(t, srv, time.Second)
	c := client.New("http://"+addr, "")
	e, err := c.Enroll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"id":"slow","epsilon":1,"values":[null,null,null,null,null,null,null,null]}`
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		api.PathReports, e.Token, len(body), body[:10])
	time.Sleep(200 * time.Millisecond) // the request is in its handler, reading the body
	type result struct {
		err error
		d   time.Duration
	}
	done := make(chan result, 1)
	go func() { err, d := stop(); done <- result{err, d} }()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the slow upload got no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "shutting down") {
		t.Fatalf("the slow upload got %d (Retry-After %q) %s; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Serve = %v, want nil", r.err)
	}
	if _, err := st.Report(ctx, e.User, "slow"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the cut report was stored: %v", err)
	}
}

// TestShutdownPastGrace: a write still waiting on the database when the
// grace period ends does not make a requested shutdown fail: Serve
// returns nil soon after the grace period.
func TestShutdownPastGrace(t *testing.T) {
	ctx := context.Background()
	st, err := store.Create(ctx, storetest.URL(t, "sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := &storetest.Faulty{Store: st}
	opt := localOptions(t, 8)
	opt.Epsilon, opt.Budget = 1, 100
	srv, err := service.New(ctx, f, opt)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := serveFor(t, srv, 300*time.Millisecond)
	c := client.New("http://"+addr, "")
	if _, err := c.Enroll(ctx); err != nil {
		t.Fatal(err)
	}
	f.Stall(1500 * time.Millisecond)
	go c.Submit(ctx, api.Report{ID: "stalled", Epsilon: 1, Values: make([]*float64, 8)})
	time.Sleep(100 * time.Millisecond)
	err, d := stop()
	if err != nil {
		t.Fatalf("Serve past the grace period = %v, want nil (a requested shutdown)", err)
	}
	if d < 300*time.Millisecond {
		t.Fatalf("Serve returned after %s, before the grace period", d)
	}
}
