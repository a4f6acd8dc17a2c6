package service

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// Options configure a server. The collection fields (Catalogue through
// Levels) are recorded in the database on first start; a later start with
// other values is refused, since the stored reports and ledgers were made
// under them.
type Options struct {
	// Catalogue is the declared item catalogue (--items FILE).
	Catalogue *model.Catalogue
	// Mechanism is "rr", "laplace" (local DP) or "none" (central mode).
	Mechanism string
	// Epsilon is the per-user ε of one report (local mode).
	Epsilon float64
	// MeanEpsilon (local mode) is the part of Epsilon spent on the mean
	// report every report carries (the device's own mean rating with
	// Laplace noise); the rest, Epsilon − MeanEpsilon, is spread over the
	// catalogue's cells. 0: reports carry no mean report. `privrec serve`
	// defaults it to DefaultMeanEpsilon(Epsilon) for a new collection.
	MeanEpsilon float64
	// Budget is every user's total ε.
	Budget float64
	// Scale is the declared rating scale; Levels its number of levels
	// (rr: 0 means max − min + 1 for integer ends).
	Scale  model.Range
	Levels int
	// BudgetDelta (central mode) is the δ of the budget: (Budget,
	// BudgetDelta)-DP is converted once to the zCDP ρ the ledger holds
	// (0: DefaultBudgetDelta).
	BudgetDelta float64
	// Period (central mode), when > 0, makes the budget per period (a
	// whole number of seconds): the releases within one period
	// [k·Period, (k+1)·Period) of Unix time cost each user at most her
	// budget.
	Period time.Duration

	// MaxDelta (central mode) is the largest δ a release may state (0:
	// 1/(10·population of the release)). A policy, not recorded.
	MaxDelta float64
	// Exhausted (central mode) is the budget policy, api.ExhaustedRefuse
	// (default) or api.ExhaustedSkip. A policy, not recorded.
	Exhausted string

	// AdminToken authorises the admin calls ("" disables them).
	AdminToken string
	// AddItems accepts a catalogue that extends the recorded one (the
	// recorded items first, in their order, then new ones), every other
	// setting unchanged, and records it as the collection's next version
	// (docs/SERVICE.md, "The catalogue grows").
	AddItems bool
	// UserTokenTTL, when > 0, makes a user's token expire that long
	// after it was issued (enrolment or rotation); 0: never.
	UserTokenTTL time.Duration
	// EnrollAdminOnly: only the admin may enrol users.
	EnrollAdminOnly bool
	// MaxBody bounds a request body in bytes (0: 64 KiB + 32 bytes per
	// catalogue item).
	MaxBody int64
	// Rate and Burst limit requests per user token (per second; 0: 50/s,
	// burst 100); EnrollRate and EnrollBurst limit enrolments per client
	// address (0: 10/s, burst 100).
	Rate, EnrollRate   float64
	Burst, EnrollBurst int
	// MaxBatch bounds how many writes share one transaction (0: 256).
	MaxBatch int
	// Writers is the number of concurrent write transactions (0: 1;
	// always 1 for SQLite, which has one writer). On a small machine one
	// writer with large batches beats several with small ones, for
	// PostgreSQL too.
	Writers int
	// Workers bounds training parallelism (0: all cores).
	Workers int
	// MaxConns bounds the open HTTP connections (0: the descriptor
	// limit minus FDReserve, see ConnLimit); IdleTimeout is how long an
	// idle keep-alive connection is kept (0: DefaultIdleTimeout). TLS,
	// when set, serves HTTPS.
	MaxConns    int
	IdleTimeout time.Duration
	TLS         *tls.Config
	// Log receives structured logs (nil: discarded). Tokens and report
	// values are never logged.
	Log *slog.Logger
	// Root, when set, serves every path outside the API (a web client).
	Root http.Handler
	// Now is the clock (nil: time.Now); tests may fix it.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.Rate == 0 {
		o.Rate = 50
	}
	if o.Burst == 0 {
		o.Burst = 100
	}
	if o.EnrollRate == 0 {
		o.EnrollRate = 10
	}
	if o.EnrollBurst == 0 {
		o.EnrollBurst = 100
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 256
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxBody == 0 && o.Catalogue != nil {
		o.MaxBody = 64<<10 + 32*int64(o.Catalogue.Len())
	}
}

