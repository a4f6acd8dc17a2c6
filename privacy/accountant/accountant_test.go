package accountant

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/privrec/privrec/privacy"
)

// Golden values were computed independently with mpmath at 40 digits
// (bisection on the exact formulas: testdata/gold.py) and agree with
// docs/PRIVACY.md; other tests recompute values a second way where that is
// cheap (brute-force α scans, tightness of σ).
func TestGoldens(t *testing.T) {
	tests := []struct {
		name string
		got  func() (float64, error)
		want float64
		tol  float64 // relative
	}{
		{"analytic σ(ε=1, δ=1e-5)", func() (float64, error) { return AnalyticGaussianSigma(1, 1e-5, 1) }, 3.730631634815942, 1e-8},
		{"analytic σ(ε=0.5, δ=1e-6)", func() (float64, error) { return AnalyticGaussianSigma(0.5, 1e-6, 1) }, 8.057618480725044, 1e-8},
		{"classic σ(ε=1, δ=1e-5)", func() (float64, error) { return ClassicGaussianSigmaUnchecked(1, 1e-5, 1), nil }, 4.844805262605389, 1e-12},
		{"simple ρ=0.5", func() (float64, error) { return ZCDPToApproxSimple(0.5, 1e-5) }, 5.298525912188081, 1e-12},
		{"tight ρ=0.5", func() (float64, error) { return ZCDPToApprox(0.5, 1e-5) }, 4.728386984943314, 1e-9},
		{"simple ρ=0.1", func() (float64, error) { return ZCDPToApproxSimple(0.1, 1e-5) }, 2.245966026289347, 1e-12},
		{"tight ρ=0.1", func() (float64, error) { return ZCDPToApprox(0.1, 1e-5) }, 1.914238832003598, 1e-9},
		{"advanced 100×0.1, δ′=1e-6", func() (float64, error) {
			e, _, err := AdvancedComposition(0.1, 0, 100, 1e-6)
			return e, err
		}, 6.308230950513408, 1e-12},
		{"Rényi Gaussian σ=2, δ=1e-5", func() (float64, error) {
			c, err := GaussianRDP(1, 2)
			if err != nil {
				return 0, err
			}
			return RDPToApprox(c, 1e-5, nil)
		}, 2.165715659029443, 1e-4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.got()
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tt.want) > tt.tol*tt.want {
				t.Errorf("got %.15g, want %.15g", got, tt.want)
			}
		})
	}
}

// The tight conversion never reports a smaller ε than the truth: the
// returned ε must satisfy δ(ε) ≤ δ, recomputed by a brute-force scan over α.
func TestTightConversionIsSafe(t *testing.T) {
	for _, rho := range []float64{0.001, 0.03, 0.1, 0.5, 2, 10} {
		for _, delta := range []float64{1e-10, 1e-6, 1e-5, 1e-3} {
			eps, err := ZCDPToApprox(rho, delta)
			if err != nil {
				t.Fatal(err)
			}
			best := math.Inf(1)
			for a := 1.00001; a < 1e5; a *= 1.0001 {
				v := (a-1)*(a*rho-eps) + a*math.Log1p(-1/a) - math.Log(a-1)
				best = math.Min(best, v)
			}
			if d := math.Exp(best); d > delta*(1+1e-5) { // grid ratio 1.0001 ⇒ δ off by < 1e-5 relative
				t.Errorf("ρ=%g δ=%g: ε=%g but brute-force δ(ε)=%g", rho, delta, eps, d)
			}
			simple, _ := ZCDPToApproxSimple(rho, delta)
			if eps > simple {
				t.Errorf("ρ=%g δ=%g: tight %g > simple %g", rho, delta, eps, simple)
			}
		}
	}
}

