package dap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"

	"github.com/privrec/privrec/model"
)

// Ledger is the device's own count of the ρ its user has spent with one
// leader. The leader keeps a ledger too, but a leader that lied about it
// could keep opening tasks; what bounds her total ρ is how many reports
// her device sends. Reserve records a task before its report leaves the
// device (write-ahead: the ρ is spent once the shares are sent, even if
// the acknowledgement is lost) and refuses one that would exceed her
// budget; reserving the same task again is free (a resend of the same
// task is refused by the leader and never counted twice). Amounts are
// kept in integer nano-ρ, rounded up. Not safe for concurrent use.
type Ledger struct {
	Leader    string           `json:"leader"`
	BudgetRho float64          `json:"budget_rho"`
	Tasks     map[string]int64 `json:"tasks_nano_rho"`
}

// ErrOverBudget is returned by Reserve for a task the budget cannot pay.
var ErrOverBudget = errors.New("dap: over the device's budget")

// ErrAlreadySent is returned by Reserve for a task already reported.
var ErrAlreadySent = errors.New("dap: this device already sent a report for the task")

func nanoRho(rho float64) int64 { return int64(math.Ceil(rho*1e9 - 1e-6)) }

// NewLedger starts a device ledger with the budget its user accepted.
func NewLedger(leader string, budgetRho float64) (*Ledger, error) {
	if !(budgetRho > 0) || budgetRho > 1e9 {
		return nil, fmt.Errorf("%w: device budget ρ %v", ErrInvalid, budgetRho)
	}
	return &Ledger{Leader: leader, BudgetRho: budgetRho, Tasks: map[string]int64{}}, nil
}

// SpentRho is the ρ reserved so far.
func (l *Ledger) SpentRho() float64 { return float64(l.spent()) / 1e9 }

func (l *Ledger) spent() int64 {
	var s int64
	for _, v := range l.Tasks {
		s += v
	}
	return s
}

// Reserve records task t against the budget, or refuses it: the device
// derives the task's charge itself (Consent{}.Check: a task that falls
// short of its plan, or splits the noise, is refused) and calls Charge.
func (l *Ledger) Reserve(t *Task) error {
	d, err := Consent{}.Check(*t)
	if err != nil {
		return err
	}
	return l.Charge(d)
}

// Charge records d's task at d.ChargeRho (what the device derived, never
// what the leader says it costs), or refuses it.
func (l *Ledger) Charge(d Derived) error {
	if _, ok := l.Tasks[d.TaskID]; ok {
		return fmt.Errorf("%w: task %s", ErrAlreadySent, d.TaskID)
	}
	if !(d.ChargeRho > 0) {
		return fmt.Errorf("%w: task %s: no derived charge (dap.Derive)", ErrInvalid, d.TaskID)
	}
	c := nanoRho(d.ChargeRho)
	if l.spent()+c > nanoRho(l.BudgetRho) {
		return fmt.Errorf("%w: task %s costs ρ %g; spent %g of %g", ErrOverBudget, d.TaskID, d.ChargeRho, l.SpentRho(), l.BudgetRho)
	}
	l.Tasks[d.TaskID] = c
	return nil
}

// LoadLedger reads a ledger file; a missing file is (nil, nil).
func LoadLedger(path string) (*Ledger, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dap ledger: %w", err)
	}
	defer f.Close()
	return ReadLedger(f, path)
}

// ReadLedger decodes a ledger (as Save writes it) from r; name says where
// it comes from in errors (a file, the browser's storage).
func ReadLedger(r io.Reader, name string) (*Ledger, error) {
	var l Ledger
	d := json.NewDecoder(io.LimitReader(r, 16<<20))
	d.DisallowUnknownFields()
	if err := d.Decode(&l); err != nil {
		return nil, fmt.Errorf("%w: dap ledger %s: %v", ErrInvalid, name, err)
	}
	if !(l.BudgetRho > 0) || l.Tasks == nil {
		return nil, fmt.Errorf("%w: dap ledger %s: no budget or tasks", ErrInvalid, name)
	}
	for id, v := range l.Tasks {
		if v < 0 {
			return nil, fmt.Errorf("%w: dap ledger %s: task %q has negative ρ", ErrInvalid, name, id)
		}
	}
	return &l, nil
}

// Save writes the ledger atomically.
func (l *Ledger) Save(path string) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return fmt.Errorf("dap ledger: %w", err)
	}
	return model.WriteFileAtomicBytes(path, append(b, '\n'), 0o600)
}