// Identity is what the database records of the collection: every fact
// the stored reports and ledgers depend on.
type Identity struct {
	Mode          string  `json:"mode"`
	Mechanism     string  `json:"mechanism"`
	ReportEpsilon float64 `json:"report_epsilon"`
	CellEpsilon   float64 `json:"cell_epsilon"`
	// MeanEpsilon is the mean report's ε (0, and absent, for collections
	// made before mean reports existed or without them).
	MeanEpsilon float64   `json:"mean_epsilon,omitempty"`
	Budget      float64   `json:"budget"`
	Scale       api.Scale `json:"scale"`
	Units       string    `json:"units"`
	Items       []string  `json:"items"`
	// The central mode's ledger: zCDP ρ converted from (Budget,
	// BudgetDelta), per period of PeriodSeconds when set. (Empty in local
	// mode, whose ledger is in ε: databases made before these fields
	// existed keep their identity.)
	LedgerUnit    string  `json:"ledger_unit,omitempty"`
	BudgetDelta   float64 `json:"budget_delta,omitempty"`
	BudgetRho     float64 `json:"budget_rho,omitempty"`
	PeriodSeconds int64   `json:"period_seconds,omitempty"`
}

// DefaultBudgetDelta is the δ of a central-mode budget when
// --budget-delta is not given.
const DefaultBudgetDelta = 1e-6

// DefaultMeanEpsilon is the mean report's share of a per-report ε when
// --mean-epsilon is not given for a new collection: an eighth. The mean
// report's noise (Laplace of scale (max − min)/ε_mean) averages out over
// the population while the recovery needs its level, and the cells keep
// 7/8 of the report's ε.
func DefaultMeanEpsilon(reportEps float64) float64 { return reportEps / 8 }

// BuildConfig validates the options and builds the published collection
// configuration. Errors name the flag.
func BuildConfig(o Options) (*api.Config, error) {
	if err := checkCatalogueBudget(o); err != nil {
		return nil, err
	}
	cfg := &api.Config{Mechanism: o.Mechanism, Budget: o.Budget, Scale: api.Scale{Min: o.Scale.Min, Max: o.Scale.Max, Levels: o.Levels},
		Items: configItems(o.Catalogue)}
	var err error
	switch o.Mechanism {
	case "rr", "laplace":
		err = localConfig(o, cfg)
	case api.MechanismNone:
		err = centralConfig(o, cfg)
	default:
		err = fmt.Errorf("--mechanism %q: want rr or laplace (local DP, randomized on the device) or none (central: a trusted curator)", o.Mechanism)
	}
	if err != nil {
		return nil, err
	}
	cfg.GuaranteeText = cfg.Guarantee.String()
	return cfg, nil
}

// checkCatalogueBudget refuses a catalogue that is missing or cannot be
// written in a collect file, a scale that is not one, and a budget that is
// not a positive finite ε the ledger can hold.
func checkCatalogueBudget(o Options) error {
	if o.Catalogue == nil || o.Catalogue.Len() == 0 {
		return fmt.Errorf("--items FILE is required: the declared catalogue every report covers")
	}
	for _, id := range o.Catalogue.IDs() {
		if strings.ContainsAny(id, "\t\r\n") || strings.HasPrefix(id, "#") {
			return fmt.Errorf("--items: item ID %q cannot be written in a collect file (tab, newline or leading #)", id)
		}
	}
	if err := o.Scale.Validate(); err != nil {
		return fmt.Errorf("--scale: %w", err)
	}
	if !(o.Budget > 0) || math.IsInf(o.Budget, 0) {
		return fmt.Errorf("--budget must be a positive finite ε, got %g", o.Budget)
	}
	if _, err := store.BudgetNano(o.Budget); err != nil {
		return fmt.Errorf("--budget: %w", err)
	}
	return nil
}

