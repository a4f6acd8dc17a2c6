package service_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store/storetest"
)

// centralOptions is a central-mode collection over n items on 1…5 with
// budget (ε, δ) = (budget, 1e-6).
func centralOptions(t testing.TB, n int, budget float64) service.Options {
	opt := localOptions(t, n)
	opt.Mechanism, opt.Epsilon, opt.Budget = api.MechanismNone, 0, budget
	return opt
}

// submitTrue sends a user's true ratings (central mode).
func submitTrue(t testing.TB, c *client.Client, cfg *api.Config, r client.Ratings) {
	t.Helper()
	rep, _, err := client.Randomize(cfg, r, nil, client.NewReportID())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Submit(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
}

// untouched checks that no release was stored and no ledger charged.
func untouched(t testing.TB, s *testServer, users []*client.Client) {
	t.Helper()
	ctx := context.Background()
	st, err := s.st.Stats(ctx)
	if err != nil || st.Releases != 0 || st.MaxSpent != 0 {
		t.Fatalf("after a refused release: %+v, %v", st, err)
	}
	for _, c := range users {
		if me, err := c.Status(ctx); err != nil || me.Spent != 0 {
			t.Fatalf("a refused release charged %+v (%v)", me, err)
		}
	}
	if err := s.st.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCentralRefusesWhatItCannotCharge reproduces the attacks of issue 23
// against central mode and checks each is refused with the reason, with
// nothing published or charged. On the code before it, every one of these
// releases was published:
//
//   - defect 1: onebit-inp (per rating: which items a user rated is
//     public) was charged k·ε; its model listed the items rated in the
//     data, so a user rating a new item i9 appeared in the next release;
//   - defect 2: dp-bias at ε = 0.01, δ = 0.9 (ρ = 0.01, printed ε ≈ 6e-32)
//     was charged 0 and published even after every budget was spent;
//   - defect 3: onebit-objp (as-claimed: no ε is proven) was charged as
//     if its ε held.
func TestCentralRefusesWhatItCannotCharge(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			s := newTestServer(t, kind, centralOptions(t, 9, 1.6))
			cfg, err := s.client("").Config(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var users []*client.Client
			for u := range 12 { // 12 users rate i01–i08
				c := enrolled(t, s)
				r := client.Ratings{}
				for j := range 8 {
					r[fmt.Sprintf("i%02d", j+1)] = float64(1 + (u+j)%5)
				}
				submitTrue(t, c, cfg, r)
				users = append(users, c)
			}
			x := enrolled(t, s) // X rates only i09
			submitTrue(t, x, cfg, client.Ratings{"i09": 5})
			users = append(users, x)
			admin := s.client(adminToken)
			for _, c := range []struct {
				req         api.ReleaseRequest
				field, want string
			}{
				{api.ReleaseRequest{Method: "onebit-inp", Epsilon: 0.1, Params: map[string]any{"threshold": 3.0, "alpha": "inf"}}, "method", "per rating"},
				{api.ReleaseRequest{Method: "onebit-objp", Epsilon: 1, Params: map[string]any{"threshold": 3.0}}, "method", "not proven"},
				{api.ReleaseRequest{Method: "dp-bias", Epsilon: 0.01, Delta: 0.9}, "delta", "policy"},
				// 13 users: the policy is δ ≤ 1/130.
				{api.ReleaseRequest{Method: "dp-bias", Epsilon: 1, Delta: 0.008}, "delta", "policy"},
				{api.ReleaseRequest{Method: "bias"}, "method", "not private"},
			} {
				_, err := admin.Publish(ctx, c.req)
				e, ok := err.(*api.Error)
				if !ok || e.Status != 400 || e.Field != c.field || !strings.Contains(e.Message, c.want) {
					t.Fatalf("%s at (%g, %g): %v; want a 400 on %s naming %q", c.req.Method, c.req.Epsilon, c.req.Delta, err, c.field, c.want)
				}
				untouched(t, s, users)
			}
			// Within the policy a release is charged its ρ, however small
			// its ε; a user-level release's model covers the declared
			// catalogue whatever was rated.
			res, err := admin.Publish(ctx, api.ReleaseRequest{Method: "dp-bias", Epsilon: 1e-3, Delta: 1e-3})
			if err != nil {
				t.Fatal(err)
			}
			g := res.Release.Guarantee
			if g.Rho <= 0 || res.MaxCharge < g.Rho || res.MaxCharge > g.Rho+2e-9 || res.UsersCharged != len(users) {
				t.Fatalf("tiny-ε release: guarantee %+v charged %d users %g", g, res.UsersCharged, res.MaxCharge)
			}
			for _, c := range users {
				if me, _ := c.Status(ctx); me.Spent != res.MaxCharge {
					t.Fatalf("ledger %+v after a release charging %g", me, res.MaxCharge)
				}
			}
			if len(res.Release.Model.Items) != 9 {
				t.Fatalf("the public model lists %d items; the catalogue has 9", len(res.Release.Model.Items))
			}
		})
	}
}

