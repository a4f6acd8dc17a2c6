package synth

import (
	"context"
	"math"
	"slices"
	"testing"
)

// Explicit is deterministic for its seed, keeps Implicit's pattern, puts
// every value on the integer scale, holds out the stated share, and with
// no bias, taste or noise rates everything round(Mean).
func TestExplicit(t *testing.T) {
	small := ExplicitConfig{
		ImplicitConfig: ImplicitConfig{Users: 3000, Items: 300, Interactions: 90000, Rank: 4, PopExponent: 0.9, ActivitySpread: 1, Taste: 0.5},
		Factors:        4, Mean: 3.6, UserBias: 0.4, ItemBias: 0.35, Affinity: 0.8, Noise: 0.65, Low: 1, High: 5, Holdout: 0.2,
	}
	type rating struct {
		u    int
		j    int32
		v    float32
		test bool
	}
	collect := func(cfg ExplicitConfig, seed uint64) []rating {
		var out []rating
		err := Explicit(context.Background(), cfg, seed, func(u int, items []int32, vals []float32, held []bool) error {
			for k, j := range items {
				out = append(out, rating{u, j, vals[k], held[k]})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := collect(small, 5), collect(small, 5)
	if !slices.Equal(a, b) {
		t.Fatal("two runs with one seed differ")
	}
	if c := collect(small, 6); slices.Equal(a, c) {
		t.Fatal("seeds 5 and 6 give the same population")
	}
	var implicit []int32
	if err := Implicit(context.Background(), small.ImplicitConfig, 5, func(_ int, items []int32) error {
		implicit = append(implicit, items...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var held, sum float64
	counts := map[float32]int{}
	for k, r := range a {
		if r.j != implicit[k] {
			t.Fatalf("rating %d is item %d, Implicit's pattern has %d", k, r.j, implicit[k])
		}
		if r.v != float32(math.Round(float64(r.v))) || r.v < 1 || r.v > 5 {
			t.Fatalf("value %v off the scale 1..5", r.v)
		}
		counts[r.v]++
		sum += float64(r.v)
		if r.test {
			held++
		}
	}
	n := float64(len(a))
	// Binomial(n, 0.2): 4.5 standard deviations, a false failure in about
	// 7·10⁻⁶ of seeds.
	if sd := math.Sqrt(n * 0.2 * 0.8); math.Abs(held-0.2*n) > 4.5*sd {
		t.Errorf("%v of %v held out, want 0.2 ± %.0f", held, n, 4.5*sd)
	}
	if len(counts) != 5 {
		t.Errorf("values used: %v, want all of 1..5", counts)
	}
	if m := sum / n; math.Abs(m-3.5) > 0.3 {
		t.Errorf("mean rating %.3f, want near 3.6 less the clipping at 5", m)
	}
	flat := small
	flat.UserBias, flat.ItemBias, flat.Affinity, flat.Noise = 0, 0, 0, 0
	for _, r := range collect(flat, 5) {
		if r.v != 4 {
			t.Fatalf("without variation a rating is %v, want round(3.6) = 4", r.v)
		}
	}
}

func TestExplicitCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ExplicitConfig)
	}{
		{"factors", func(c *ExplicitConfig) { c.Factors = 0 }},
		{"scale", func(c *ExplicitConfig) { c.Low, c.High = 5, 5 }},
		{"holdout", func(c *ExplicitConfig) { c.Holdout = 1 }},
		{"noise", func(c *ExplicitConfig) { c.Noise = -1 }},
		{"mean", func(c *ExplicitConfig) { c.Mean = math.NaN() }},
		{"users", func(c *ExplicitConfig) { c.Users = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ExplicitDefaults()
			if err := c.Check(); err != nil {
				t.Fatalf("defaults: %v", err)
			}
			tc.edit(&c)
			if err := c.Check(); err == nil {
				t.Error("accepted")
			}
		})
	}
}