func TestMonotonicity(t *testing.T) {
	prev := math.Inf(1)
	for _, d := range []float64{1e-12, 1e-9, 1e-6, 1e-3, 0.1} {
		e, err := ZCDPToApprox(0.3, d)
		if err != nil {
			t.Fatal(err)
		}
		if e >= prev {
			t.Errorf("ε not decreasing in δ: %g at δ=%g after %g", e, d, prev)
		}
		prev = e
	}
	prev = 0
	for _, r := range []float64{0.01, 0.1, 1, 5} {
		e, _ := ZCDPToApprox(r, 1e-6)
		if e <= prev {
			t.Errorf("ε not increasing in ρ at %g", r)
		}
		prev = e
	}
	r, _ := ZCDPCompose(0.1, 0.2, 0.3)
	if math.Abs(r-0.6) > 1e-15 || r < 0.6 {
		t.Errorf("ρ not additive: %g", r)
	}
	// Analytic ≤ classic for ε < 1, and σ decreasing in ε.
	a, _ := AnalyticGaussianSigma(0.5, 1e-5, 1)
	c, _ := ClassicGaussianSigma(0.5, 1e-5, 1)
	if a > c {
		t.Errorf("analytic %g > classic %g", a, c)
	}
}

// The analytic σ is the smallest: δ(σ) ≤ δ and δ(σ·(1−1e-7)) > δ.
func TestAnalyticSigmaIsTight(t *testing.T) {
	for _, c := range []struct{ eps, delta, sens float64 }{{1, 1e-5, 1}, {0.1, 1e-6, 2}, {5, 1e-8, 0.5}, {20, 1e-3, 1}} {
		s, err := AnalyticGaussianSigma(c.eps, c.delta, c.sens)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := AnalyticGaussianDelta(c.eps, c.sens, s)
		d2, _ := AnalyticGaussianDelta(c.eps, c.sens, s*(1-1e-7))
		if d > c.delta || d2 <= c.delta {
			t.Errorf("%+v: σ=%g δ(σ)=%g δ(0.9999999σ)=%g", c, s, d, d2)
		}
	}
}

func TestCalibration(t *testing.T) {
	rho, err := RhoForApprox(1, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ZCDPToApprox(rho, 1e-5); e > 1 {
		t.Errorf("RhoForApprox(1, 1e-5) = %g converts to ε = %g > 1", rho, e)
	}
	if e, _ := ZCDPToApprox(rho*1.001, 1e-5); e <= 1 {
		t.Errorf("RhoForApprox not maximal: 1.001ρ still gives ε = %g", e)
	}
	const T = 20
	s, err := GaussianSigmaForTarget(1, 1e-5, T, 2)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := GaussianRho(2, s)
	total := one * T
	if e, _ := ZCDPToApprox(total, 1e-5); e > 1 {
		t.Errorf("T=%d releases at σ=%g give ε=%g > 1", T, s, e)
	}
	if total < rho*(1-1e-9) {
		t.Errorf("σ wasteful: total ρ %g < budget %g", total, rho)
	}
	// A schedule spends exactly the budget and keeps its shape.
	w := []float64{1, 1.5, 2, 3, 5}
	sig, err := ScheduleSigmas(1, 1e-5, 2, w)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ScheduleRho(2, sig)
	if got > rho || got < rho*(1-1e-9) {
		t.Errorf("schedule ρ = %g, budget %g", got, rho)
	}
	for i := range w {
		if r := sig[i] / sig[0]; math.Abs(r-w[i]) > 1e-9*w[i] {
			t.Errorf("schedule shape %d: %g, want %g", i, r, w[i])
		}
	}
	// Equal weights reproduce GaussianSigmaForTarget.
	eq, _ := ScheduleSigmas(1, 1e-5, 2, make20(T))
	if math.Abs(eq[0]-s) > 1e-9*s {
		t.Errorf("equal schedule σ %g vs %g", eq[0], s)
	}
}

func make20(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

func TestValidation(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		err  error
	}{
		{"NaN ε", CheckEpsilon(nan)},
		{"Inf ε", CheckEpsilon(inf)},
		{"tiny ε", CheckEpsilon(0x1p-51)},
		{"negative ε", CheckEpsilon(-1)},
		{"δ = 0", CheckDelta(0)},
		{"δ = 1", CheckDelta(1)},
		{"NaN δ", CheckDelta(nan)},
		{"ρ = 0", CheckRho(0)},
		{"Inf sensitivity", CheckSensitivity(inf)},
		{"classic ε ≥ 1", func() error { _, err := ClassicGaussianSigma(1, 1e-5, 1); return err }()},
		{"simple NaN ρ", func() error { _, err := ZCDPToApproxSimple(nan, 1e-5); return err }()},
		{"schedule zero weight", func() error { _, err := ScheduleSigmas(1, 1e-5, 1, []float64{1, 0}); return err }()},
		{"T = 0", func() error { _, err := GaussianSigmaForTarget(1, 1e-5, 0, 1); return err }()},
		{"advanced k = 0", func() error { _, _, err := AdvancedComposition(1, 0, 0, 1e-5); return err }()},
		{"basic NaN", func() error { _, err := BasicComposition(1, nan); return err }()},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tt.name, tt.err)
		}
	}
	if err := CheckEpsilon(MinEpsilon); err != nil {
		t.Errorf("MinEpsilon rejected: %v", err)
	}
}

