package mechanism

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
)

var (
	l1 = Sensitivity{Value: 1, Norm: L1, Relation: ReplaceOne, Unit: privacy.UnitEntry}
	l2 = Sensitivity{Value: 1, Norm: L2, Relation: ReplaceOne, Unit: privacy.UnitEntry}
)

// Tier 1 (exact): binary randomized response, from the sampler's realised
// probabilities: max ln(P/Q) ≤ ε + 1e-12 and δ = Σ max(0, P − e^ε Q) = 0.
func TestRRExact(t *testing.T) {
	for _, eps := range []float64{0.01, 0.5, 1, 3, 10} {
		m, err := NewRandomizedResponse(eps)
		if err != nil {
			t.Fatal(err)
		}
		g := m.Guarantee()
		pp, pm := m.OutputProbabilities()
		P := []float64{pp, 1 - pp} // input +1
		Q := []float64{pm, 1 - pm} // input −1
		checkPure(t, "rr", g.Epsilon, [][]float64{P, Q})
		if g.Epsilon > eps*(1+1e-12) {
			t.Errorf("ε=%g: guarantee %g", eps, g.Epsilon)
		}
		if g.Unit != privacy.UnitEntry || g.Notion != privacy.Local || g.Status != privacy.Proven {
			t.Errorf("guarantee fields %+v", g)
		}
	}
}

// checkPure asserts every pair of rows of an output distribution table is
// within e^ε of each other with no δ slack.
func checkPure(t *testing.T, name string, eps float64, rows [][]float64) {
	t.Helper()
	for a := range rows {
		for b := range rows {
			var delta float64
			for y := range rows[a] {
				if rows[a][y] > 0 && rows[b][y] == 0 {
					t.Fatalf("%s: output %d possible from %d but not %d", name, y, a, b)
				}
				if rows[a][y] > 0 && math.Log(rows[a][y]/rows[b][y]) > eps+1e-12 {
					t.Errorf("%s: ln P(%d|%d)/P(%d|%d) = %g > ε = %g", name, y, a, y, b, math.Log(rows[a][y]/rows[b][y]), eps)
				}
				delta += math.Max(0, rows[a][y]-math.Exp(eps)*rows[b][y])
			}
			if delta > 1e-15 {
				t.Errorf("%s: δ = %g between %d and %d", name, delta, a, b)
			}
		}
	}
}

