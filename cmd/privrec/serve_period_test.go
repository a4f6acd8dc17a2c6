package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// TestServeStatsPeriods: `privrec serve stats` checks a per-period
// central ledger period by period, in ρ: three releases over two days fit
// a budget of two per day (the lifetime sum would not).
func TestServeStatsPeriods(t *testing.T) {
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(t.TempDir(), "p.db")
	st, err := store.Create(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := model.NewCatalogue([]string{"a", "b", "c", "d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	const admin = "stats-admin-token-0123456789"
	srv, err := service.New(ctx, st, service.Options{Catalogue: cat, Mechanism: api.MechanismNone, Budget: 1.6, Scale: model.Range{Min: 1, Max: 5},
		Period: 24 * time.Hour, AdminToken: admin, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer func() { ts.Close(); srv.Close(); st.Close() }()
	cfg := srv.Config()
	for u := range 12 {
		e, err := client.New(ts.URL, "").Enroll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, _, err := client.Randomize(cfg, client.Ratings{"a": float64(1 + u%5), "c": 3}, nil, client.NewReportID())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := client.New(ts.URL, e.Token).Submit(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 3 {
		if k == 2 {
			now = now.Add(6 * time.Hour) // the next day
		}
		if _, err := client.New(ts.URL, admin).Publish(ctx, api.ReleaseRequest{Method: "dp-bias", Epsilon: 1, Delta: 1e-6}); err != nil {
			t.Fatalf("release %d: %v", k+1, err)
		}
	}
	code, out := runCmd(t, "serve", "stats", "--db", db, "--json")
	s := decodeJSON(t, out)
	if code != 0 || s["ledger_ok"] != true || s["unit"] != "rho" || s["period_seconds"] != float64(86400) || s["releases"] != float64(3) {
		t.Fatalf("serve stats: %d %s", code, out)
	}
	if err := st.Check(ctx); err == nil {
		t.Fatal("the lifetime check passed three releases over a budget for two")
	}
}