func TestBudgetRefusesOverspending(t *testing.T) {
	b, err := NewBudget(1, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Spend(0.6, 5e-7); err != nil {
		t.Fatal(err)
	}
	if err := b.Spend(0.5, 0); !errors.Is(err, ErrOverspent) {
		t.Fatalf("overspend accepted: %v", err)
	}
	if e, d := b.Spent(); e != 0.6 || d != 5e-7 {
		t.Errorf("refused spend was charged: %g %g", e, d)
	}
	if err := b.Spend(0.4, 5e-7); err != nil {
		t.Errorf("exact remainder refused: %v", err)
	}
	// Concurrent spends never exceed the budget.
	rb, _ := NewRhoBudget(1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 100 {
		wg.Go(func() {
			if rb.Spend(0.03) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != 33 || rb.Spent() > 1 {
		t.Errorf("%d concurrent spends of 0.03 accepted (want 33), spent %g", ok, rb.Spent())
	}
}

func TestRDPMatchesZCDP(t *testing.T) {
	// A Gaussian's Rényi curve is αρ; converting it is never better than
	// the tight zCDP conversion by more than the α-grid allows, and
	// composition adds curves.
	c1, _ := GaussianRDP(1, 3)
	c2, _ := GaussianRDP(1, 4)
	comp := ComposeRDP(c1, c2)
	r1, _ := GaussianRho(1, 3)
	r2, _ := GaussianRho(1, 4)
	if got, want := comp(7), 7*(r1+r2); math.Abs(got-want) > 1e-12 {
		t.Errorf("composed curve %g, want %g", got, want)
	}
	e1, _ := RDPToApprox(comp, 1e-6, nil)
	e2, _ := ZCDPToApprox(r1+r2, 1e-6)
	if math.Abs(e1-e2) > 1e-3*e2 {
		t.Errorf("RDP conversion %g vs zCDP tight %g", e1, e2)
	}
}

func TestCompose(t *testing.T) {
	pure := privacy.Guarantee{Epsilon: 0.1, Unit: privacy.UnitUser, Notion: privacy.Joint, Status: privacy.Proven}
	gauss := privacy.Guarantee{Epsilon: 1, Delta: 1e-6, Rho: 0.02, Unit: privacy.UnitUser, Notion: privacy.Central, Status: privacy.Proven}
	// 50 pure parts of 0.1: basic 5; zCDP ρ = 50·0.005 = 0.25 → tight ε at 1e-6.
	parts := make([]privacy.Guarantee, 50)
	for i := range parts {
		parts[i] = pure
	}
	g, err := Compose(1e-6, parts...)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ZCDPToApprox(0.25, 1e-6)
	if math.Abs(g.Epsilon-want) > 1e-12 || g.Delta != 1e-6 || math.Abs(g.Rho-0.25) > 1e-12 || g.Notion != privacy.Joint {
		t.Errorf("50 × pure 0.1: %+v, want ε %g", g, want)
	}
	// Without a δ the pure composition stays pure.
	g, _ = Compose(0, parts...)
	if math.Abs(g.Epsilon-5) > 1e-12 || g.Delta != 0 {
		t.Errorf("pure composition %+v", g)
	}
	// Mixed with a Gaussian: notion central, ρ added.
	g, _ = Compose(1e-5, pure, gauss)
	if g.Notion != privacy.Central || math.Abs(g.Rho-(0.005+0.02)) > 1e-12 {
		t.Errorf("mixed %+v", g)
	}
	// An unprotected part makes the whole unprotected; a claim is carried.
	claimed := pure
	claimed.Status, claimed.ClaimedEpsilon, claimed.Epsilon = privacy.AsClaimed, 0.05, 0.2
	g, _ = Compose(0, pure, claimed)
	if g.Status != privacy.AsClaimed || math.Abs(g.ClaimedEpsilon-0.15) > 1e-12 || math.Abs(g.Epsilon-0.3) > 1e-12 {
		t.Errorf("claimed %+v", g)
	}
	g, _ = Compose(0, pure, privacy.NoPrivacy(privacy.UnitUser, "raw"))
	if g.Private() || g.Status != privacy.None {
		t.Errorf("with an unprotected part: %+v", g)
	}
	if _, err := Compose(0, pure, privacy.Guarantee{Epsilon: 1, Unit: privacy.UnitEntry, Status: privacy.Proven}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unit mismatch: %v", err)
	}
}

func TestBasicApproxComposition(t *testing.T) {
	e, d, err := BasicApproxComposition([]float64{0.5, 0.25}, []float64{0, 0})
	if err != nil || e != 0.75 || d != 0 {
		t.Errorf("pure parts: ε %g δ %g err %v", e, d, err)
	}
	e, d, _ = BasicApproxComposition([]float64{0.5, 0.25}, []float64{1e-6, 2e-6})
	if e < 0.75 || d < 3e-6 || d > 3e-6*(1+1e-15) {
		t.Errorf("approx parts: ε %g δ %g", e, d)
	}
	if _, _, err := BasicApproxComposition([]float64{1}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("length mismatch: %v", err)
	}
}

func TestLaplaceRDP(t *testing.T) {
	c, err := LaplaceRDP(1)
	if err != nil {
		t.Fatal(err)
	}
	// Increasing in α, below ε, → ε as α → ∞, and ≈ ε²/2·α-ish near 1
	// (KL divergence of Laplace: ε + e^{−ε} − 1 at α → 1).
	prev := 0.0
	for _, a := range []float64{1.001, 1.5, 2, 5, 20, 1000} {
		v := c(a)
		if v < prev || v > 1 {
			t.Errorf("ε(%g) = %g", a, v)
		}
		prev = v
	}
	if kl := 1 + math.Exp(-1) - 1; math.Abs(c(1.000001)-kl) > 1e-4 {
		t.Errorf("ε(1+) = %g, want KL %g", c(1.000001), kl)
	}
	if math.Abs(c(1e6)-1) > 1e-4 {
		t.Errorf("ε(∞) = %g, want 1", c(1e6))
	}
	// Composing 100 Laplace(ε=0.1) through Rényi beats basic composition.
	c01, _ := LaplaceRDP(0.1)
	curves := make([]RDP, 100)
	for i := range curves {
		curves[i] = c01
	}
	e, err := RDPToApprox(ComposeRDP(curves...), 1e-6, nil)
	if err != nil || e >= 10 {
		t.Errorf("100 × 0.1 via Rényi: %g (%v)", e, err)
	}
}