// Seed 000's Theorem 1 is not sufficient: the exact ε is reported and the
// paper's claim kept beside it.
func TestAsymmetricRRTheorem1(t *testing.T) {
	if !Theorem1Holds(0.01, 0.5, 1) {
		t.Fatal("the counterexample should satisfy Theorem 1's condition")
	}
	m, err := NewRandomizedResponseClaimed(0.01, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := m.Guarantee()
	if math.Abs(g.Epsilon-math.Log(50)) > 1e-9 || g.ClaimedEpsilon != 1 || g.Status != privacy.Proven {
		t.Errorf("guarantee %+v, want ε = ln 50 with the claim 1", g)
	}
	pp, pm := m.OutputProbabilities()
	checkPure(t, "asymmetric rr", g.Epsilon, [][]float64{{pp, 1 - pp}, {pm, 1 - pm}})
	// A pair that is really ε-DP keeps no claim.
	p := 1 / (1 + math.E)
	m, err = NewRandomizedResponseClaimed(p, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Guarantee().ClaimedEpsilon != 0 {
		t.Errorf("symmetric pair got a claim: %+v", m.Guarantee())
	}
	if _, err := NewRandomizedResponseClaimed(0.9, 0.9, 1); err == nil {
		t.Error("Theorem 1 violation accepted")
	}
}

// Tier 1 (exact): k-ary RR over {missing, 1..d}, every pair of inputs.
func TestKaryRRExact(t *testing.T) {
	for _, d := range []int{1, 2, 5, 10} {
		for _, eps := range []float64{0.1, 1, 4} {
			m, err := NewKaryRR(eps, d)
			if err != nil {
				t.Fatal(err)
			}
			rows := make([][]float64, d+1)
			for i := range rows {
				rows[i] = make([]float64, d+1)
				var sum float64
				for j := range rows[i] {
					rows[i][j] = m.OutputProbability(i, j)
					sum += rows[i][j]
				}
				if math.Abs(sum-1) > 1e-12 {
					t.Fatalf("row %d sums to %g", i, sum)
				}
			}
			g := m.Guarantee()
			checkPure(t, "krr", g.Epsilon, rows)
			if g.Epsilon > eps*(1+1e-12) {
				t.Errorf("d=%d ε=%g: guarantee %g", d, eps, g.Epsilon)
			}
			ug, _ := m.UserGuarantee(20)
			if ug.Unit != privacy.UnitUser || math.Abs(ug.Epsilon-20*g.Epsilon) > 1e-9 {
				t.Errorf("user guarantee %+v", ug)
			}
		}
	}
}

// Tier 2: k-ary RR frequencies (tolerance 4.42 sd, false failure ≈ 1e-5 each).
func TestKaryRRFrequencies(t *testing.T) {
	const n = 125000
	m, _ := NewKaryRR(1, 4)
	s := noise.Seeded(31)
	counts := make([]int, 5)
	for range n {
		v, err := m.Randomize(s, 2)
		if err != nil {
			t.Fatal(err)
		}
		counts[v]++
	}
	for j, c := range counts {
		p := m.OutputProbability(2, j)
		if math.Abs(float64(c)/n-p) > 4.42*math.Sqrt(p*(1-p)/n) {
			t.Errorf("P(%d|2) ≈ %g, want %g", j, float64(c)/n, p)
		}
	}
	if _, err := m.Randomize(s, 5); !errors.Is(err, ErrData) {
		t.Errorf("category 5 of 4 accepted: %v", err)
	}
}

// Tier 1 for the modified Laplace mechanism: the exact log-likelihood ratio
// of the realised mechanism (keep probability, lattice discrete Laplace of
// integer scale t) over lattice inputs in [−1, 1] and missing, at the
// outputs where it is extreme (missing, and lattice points beyond ±1).
func TestModifiedLaplaceExact(t *testing.T) {
	for _, eps := range []float64{0.1, 1, 3} {
		m, err := NewModifiedLaplace(eps)
		if err != nil {
			t.Fatal(err)
		}
		z := noise.RealizedBernoulli(m.Zeta())
		b := noise.EffectiveLaplaceScale(m.Scale())
		// log P(output | input); input NaN = missing, output NaN = missing.
		logP := func(y, x float64) float64 {
			switch {
			case math.IsNaN(y) && math.IsNaN(x):
				return math.Log(z)
			case math.IsNaN(y):
				return math.Log(1 - z)
			case math.IsNaN(x):
				return math.Log(1-z) - math.Abs(y)/b
			}
			return math.Log(z) - math.Abs(y-x)/b // common normaliser cancels
		}
		inputs := []float64{math.NaN(), -1, -0.5, 0, 0.5, 1}
		outputs := []float64{math.NaN(), -3, -1, 0, 1, 3}
		var worst float64
		for _, x := range inputs {
			for _, x2 := range inputs {
				for _, y := range outputs {
					worst = math.Max(worst, logP(y, x)-logP(y, x2))
				}
			}
		}
		if g := m.Guarantee(); worst > g.Epsilon+1e-12 || g.Epsilon > eps*(1+1e-9) {
			t.Errorf("ε=%g: exact worst log ratio %g, guarantee %g", eps, worst, g.Epsilon)
		}
	}
	m, _ := NewModifiedLaplace(1)
	for _, v := range []float64{1.5, math.NaN(), math.Inf(-1)} {
		if _, _, err := m.Randomize(noise.Seeded(1), v, true); !errors.Is(err, ErrData) {
			t.Errorf("rating %v accepted", v)
		}
	}
}

// Tier 7: randomize m known bits once and guess each from its output; the
// number of correct guesses stays under the Binomial(m, e^ε/(1+e^ε))
// upper tail at 1e-6 (false-failure rate 1e-6).
func TestLocalOneRun(t *testing.T) {
	const m, eps = 100000, 1.0
	rr, _ := NewRandomizedResponse(eps)
	s := noise.Seeded(32)
	correct := 0
	for i := range m {
		bit := i%3 == 0
		if rr.Randomize(s, bit) == bit {
			correct++
		}
	}
	p := math.Exp(eps) / (1 + math.Exp(eps))
	bin := distuv.Binomial{N: m, P: p}
	lim := m * p
	for bin.Survival(lim) > 1e-6 { // smallest limit with P(X > lim) ≤ 1e-6
		lim++
	}
	if float64(correct) > lim {
		t.Errorf("%d correct guesses of %d exceed the ε-DP limit %g", correct, m, lim)
	}
}

func TestLaplaceGuarantee(t *testing.T) {
	for _, c := range []struct {
		eps, sens float64
		dim       int
	}{{1, 1, 1}, {0.1, 2, 1000}, {5, 0.01, 1e6}} {
		m, err := NewLaplace(c.eps, Sensitivity{Value: c.sens, Norm: L1, Relation: AddRemoveOne, Unit: privacy.UnitUser}, c.dim)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := LaplaceEpsilon(c.sens, m.Scale(), c.dim)
		if e > c.eps {
			t.Errorf("%+v: scale %g gives ε %g", c, m.Scale(), e)
		}
		if m.Scale() > c.sens/c.eps*(1+1e-6) {
			t.Errorf("%+v: scale %g wasteful vs %g", c, m.Scale(), c.sens/c.eps)
		}
		g := m.Guarantee()
		if g.Epsilon != c.eps || g.Unit != privacy.UnitUser || g.Notion != privacy.Central {
			t.Errorf("guarantee %+v", g)
		}
		g2, _ := m.GuaranteeFor(3)
		if math.Abs(g2.Epsilon-3*c.eps) > 1e-12 {
			t.Errorf("group guarantee %g", g2.Epsilon)
		}
	}
}

func TestGaussianGuarantee(t *testing.T) {
	// One coordinate, analytic: σ ≈ Balle–Wang's 3.7306 and ε as asked.
	m, err := NewGaussian(1, 1e-5, l2, 1, CalibrateAnalytic)
	if err != nil {
		t.Fatal(err)
	}
	if g := m.Guarantee(); g.Epsilon != 1 || g.Delta != 1e-5 || g.Status != privacy.Proven || math.Abs(m.Sigma()-3.7306316)/3.73 > 1e-6 {
		t.Errorf("analytic: σ %g, %+v", m.Sigma(), g)
	}
	// zCDP calibration, many coordinates: proven, ε ≤ asked, ρ matches σ.
	m, err = NewGaussian(1, 1e-5, l2, 10000, CalibrateZCDP)
	if err != nil {
		t.Fatal(err)
	}
	g := m.Guarantee()
	if g.Epsilon > 1 || g.Status != privacy.Proven {
		t.Errorf("zcdp: %+v", g)
	}
	if r, _ := accountant.GaussianRho(1, m.Sigma()); r > m.Rho() {
		t.Errorf("ρ %g below the continuous %g", m.Rho(), r)
	}
	// Analytic on many coordinates is only claimed.
	m, err = NewGaussian(1, 1e-5, l2, 100, CalibrateAnalytic)
	if err != nil {
		t.Fatal(err)
	}
	if g := m.Guarantee(); g.Status != privacy.AsClaimed || g.ClaimedEpsilon != 1 || g.Epsilon <= 1 {
		t.Errorf("analytic, 100 coordinates: %+v", g)
	}
	// Classic is refused for ε ≥ 1.
	if _, err := NewGaussian(1, 1e-5, l2, 1, CalibrateClassic); err == nil {
		t.Error("classic calibration accepted at ε = 1")
	}
	// A given σ: ρ = Δ²/2σ² up to the lattice rounding (≤ 2^-26 relative).
	m, err = NewGaussianSigma(2, 1e-6, l2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.Rho()/0.125-1) > 1e-7 {
		t.Errorf("ρ = %g, want 0.125", m.Rho())
	}
	g4, _ := m.GuaranteeFor(2)
	if math.Abs(g4.Rho/m.Rho()-4) > 1e-12 {
		t.Errorf("group ρ %g", g4.Rho)
	}
	sym := mat.NewSymDense(10, nil)
	m, _ = NewGaussianSigma(1, 1e-6, l2, 55)
	if err := m.ReleaseSym(noise.Seeded(1), sym); err != nil {
		t.Error(err)
	}
	m, _ = NewGaussianSigma(1, 1e-6, l2, 54)
	if err := m.ReleaseSym(noise.Seeded(1), sym); !errors.Is(err, ErrData) {
		t.Errorf("too many coordinates accepted: %v", err)
	}
}

// Validation: every argument checked; a norm mismatch is an error.
func TestValidation(t *testing.T) {
	nan := math.NaN()
	badSens := []Sensitivity{
		{Value: nan, Norm: L1, Relation: ReplaceOne, Unit: privacy.UnitEntry},
		{Value: 0, Norm: L1, Relation: ReplaceOne, Unit: privacy.UnitEntry},
		{Value: 1, Norm: "l7", Relation: ReplaceOne, Unit: privacy.UnitEntry},
		{Value: 1, Norm: L1, Relation: "", Unit: privacy.UnitEntry},
		{Value: 1, Norm: L1, Relation: ReplaceOne, Unit: ""},
	}
	for _, s := range badSens {
		if _, err := NewLaplace(1, s, 1); err == nil {
			t.Errorf("sensitivity %+v accepted", s)
		}
	}
	if _, err := NewLaplace(1, l2, 1); !errors.Is(err, ErrNorm) {
		t.Errorf("ℓ2 sensitivity to Laplace: %v", err)
	}
	if _, err := NewGaussian(1, 1e-5, l1, 1, CalibrateZCDP); !errors.Is(err, ErrNorm) {
		t.Errorf("ℓ1 sensitivity to Gaussian: %v", err)
	}
	if _, err := NewL2Laplace(1, l1, 3); !errors.Is(err, ErrNorm) {
		t.Errorf("ℓ1 sensitivity to ℓ2 Laplace: %v", err)
	}
	for _, eps := range []float64{nan, 0, -1, math.Inf(1), 1e-300} {
		if _, err := NewLaplace(eps, l1, 1); err == nil {
			t.Errorf("ε = %v accepted", eps)
		}
		if _, err := NewRandomizedResponse(eps); err == nil {
			t.Errorf("rr ε = %v accepted", eps)
		}
	}
	for _, delta := range []float64{0, 1, nan} {
		if _, err := NewGaussian(1, delta, l2, 1, CalibrateZCDP); err == nil {
			t.Errorf("δ = %v accepted", delta)
		}
	}
	lap, _ := NewLaplace(1, l1, 2)
	if err := lap.Release(noise.Seeded(1), []float64{1, nan}); !errors.Is(err, ErrData) {
		t.Errorf("NaN released: %v", err)
	}
	if err := lap.Release(noise.Seeded(1), []float64{1, 2, 3}); !errors.Is(err, ErrData) {
		t.Errorf("3 coordinates released by a 2-coordinate mechanism: %v", err)
	}
	if _, err := NewAsymmetricRR(0.6, 0.5); err == nil {
		t.Error("p1 + p2 ≥ 1 accepted")
	}
	if _, err := lap.GuaranteeFor(0); err == nil {
		t.Error("distance 0 accepted")
	}
}

var _ = []Mechanism{&Laplace{}, &Gaussian{}, &L2Laplace{}, &RandomizedResponse{}, &KaryRR{}, &ModifiedLaplace{}}

// discreteGaussianDelta is an upper bound on the exact δ(ε) of the
// discrete Gaussian (CKS 2020, Theorem 7), computed here a second way by
// direct summation of the pmf: the bound must never be below it, and at
// lattice-like scales (σ ≈ 2^20) it must be tight (its slack is O(1/σ) per
// tail).
func TestDiscreteGaussianDeltaBound(t *testing.T) {
	exactDelta := func(eps, sens, sigma float64) float64 {
		s2 := sigma * sigma
		// The normaliser: summed for small σ; for large σ, σ√(2π) is exact
		// to double precision (Poisson summation: the correction is
		// 2e^{−2π²σ²}).
		norm := sigma * math.Sqrt(2*math.Pi)
		if sigma < 100 {
			norm = 0
			for z := -int(40 * sigma); z <= int(40*sigma); z++ {
				norm += math.Exp(-float64(z*z) / (2 * s2))
			}
		}
		tail := func(a float64) float64 { // P[Y > a], summed from the far end for accuracy
			var p float64
			for z := int(math.Floor(a)) + int(13*sigma); z > int(math.Floor(a)); z-- {
				p += math.Exp(-float64(z*z) / (2 * s2))
			}
			return p / norm
		}
		return tail(eps*s2/sens-sens/2) - math.Exp(eps)*tail(eps*s2/sens+sens/2)
	}
	for _, c := range []struct {
		eps, sens, sigma float64
		tight            bool
	}{
		{1, 1, 4, false}, {0.5, 3, 20, false}, {2, 2, 10, false}, {0.1, 1, 50, false},
		{1, 281078, 1 << 20, true}, // ≈ the analytic Gaussian for (1, 1e-5) on a 2^20 lattice
	} {
		exact := exactDelta(c.eps, c.sens, c.sigma)
		bound := discreteGaussianDelta(c.eps, c.sens, c.sigma)
		if bound < exact {
			t.Errorf("%+v: bound %g below the exact %g", c, bound, exact)
		}
		if c.tight && bound > exact*1.001 {
			t.Errorf("%+v: bound %g not tight (exact %g)", c, bound, exact)
		}
	}
}

// Mechanisms never reach the integer samplers' scale limit
// (noise.MaxDiscreteLaplaceScale): the lattice keeps the integer scale at
// most 2^40 whatever the float scale, so a scale of 2^50 (ε = 2^-30 on a
// sensitivity of 2^20) gets all its noise. |noise|/b ≈ Exp(1) (mean 1,
// sd 1), n = 125000, tolerance 4.42·sd/√n: false failure ≈ 1e-5.
func TestLaplaceHugeScale(t *testing.T) {
	m, err := NewLaplace(0x1p-30, Sensitivity{Value: 0x1p20, Norm: L1, Relation: ReplaceOne, Unit: privacy.UnitEntry}, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := noise.EffectiveLaplaceScale(m.Scale())
	if b < 0x1p50 {
		t.Fatalf("scale %g below 2^50", b)
	}
	src := noise.Seeded(31)
	const n = 125000
	var s float64
	for range n {
		y, err := m.ReleaseScalar(src, 0)
		if err != nil {
			t.Fatal(err)
		}
		s += math.Abs(y) / b
	}
	if s /= n; math.Abs(s-1) > 4.42/math.Sqrt(n) {
		t.Errorf("E|noise|/b = %g at b = %g, want 1", s, b)
	}
}