// configItems is the catalogue's items, with their titles.
func configItems(cat *model.Catalogue) []api.Item {
	var items []api.Item
	titles := cat.Titles()
	for k, id := range cat.IDs() {
		it := api.Item{ID: id}
		if titles != nil {
			it.Title = titles[k]
		}
		items = append(items, it)
	}
	return items
}

// localConfig settles a local-mode collection (rr, laplace): the per-report
// ε and its mean part, the rating levels, the reports' parameters, the
// reports a budget affords and the guarantee.
func localConfig(o Options, cfg *api.Config) error {
	n := o.Catalogue.Len()
	cfg.Mode = api.ModeLocal
	cfg.LedgerUnit = api.UnitEpsilon
	switch {
	case o.BudgetDelta != 0:
		return fmt.Errorf("--budget-delta applies to central mode (--mechanism none): a local-mode budget is a pure ε")
	case o.Period != 0:
		return fmt.Errorf("--period applies to central mode (--mechanism none): a local-mode budget is for all of a user's reports")
	case o.MaxDelta != 0:
		return fmt.Errorf("--max-delta applies to central mode (--mechanism none): local-mode releases are post-processing of pure ε-DP reports")
	case o.Exhausted != "":
		return fmt.Errorf("--exhausted applies to central mode (--mechanism none): a local-mode report past the budget is refused")
	}
	if !(o.Epsilon > 0) || math.IsInf(o.Epsilon, 0) {
		return fmt.Errorf("--epsilon must be a positive finite per-report ε, got %g", o.Epsilon)
	}
	if !(o.MeanEpsilon >= 0) || math.IsInf(o.MeanEpsilon, 0) {
		return fmt.Errorf("--mean-epsilon must be a finite ε ≥ 0 (0: no mean report), got %g", o.MeanEpsilon)
	}
	if o.MeanEpsilon >= o.Epsilon {
		return fmt.Errorf("--mean-epsilon %g must be below --epsilon %g: the mean report is part of the per-report ε, and the rest pays for the %d cells", o.MeanEpsilon, o.Epsilon, n)
	}
	if o.Epsilon > o.Budget {
		return fmt.Errorf("--epsilon %g exceeds --budget %g: no report would fit", o.Epsilon, o.Budget)
	}
	if o.Mechanism == "rr" {
		lv, err := rrLevels(cfg.Scale)
		if err != nil {
			return err
		}
		cfg.Scale.Levels = lv
	} else if o.Levels != 0 {
		return fmt.Errorf("--levels applies to --mechanism rr only")
	}
	lp, err := localParams(o.Mechanism, o.Epsilon, o.MeanEpsilon, n, cfg.Scale)
	if err != nil {
		if o.MeanEpsilon > 0 {
			return fmt.Errorf("--epsilon %g with --mean-epsilon %g: %w", o.Epsilon, o.MeanEpsilon, err)
		}
		return fmt.Errorf("--epsilon: %w", err)
	}
	cfg.ReportEpsilon, cfg.CellEpsilon, cfg.Units, cfg.MaxAbsValue = o.Epsilon, lp.cellEps, lp.units, lp.maxAbs
	cfg.MeanEpsilon, cfg.MaxAbsMean = o.MeanEpsilon, lp.maxAbsMean
	charge, _ := store.ChargeNano(o.Epsilon)
	budget, _ := store.BudgetNano(o.Budget)
	cfg.MaxReports = int(budget / charge)
	cfg.Guarantee = localGuarantee(o, lp, n)
	return nil
}

