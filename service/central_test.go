package service_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store/storetest"
)

// TestCentral: in central mode (a trusted curator) reports carry true
// ratings and cost nothing; each release charges every user whose ratings
// it used her per-user ε, and a release that would take anyone past her
// budget is refused whole. A joint-DP release's per-user state is served
// to its user only.
func TestCentral(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			opt := localOptions(t, 8)
			// (ε = 1.6, δ = 1e-6) is ρ ≈ 0.0584 zCDP: room for two
			// dp-bias releases at (1, 1e-6), ρ ≈ 0.0244 each, not three.
			opt.Mechanism, opt.Epsilon, opt.Budget = api.MechanismNone, 0, 1.6
			s := newTestServer(t, kind, opt)
			cfg, err := s.client("").Config(ctx)
			if err != nil || cfg.Mode != api.ModeCentral || cfg.Units != "rating" || cfg.LedgerUnit != api.UnitRho {
				t.Fatalf("configuration %+v, %v", cfg, err)
			}
			const rho = 0.024355970 // dp-bias at (ε, δ) = (1, 1e-6)
			if cfg.BudgetDelta != 1e-6 || !(cfg.BudgetRho > 2*rho && cfg.BudgetRho < 3*rho) {
				t.Fatalf("budget ρ = %g from (1.6, %g)", cfg.BudgetRho, cfg.BudgetDelta)
			}
			pop := synthPopulation(40, 8, 0.6, 3)
			users := make([]*client.Client, len(pop.rated))
			for u, r := range pop.rated {
				users[u] = enrolled(t, s)
				rep, _, err := client.Randomize(cfg, r, nil, client.NewReportID())
				if err != nil {
					t.Fatal(err)
				}
				ack, _, err := users[u].Submit(ctx, rep)
				if err != nil || ack.Spent != 0 || ack.Epsilon != 0 {
					t.Fatalf("central report: %+v, %v", ack, err)
				}
			}
			idle := enrolled(t, s) // no ratings: never charged
			admin := s.client(adminToken)
			req := api.ReleaseRequest{Method: "dp-bias", Epsilon: 1, Delta: 1e-6, Seed: 5}
			for k := range 2 {
				res, err := admin.Publish(ctx, req)
				if err != nil {
					t.Fatalf("release %d: %v", k+1, err)
				}
				// dp-bias states its zCDP ρ; the ledger charges it
				// rounded up to 10⁻⁹.
				if res.UsersCharged != len(users) || math.Abs(res.MaxCharge-rho) > 1e-6 || res.Unit != api.UnitRho {
					t.Fatalf("release %d charged %d users at most %g %s", k+1, res.UsersCharged, res.MaxCharge, res.Unit)
				}
				// The public ledger sentence holds no count of users.
				if strings.Contains(res.Release.Ledger, strconv.Itoa(len(users))) {
					t.Fatalf("the public ledger sentence counts the users: %q", res.Release.Ledger)
				}
			}
			// A third release would take everyone to 3ρ > the budget:
			// refused, nothing published or charged.
			_, err = admin.Publish(ctx, req)
			if e, ok := err.(*api.Error); !ok || e.Status != 403 || e.Code != api.CodeBudgetExceeded {
				t.Fatalf("third release: %v", err)
			}
			for _, c := range []*client.Client{users[0], users[len(users)-1]} {
				if st, _ := c.Status(ctx); math.Abs(st.Spent-2*rho) > 1e-6 || math.Abs(st.Remaining-(cfg.BudgetRho-2*rho)) > 1e-6 || st.Unit != api.UnitRho {
					t.Fatalf("ledger after two releases: %+v", st)
				}
			}
			if st, _ := idle.Status(ctx); st.Spent != 0 {
				t.Fatalf("a user without ratings was charged: %+v", st)
			}
			stats, _ := s.st.Stats(ctx)
			if stats.Releases != 2 {
				t.Fatalf("%d releases stored", stats.Releases)
			}
			// Each user's own state (her bias) is hers alone.
			a, b := users[0], users[1]
			sa, sb := myState(t, s, a.Token), myState(t, s, b.Token)
			meA, _ := a.Status(ctx)
			meB, _ := b.Status(ctx)
			if sa.User != meA.User || sb.User != meB.User {
				t.Fatalf("states of %s and %s answered for %s and %s", meA.User, meB.User, sa.User, sb.User)
			}
			if status, _, _ := raw(t, s, "GET", api.PathMyState, idle.Token, ""); status != http.StatusNotFound {
				t.Fatalf("state of a user without ratings: %d", status)
			}
			// The public part has no user, and her own recommendations
			// come from it and her ratings.
			rel, err := a.LatestRelease(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if recs, err := client.Recommend(rel, pop.rated[0], 3); err != nil || len(recs) == 0 {
				t.Fatalf("recommendations: %v %v", recs, err)
			}
			if err := s.st.Check(ctx); err != nil {
				t.Fatal(err)
			}
			// A non-private method cannot be released: it would cost ∞.
			if _, err := admin.Publish(ctx, api.ReleaseRequest{Method: "bias"}); !isStatus(err, 400) {
				t.Fatalf("non-private release: %v", err)
			}
		})
	}
}

func myState(t *testing.T, s *testServer, token string) model.UserState {
	t.Helper()
	status, _, b := raw(t, s, "GET", api.PathMyState, token, "")
	if status != 200 {
		t.Fatalf("my state: %d %s", status, b)
	}
	var st model.UserState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}
