package service

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// TestChargeFor: the one place that decides what a central release costs
// each user it covers, against every kind of guarantee. Before issue 23
// it charged ε (not δ or ρ), accepted as-claimed and per-rating
// guarantees (k·ε by group privacy) and any δ.
func TestChargeFor(t *testing.T) {
	const cap = 1e-4 // the δ policy of a release over 1 000 users
	user := func(eps, delta, rho float64) privacy.Guarantee {
		return privacy.Guarantee{Epsilon: eps, Delta: delta, Rho: rho, Unit: privacy.UnitUser, Notion: privacy.Joint, Status: privacy.Proven,
			Relation: privacy.RelationUserReplace}
	}
	with := func(g privacy.Guarantee, f func(*privacy.Guarantee)) privacy.Guarantee { f(&g); return g }
	cases := []struct {
		name string
		g    privacy.Guarantee
		rho  float64 // 0: refused
		why  string  // in the refusal
	}{
		{"joint, zCDP (dp-bias, dpals, dpfw, dpsvd, mm)", user(1, 1e-6, 0.0243), 0.0243, ""},
		{"central, zCDP", with(user(1, 1e-6, 0.0243), func(g *privacy.Guarantee) { g.Notion = privacy.Central }), 0.0243, ""},
		{"pure ε: ρ = ε²/2", user(0.5, 0, 0), 0.125, ""},
		{"add/remove relation: a replacement is two steps, 4ρ", with(user(1, 1e-6, 0.01), func(g *privacy.Guarantee) { g.Relation = privacy.RelationUserAddRemove }), 0.04, ""},
		{"tiny ε, δ within policy: charged its ρ", user(1e-6, 1e-5, 1e-14), 1e-14, ""},
		{"tiny ε, huge δ (free before)", user(6e-32, 0.9, 0.01), 0, "policy"},
		{"δ just above the policy", user(1, 2e-4, 0.02), 0, "policy"},
		{"(ε, δ) without ρ", user(1, 1e-6, 0), 0, "no zCDP ρ"},
		{"as-claimed (onebit-objp)", with(user(1, 0, 0), func(g *privacy.Guarantee) { g.Status = privacy.AsClaimed; g.Note = "No ε is proven. More." }), 0, "not proven"},
		{"no privacy", privacy.NoPrivacy(privacy.UnitUser, "none"), 0, "promises no privacy"},
		{"per rating, pure (onebit-inp, cp-ip)", privacy.Guarantee{Epsilon: 1, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven, Relation: privacy.RelationRatingValue}, 0, "per rating"},
		{"per rating, zCDP (cp-dpsgd)", privacy.Guarantee{Epsilon: 1, Delta: 1e-6, Rho: 0.02, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven, Relation: privacy.RelationRatingValue}, 0, "per rating"},
		{"local DP", with(user(1, 0, 0), func(g *privacy.Guarantee) { g.Notion = privacy.Local; g.Relation = privacy.RelationLocalReport }), 0, "local"},
		{"another relation", with(user(1, 0, 0), func(g *privacy.Guarantee) { g.Relation = "one user's first rating changes" }), 0, "does not cover"},
		{"reproducible noise", with(user(1, 1e-6, 0.02), func(g *privacy.Guarantee) { g.Reproducible = true }), 0, "seeded"},
		{"malformed: δ = NaN", user(1, math.NaN(), 0.02), 0, "malformed"},
		{"malformed: negative ρ", user(1, 1e-6, -1), 0, "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rho, err := chargeFor(c.g, cap)
			if c.rho == 0 {
				if err == nil || !strings.Contains(err.Error(), c.why) {
					t.Fatalf("charged %g, error %v; want a refusal naming %q", rho, err, c.why)
				}
				return
			}
			if err != nil || math.Abs(rho-c.rho) > 1e-12*c.rho+1e-300 {
				t.Fatalf("charge %g, %v; want %g", rho, err, c.rho)
			}
		})
	}
}