// TestBudgetSkip: with --exhausted skip, once the first users' budgets
// are spent a release covers the users who can still pay (and charges
// only them) instead of being refused for everyone.
func TestBudgetSkip(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			opt := centralOptions(t, 8, 1.6) // two dp-bias releases at (1, 1e-6) fit
			opt.Exhausted = api.ExhaustedSkip
			s := newTestServer(t, kind, opt)
			cfg, _ := s.client("").Config(ctx)
			pop := synthPopulation(30, 8, 0.6, 3)
			var early, late []*client.Client
			for u := range 20 {
				c := enrolled(t, s)
				submitTrue(t, c, cfg, pop.rated[u])
				early = append(early, c)
			}
			admin := s.client(adminToken)
			req := api.ReleaseRequest{Method: "dp-bias", Epsilon: 1, Delta: 1e-6}
			for range 2 {
				if _, err := admin.Publish(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			// Everyone who reported is spent: nobody can pay.
			if _, err := admin.Publish(ctx, req); !isStatus(err, 403) {
				t.Fatalf("release with every budget spent: %v", err)
			}
			for u := 20; u < 30; u++ {
				c := enrolled(t, s)
				submitTrue(t, c, cfg, pop.rated[u])
				late = append(late, c)
			}
			res, err := admin.Publish(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.UsersCharged != 10 || res.UsersSkipped != 20 {
				t.Fatalf("charged %d, skipped %d; want 10 and 20", res.UsersCharged, res.UsersSkipped)
			}
			if strings.Contains(res.Release.Ledger, "20") || strings.Contains(res.Release.Ledger, "10 ") {
				t.Fatalf("the public ledger sentence counts users: %q", res.Release.Ledger)
			}
			for _, c := range early {
				if me, _ := c.Status(ctx); math.Abs(me.Spent-2*res.MaxCharge) > 1e-8 {
					t.Fatalf("an early user's ledger %+v", me)
				}
			}
			for _, c := range late {
				if me, _ := c.Status(ctx); me.Spent != res.MaxCharge {
					t.Fatalf("a late user's ledger %+v", me)
				}
			}
			if err := s.st.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBudgetPeriod: with --period, a user's releases within one period
// cost at most her budget, which renews with the next period; GET /v1/me
// shows the current period's spending.
func TestBudgetPeriod(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
			opt := centralOptions(t, 8, 1.6)
			opt.Period = 24 * time.Hour
			opt.Now = func() time.Time { return now }
			s := newTestServer(t, kind, opt)
			cfg, _ := s.client("").Config(ctx)
			if cfg.PeriodSeconds != 86400 || !strings.Contains(cfg.GuaranteeText, "per period") {
				t.Fatalf("configuration: period %d, %q", cfg.PeriodSeconds, cfg.GuaranteeText)
			}
			pop := synthPopulation(20, 8, 0.6, 4)
			var users []*client.Client
			for _, r := range pop.rated {
				c := enrolled(t, s)
				submitTrue(t, c, cfg, r)
				users = append(users, c)
			}
			admin := s.client(adminToken)
			req := api.ReleaseRequest{Method: "dp-bias", Epsilon: 1, Delta: 1e-6}
			var rho float64
			for range 2 {
				res, err := admin.Publish(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				rho = res.MaxCharge
			}
			if _, err := admin.Publish(ctx, req); !isStatus(err, 403) {
				t.Fatalf("third release in the period: %v", err)
			}
			now = now.Add(14 * time.Hour) // the next day (UTC)
			me, _ := users[0].Status(ctx)
			if me.Spent != 0 || me.PeriodStart == nil || !me.PeriodStart.Equal(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)) {
				t.Fatalf("ledger in the new period: %+v", me)
			}
			if _, err := admin.Publish(ctx, req); err != nil {
				t.Fatalf("first release of the next period: %v", err)
			}
			if me, _ = users[0].Status(ctx); math.Abs(me.Spent-rho) > 1e-12 {
				t.Fatalf("ledger: %+v", me)
			}
			if err := s.st.CheckPeriods(ctx, 86400e3); err != nil {
				t.Fatal(err)
			}
			// Lifetime spending (3ρ) is over the per-period budget: the
			// lifetime check says so, the per-period one does not.
			if err := s.st.Check(ctx); err == nil {
				t.Fatal("the lifetime check passed 3 releases over a budget for 2")
			}
		})
	}
}
