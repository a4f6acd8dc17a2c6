package service_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// restart reopens a database and starts a server on it.
func restart(t *testing.T, url string, opt service.Options) (*testServer, error) {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := service.New(context.Background(), st, opt)
	if err != nil {
		st.Close()
		return nil, err
	}
	srv.Close() // the collection is recorded; serveStore serves it
	s := serveStore(t, st, opt)
	s.url = url
	return s, nil
}

// TestAddItems: a catalogue that grows is a new collection version,
// recorded only when the operator says so (--add-items). Local mode: a
// user's ledger carries over — her reports of both versions are charged
// against one budget — a report over the old catalogue is refused, and
// releases read only the current version's reports. Central mode: the
// old reports' ratings are read under the new catalogue, the new items
// unrated.
func TestAddItems(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			opt := localOptions(t, 4)
			opt.Epsilon, opt.Budget = 2, 4 // two reports in all
			s := newTestServer(t, kind, opt)
			url := s.url
			c := s.client("")
			if _, err := c.Enroll(ctx); err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Submit(ctx, api.Report{ID: "v1", Epsilon: 2, Values: make([]*float64, 4)}); err != nil {
				t.Fatal(err)
			}
			s.ts.Close()
			s.srv.Close()
			grown := localOptions(t, 5)
			grown.Epsilon, grown.Budget = 2, 4
			if _, err := restart(t, url, grown); err == nil || !strings.Contains(err.Error(), "--add-items") || strings.Contains(err.Error(), "--epsilon") {
				t.Fatalf("a grown catalogue without --add-items: %v", err)
			}
			grown.AddItems = true
			s2, err := restart(t, url, grown)
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := s2.st.CollectionVersion(ctx); v != 2 {
				t.Fatalf("collection version %d, want 2", v)
			}
			c.HTTP, c.Server = s2.ts.Client(), s2.ts.URL
			_, _, err = c.Submit(ctx, api.Report{ID: "old", Epsilon: 2, Values: make([]*float64, 4)})
			wantStatus(t, "a report over the old catalogue", err, http.StatusBadRequest)
			ack, _, err := c.Submit(ctx, api.Report{ID: "v2", Epsilon: 2, Values: make([]*float64, 5)})
			if err != nil || ack.Spent != 4 || ack.Remaining != 0 {
				t.Fatalf("a report of version 2: %+v, %v; want her ledger to carry over (spent 4 of 4)", ack, err)
			}
			_, _, err = c.Submit(ctx, api.Report{ID: "v2b", Epsilon: 2, Values: make([]*float64, 5)})
			wantStatus(t, "a third report (the budget holds across versions)", err, http.StatusForbidden)
			_, n, _, err := service.ReportsMatrix(ctx, s2.st, s2.srv.Config())
			if err != nil || n != 1 {
				t.Fatalf("a local release reads %d reports (%v), want the current version's 1", n, err)
			}
			if err := s2.st.Check(ctx); err != nil {
				t.Fatal(err)
			}
			// Recorded: a plain restart with the grown catalogue is fine.
			s2.ts.Close()
			s2.srv.Close()
			grown.AddItems = false
			if _, err := restart(t, url, grown); err != nil {
				t.Fatalf("restarting on version 2: %v", err)
			}
		})
	}
	t.Run("central", func(t *testing.T) {
		ctx := context.Background()
		opt := centralOptions(t, 4, 2)
		s := newTestServer(t, "sqlite", opt)
		c := s.client("")
		if _, err := c.Enroll(ctx); err != nil {
			t.Fatal(err)
		}
		submitTrue(t, c, s.srv.Config(), client.Ratings{"i01": 5, "i03": 2})
		s.ts.Close()
		s.srv.Close()
		grown := centralOptions(t, 5, 2)
		grown.AddItems = true
		s2, err := restart(t, s.url, grown)
		if err != nil {
			t.Fatal(err)
		}
		m, n, _, err := service.RatingsMatrix(ctx, s2.st, s2.srv.Config())
		if err != nil || n != 1 || m.NumItems() != 5 || m.Len() != 2 {
			t.Fatalf("central ratings after adding an item: %v reports %d, %v", m, n, err)
		}
	})
}
