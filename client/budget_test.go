package client_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/service/api"
)

// TestBudgetOf: a local ledger reads in ε; a central one in the (ε, δ)
// the budget was stated in, its ρ a detail — never "ε = 0 of 1.052".
func TestBudgetOf(t *testing.T) {
	local := &api.Config{Mode: api.ModeLocal, LedgerUnit: api.UnitEpsilon, Budget: 12}
	b, err := client.BudgetOf(local, 6, 12)
	if err != nil || b.String() != "ε = 6 of your budget ε = 12 (ε = 6 left)" {
		t.Fatalf("local: %q, %v", b, err)
	}
	rho, err := accountant.RhoForApprox(8, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	central := &api.Config{Mode: api.ModeCentral, LedgerUnit: api.UnitRho, Budget: 8, BudgetDelta: 1e-6, BudgetRho: rho}
	for _, tc := range []struct {
		spent float64
		want  []string
	}{
		{0, []string{"ε = 0 of your budget ε = 8 at δ = 1e-6", "ρ = 0 of ρ = " + strconv.FormatFloat(rho, 'g', 4, 64)}},
		{rho, []string{"ε = 8 of your budget ε = 8", "ρ = 0 left"}},
	} {
		b, err := client.BudgetOf(central, tc.spent, rho)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("central, spent ρ = %g: %q does not say %q", tc.spent, b, w)
			}
		}
		if tc.spent == rho && math.Abs(b.Spent-8) > 1e-6 {
			t.Errorf("the whole budget ρ reads as ε = %g, want 8", b.Spent)
		}
	}
}
