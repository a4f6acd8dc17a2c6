package main

import (
	"math"
	"testing"
)

// TestNum: budgets shown to people carry no floating-point residue.
func TestNum(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{
		{0.999999998, "1"},
		{3.000000002, "3"},
		{4, "4"},
		{0.5, "0.5"},
		{1e-6, "1e-06"},
		{4.0 / 3883, "0.00103"},
		{260, "260"},
		{math.Inf(1), "∞"},
	} {
		if got := num(tc.x); got != tc.want {
			t.Errorf("num(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}
