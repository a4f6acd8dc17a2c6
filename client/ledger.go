package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"

	"github.com/privrec/privrec/service/api"
)

// Ledger is the device's own account of the privacy budget its user spends
// with one server in local mode. The server keeps a ledger too, but in
// local DP nobody is trusted with her ratings — the server included — and a
// server that lied about its ledger could keep asking for reports; what
// bounds her total ε is then how many reports her device sends. The device
// ledger is that bound:
//
//   - The budget is the one she accepted when the ledger was made (the
//     server's published budget at the time); a server that later raises
//     its budget does not raise hers.
//   - Reserve records a report before it leaves the device (write-ahead: ε
//     is spent once the randomized report is sent, even if the
//     acknowledgement is lost) and refuses one that would take her past
//     her budget. Recording the same report ID again is free, as on the
//     server, so resubmissions after a lost acknowledgement cost nothing.
//   - Compare reports a server whose ledger disagrees with hers.
//
// Spent amounts are kept in integer nano-ε as the server keeps them, so
// sums are exact. A Ledger is not safe for concurrent use.
//
// The ledger also pins the collection she joined (Collection): a server
// whose configuration later weakens it is refused on the device
// (CheckConfig). In central mode reports cost nothing on the device (each
// release is charged on the server); the ledger then only pins.
type Ledger struct {
	Server     string        `json:"server"`
	Budget     float64       `json:"budget"`
	Reports    []LedgerEntry `json:"reports"`
	Collection *Collection   `json:"collection,omitempty"`
}

// LedgerEntry is one report the device sent (or was about to send).
type LedgerEntry struct {
	ID      string  `json:"id"`
	Epsilon float64 `json:"epsilon"`
}

// nano is the ledger's unit: ε in integer nano-ε, rounded up so the device
// never under-counts. Amounts are at most maxEpsilon, so sums of a ledger
// (whose total is at most its budget) fit in an int64.
func nano(eps float64) int64 { return int64(math.Ceil(eps*1e9 - 1e-6)) }

// maxEpsilon bounds every budget and ε a device ledger holds (10⁹: far
// beyond any meaningful guarantee, and 10¹⁸ nano-ε fits in an int64).
const maxEpsilon = 1e9

// validEpsilon reports whether eps is an amount a ledger can hold.
func validEpsilon(eps float64) bool { return eps > 0 && eps <= maxEpsilon }

// NewLedger starts a device ledger for a server under its published
// configuration: her budget is the configuration's per-user budget.
// It pins the collection (Collection); in central mode it only pins.
func NewLedger(server string, cfg *api.Config) (*Ledger, error) {
	if cfg.Mode != api.ModeLocal && cfg.Mode != api.ModeCentral {
		return nil, fmt.Errorf("client: unknown collection mode %q", cfg.Mode)
	}
	if !validEpsilon(cfg.Budget) {
		return nil, fmt.Errorf("client: the server publishes budget %g; a device ledger needs a budget in (0, %g]", cfg.Budget, maxEpsilon)
	}
	return &Ledger{Server: server, Budget: cfg.Budget, Collection: PinCollection(cfg)}, nil
}

// Spent is the ε the device has recorded.
func (l *Ledger) Spent() float64 {
	var s int64
	for _, e := range l.Reports {
		s += nano(e.Epsilon)
	}
	return float64(s) / 1e9
}

// Remaining is her budget less what the device has recorded.
func (l *Ledger) Remaining() float64 { return math.Max(0, l.Budget-l.Spent()) }

