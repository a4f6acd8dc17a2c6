package ldp_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/privrec/privrec/ldp"
)

func TestAppendReport(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{0.5, "0.5"},
		{-2.1188134, "-2.118813"},
		{3.1356895, "3.13569"},
		{0.0000004, "0"},
		{-0.0000006, "-0.000001"},
		{12.0000001, "12"},
		{99.9999996, "100"},
		{1e12, "1e+12"},
		{math.Inf(-1), "-Inf"},
	} {
		if got := string(ldp.AppendReport(nil, tc.v)); got != tc.want {
			t.Errorf("AppendReport(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// FuzzAppendReport: the output always parses back to within half a unit of
// the last decimal place (plus float rounding), for any finite value.
func FuzzAppendReport(f *testing.F) {
	for _, v := range []float64{0, 1, -1, 0.25, -3.999999, 123456.7891234, 1e-7, 5e11} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		s := string(ldp.AppendReport([]byte("x"), v))[1:]
		got, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("AppendReport(%v) = %q does not parse: %v", v, s, err)
		}
		if math.IsNaN(v) {
			if !math.IsNaN(got) {
				t.Fatalf("AppendReport(NaN) = %q", s)
			}
			return
		}
		tol := 5e-7 + 4e-16*math.Abs(v)
		if math.Abs(v) >= 1e12 {
			tol = 0
		}
		if math.Abs(got-v) > tol && !(math.IsInf(v, 0) && got == v) {
			t.Fatalf("AppendReport(%v) = %q: error %g > %g", v, s, math.Abs(got-v), tol)
		}
	})
}

func BenchmarkAppendReport(b *testing.B) {
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = ldp.AppendReport(buf[:0], -2.1188134)
	}
}