// localGuarantee is a local-mode collection's guarantee: each report's
// per-user ε with its cells and mean report, the ledger's bound.
func localGuarantee(o Options, lp localFit, n int) privacy.Guarantee {
	g := lp.perUser
	g.Epsilon = o.Epsilon
	g.Relation = privacy.RelationLocalReport
	if o.MeanEpsilon > 0 {
		g.Note = fmt.Sprintf("One report covers all %d catalogue items, each randomized on the device (%s, per-item ε = %.6g; a missing rating is randomized too), and carries the device's own mean rating on the declared scale with Laplace noise at ε = %g (the mean report); by basic composition one report is ε = %.6g + %g ≤ %g-DP for its user (%d·%.6g for the cells, %g for the mean), and ε = %.6g per rating (its cell and the mean). The ledger debits ε = %g per stored report and refuses reports beyond the budget ε = %g, so all of a user's reports together are at most %g-DP.",
			n, mechanismName(o.Mechanism), lp.cellEps, o.MeanEpsilon, lp.perUser.Epsilon-o.MeanEpsilon, o.MeanEpsilon, o.Epsilon, n, lp.cellEps, o.MeanEpsilon, lp.perRating.Epsilon, o.Epsilon, o.Budget, o.Budget)
	} else {
		g.Note = fmt.Sprintf("One report covers all %d catalogue items, each randomized on the device (%s, per-item ε = %.6g; a missing rating is randomized too), and carries no mean report; by basic composition one report is ε = %g-DP for its user. The ledger debits ε = %g per stored report and refuses reports beyond the budget ε = %g, so all of a user's reports together are at most %g-DP.",
			n, mechanismName(o.Mechanism), lp.cellEps, o.Epsilon, o.Epsilon, o.Budget, o.Budget)
	}
	return g
}

// centralConfig settles a central-mode collection (none): the ledger's
// budget in ρ, its period, the δ policy and the guarantee.
func centralConfig(o Options, cfg *api.Config) error {
	cfg.Mode = api.ModeCentral
	if o.Epsilon != 0 {
		return fmt.Errorf("--epsilon applies to local mechanisms (rr, laplace); in central mode (--mechanism none) each release states its own ε")
	}
	if o.MeanEpsilon != 0 {
		return fmt.Errorf("--mean-epsilon applies to local mechanisms (rr, laplace): in central mode (--mechanism none) reports carry true ratings, no mean report")
	}
	if o.Levels < 0 || o.Levels == 1 {
		return fmt.Errorf("--levels must be 0 or ≥ 2, got %d", o.Levels)
	}
	if err := centralLedger(o, cfg); err != nil {
		return err
	}
	cfg.Units = "rating"
	period := ""
	if cfg.PeriodSeconds > 0 {
		period = fmt.Sprintf(" per period of %s (periods [k·P, (k+1)·P) of Unix time; the budget renews with each period, so the guarantee holds for the releases of one period, not for all time)", time.Duration(cfg.PeriodSeconds)*time.Second)
	}
	cfg.Guarantee = privacy.Guarantee{Epsilon: math.Inf(1), Unit: privacy.UnitUser, Notion: privacy.Central, Status: privacy.None,
		Relation: RelationCentral,
		Note: fmt.Sprintf("Central mode: reports carry true ratings to a trusted curator and cost nothing. The curator publishes only releases with a proven user-level guarantee under the collection's relation, and charges each user a release covers its zCDP ρ (a pure ε-DP release: ρ = ε²/2); the ledger holds ρ ≤ %.6g for every user%s, which is (ε = %g, δ = %g)-DP. A release stating δ above the policy (%s) is refused; %s.",
			cfg.BudgetRho, period, o.Budget, cfg.BudgetDelta, deltaPolicy(cfg.MaxDelta), exhaustedText(cfg.Exhausted))}
	return nil
}

// RelationCentral is the neighbouring relation of a central-mode
// collection: what every release it publishes must be proven under.
const RelationCentral = "one user's ratings are replaced by any others (any ratings of the declared catalogue on the declared scale, which items she rated included); the catalogue, the scale and the population (the users who sent reports) are public"

