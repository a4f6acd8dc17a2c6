package gram

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/statistic"
)

// TestContributionBounds checks the per-user bounds the sensitivities
// rest on, over every interaction count up to 5 000: the capped counts'
// part has ℓ2 norm ≤ √cap and the Gram's upper-triangle part ≤ gram-norm.
func TestContributionBounds(t *testing.T) {
	for _, cap := range []float64{1, 7.5, 50} {
		for n := 1; n <= 5000; n++ {
			if norm := (&statistic.Counts{Cap: cap}).Weight(n) * math.Sqrt(float64(n)); norm > math.Sqrt(cap) {
				t.Fatalf("cap %g, n = %d: count part norm %g > √cap", cap, n, norm)
			}
		}
		if s := (&statistic.Counts{Cap: cap}).Sensitivity().Value; math.Abs(s-math.Sqrt(2*cap)) > 1e-12 {
			t.Errorf("counts sensitivity %g", s)
		}
	}
	for _, norm := range []float64{0.5, 1, 30} {
		w := (&Gram{Norm: norm}).Weight()
		cols := make([]int32, 0, 5000)
		for n := 1; n <= 5000; n++ {
			cols = append(cols, int32(n))
			if got := w(cols) * math.Sqrt(float64(n)*float64(n+1)/2); got > norm {
				t.Fatalf("gram-norm %g, n = %d: part norm %g", norm, n, got)
			}
		}
	}
	// With column weights (weight-exp), the part's entries are
	// Weight·g_p·g_q over her pairs p ≤ q: its norm, summed directly, stays
	// ≤ gram-norm for random weights spanning six orders of magnitude.
	r := rand.New(rand.NewPCG(9, 9))
	g := make([]float64, 300)
	for i := range g {
		g[i] = math.Pow(10, 6*r.Float64()-3)
	}
	for trial := range 200 {
		var cols []int32
		for p := range int32(len(g)) {
			if r.IntN(300) < trial+1 {
				cols = append(cols, p)
			}
		}
		if len(cols) == 0 {
			continue
		}
		w := (&Gram{Norm: 1, ColWeights: g}).Weight()(cols)
		var s float64
		for a, p := range cols {
			for _, q := range cols[a:] {
				e := w * g[p] * g[q]
				s += e * e
			}
		}
		if math.Sqrt(s) > 1 {
			t.Fatalf("weighted part of %d columns has norm %g > 1", len(cols), math.Sqrt(s))
		}
	}
}
