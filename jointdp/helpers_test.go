package jointdp

import (
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// rankOne builds a test problem in the seed's synthetic style: Y* = u vᵀ
// with u, v uniform on [−1, 1] scaled to ‖Y*‖_∞ = 1, and per random items
// observed for each of m users. It returns the problem and the truth.
func rankOne(m, n, per int, seed uint64) (*Problem, func(i, j int) float64) {
	rnd := noise.Seeded(seed)
	u := make([]float64, m)
	v := make([]float64, n)
	var mu, mv float64
	for i := range u {
		u[i] = 2*rnd.Float64() - 1
		mu = math.Max(mu, math.Abs(u[i]))
	}
	for j := range v {
		v[j] = 2*rnd.Float64() - 1
		mv = math.Max(mv, math.Abs(v[j]))
	}
	for i := range u {
		u[i] /= mu
	}
	for j := range v {
		v[j] /= mv
	}
	ptr := make([]int64, m+1)
	cols := make([]int32, 0, m*per)
	vals := make([]float32, 0, m*per)
	perm := make([]int, n)
	for i := range m {
		for j := range perm {
			perm[j] = j
		}
		for k := range per {
			r := k + rnd.IntN(n-k)
			perm[k], perm[r] = perm[r], perm[k]
		}
		row := slices.Clone(perm[:per])
		slices.Sort(row)
		for _, j := range row {
			cols = append(cols, int32(j))
			vals = append(vals, float32(u[i]*v[j]))
		}
		ptr[i+1] = int64(len(cols))
	}
	rm, err := ratings.FromCSR(nil, nil, n, ptr, cols, vals, nil)
	if err != nil {
		panic(err)
	}
	p, err := NewProblem(rm)
	if err != nil {
		panic(err)
	}
	return p, func(i, j int) float64 { return u[i] * v[j] }
}

// rmseAll is the RMSE of f against the truth over every entry.
func rmseAll(p *Problem, f *Factors, truth func(i, j int) float64) float64 {
	var s float64
	for i := range p.M {
		for j := range p.N {
			d := f.At(i, j) - truth(i, j)
			s += d * d
		}
	}
	return math.Sqrt(s / float64(p.M*p.N))
}

// nuclearTruth is ‖u vᵀ‖_* = ‖u‖‖v‖ for the rank-one truth.
func nuclearTruth(p *Problem, truth func(i, j int) float64) float64 {
	// ‖uvᵀ‖_F = ‖u‖‖v‖ for rank one.
	var s float64
	for i := range p.M {
		for j := range p.N {
			s += truth(i, j) * truth(i, j)
		}
	}
	return math.Sqrt(s)
}

// dpfwPlan is PlanDPFW at δ = 10⁻⁶ for tests.
func dpfwPlan(t testing.TB, cal string, eps float64, T int, L float64, n int) *GramPlan {
	t.Helper()
	pl, err := PlanDPFW(cal, eps, 1e-6, T, L, n)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// dpsvdPlan is PlanDPSVD (zCDP calibration) at δ = 10⁻⁶ for tests.
func dpsvdPlan(t testing.TB, eps, L float64, n int) *GramPlan {
	t.Helper()
	pl, err := PlanDPSVD(CalZCDP, eps, 1e-6, L, n)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}
