package noise

import (
	"math"
	"testing"
)

// FuzzSnap: for any input and scale the lattice samplers never panic,
// release NaN (never the input) for an invalid scale, and otherwise
// release a multiple of the grid within a plausible distance of the
// rounded input.
func FuzzSnap(f *testing.F) {
	f.Add(0.0, 1.0, uint64(1))
	f.Add(1e300, 1e-300, uint64(2))
	f.Add(math.NaN(), 3.0, uint64(3))
	f.Add(-0.5, math.Inf(1), uint64(4))
	f.Add(0.1, 0.0, uint64(5))
	f.Add(0.1, 1e-310, uint64(6))
	f.Add(0.1, 1e308, uint64(7))
	f.Fuzz(func(t *testing.T, x, scale float64, seed uint64) {
		s := Seeded(seed)
		for _, c := range []struct {
			name string
			y    float64
			g    float64
		}{
			{"SnapLaplace", SnapLaplace(s, x, scale), 0},
			{"SnapGaussian", SnapGaussian(s, x, scale), 1},
		} {
			if !validScale(scale) {
				if !math.IsNaN(c.y) {
					t.Fatalf("%s(%v, %v) = %v: released with an invalid scale", c.name, x, scale, c.y)
				}
				continue
			}
			g := LaplaceGrid(scale)
			if c.g == 1 {
				g = GaussianGrid(scale)
			}
			if math.IsNaN(c.y) {
				t.Fatalf("%s(%v, %v) = NaN", c.name, x, scale)
			}
			if q := c.y / g; !math.IsInf(q, 0) && q != math.Trunc(q) {
				t.Fatalf("%s(%v, %v) = %v is not a multiple of %v", c.name, x, scale, c.y, g)
			}
		}
	})
}

// FuzzDiscreteLaplace: any positive rational scale up to
// MaxDiscreteLaplaceScale terminates without panicking; a larger one is
// refused (CheckDiscreteLaplaceScale errs and the sampler panics) instead
// of being sampled with less noise. The law is checked elsewhere.
func FuzzDiscreteLaplace(f *testing.F) {
	f.Add(uint64(1), uint64(1), uint64(1))
	f.Add(uint64(1)<<62, uint64(3), uint64(2))
	f.Add(uint64(0), uint64(7), uint64(3))
	f.Add(uint64(1)<<52, uint64(1), uint64(4))
	f.Add(uint64(1)<<52+1, uint64(1), uint64(5))
	f.Add(^uint64(0), ^uint64(0)-1, uint64(6))
	f.Fuzz(func(t *testing.T, num, den, seed uint64) {
		if den == 0 {
			return
		}
		if num != 0 && CheckDiscreteLaplaceScale(num, den) != nil {
			defer func() {
				if recover() == nil {
					t.Fatalf("scale %d/%d above the maximum was sampled", num, den)
				}
			}()
		}
		z := DiscreteLaplace(Seeded(seed), num, den)
		if num == 0 && z != 0 {
			t.Fatalf("scale 0 gave %d", z)
		}
	})
}