// TestLedgerCharge: a charge is rounded up to the ledger's unit (10⁻⁹ ρ)
// and is never zero, however small the release's ρ.
func TestLedgerCharge(t *testing.T) {
	for _, c := range []struct {
		rho  float64
		want int64
	}{{1e-20, 1}, {1e-15, 1}, {1e-9, 1}, {1.5e-9, 2}, {0.1, 1e8}, {0.024355970202676457, 24355971}} {
		if got, err := ledgerCharge(c.rho); err != nil || got != c.want {
			t.Errorf("ledgerCharge(%g) = %d, %v; want %d", c.rho, got, err, c.want)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), -1, 2e9} {
		if _, err := ledgerCharge(bad); err == nil {
			t.Errorf("ledgerCharge(%g) accepted", bad)
		}
	}
}

// TestChargeForEveryMethod: every registered private method, trained as
// the server trains it (declared scale, catalogue and population), is
// either published and charged its ρ (a proven user-level guarantee under
// the collection's relation) or refused with the reason. New methods are
// covered by the default branch: a user-level proven method must be
// chargeable, anything else refused.
func TestChargeForEveryMethod(t *testing.T) {
	in := smallCentralInput(t, 60, 10)
	var published []string
	for _, meth := range methods.All() {
		if !meth.Private {
			continue
		}
		t.Run(meth.Name, func(t *testing.T) {
			env := methods.Env{Epsilon: 1, Delta: 1e-6, Seed: 1, Noise: noise.Secure(), Rand: noise.Seeded(1)}
			rel, err := methods.Train(context.Background(), meth.Name, meth.New(), in, env)
			if err != nil {
				if strings.HasPrefix(meth.Name, "ldp-") {
					return // trains on collect files only: local mode
				}
				t.Fatalf("training: %v", err)
			}
			g := rel.Guarantee
			rho, err := chargeFor(g, deltaCap(0, 60))
			want := g.Status == privacy.Proven && g.Unit == privacy.UnitUser && g.Relation == privacy.RelationUserReplace
			switch meth.Name {
			case "dp-bias", "dpals", "dpfw", "dpsvd", "mm":
				if !want {
					t.Fatalf("expected a proven user-level guarantee, got %+v", g)
				}
			case "onebit-inp", "onebit-objp", "onebit-outp", "onebit-grap", "cp-ip", "cp-dpsgd", "tucker-ip", "tucker-dpsgd", "cp-gp", "cp-op", "tucker-gp", "tucker-op":
				if want {
					t.Fatalf("expected a per-rating or unproven guarantee, got %+v", g)
				}
			}
			if want {
				if err != nil || !(rho > 0) || math.Abs(rho-g.Rho) > 1e-15 {
					t.Fatalf("charge %g, %v for %+v", rho, err, g)
				}
				// The public model covers exactly the declared catalogue.
				if m := rel.Model(); m == nil || len(m.Items) != in.Declared.Catalogue.Len() {
					t.Fatalf("the public model's items are not the catalogue's %d", in.Declared.Catalogue.Len())
				}
				published = append(published, meth.Name)
				return
			}
			if err == nil {
				t.Fatalf("charged %g for %+v", rho, g)
			}
			t.Logf("refused: %v", err)
		})
	}
	// A refusal names the methods central mode publishes: exactly these.
	slices.Sort(published)
	if want := slices.Sorted(slices.Values(centralMethods)); !slices.Equal(published, want) {
		t.Errorf("central mode publishes %v; its refusals name %v", published, centralMethods)
	}
}

// smallCentralInput is what the server hands a method: users × items
// ratings on 1…5 over a declared catalogue, the population declared.
func smallCentralInput(t testing.TB, users, items int) release.Input {
	ids := make([]string, items)
	for j := range ids {
		ids[j] = fmt.Sprintf("i%d", j)
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := ratings.NewBuilder(ratings.DupError)
	r := rand.New(rand.NewPCG(1, 2))
	for u := range users {
		for j := range items {
			if r.Float64() < 0.5 {
				if err := b.Add(fmt.Sprintf("u%d", u), ids[j], float64(1+r.IntN(5)), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	sc := release.Scale{Min: 1, Max: 5}
	return release.Input{Ratings: m, Declared: release.Declared{Scale: &sc, Catalogue: cat, Population: users}}
}
