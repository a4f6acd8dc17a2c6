package client

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service/api"
)

// Budget is a user's ledger in the unit her budget is stated in: ε in
// local mode; in central mode (ε, δ), the ledger's zCDP ρ a detail. Both
// `privrec client` and the browser word her ledger with it.
type Budget struct {
	Mode string `json:"mode"`
	// Spent and Budget are ε. In central mode Spent is the ε at Delta of
	// the ρ charged so far (tight conversion; ε does not add up across
	// releases, ρ does), and Budget the stated budget ε.
	Spent  float64 `json:"spent_epsilon"`
	Budget float64 `json:"budget_epsilon"`
	Delta  float64 `json:"delta,omitempty"`
	// SpentRho, BudgetRho and RemainingRho (central mode) are the
	// ledger's own counts.
	SpentRho     float64 `json:"spent_rho,omitempty"`
	BudgetRho    float64 `json:"budget_rho,omitempty"`
	RemainingRho float64 `json:"remaining_rho,omitempty"`
	// Remaining (local mode) is ε left.
	Remaining float64 `json:"remaining_epsilon,omitempty"`
}

// BudgetOf reads a ledger's spent and budget (in the configuration's
// ledger unit, as GET /v1/me and acknowledgements give them) as Budget.
func BudgetOf(cfg *api.Config, spent, budget float64) (Budget, error) {
	if cfg.LedgerUnit != api.UnitRho {
		return Budget{Mode: cfg.Mode, Spent: spent, Budget: budget, Remaining: max(0, budget-spent)}, nil
	}
	b := Budget{Mode: cfg.Mode, Budget: cfg.Budget, Delta: cfg.BudgetDelta, SpentRho: spent, BudgetRho: budget, RemainingRho: max(0, budget-spent)}
	if spent > 0 {
		eps, err := accountant.ZCDPToApprox(spent, cfg.BudgetDelta)
		if err != nil {
			return Budget{}, fmt.Errorf("client: the ledger's ρ = %g at δ = %g: %w", spent, cfg.BudgetDelta, err)
		}
		b.Spent = eps
	}
	return b, nil
}

// String is the sentence: "ε = 3.1 of your budget ε = 8 at δ = 1e-06
// (in zCDP, which the ledger counts: ρ = 0.2 of ρ = 1.052)".
func (b Budget) String() string {
	if b.BudgetRho == 0 {
		return fmt.Sprintf("ε = %s of your budget ε = %s (ε = %s left)", short(b.Spent), short(b.Budget), short(b.Remaining))
	}
	return fmt.Sprintf("ε = %s of your budget ε = %s at δ = %s (in zCDP, which the ledger counts: ρ = %s of ρ = %s, ρ = %s left)",
		short(b.Spent), short(b.Budget), FormatDelta(b.Delta), short(b.SpentRho), short(b.BudgetRho), short(b.RemainingRho))
}

// FormatDelta prints δ as people write it: 1e-6, 0.01.
func FormatDelta(d float64) string {
	if d != 0 && d < 1e-3 {
		return strings.Replace(strconv.FormatFloat(d, 'e', -1, 64), "e-0", "e-", 1)
	}
	return strconv.FormatFloat(d, 'g', -1, 64)
}

// short prints a number with at most 4 significant digits.
func short(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

// ReleaseWarnings judges, on the device, whether the release's noise
// drowns its statistic (release.Warnings on its own report and public
// model: the device does not take the server's word for it) for a list
// of k items.
func ReleaseWarnings(rel *api.Release, k int) ([]release.Warning, error) {
	m, err := rel.Model.Model()
	if err != nil {
		return nil, fmt.Errorf("client: release %d: %w", rel.ID, err)
	}
	return release.Warnings(release.Report(rel.Report), m, release.Facts{List: k}), nil
}

// Ranks says whether a release's scores only rank items (a top-N model):
// they are then shown as a ranking, never as predicted ratings.
func Ranks(rel *api.Release) bool { return !rel.Model.Output.Rated() }