// centralLedger validates the central mode's budget settings and states
// the budget in the ledger's unit, zCDP ρ: (Budget, BudgetDelta)-DP
// converted once (the largest ρ whose tight conversion gives it).
func centralLedger(o Options, cfg *api.Config) error {
	cfg.LedgerUnit = api.UnitRho
	bd := o.BudgetDelta
	if bd == 0 {
		bd = DefaultBudgetDelta
	}
	if !(bd > 0 && bd < 1) {
		return fmt.Errorf("--budget-delta must be in (0, 1), got %g", bd)
	}
	if bd > 1e-3 {
		return fmt.Errorf("--budget-delta %g is too large: δ is the probability the guarantee fails outright; state it at most 1/(10·population), and never above 1e-3", bd)
	}
	rho, err := accountant.RhoForApprox(o.Budget, bd)
	if err != nil {
		return fmt.Errorf("--budget %g with --budget-delta %g: %w", o.Budget, bd, err)
	}
	if rho < 1e-6 {
		return fmt.Errorf("--budget %g with --budget-delta %g is ρ = %g zCDP, too small for the ledger (1e-9 units): raise --budget", o.Budget, bd, rho)
	}
	if _, err := store.BudgetNano(rho); err != nil {
		return fmt.Errorf("--budget %g with --budget-delta %g is ρ = %g zCDP: %w", o.Budget, bd, rho, err)
	}
	cfg.BudgetDelta, cfg.BudgetRho = bd, rho
	if !(o.MaxDelta >= 0 && o.MaxDelta < 1) {
		return fmt.Errorf("--max-delta must be in [0, 1) (0: 1/(10·population)), got %g", o.MaxDelta)
	}
	cfg.MaxDelta = o.MaxDelta
	switch o.Exhausted {
	case "", api.ExhaustedRefuse:
		cfg.Exhausted = api.ExhaustedRefuse
	case api.ExhaustedSkip:
		cfg.Exhausted = api.ExhaustedSkip
	default:
		return fmt.Errorf("--exhausted %q: want refuse (a release that would take anyone past her budget is refused whole) or skip (releases cover the users who can still pay)", o.Exhausted)
	}
	if o.Period < 0 || o.Period%time.Second != 0 {
		return fmt.Errorf("--period must be a positive whole number of seconds (e.g. 720h), got %s", o.Period)
	}
	cfg.PeriodSeconds = int64(o.Period / time.Second)
	return nil
}

// deltaPolicy states the release δ policy in words.
func deltaPolicy(maxDelta float64) string {
	if maxDelta > 0 {
		return fmt.Sprintf("δ ≤ %g and δ ≤ 1/(10·population)", maxDelta)
	}
	return "δ ≤ 1/(10·population)"
}

// exhaustedText states the budget policy in words.
func exhaustedText(p string) string {
	if p == api.ExhaustedSkip {
		return "a release covers only the users whose remaining budget pays for it (the others are left out and not charged; who is left out depends only on the public release history)"
	}
	return "a release that would take anyone past her budget is refused whole"
}

func mechanismName(m string) string {
	switch m {
	case "rr":
		return "randomized response over {missing, 1…d}"
	case "laplace":
		return "the modified Laplace mechanism"
	}
	return m
}

// identityJSON is the canonical record of the collection in the database.
func identityJSON(c *api.Config) []byte {
	id := Identity{Mode: c.Mode, Mechanism: c.Mechanism, ReportEpsilon: c.ReportEpsilon, CellEpsilon: c.CellEpsilon, MeanEpsilon: c.MeanEpsilon,
		Budget: c.Budget, Scale: c.Scale, Units: c.Units, PeriodSeconds: c.PeriodSeconds}
	if c.LedgerUnit == api.UnitRho {
		id.LedgerUnit, id.BudgetDelta, id.BudgetRho = c.LedgerUnit, c.BudgetDelta, c.BudgetRho
	}
	for _, it := range c.Items {
		id.Items = append(id.Items, it.ID)
	}
	b, _ := json.Marshal(id) // plain types: cannot fail
	return b
}

