package service_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
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
