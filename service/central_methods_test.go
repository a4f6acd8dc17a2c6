package service_test

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/service/api"
)

// TestCentralEveryMethod publishes every registered private method in
// central mode, over a population that includes a user whose report
// holds no rating (an empty row: who reported is public, what she rated
// is not). Each is either published — then its guarantee is proven,
// user-level, under the user-replacement relation, every user who
// reported is charged its ρ, and its public model covers exactly the
// declared catalogue — or refused with a 400 and nothing charged.
func TestCentralEveryMethod(t *testing.T) {
	ctx := context.Background()
	s := newTestServer(t, "sqlite", centralOptions(t, 8, 100))
	cfg, err := s.client("").Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pop := synthPopulation(40, 8, 0.6, 3)
	var users []*client.Client
	for _, r := range pop.rated {
		c := enrolled(t, s)
		submitTrue(t, c, cfg, r)
		users = append(users, c)
	}
	empty := enrolled(t, s)
	submitTrue(t, empty, cfg, client.Ratings{})
	users = append(users, empty)
	admin := s.client(adminToken)
	var spent float64
	published := 0
	for _, m := range methods.All() {
		if !m.Private {
			continue
		}
		res, err := admin.Publish(ctx, api.ReleaseRequest{Method: m.Name, Epsilon: 1, Delta: 1e-6})
		if err != nil {
			if !isStatus(err, 400) {
				t.Errorf("%s: %v; want published or a 400", m.Name, err)
			}
			if me, _ := empty.Status(ctx); math.Abs(me.Spent-spent) > 1e-12 {
				t.Fatalf("%s: refused but charged: %+v", m.Name, me)
			}
			continue
		}
		published++
		g := res.Release.Guarantee
		if g.Status != privacy.Proven || g.Unit != privacy.UnitUser || g.Relation != privacy.RelationUserReplace || !(g.Rho > 0) {
			t.Errorf("%s published under %+v", m.Name, g)
		}
		if res.UsersCharged != len(users) || res.MaxCharge < g.Rho || res.MaxCharge > g.Rho+2e-9 {
			t.Errorf("%s charged %d users %g for ρ = %g", m.Name, res.UsersCharged, res.MaxCharge, g.Rho)
		}
		if len(res.Release.Model.Items) != len(cfg.Items) {
			t.Errorf("%s: the public model lists %d items, the catalogue %d", m.Name, len(res.Release.Model.Items), len(cfg.Items))
		}
		spent += res.MaxCharge
		if me, _ := empty.Status(ctx); math.Abs(me.Spent-spent) > 1e-8 {
			t.Fatalf("%s: the user without ratings has spent %g, want %g", m.Name, me.Spent, spent)
		}
	}
	if published < 5 {
		t.Fatalf("only %d methods published", published)
	}
	if err := s.st.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
