package client

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/privrec/privrec/service/api"
)

// Collection is what a device pins of the collection its user joined:
// the facts her protection rests on. A server whose configuration later
// weakens any of them — another mode (central mode sends true ratings),
// another mechanism, a larger per-report, per-item or mean-report ε,
// another scale or catalogue — is refused on the device (Check), whatever it publishes.
// Her budget is pinned by the device ledger itself (Ledger.Budget): the
// device keeps to it whatever budget the server later allows.
type Collection struct {
	Mode          string  `json:"mode"`
	Mechanism     string  `json:"mechanism"`
	ReportEpsilon float64 `json:"report_epsilon"`
	CellEpsilon   float64 `json:"cell_epsilon,omitempty"`
	// MeanEpsilon is the mean report's ε (0: none).
	MeanEpsilon float64   `json:"mean_epsilon,omitempty"`
	Scale       api.Scale `json:"scale"`
	Units       string    `json:"units"`
	Items       int       `json:"items"`
	// Catalogue is the SHA-256 of the catalogue's item IDs, in order.
	Catalogue string `json:"catalogue_sha256"`
	// The central mode's ledger: budget ρ (zCDP), its δ and period.
	BudgetRho     float64 `json:"budget_rho,omitempty"`
	BudgetDelta   float64 `json:"budget_delta,omitempty"`
	PeriodSeconds int64   `json:"period_seconds,omitempty"`
}

// PinCollection is the collection a configuration describes.
func PinCollection(cfg *api.Config) *Collection {
	return &Collection{Mode: cfg.Mode, Mechanism: cfg.Mechanism, ReportEpsilon: cfg.ReportEpsilon, CellEpsilon: cfg.CellEpsilon,
		MeanEpsilon: cfg.MeanEpsilon, Scale: cfg.Scale, Units: cfg.Units, Items: len(cfg.Items), Catalogue: catalogueHash(cfg.Items),
		BudgetRho: cfg.BudgetRho, BudgetDelta: cfg.BudgetDelta, PeriodSeconds: cfg.PeriodSeconds}
}

func catalogueHash(items []api.Item) string {
	h := sha256.New()
	for _, it := range items {
		h.Write([]byte(it.ID))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WeakenedError is the device's refusal of a configuration that weakens
// the collection its user joined.
type WeakenedError struct {
	Changes []string
}

func (e *WeakenedError) Error() string {
	return fmt.Sprintf("client: refused on this device: the server's configuration is not the collection you joined: %s; nothing is sent (to accept it, start a new device ledger — a new enrolment)",
		joinChanges(e.Changes))
}

func joinChanges(c []string) string {
	s := ""
	for k, x := range c {
		if k > 0 {
			s += "; "
		}
		s += x
	}
	return s
}

// Check compares a configuration with the pinned collection: an error
// (*WeakenedError) naming every fact that weakens it. A smaller ε, or a
// longer budget period, is not a weakening.
func (p *Collection) Check(cfg *api.Config) error {
	var ch []string
	if cfg.Mode != p.Mode {
		what := fmt.Sprintf("it now runs in %s mode; you joined a %s-mode collection", cfg.Mode, p.Mode)
		if cfg.Mode == api.ModeCentral {
			what += " (in central mode your true ratings would be sent)"
		}
		ch = append(ch, what)
	}
	if cfg.Mechanism != p.Mechanism {
		ch = append(ch, fmt.Sprintf("its mechanism is now %q, not %q", cfg.Mechanism, p.Mechanism))
	}
	if nano(cfg.ReportEpsilon) > nano(p.ReportEpsilon) {
		ch = append(ch, fmt.Sprintf("a report now costs ε = %g, not %g", cfg.ReportEpsilon, p.ReportEpsilon))
	}
	if nano(cfg.CellEpsilon) > nano(p.CellEpsilon) {
		ch = append(ch, fmt.Sprintf("its per-item ε is now %g, not %g", cfg.CellEpsilon, p.CellEpsilon))
	}
	if nano(cfg.MeanEpsilon) > nano(p.MeanEpsilon) {
		ch = append(ch, fmt.Sprintf("its mean report (your noised mean rating) now costs ε = %g, not %g", cfg.MeanEpsilon, p.MeanEpsilon))
	}
	if cfg.Scale != p.Scale || cfg.Units != p.Units {
		ch = append(ch, fmt.Sprintf("its scale is now %g:%g (%d levels, %s), not %g:%g (%d levels, %s)",
			cfg.Scale.Min, cfg.Scale.Max, cfg.Scale.Levels, cfg.Units, p.Scale.Min, p.Scale.Max, p.Scale.Levels, p.Units))
	}
	if len(cfg.Items) != p.Items || catalogueHash(cfg.Items) != p.Catalogue {
		ch = append(ch, fmt.Sprintf("its catalogue changed (%d items, %d when you joined)", len(cfg.Items), p.Items))
	}
	if nano(cfg.BudgetRho) > nano(p.BudgetRho) || cfg.BudgetDelta > p.BudgetDelta {
		ch = append(ch, fmt.Sprintf("its budget is now ρ = %g (δ = %g), not ρ = %g (δ = %g)", cfg.BudgetRho, cfg.BudgetDelta, p.BudgetRho, p.BudgetDelta))
	}
	if cfg.PeriodSeconds != p.PeriodSeconds && (p.PeriodSeconds == 0 || (cfg.PeriodSeconds > 0 && cfg.PeriodSeconds < p.PeriodSeconds)) {
		ch = append(ch, fmt.Sprintf("its budget now renews every %d s (you joined: %s)", cfg.PeriodSeconds, periodWords(p.PeriodSeconds)))
	}
	if len(ch) > 0 {
		return &WeakenedError{Changes: ch}
	}
	return nil
}

func periodWords(s int64) string {
	if s == 0 {
		return "never"
	}
	return fmt.Sprintf("every %d s", s)
}

// CheckConfig checks, before anything is randomized or sent, that the
// server's configuration is the collection this ledger joined (and its
// own claims hold: the package's CheckConfig). A ledger made before
// collections were pinned (no Collection) pins the configuration now,
// provided it is a local-mode one: such ledgers were made in local mode.
// The caller saves the ledger afterwards.
func (l *Ledger) CheckConfig(server string, cfg *api.Config) error {
	if server != l.Server {
		return fmt.Errorf("client: the device ledger is for %s, not %s", l.Server, server)
	}
	if err := CheckConfig(cfg); err != nil {
		return err
	}
	if l.Collection == nil {
		if cfg.Mode != api.ModeLocal {
			return &WeakenedError{Changes: []string{fmt.Sprintf("it now runs in %s mode; this device ledger was made in local mode (in central mode your true ratings would be sent)", cfg.Mode)}}
		}
		l.Collection = PinCollection(cfg)
		return nil
	}
	return l.Collection.Check(cfg)
}

// IsWeakened reports whether err is a device's refusal of a weakened
// configuration.
func IsWeakened(err error) bool {
	var w *WeakenedError
	return errors.As(err, &w)
}