// openCollection records the collection on a new database or checks it
// against the recorded one, adding items as a new collection version
// when opt.AddItems allows it; it returns the current version.
func openCollection(ctx context.Context, st store.Store, cfg *api.Config, opt Options) (int, error) {
	now := identityJSON(cfg)
	err := st.Init(ctx, now)
	if errors.Is(err, store.ErrConfigMismatch) {
		stored, cerr := st.Config(ctx)
		if cerr != nil {
			return 0, errors.Join(err, cerr)
		}
		if !opt.AddItems || !extends(stored, cfg) {
			return 0, mismatch(stored, cfg)
		}
		v, err := st.Evolve(ctx, stored, now, opt.Now().UnixMilli())
		if err != nil {
			return 0, err
		}
		opt.Log.Info("the catalogue grew: new collection version", "version", v, "items", len(cfg.Items))
		return v, nil
	}
	if err != nil {
		return 0, err
	}
	return st.CollectionVersion(ctx)
}

// extends reports whether cfg differs from the stored collection only by
// items added after the recorded ones (and the per-item ε that follows).
func extends(stored []byte, cfg *api.Config) bool {
	var s, now Identity
	if json.Unmarshal(stored, &s) != nil || json.Unmarshal(identityJSON(cfg), &now) != nil {
		return false
	}
	if len(now.Items) <= len(s.Items) || !slices.Equal(now.Items[:len(s.Items)], s.Items) {
		return false
	}
	s.Items, now.Items, s.CellEpsilon, now.CellEpsilon = nil, nil, 0, 0
	return reflect.DeepEqual(s, now)
}

// mismatch explains how the stored collection differs from the flags.
func mismatch(stored []byte, c *api.Config) error {
	var s Identity
	if err := json.Unmarshal(stored, &s); err != nil {
		return fmt.Errorf("the database records a collection this version cannot read: %w", err)
	}
	now := Identity{}
	_ = json.Unmarshal(identityJSON(c), &now)
	var diffs []string
	if s.Mechanism != now.Mechanism {
		diffs = append(diffs, fmt.Sprintf("--mechanism %s (the database holds %s)", now.Mechanism, s.Mechanism))
	}
	// The per-item ε follows from --epsilon and the catalogue's size: it
	// is the catalogue's to explain when only that changed.
	if s.ReportEpsilon != now.ReportEpsilon {
		diffs = append(diffs, fmt.Sprintf("--epsilon %g (the database holds %g)", now.ReportEpsilon, s.ReportEpsilon))
	}
	if s.MeanEpsilon != now.MeanEpsilon {
		held := fmt.Sprintf("%g", s.MeanEpsilon)
		if s.MeanEpsilon == 0 {
			held = "0: its reports carry no mean report (made before mean reports, or with --mean-epsilon 0)"
		}
		diffs = append(diffs, fmt.Sprintf("--mean-epsilon %g (the database holds %s)", now.MeanEpsilon, held))
	}
	if s.Budget != now.Budget {
		diffs = append(diffs, fmt.Sprintf("--budget %g (the database holds %g)", now.Budget, s.Budget))
	}
	if s.Scale.Min != now.Scale.Min || s.Scale.Max != now.Scale.Max {
		diffs = append(diffs, fmt.Sprintf("--scale %g:%g (the database holds %g:%g)", now.Scale.Min, now.Scale.Max, s.Scale.Min, s.Scale.Max))
	} else if s.Scale.Levels != now.Scale.Levels && s.Mechanism == now.Mechanism {
		diffs = append(diffs, fmt.Sprintf("--levels %d (the database holds %d)", now.Scale.Levels, s.Scale.Levels))
	}
	if s.LedgerUnit != now.LedgerUnit || s.BudgetDelta != now.BudgetDelta {
		held := "an ε ledger (made before central releases were charged in zCDP ρ)"
		if s.LedgerUnit == api.UnitRho {
			held = fmt.Sprintf("a ρ ledger with --budget-delta %g", s.BudgetDelta)
		}
		diffs = append(diffs, fmt.Sprintf("--budget-delta %g (the database holds %s)", now.BudgetDelta, held))
	}
	if s.PeriodSeconds != now.PeriodSeconds {
		diffs = append(diffs, fmt.Sprintf("--period %s (the database holds %s)", time.Duration(now.PeriodSeconds)*time.Second, time.Duration(s.PeriodSeconds)*time.Second))
	}
	if d := itemsDiff(s.Items, now.Items); d != "" {
		diffs = append(diffs, d)
	}
	if len(diffs) == 0 {
		diffs = append(diffs, "the collection settings")
	}
	return fmt.Errorf("the database was created for another collection: %s; its reports and ledgers were made under the stored settings — start with those, or use a new database", strings.Join(diffs, "; "))
}

