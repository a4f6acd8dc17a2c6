package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// randomGuarantee draws a release's guarantee of any kind a method could
// state: user-level zCDP or pure, per rating, unproven, none, with ε and
// δ from tiny to huge (the "free" releases of issue 23 among them).
func randomGuarantee(r *rand.Rand) privacy.Guarantee {
	eps := math.Pow(10, -8+9*r.Float64()) // 1e-8 … 10
	g := privacy.Guarantee{Epsilon: eps, Unit: privacy.UnitUser, Notion: privacy.Joint, Status: privacy.Proven, Relation: privacy.RelationUserReplace}
	switch r.IntN(3) {
	case 0: // pure ε
	case 1: // zCDP with its conversion's δ
		g.Delta = math.Pow(10, -10+10*r.Float64()) // 1e-10 … 1: huge δ included
		g.Rho = math.Pow(10, -12+12*r.Float64())
	default: // (ε, δ) with no ρ
		g.Delta = math.Pow(10, -10+10*r.Float64())
	}
	if g.Delta >= 1 {
		g.Delta = 0.99
	}
	switch r.IntN(8) {
	case 0:
		g.Unit, g.Notion, g.Relation = privacy.UnitEntry, privacy.Central, privacy.RelationRatingValue
	case 1:
		g.Status = privacy.AsClaimed
	case 2:
		g.Relation = privacy.RelationUserAddRemove
	case 3:
		g.Notion = privacy.Central
	}
	return g
}

// TestLedgerNeverExceedsBudget: 1 000 random sequences of releases of
// random guarantees, each charged through chargeFor and the store as the
// server does, to random subsets of users with random budgets (ε, δ) —
// lifetime or per period. After each sequence no user's charges (per
// period, when per period) exceed her budget ρ, the (ε, δ) they convert
// to is within the stated budget (ε_B, δ_B), no accepted release was free
// and none stated δ above the policy. Deterministic (fixed seed): no false
// failures.
func TestLedgerNeverExceedsBudget(t *testing.T) {
	ctx := context.Background()
	st, err := store.Create(ctx, storetest.URL(t, "sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Init(ctx, []byte(`{"test":"random ledgers"}`)); err != nil {
		t.Fatal(err)
	}
	sequences := 1000
	if testtier.Quick() {
		sequences = 100 // 1000 in the long tier
	}
	r := rand.New(rand.NewPCG(23, 2026))
	const periodMS = 1000
	var published, refused, overBudget int
	var clock int64 = 1
	for seq := range sequences {
		epsB := 0.2 + 8*r.Float64()
		deltaB := math.Pow(10, -9+4*r.Float64())
		rhoB, err := accountant.RhoForApprox(epsB, deltaB)
		if err != nil {
			t.Fatal(err)
		}
		budget, err := store.BudgetNano(rhoB)
		if err != nil {
			t.Fatal(err)
		}
		periods := r.IntN(3) == 0
		users := make([]string, 1+r.IntN(4))
		if err := st.Update(ctx, func(tx store.Tx) error {
			for k := range users {
				users[k] = fmt.Sprintf("s%d-u%d", seq, k)
				if err := tx.CreateUser(ctx, store.NewUser{ID: users[k], TokenHash: []byte(users[k]), Budget: budget, CreatedMS: clock}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		population := 10 + r.IntN(100000)
		first := clock
		cap := deltaCap(0, population)
		for range 1 + r.IntN(8) {
			clock += int64(r.IntN(700)) // several releases per period
			g := randomGuarantee(r)
			rho, err := chargeFor(g, cap)
			if err != nil {
				refused++
				continue
			}
			if g.Status != privacy.Proven || g.Unit != privacy.UnitUser || g.Delta > cap {
				t.Fatalf("sequence %d: accepted %+v (policy δ ≤ %g)", seq, g, cap)
			}
			nano, err := ledgerCharge(rho)
			if err != nil {
				refused++ // a ρ beyond the ledger's range
				continue
			}
			var cover []store.Charge
			for _, u := range users {
				if r.IntN(4) > 0 {
					cover = append(cover, store.Charge{User: u, Nano: nano})
				}
			}
			nr := store.NewRelease{CreatedMS: clock, Method: "random", Doc: []byte(`{}`), Charges: cover}
			if periods {
				nr.PeriodStartMS = clock - clock%periodMS
			}
			_, err = st.Publish(ctx, nr)
			var ob *store.OverBudgetError
			switch {
			case errors.As(err, &ob):
				overBudget++
			case err != nil:
				t.Fatal(err)
			default:
				published++
			}
		}
		// Every user's spending, per period or for all time, within her
		// budget in ρ and so within (ε_B, δ_B).
		var worst int64
		if periods {
			for p := first / periodMS; p <= clock/periodMS; p++ {
				spent, err := st.SpentSince(ctx, p*periodMS)
				if err != nil {
					t.Fatal(err)
				}
				next, err := st.SpentSince(ctx, (p+1)*periodMS)
				if err != nil {
					t.Fatal(err)
				}
				for _, u := range users {
					worst = max(worst, spent[u]-next[u])
				}
			}
		} else {
			spent, err := st.SpentSince(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range users {
				worst = max(worst, spent[u])
			}
		}
		if worst > budget {
			t.Fatalf("sequence %d: a user spent %d units of her budget %d", seq, worst, budget)
		}
		if worst > 0 {
			eps, err := accountant.ZCDPToApprox(store.Eps(worst), deltaB)
			if err != nil || eps > epsB {
				t.Fatalf("sequence %d: spending ρ = %g is (%g, %g)-DP, over the budget (%g, %g) (%v)", seq, store.Eps(worst), eps, deltaB, epsB, deltaB, err)
			}
		}
	}
	if err := st.Check(ctx); err != nil && published > 0 {
		// Lifetime check: users of per-period sequences may exceed
		// their budget over several periods; check those per period.
		if err := st.CheckPeriods(ctx, periodMS); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d sequences: %d releases published, %d refused by chargeFor, %d refused for lack of budget", sequences, published, refused, overBudget)
	if published == 0 || refused == 0 || overBudget == 0 {
		t.Fatal("the random sequences did not exercise every outcome")
	}
}
