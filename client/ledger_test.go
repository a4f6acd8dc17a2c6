package client

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/service/api"
)

const srv = "http://127.0.0.1:8080"

func TestLedgerReserve(t *testing.T) {
	cfg := &api.Config{Mode: api.ModeLocal, Budget: 1}
	l, err := NewLedger(srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 0.1 ten times is exactly the budget in nano-ε (in float64 the sum
	// would be 0.9999999999999999 or 1.0000000000000002).
	for k := range 10 {
		if err := l.Reserve(srv, NewReportID(), 0.1); err != nil {
			t.Fatalf("report %d: %v", k+1, err)
		}
	}
	if l.Spent() != 1 || l.Remaining() != 0 {
		t.Fatalf("spent %g remaining %g, want 1 and 0", l.Spent(), l.Remaining())
	}
	var be *BudgetError
	if err := l.Reserve(srv, "one-more", 0.1); !errors.As(err, &be) {
		t.Fatalf("an eleventh report: %v, want a BudgetError", err)
	}
	if len(l.Reports) != 10 {
		t.Fatalf("a refused report was recorded: %d entries", len(l.Reports))
	}
	// A recorded ID costs nothing again (a resubmission); with another ε it
	// is an error.
	id := l.Reports[3].ID
	if err := l.Reserve(srv, id, 0.1); err != nil {
		t.Fatalf("re-reserving a recorded report: %v", err)
	}
	if err := l.Reserve(srv, id, 0.2); err == nil {
		t.Fatal("re-reserving a recorded report at another ε should fail")
	}
	if err := l.Reserve("http://elsewhere", "x", 0.1); err == nil || !strings.Contains(err.Error(), "elsewhere") {
		t.Fatalf("another server: %v", err)
	}
	if len(l.Reports) != 10 {
		t.Fatalf("refusals changed the ledger: %d entries", len(l.Reports))
	}
}

func TestNewLedgerRefuses(t *testing.T) {
	for _, cfg := range []*api.Config{
		{Mode: "remote", Budget: 1},
		{Mode: api.ModeLocal, Budget: 0},
	} {
		if _, err := NewLedger(srv, cfg); err == nil {
			t.Errorf("NewLedger(%+v) should fail", *cfg)
		}
	}
}

func TestLedgerCompare(t *testing.T) {
	l := &Ledger{Server: srv, Budget: 4, Reports: []LedgerEntry{{"a", 1}, {"b", 1}}}
	tests := []struct {
		name string
		st   api.Status
		want string // "" for agreement
	}{
		{"agrees", api.Status{Spent: 2, Budget: 4}, ""},
		{"server counts more (other devices)", api.Status{Spent: 3, Budget: 4}, ""},
		{"server counts less", api.Status{Spent: 1, Budget: 4}, "counts ε = 1 spent"},
		{"server raised the budget", api.Status{Spent: 2, Budget: 8}, "allows a budget of 8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := l.Compare(tc.st)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Compare = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	l := &Ledger{Server: srv, Budget: 4, Reports: []LedgerEntry{{"a", 1}, {"b", 0.5}}}
	var buf bytes.Buffer
	if err := l.Write(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.json")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadLedger(path)
	if err != nil || got.Spent() != 1.5 || got.Server != srv || got.Budget != 4 {
		t.Fatalf("LoadLedger = %+v, %v", got, err)
	}
	if got, err := LoadLedger(filepath.Join(t.TempDir(), "none.json")); got != nil || err != nil {
		t.Fatalf("a missing ledger: %v, %v; want nil, nil", got, err)
	}
}

func TestReadLedgerBad(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not JSON", "{", "unexpected EOF"},
		{"unknown field", `{"server":"s","budget":1,"reports":[],"extra":1}`, "unknown field"},
		{"no server", `{"budget":1,"reports":[]}`, "names no server"},
		{"zero budget", `{"server":"s","budget":0,"reports":[]}`, "budget must be positive"},
		{"repeated ID", `{"server":"s","budget":1,"reports":[{"id":"a","epsilon":0.1},{"id":"a","epsilon":0.1}]}`, "repeated ID"},
		{"bad ε", `{"server":"s","budget":1,"reports":[{"id":"a","epsilon":-1}]}`, "ε = -1"},
		{"huge budget", `{"server":"s","budget":1e308,"reports":[]}`, "at most"},
		{"over budget", `{"server":"s","budget":1,"reports":[{"id":"a","epsilon":0.6},{"id":"b","epsilon":0.6}]}`, "cost more than its budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadLedger(strings.NewReader(tc.in), "ledger.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ledger.json") {
				t.Fatalf("ReadLedger(%s) = %v, want an error naming the file and %q", tc.in, err, tc.want)
			}
		})
	}
}

// FuzzReadLedger: any input is a ledger that satisfies its invariants or
// an error, never a panic.
func FuzzReadLedger(f *testing.F) {
	f.Add(`{"server":"s","budget":1,"reports":[{"id":"a","epsilon":0.1}]}`)
	f.Add(`{"server":"s","budget":1e308,"reports":[]}`)
	f.Fuzz(func(t *testing.T, in string) {
		l, err := ReadLedger(strings.NewReader(in), "f")
		if err != nil {
			return
		}
		if l.Server == "" || !(l.Budget > 0) || l.Spent() < 0 || l.Spent() > l.Budget {
			t.Fatalf("accepted an invalid ledger %+v", l)
		}
	})
}
