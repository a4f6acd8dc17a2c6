package audit

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
)

// The planned release check at every ε of `privrec audit --matrix`: for a
// Gaussian release (zCDP ρ of the whole budget at δ = 10⁻⁵, and a 15 %
// share of it) and a Laplace release of ε, PlanShift finds a test point
// with margin ≥ ShiftPowerMargin; a release with exactly the claimed noise
// passes and one with half of it is caught, both sampled here directly
// (the noise z/Δ, shifted by K on side 1, as methods' release check does).
// False failure: each honest run is a Clopper–Pearson bound at confidence
// 1 − 10⁻⁴ (≤ 10⁻⁴ each, ≤ 1.2·10⁻³ over the 12 runs, fixed seeds);
// a miss of the halved noise has probability ≈ Φ(−margin) ≤ 3·10⁻⁵ each.
func TestPlannedShiftHasPowerAtEveryEpsilon(t *testing.T) {
	const conf = 1 - 1e-4
	for _, eps := range []float64{0.5, 1, 4, 8} {
		rho, err := accountant.RhoForApprox(eps, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		for _, law := range []ReleaseLaw{{Mechanism: "gaussian", Rho: rho}, {Mechanism: "gaussian", Rho: 0.15 * rho}, {Mechanism: "laplace", Epsilon: eps}} {
			if law.Mechanism == "laplace" && eps == 8 && testing.Short() {
				continue // 7·10⁴ samples per side
			}
			d, n, ok, err := PlanShift(law, conf, 150000)
			if err != nil || !ok || d.Margin < ShiftPowerMargin {
				t.Fatalf("ε = %g, %+v: plan %+v, %d runs, ok %v, %v", eps, law, d, n, ok, err)
			}
			for _, f := range []float64{1, 0.5} {
				scale := f / math.Sqrt(2*law.Rho) // σ in units of Δ
				if law.Mechanism == "laplace" {
					scale = f / law.Epsilon
				}
				spec := Spec{Mechanism: law.Mechanism, ClaimedEpsilon: d.Epsilon, Delta: d.Delta, Events: d.Events(law),
					Sample: func(src *noise.Source, side int) float64 {
						z := scale * src.NormFloat64()
						if law.Mechanism == "laplace" {
							z = noise.Laplace(src, scale)
						}
						return z + float64(side*d.Group)
					}}
				r, err := Run(context.Background(), spec, n, conf, noise.Seeded(uint64(100*eps)+uint64(10*f)))
				if err != nil {
					t.Fatal(err)
				}
				if r.Violation != (f < 1) {
					t.Errorf("ε = %g, %s (ρ %.4g), noise ×%g: violation %v (bound %.3f against %.3f at δ %.3g, K = %d, %d runs)",
						eps, law.Mechanism, law.Rho, f, r.Violation, r.EpsilonLowerBound, d.Epsilon, d.Delta, d.Group, n)
				}
			}
		}
	}
}

// A pure ε = 8 release is planned where its event is rare on side 0
// (rareCounts): 30 000 samples per side at confidence 0.95 and 70 000 at
// 1 − 10⁻⁴ (the normal approximation, which needs an expected count of 5
// there, planned 10⁵); deterministic.
func TestPlanShiftRareEvents(t *testing.T) {
	for _, c := range []struct {
		conf float64
		want int
	}{{0.95, 30000}, {1 - 1e-4, 70000}} {
		d, n, ok, err := PlanShift(ReleaseLaw{Mechanism: "laplace", Epsilon: 8}, c.conf, 150000)
		if err != nil || !ok || n != c.want {
			t.Errorf("confidence %g: %d runs (want %d), ok %v, %v; plan %+v", c.conf, n, c.want, ok, err, d)
		}
	}
}

// The ℓ2 Laplace design's tail probabilities, computed by quadrature
// (l2Tails), agree with a simulation of the statistic (2·10⁵ draws per
// case) within 5 standard deviations; fixed seed (a false failure needs a
// 5-sd deviation, < 6·10⁻⁷ per comparison).
func TestL2TailsMatchSimulation(t *testing.T) {
	const m = 200000
	for _, c := range []struct {
		d    int
		b, k float64
	}{{3, 1.0 / 16, 1}, {3, 0.5, 2}, {5, 0.25, 1}, {2, 0.5, 1}} {
		tails := newL2Tails(c.d, c.b)
		src := noise.Seeded(uint64(7 * c.d))
		t0, t1 := make([]float64, m), make([]float64, m)
		z := make([]float64, c.d)
		for i := range m {
			noise.Sphere(src, z)
			r := noise.Gamma(src, float64(c.d), c.b)
			for j := range z {
				z[j] *= r
			}
			t0[i], t1[i] = ShiftStatistic(z, 0, int(c.k)), ShiftStatistic(z, c.k, int(c.k))
		}
		for _, f := range []float64{-0.5, 0.2, 0.5, 0.8} {
			s := f * c.k
			for side, pair := range [][2]float64{{tails.side0(c.k, s), frac(t0, s)}, {tails.side1(c.k, s), frac(t1, s)}} {
				exact, sim := pair[0], pair[1]
				if sd := math.Sqrt(exact*(1-exact)/m) + 1/float64(m); math.Abs(exact-sim) > 5*sd {
					t.Errorf("d %d, b %g, K %g, s %g, side %d: quadrature %.6g, simulation %.6g", c.d, c.b, c.k, s, side, exact, sim)
				}
			}
		}
	}
}

func frac(xs []float64, s float64) float64 {
	n := 0
	for _, x := range xs {
		if x >= s {
			n++
		}
	}
	return float64(n) / float64(len(xs))
}

// Randomized response claiming ε = 8 is planned in the rare-count regime
// too (a sign from −1 released as +1 with probability 1/(1 + e¹⁶) under
// half the noise): 30 000 samples per side at confidence 0.95;
// deterministic.
func TestPlanShiftRandomizedResponse(t *testing.T) {
	d, n, ok, err := PlanShift(ReleaseLaw{Mechanism: "rr", Epsilon: 8}, 0.95, 150000)
	if err != nil || !ok || n != 30000 || d.Threshold != 0.5 {
		t.Errorf("%d samples, ok %v, %v; plan %+v", n, ok, err, d)
	}
}
