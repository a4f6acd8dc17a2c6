package ldp_test

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/audit"
	"github.com/privrec/privrec/privacy/noise"
)

// TestAuditCells audits the per-cell randomizers exactly as Randomize
// applies them (rating scale 1…5 normalised for Laplace, levels for RR) on
// the neighbouring pairs that matter for local DP over the whole item set:
// rated ↔ missing (which `privrec audit --mechanism modlaplace` does not
// sample) and the two extreme ratings. A Clopper–Pearson lower bound
// above the claimed ε would be a violation; the confidence 1 − 10⁻⁶ makes
// the false-failure rate at most 10⁻⁶ per pair (5 pairs). The Laplace
// pairs draw fewer samples (60 000; 20 000 with -short) because the client
// path's bounded-time sampler costs ≈ 10–40 µs a draw; the bounds are then
// a little looser (a lower bound can only show a violation).
func TestAuditCells(t *testing.T) {
	const eps, n = 1.0, 200_000
	nLap := 60_000
	if testtier.Quick() {
		nLap = 20_000
	}
	sc := ldp.Scale{Min: 1, Max: 5, Levels: 5}
	lap, err := ldp.NewModifiedLaplace(eps, sc)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := ldp.NewRandomizedResponse(eps, sc)
	if err != nil {
		t.Fatal(err)
	}
	lapCell := func(rating float64) func(*noise.Source) float64 {
		return func(s *noise.Source) float64 {
			in, out := []float64{rating}, []float64{0}
			if err := lap.Randomize(s, in, out); err != nil {
				return math.Inf(1) // lands in a tail event; also fails the pair below
			}
			return out[0]
		}
	}
	rrCell := func(rating float64) func(*noise.Source) float64 {
		return func(s *noise.Source) float64 {
			in, out := []float64{rating}, []float64{0}
			if err := rr.Randomize(s, in, out); err != nil {
				return -1
			}
			return out[0]
		}
	}
	// Laplace events: tails around the two extreme normalised ratings ±1 on
	// a grid of half the noise scale, plus "missing".
	b := lap.NoiseScale()
	var lapEvents []audit.Event
	for k := -2; k <= 8; k++ {
		lapEvents = append(lapEvents, audit.Event{Kind: audit.AtLeast, T: 1 + float64(k)*b/2}, audit.Event{Kind: audit.AtMost, T: -1 - float64(k)*b/2})
	}
	lapEvents = append(lapEvents, audit.Event{Kind: audit.IsMissing})
	rrEvents := []audit.Event{{Kind: audit.IsMissing}}
	for v := 1; v <= 5; v++ {
		rrEvents = append(rrEvents, audit.Event{Kind: audit.Equals, T: float64(v)})
	}
	for _, tc := range []struct {
		name   string
		a, b   func(*noise.Source) float64
		events []audit.Event
		n      int
	}{
		{"laplace rated 5 vs missing", lapCell(5), lapCell(ldp.Missing), lapEvents, nLap},
		{"laplace rated 1 vs missing", lapCell(1), lapCell(ldp.Missing), lapEvents, nLap},
		{"laplace rated 1 vs 5", lapCell(1), lapCell(5), lapEvents, nLap},
		{"rr rated 1 vs missing", rrCell(1), rrCell(ldp.Missing), rrEvents, n},
		{"rr rated 1 vs 5", rrCell(1), rrCell(5), rrEvents, n},
	} {
		res := auditPair(t, tc.name, eps, tc.events, tc.n, 77, tc.a, tc.b)
		if res.Violation {
			t.Errorf("%s: audit lower bound %.4f exceeds the claimed ε = %g", tc.name, res.EpsilonLowerBound, eps)
		}
	}
}

// TestAuditMeanReport audits the device's mean report on the pairs that
// reach its sensitivity (one rating 1 vs one rating 5: the means are the
// scale's ends) and on no rating (the midpoint) vs one rating: a
// Clopper–Pearson lower bound above the claimed ε = 1 would be a violation
// (confidence 1 − 10⁻⁶ per pair). As a check that the audit can fail, the
// same samples must flag a claim of ε = 0.5 on the extreme pair.
func TestAuditMeanReport(t *testing.T) {
	const eps = 1.0
	n := 60_000
	if testtier.Quick() {
		n = 20_000
	}
	sc := ldp.Scale{Min: 1, Max: 5, Levels: 5}
	mr, err := ldp.NewMeanReporter(eps, sc)
	if err != nil {
		t.Fatal(err)
	}
	report := func(in []float64) func(*noise.Source) float64 {
		return func(s *noise.Source) float64 {
			v, err := mr.Report(s, in)
			if err != nil {
				return math.NaN()
			}
			return v
		}
	}
	b := math.Sqrt(mr.Variance() / 2) // the Laplace scale
	var events []audit.Event
	for k := -2; k <= 8; k++ {
		events = append(events, audit.Event{Kind: audit.AtLeast, T: 5 + float64(k)*b/2}, audit.Event{Kind: audit.AtMost, T: 1 - float64(k)*b/2})
	}
	for _, tc := range []struct {
		name    string
		a, b    []float64
		claimed float64
		flagged bool
	}{
		{"mean of 1 vs 5", []float64{1}, []float64{5}, eps, false},
		{"no rating vs 1", []float64{ldp.Missing}, []float64{1}, eps, false},
		{"mean of 1 vs 5, claiming ε/2", []float64{1}, []float64{5}, eps / 2, true},
	} {
		res := auditPair(t, tc.name, tc.claimed, events, n, 78, report(tc.a), report(tc.b))
		if res.Violation != tc.flagged {
			t.Errorf("%s: violation %t (lower bound %.4f, claimed %g), want %t", tc.name, res.Violation, res.EpsilonLowerBound, tc.claimed, tc.flagged)
		}
	}
}

// auditPair audits sample a (side 0) against b (side 1) for the claim at
// confidence 1 − 10⁻⁶ over events, n samples a side, seeded, and logs the
// bound.
func auditPair(t *testing.T, name string, claimed float64, events []audit.Event, n int, seed uint64, a, b func(*noise.Source) float64) audit.Result {
	t.Helper()
	spec := audit.Spec{Mechanism: name, ClaimedEpsilon: claimed, Events: events,
		Sample: func(s *noise.Source, side int) float64 {
			if side == 0 {
				return a(s)
			}
			return b(s)
		}}
	res, err := audit.Run(context.Background(), spec, n, 1-1e-6, noise.Seeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: ε lower bound %.3f (claimed %g), point estimate %.3f on %s", name, res.EpsilonLowerBound, claimed, res.EpsilonEstimate, res.Event)
	return res
}
