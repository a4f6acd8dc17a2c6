package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
)

func zcdp(t *testing.T, rho float64, unit privacy.Unit) privacy.Guarantee {
	t.Helper()
	eps, err := accountant.ZCDPToApprox(rho, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	return privacy.Guarantee{Epsilon: eps, Delta: 1e-6, Rho: rho, Unit: unit, Notion: privacy.Joint, Status: privacy.Proven}
}

// A second release on the same ledger is counted: its number is 2 and
// the total is the zCDP composition of both (ρ adds); a damaged ledger
// or units that cannot compose record nothing.
func TestLedgerCountsReruns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	e := LedgerEntry{Time: time.Unix(0, 0).UTC(), Method: "dp-bias", Engine: "beam", Data: "r.tsv", Out: "m", Guarantee: zcdp(t, 0.02, privacy.UnitUser)}
	s1, err := RecordRelease(path, e)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Release != 1 || s1.Total.Rho != 0.02 || !strings.Contains(s1.String(), "release 1") {
		t.Fatalf("first release: %+v (%s)", s1, s1)
	}
	e.Engine = "in-process"
	s2, err := RecordRelease(path, e)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Release != 2 || s2.Releases != 2 || s2.Total.Rho < 0.04 || s2.Total.Rho > 0.04*(1+1e-12) {
		t.Fatalf("second release: %+v", s2)
	}
	if !(s2.Total.Epsilon > e.Guarantee.Epsilon) || !strings.Contains(s2.String(), "the 2 releases together") {
		t.Errorf("second release: total %v, one release ε %v (%s)", s2.Total, e.Guarantee.Epsilon, s2)
	}
	l, err := LoadLedger(path)
	if err != nil || len(l.Releases) != 2 || l.Releases[0].Engine != "beam" {
		t.Fatalf("ledger %+v, %v", l, err)
	}

	for _, tc := range []struct {
		name, content string
		entry         LedgerEntry
		want          string
	}{
		{"damaged", "{not json", e, "damaged"},
		{"units", "", LedgerEntry{Method: "onebit-inp", Guarantee: privacy.Guarantee{Epsilon: 1, Unit: privacy.UnitEntry, Notion: privacy.Local, Status: privacy.Proven}}, "units must match"},
		{"invalid guarantee", `{"releases":[{"guarantee":{"epsilon":-1}}]}`, e, "release 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := path
			if tc.content != "" {
				p = filepath.Join(t.TempDir(), "l.json")
				if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.ReadFile(p)
			if _, err := RecordRelease(p, tc.entry); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if after, _ := os.ReadFile(p); string(after) != string(before) {
				t.Error("a refused record changed the ledger")
			}
			if _, err := os.Stat(p + ".lock"); err == nil {
				t.Error("the lock file was left behind")
			}
		})
	}
}

// Records that finish together are all counted (the lock serialises
// them).
func TestLedgerConcurrentRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	errs := make(chan error, 8)
	g := zcdp(t, 0.01, privacy.UnitUser)
	for range 8 {
		go func() {
			_, err := RecordRelease(path, LedgerEntry{Method: "dp-popularity", Guarantee: g})
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	l, err := LoadLedger(path)
	if err != nil || len(l.Releases) != 8 {
		t.Fatalf("%d releases recorded, want 8 (%v)", len(l.Releases), err)
	}
}
