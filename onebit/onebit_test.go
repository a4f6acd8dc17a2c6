package onebit

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// synthetic builds the seed's setup: M = M1 M2ᵀ with U[−½, ½] factors scaled
// to ‖M‖_∞ = alpha, a fraction frac of entries observed, signs drawn from
// link. Test-local so the tests do not depend on other packages' data.
func synthetic(seed uint64, d1, d2, r int, alpha, frac float64, link Link) ([]float64, *Problem) {
	rng := rand.New(rand.NewPCG(seed, 7))
	m1 := make([]float64, d1*r)
	m2 := make([]float64, d2*r)
	for i := range m1 {
		m1[i] = rng.Float64() - 0.5
	}
	for i := range m2 {
		m2[i] = rng.Float64() - 0.5
	}
	M := make([]float64, d1*d2)
	var mx float64
	for i := range d1 {
		for j := range d2 {
			var s float64
			for k := range r {
				s += m1[i*r+k] * m2[j*r+k]
			}
			M[i*d2+j] = s
			mx = math.Max(mx, math.Abs(s))
		}
	}
	for i := range M {
		M[i] *= alpha / mx
	}
	p := &Problem{D1: d1, D2: d2}
	for i := range d1 {
		for j := range d2 {
			if rng.Float64() < frac {
				y := -1.0
				if rng.Float64() < link.H(M[i*d2+j]) {
					y = 1
				}
				p.Rows = append(p.Rows, int32(i))
				p.Cols = append(p.Cols, int32(j))
				p.Y = append(p.Y, y)
			}
		}
	}
	return M, p
}

func are(est, truth []float64) float64 {
	var num, den float64
	for i := range truth {
		num += (est[i] - truth[i]) * (est[i] - truth[i])
		den += truth[i] * truth[i]
	}
	return num / den
}

func nuclearNorm(x []float64, d1, d2 int) float64 {
	t, _ := fullSVD(mat.NewDense(d1, d2, append([]float64(nil), x...)))
	var s float64
	for _, v := range t.S {
		s += v
	}
	return s
}

func TestProjectMatchesFullSVD(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const d1, d2 = 40, 50
	for _, tc := range []struct {
		name       string
		tau, alpha float64
		rank       int
		noise      float64
	}{
		{"nuclear only", 5, 100, 3, 0.01},
		{"both active", 20, 0.3, 4, 0.1},
		{"inside", 1e6, 1e6, 2, 0.1},
		{"box only", 1e6, 0.2, 2, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mat.NewDense(d1, tc.rank, nil)
			b := mat.NewDense(d2, tc.rank, nil)
			for i := range d1 {
				for k := range tc.rank {
					a.Set(i, k, rng.NormFloat64())
				}
			}
			for i := range d2 {
				for k := range tc.rank {
					b.Set(i, k, rng.NormFloat64())
				}
			}
			z := make([]float64, d1*d2)
			mat.NewDense(d1, d2, z).Mul(a, b.T())
			for i := range z {
				z[i] += tc.noise * rng.NormFloat64()
			}
			got := make([]float64, len(z))
			want := make([]float64, len(z))
			pr, _ := NewProjector(d1, d2, tc.tau, tc.alpha, rng.Float64)
			pr.Tol, pr.MaxDykstra = 1e-4, 300
			if _, _, err := pr.Project(got, z); err != nil {
				t.Fatal(err)
			}
			// Same Dykstra settings with exact SVDs: isolates the partial SVD.
			ref, _ := NewProjector(d1, d2, tc.tau, tc.alpha, rng.Float64)
			ref.Tol, ref.MaxDykstra, ref.FullSVD = 1e-4, 300, true
			if _, _, err := ref.Project(want, z); err != nil {
				t.Fatal(err)
			}
			if nn := nuclearNorm(got, d1, d2); nn > tc.tau*(1+1e-9) {
				t.Errorf("nuclear norm %g > τ = %g", nn, tc.tau)
			}
			if m := maxAbs(got); m > tc.alpha*(1+1e-12) {
				t.Errorf("max |x| = %g > α = %g", m, tc.alpha)
			}
			var diff, size float64
			for i := range got {
				diff += (got[i] - want[i]) * (got[i] - want[i])
				size += want[i] * want[i]
			}
			if rel := math.Sqrt(diff / size); rel > 1e-3 {
				t.Errorf("partial-SVD projection differs from the full-SVD one by %.3g (relative Frobenius)", rel)
			}
		})
	}
}

// TestSolveRecovers checks accuracy against a known truth in a well-posed
// setting (rank 1, 60 % observed, τ the truth's nuclear norm). Seeds are
// fixed, so the outcome is deterministic (no false failures); the bound has
// a wide margin over the measured ARE.
func TestSolveRecovers(t *testing.T) {
	for _, tc := range []struct {
		link Link
		max  float64
	}{{Logistic{}, 0.85}, {Probit{Sigma: 0.5}, 0.5}} {
		t.Run(tc.link.Name(), func(t *testing.T) {
			const d = 40
			M, p := synthetic(3, d, d, 1, 2, 0.6, tc.link)
			tau := nuclearNorm(M, d, d)
			rng := rand.New(rand.NewPCG(4, 5))
			sol, err := Solve(context.Background(), p, Options{Link: tc.link, Tau: tau, Alpha: 2, Rand: rng.Float64})
			if err != nil {
				t.Fatal(err)
			}
			e := are(sol.X, M)
			t.Logf("ARE %.3f after %d iterations (%s)", e, sol.Iterations, sol.Stop)
			if e > tc.max {
				t.Errorf("ARE %.3f > %.2f", e, tc.max)
			}
			if nuclearNorm(sol.X, d, d) > tau*(1+1e-9) || maxAbs(sol.X) > 2 {
				t.Error("solution outside C")
			}
			rank, u, v, err := sol.FactorsUV(d, d)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for i := range d {
				for j := range d {
					var s float64
					for k := range rank {
						s += u[i*rank+k] * v[j*rank+k]
					}
					worst = math.Max(worst, math.Abs(s-sol.X[i*d+j]))
				}
			}
			if worst > 1e-8 {
				t.Errorf("factors reproduce X only to %.3g", worst)
			}
		})
	}
}
