package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
)

// Ledger is the curator's record of the releases made from one dataset
// (`privrec train --ledger FILE`, `privrec-beam --ledger FILE`): running
// a training again on the same data is a second release, and the
// guarantees of all the releases in a ledger compose (accountant.Compose,
// zCDP where every part has ρ). A release is recorded after training and
// before its model is written, so a model on disk is always counted; a
// run that fails before writing released nothing and is not recorded.
//
// The ledger is a JSON file the operator keeps with the data (one ledger
// per population: the releases of different data do not compose). It is
// written atomically; Record holds a lock file (FILE.lock) while it reads,
// appends and writes, so two runs that finish together are both counted.
type Ledger struct {
	Releases []LedgerEntry `json:"releases"`
}

// LedgerEntry is one recorded release.
type LedgerEntry struct {
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	// Engine is where the sums ran: "in-process" or "beam".
	Engine string `json:"engine"`
	// Data names the input (paths or URLs, as given; never its content).
	Data string `json:"data"`
	// Out is the model file written.
	Out       string            `json:"out"`
	Guarantee privacy.Guarantee `json:"guarantee"`
}

// LedgerSummary is what a report says about the ledger after a release.
type LedgerSummary struct {
	File string `json:"file"`
	// Release is this release's number (1 for the first), Releases the
	// number recorded, this one included.
	Release  int `json:"release"`
	Releases int `json:"releases"`
	// Total is the composition of every recorded release's guarantee.
	Total privacy.Guarantee `json:"total"`
}

// String is the report's sentence.
func (s LedgerSummary) String() string {
	if s.Releases == 1 {
		return fmt.Sprintf("release 1 of this data in the ledger %s", s.File)
	}
	return fmt.Sprintf("release %d of this data in the ledger %s; the %d releases together: %s", s.Release, s.File, s.Releases, s.Total)
}

// ledgerLockWait bounds how long Record waits for another run's lock.
const ledgerLockWait = 30 * time.Second

// RecordRelease appends e to the ledger at path (created if missing) and
// returns the summary of all its releases. It fails, recording nothing,
// if the file is damaged or the guarantees cannot compose (different
// units), so the caller must not write the model.
func RecordRelease(path string, e LedgerEntry) (LedgerSummary, error) {
	unlock, err := lockFile(path+".lock", ledgerLockWait)
	if err != nil {
		return LedgerSummary{}, err
	}
	defer unlock()
	l, err := LoadLedger(path)
	if err != nil {
		return LedgerSummary{}, err
	}
	l.Releases = append(l.Releases, e)
	total, err := l.Total()
	if err != nil {
		return LedgerSummary{}, fmt.Errorf("ledger %s: %w (nothing recorded)", path, err)
	}
	err = model.WriteFileAtomic(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	})
	if err != nil {
		return LedgerSummary{}, fmt.Errorf("writing the ledger %s: %w", path, err)
	}
	n := len(l.Releases)
	return LedgerSummary{File: path, Release: n, Releases: n, Total: total}, nil
}

// LoadLedger reads a ledger file; a missing file is an empty ledger.
func LoadLedger(path string) (*Ledger, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Ledger{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ledger: %w", err)
	}
	var l Ledger
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("the ledger %s is damaged: %w", path, err)
	}
	for i, e := range l.Releases {
		if err := e.Guarantee.Validate(); err != nil {
			return nil, fmt.Errorf("the ledger %s, release %d: %w", path, i+1, err)
		}
	}
	return &l, nil
}

// Total composes the guarantees of every release (δ: the sum of theirs).
func (l *Ledger) Total() (privacy.Guarantee, error) {
	if len(l.Releases) == 0 {
		return privacy.Guarantee{}, fmt.Errorf("no release recorded")
	}
	parts := make([]privacy.Guarantee, len(l.Releases))
	var delta float64
	for i, e := range l.Releases {
		parts[i] = e.Guarantee
		delta += e.Guarantee.Delta
	}
	g, err := accountant.Compose(min(delta, 0.5), parts...)
	if err != nil {
		return privacy.Guarantee{}, fmt.Errorf("composing %d releases: %w", len(parts), err)
	}
	g.Note = fmt.Sprintf("Sequential composition of the %d releases recorded in the ledger.", len(parts))
	return g, nil
}

// lockFile creates path exclusively, waiting up to wait for another
// holder to remove it, and returns its removal.
func lockFile(path string, wait time.Duration) (func(), error) {
	deadline := time.Now().Add(wait)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%d\n", os.Getpid())
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("locking the ledger: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the ledger is locked by %s (another run recording a release; if none is running, remove the file)", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
