package statistic

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The sensitivity of the bias statistics holds for random and extreme
// pairs of users, with and without the spread block, with uniform and
// adaptive item weights: ‖x_u − x_u'‖ ≤ Δ₂ (deterministic, fixed seed).
// The worst cases (disjoint items, or the same items rated at opposite
// extremes, with opposite means) reach Δ₂ itself.
func TestBiasSensitivityHolds(t *testing.T) {
	const n = 12
	r := rand.New(rand.NewPCG(5, 5))
	mid, half := 3.0, 2.0
	weights := make([]float64, n)
	for j := range weights {
		weights[j] = math.Pow(1+float64(j*j), -0.5)
	}
	var spread bool
	var itemWeight []float64
	vec := func(items []int32, vals []float32, clip float64) []float64 {
		b := &Bias{Items: n, Mid: mid, Half: half, Clip: clip, ItemWeight: itemWeight, Spread: spread}
		x := make([]float64, BiasDim(n, spread))
		b.Contribute(Row{Items: items, Vals: vals}, func(i int, v float64) { x[i] += v })
		return x
	}
	user := func() ([]int32, []float32) {
		m := 1 + r.IntN(n)
		perm := r.Perm(n)[:m]
		items := make([]int32, m)
		vals := make([]float32, m)
		for k, j := range perm {
			items[k] = int32(j)
			vals[k] = float32(1 + 4*float64(r.IntN(2))) // extremes 1 or 5
			if r.IntN(3) == 0 {
				vals[k] = float32(1 + 4*r.Float64())
			}
		}
		return items, vals
	}
	sens := BiasSensitivity().Value
	worst := 0.0
	for it := range 40000 {
		spread = it%2 == 0
		itemWeight = nil
		if it%4 < 2 {
			itemWeight = weights
		}
		clip := []float64{0.5, 1.5, 2}[r.IntN(3)]
		a, av := user()
		b, bv := user()
		x, y := vec(a, av, clip), vec(b, bv, clip)
		var d float64
		for i := range x {
			d += (x[i] - y[i]) * (x[i] - y[i])
		}
		worst = math.Max(worst, math.Sqrt(d))
	}
	t.Logf("largest ‖x_u − x_u'‖ seen: %.4f, Δ₂ = %.4f", worst, sens)
	if worst < sens*0.999 {
		t.Errorf("the worst pair seen, %g, is far below Δ₂ = %g: the bound is not tight or the test does not reach it", worst, sens)
	}
	if worst > sens*(1+1e-12) {
		t.Fatalf("‖x_u − x_u'‖ = %g exceeds the sensitivity %g", worst, sens)
	}
}