// Reserve records report id costing eps before it is sent. It refuses
// (changing nothing) when the ledger is for another server or eps would
// take her past her budget; an ID already recorded costs nothing again
// (it must have the same ε).
func (l *Ledger) Reserve(server, id string, eps float64) error {
	if server != l.Server {
		return fmt.Errorf("client: the device ledger is for %s, not %s", l.Server, server)
	}
	if l.Collection != nil && l.Collection.Mode != api.ModeLocal {
		return fmt.Errorf("client: this device ledger pins a %s-mode collection, whose reports cost nothing on the device", l.Collection.Mode)
	}
	if !validEpsilon(eps) {
		return fmt.Errorf("client: a report's ε must be in (0, %g], got %g", maxEpsilon, eps)
	}
	if k := slices.IndexFunc(l.Reports, func(e LedgerEntry) bool { return e.ID == id }); k >= 0 {
		if nano(l.Reports[k].Epsilon) != nano(eps) {
			return fmt.Errorf("client: report %s was recorded at ε = %g, not %g", id, l.Reports[k].Epsilon, eps)
		}
		return nil
	}
	spent := int64(0)
	for _, e := range l.Reports {
		spent += nano(e.Epsilon)
	}
	if spent+nano(eps) > nano(l.Budget) {
		return &BudgetError{Spent: float64(spent) / 1e9, Epsilon: eps, Budget: l.Budget}
	}
	l.Reports = append(l.Reports, LedgerEntry{ID: id, Epsilon: eps})
	return nil
}

// BudgetError is the device's refusal of a report that would take her past
// the budget she accepted.
type BudgetError struct {
	Spent, Epsilon, Budget float64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("client: refused on this device: the report costs ε = %g and this device has already sent reports costing ε = %g of your budget %g (the device keeps its own count; the server's does not raise it)",
		e.Epsilon, e.Spent, e.Budget)
}

// Compare checks the server's account of her budget against the device's:
// an error when the server counts less spent than the device sent (it
// lost, or hides, reports) or publishes a larger budget than she accepted.
// Counting more is not an error here: reports the device recorded but
// whose sending failed may have reached it, or other devices of hers may
// have sent some.
func (l *Ledger) Compare(st api.Status) error {
	var errs []error
	if nano(st.Spent) < nano(l.Spent()) {
		errs = append(errs, fmt.Errorf("the server counts ε = %g spent, this device sent reports costing ε = %g", st.Spent, l.Spent()))
	}
	if nano(st.Budget) > nano(l.Budget) {
		errs = append(errs, fmt.Errorf("the server now allows a budget of %g; you accepted %g, and this device keeps to it", st.Budget, l.Budget))
	}
	if len(errs) > 0 {
		return fmt.Errorf("client: the server's ledger disagrees with this device's: %w", errors.Join(errs...))
	}
	return nil
}

// ReadLedger decodes a ledger written by Write, naming what is wrong.
func ReadLedger(r io.Reader, name string) (*Ledger, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var l Ledger
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%s: reading the device ledger: %w", name, err)
	}
	if l.Server == "" {
		return nil, fmt.Errorf("%s: the device ledger names no server", name)
	}
	if !validEpsilon(l.Budget) {
		return nil, fmt.Errorf("%s: the device ledger's budget must be positive and at most %g, got %g", name, maxEpsilon, l.Budget)
	}
	seen := make(map[string]bool, len(l.Reports))
	var spent int64
	for k, e := range l.Reports {
		if e.ID == "" || seen[e.ID] {
			return nil, fmt.Errorf("%s: report %d of the device ledger has an empty or repeated ID %q", name, k+1, e.ID)
		}
		if !validEpsilon(e.Epsilon) {
			return nil, fmt.Errorf("%s: report %s of the device ledger has ε = %g", name, e.ID, e.Epsilon)
		}
		if spent += nano(e.Epsilon); spent > nano(l.Budget) {
			return nil, fmt.Errorf("%s: the device ledger's reports cost more than its budget %g (a device records no report past it)", name, l.Budget)
		}
		seen[e.ID] = true
	}
	return &l, nil
}

// Write encodes the ledger as JSON.
func (l *Ledger) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(l)
}

// LoadLedger reads the ledger at path; a missing file is (nil, nil): no
// ledger yet.
func LoadLedger(path string) (*Ledger, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	defer f.Close()
	return ReadLedger(f, path)
}
