package ldp

import (
	"strings"
	"testing"
)

// TestCellWarning: a catalogue of 3 883 items at ε = 4 per report (per-item
// ε ≈ 0.001) is flagged with what it costs; a usable per-item ε is not.
func TestCellWarning(t *testing.T) {
	five := Scale{Min: 1, Max: 5, Levels: 5}
	cases := []struct {
		name  string
		m     Mechanism
		eps   float64
		items int
		want  []string // substrings; none means no warning
	}{
		{"rr ml-1m catalogue at ε 4", RR, 4.0 / 3883, 3883, []string{"per-item ε = 0.00103 over 3883 items", "million reports", "ε = ", "per report"}},
		{"laplace ml-1m catalogue at ε 4", Laplace, 4.0 / 3883, 3883, []string{"one item's mean rating", "million reports"}},
		{"rr at per-item ε 1", RR, 1, 20, nil},
		{"laplace at per-item ε 0.5", Laplace, 0.5, 10, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := CellWarning(tc.m, tc.eps, tc.items, five)
			if len(tc.want) == 0 {
				if w != "" {
					t.Fatalf("unexpected warning: %s", w)
				}
				return
			}
			for _, s := range tc.want {
				if !strings.Contains(w, s) {
					t.Errorf("warning %q lacks %q", w, s)
				}
			}
		})
	}
	// The figure is the formula's: RR, d = 5, ε = 1 → p − q = (e−1)/(e+5).
	if n := ReportsNeeded(RR, 1, five); n < 504 || n > 506 {
		t.Errorf("ReportsNeeded(rr, 1) = %v, want ≈ 505", n)
	}
	// The suggested per-item ε needs about UsefulReports/10 reports.
	w := CellWarning(RR, 0.001, 1000, five)
	if !strings.Contains(w, "10000 reports would need a per-item ε of about 0.") {
		t.Errorf("warning %q", w)
	}
}