// itemsDiff says how the --items catalogue differs from the recorded one
// ("" when it does not).
func itemsDiff(stored, now []string) string {
	if slices.Equal(stored, now) {
		return ""
	}
	in := func(list []string) map[string]bool {
		m := make(map[string]bool, len(list))
		for _, id := range list {
			m[id] = true
		}
		return m
	}
	had, has := in(stored), in(now)
	var added, missing []string
	for _, id := range now {
		if !had[id] {
			added = append(added, id)
		}
	}
	for _, id := range stored {
		if !has[id] {
			missing = append(missing, id)
		}
	}
	var parts []string
	if len(added) > 0 {
		what := fmt.Sprintf("--items adds %s", countedIDs(added))
		if len(missing) == 0 && slices.Equal(now[:len(stored)], stored) {
			what += " after the recorded ones: to add them as a new collection version, start once with --add-items"
		}
		parts = append(parts, what)
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("--items lacks %s the database's catalogue holds (a collection's items cannot be removed)", countedIDs(missing)))
	}
	if len(parts) == 0 {
		for k := range now {
			if now[k] != stored[k] {
				return fmt.Sprintf("--items lists the recorded items in another order (line %d is %q, the database's item %d is %q; stored reports are in the recorded order)", k+1, now[k], k+1, stored[k])
			}
		}
	}
	return strings.Join(parts, "; ")
}

// countedIDs is "1 item (a)" or "3 items (a, b, c)", at most 5 named.
func countedIDs(ids []string) string {
	shown := ids[:min(len(ids), 5)]
	more := ""
	if len(ids) > len(shown) {
		more = ", …"
	}
	noun := "items"
	if len(ids) == 1 {
		noun = "item"
	}
	return fmt.Sprintf("%d %s (%s%s)", len(ids), noun, strings.Join(shown, ", "), more)
}

// Config is the part of the collection configuration a database records
// (the catalogue without titles): what reading the stored reports needs.
func (id Identity) Config() *api.Config {
	c := &api.Config{Mode: id.Mode, Mechanism: id.Mechanism, ReportEpsilon: id.ReportEpsilon, CellEpsilon: id.CellEpsilon, MeanEpsilon: id.MeanEpsilon,
		Budget: id.Budget, Scale: id.Scale, Units: id.Units, LedgerUnit: id.LedgerUnit, BudgetDelta: id.BudgetDelta, BudgetRho: id.BudgetRho,
		PeriodSeconds: id.PeriodSeconds}
	if c.LedgerUnit == "" {
		c.LedgerUnit = api.UnitEpsilon
	}
	for _, it := range id.Items {
		c.Items = append(c.Items, api.Item{ID: it})
	}
	return c
}

// StoredConfig rebuilds the collection configuration a database records
// (for the commands that read a `privrec serve` database offline:
// privrec train --data, privrec-beam --data).
func StoredConfig(ctx context.Context, st store.Store) (*api.Config, error) {
	raw, err := st.Config(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("not a privrec serve database (no collection recorded)")
	}
	if err != nil {
		return nil, err
	}
	var id Identity
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, fmt.Errorf("reading the collection settings: %w", err)
	}
	if len(id.Items) == 0 {
		return nil, fmt.Errorf("the recorded collection has no catalogue")
	}
	return id.Config(), nil
}
