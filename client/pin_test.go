package client

import (
	"strings"
	"testing"

	"github.com/privrec/privrec/service/api"
)

// TestLedgerPinsCollection: a device ledger pins the collection its user
// joined and refuses, naming what changed, a configuration that weakens
// it (issue 23, defect 4: a browser that joined a local-mode collection
// sent true ratings once the server said mode "central"). A stronger
// configuration (smaller ε) is accepted.
func TestLedgerPinsCollection(t *testing.T) {
	joined := localConfig(t)
	l, err := NewLedger(srv, joined)
	if err != nil {
		t.Fatal(err)
	}
	clone := func(f func(c *api.Config)) *api.Config {
		c := *joined
		c.Items = append([]api.Item(nil), joined.Items...)
		f(&c)
		return &c
	}
	for _, c := range []struct {
		name string
		cfg  *api.Config
		want string // "" accepted
	}{
		{"the same", clone(func(*api.Config) {}), ""},
		{"a smaller ε per report and per item", clone(func(c *api.Config) { c.ReportEpsilon, c.CellEpsilon = 1, c.CellEpsilon/2 }), ""},
		{"titles changed", clone(func(c *api.Config) { c.Items[0].Title = "A" }), ""},
		{"central mode (true ratings)", clone(func(c *api.Config) {
			c.Mode, c.Mechanism, c.ReportEpsilon, c.CellEpsilon, c.Units = api.ModeCentral, api.MechanismNone, 0, 0, "rating"
		}), "true ratings would be sent"},
		{"another mechanism", clone(func(c *api.Config) { c.Mechanism = "laplace"; c.Units = "normalised" }), "mechanism"},
		{"a larger ε per report", clone(func(c *api.Config) { c.ReportEpsilon, c.CellEpsilon = 4, 1 }), "a report now costs"},
		{"a larger per-item ε alone", clone(func(c *api.Config) { c.CellEpsilon *= 2 }), "per-item ε"},
		{"another scale", clone(func(c *api.Config) { c.Scale.Max = 10; c.Scale.Levels = 10 }), "scale"},
		{"an item added", clone(func(c *api.Config) { c.Items = append(c.Items, api.Item{ID: "e"}) }), "catalogue"},
		{"an item renamed", clone(func(c *api.Config) { c.Items[1].ID = "bb" }), "catalogue"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := *l
			err := cp.Collection.Check(c.cfg)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !IsWeakened(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want a refusal naming %q", err, c.want)
			}
		})
	}
	// A ledger made before collections were pinned pins a local-mode
	// configuration on first use, and refuses a central one.
	old := &Ledger{Server: srv, Budget: 4}
	central := clone(func(c *api.Config) {
		c.Mode, c.Mechanism, c.ReportEpsilon, c.CellEpsilon, c.Units = api.ModeCentral, api.MechanismNone, 0, 0, "rating"
	})
	if err := old.CheckConfig(srv, central); !IsWeakened(err) || old.Collection != nil {
		t.Fatalf("an unpinned ledger accepted central mode: %v", err)
	}
	if err := old.CheckConfig(srv, joined); err != nil || old.Collection == nil || old.Collection.Mode != api.ModeLocal {
		t.Fatalf("an unpinned ledger did not pin: %v", err)
	}
	if err := old.CheckConfig(srv, central); !IsWeakened(err) {
		t.Fatalf("a pinned ledger accepted central mode: %v", err)
	}
	// A central-mode pin: a smaller budget ρ is fine, a larger one or a
	// shorter period is not; the device records no report.
	cl, err := NewLedger(srv, &api.Config{Mode: api.ModeCentral, Mechanism: api.MechanismNone, Budget: 1.6, BudgetRho: 0.058, BudgetDelta: 1e-6,
		PeriodSeconds: 86400, Scale: joined.Scale, Units: "rating", Items: joined.Items})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rho    float64
		period int64
		ok     bool
	}{{0.058, 86400, true}, {0.03, 86400, true}, {0.058, 7 * 86400, true}, {0.1, 86400, false}, {0.058, 3600, false}, {0.058, 0, true}} {
		cfg := &api.Config{Mode: api.ModeCentral, Mechanism: api.MechanismNone, Budget: 1.6, BudgetRho: c.rho, BudgetDelta: 1e-6,
			PeriodSeconds: c.period, Scale: joined.Scale, Units: "rating", Items: joined.Items}
		if err := cl.Collection.Check(cfg); (err == nil) != c.ok {
			t.Errorf("central ρ = %g period %d: %v, want ok %v", c.rho, c.period, err, c.ok)
		}
	}
	if err := cl.Reserve(srv, "r1", 0.5); err == nil {
		t.Fatal("a central-mode ledger recorded a report")
	}
}
