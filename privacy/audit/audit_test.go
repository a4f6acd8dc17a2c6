package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// Tests run at confidence 1 − 1e-6: a correct mechanism is flagged with
// probability at most 1e-6 per audit (the Bonferroni-corrected
// Clopper–Pearson bound), which is each test's false-failure rate.
const testConfidence = 1 - 1e-6

// Tier 4: every mechanism at ε = 1 stays under its claim; the ones whose
// worst case is a simple event come close to it.
func TestMechanismsPass(t *testing.T) {
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			delta := 0.0
			if name == "gaussian" {
				delta = 1e-5
			}
			spec, err := For(name, 1, delta, Options{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), spec, 200000, testConfidence, noise.Seeded(21))
			if err != nil {
				t.Fatal(err)
			}
			if r.Violation || r.EpsilonLowerBound > 1 {
				t.Errorf("violation: %+v", r)
			}
			// With 2·10^5 samples the bound on a tight simple event is
			// ≈ 0.95 in expectation; 0.9 leaves > 8 sd of slack.
			if (name == "laplace" || name == "rr" || name == "krr" || name == "modlaplace") && r.EpsilonLowerBound < 0.9 {
				t.Errorf("bound %.3f too weak for a tight mechanism: %+v", r.EpsilonLowerBound, r)
			}
		})
	}
}

// Tier 4: a mechanism with 10 % too little noise is caught. At 2·10^5
// samples the bound is ≈ 1.07 against the claim 1 with an sd ≈ 0.006, so
// a miss (the false-failure rate of this test) has probability < 1e-20.
// The ℓ2 Laplace needs 10^6 samples (its default): on its best events
// (statistic ≥ 0.9…0.95, probabilities ≈ 0.06–0.2) the bound is ≈ 1.05
// with an sd ≈ 0.005, a miss probability < 1e-20 as well.
func TestUnderNoisedCaught(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
	}{{"laplace", 200000}, {"rr", 200000}, {"krr", 200000}, {"modlaplace", 200000}, {"l2laplace", DefaultSamples}} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := For(c.name, 1, 0, Options{NoiseFactor: 0.9})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), spec, c.n, testConfidence, noise.Seeded(22))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Violation {
				t.Errorf("under-noised %s not caught: %+v", c.name, r)
			}
		})
	}
}

// Tier 4 at the sample counts `privrec audit` states for the mechanisms
// whose audit needs more than simple tails: gaussian (ε = 1, δ = 1e-5,
// GaussianSamples = 6·10^7 per side, ≈ 15 s; skipped with -short) and
// l2laplace (ε = 1, dimension 2, 10^6). The correct mechanisms run at
// confidence 1 − 1e-6 (false failure ≤ 1e-6) and must also come near the
// claim (≥ 0.8; their expected bounds are ≈ 0.89 and ≈ 0.95 with sd
// ≈ 0.01, so that check fails with probability < 1e-15). The 0.9×
// under-noised ones run at the CLI's confidence 0.95: the l2laplace bound
// is ≈ 1.07 ± 0.005 (a miss < 1e-20); the gaussian bound is ≈ 1.04 and is
// missed (≤ 1) with probability ≈ 2e-4 (3 in 2·10^4 runs of the counting
// procedure on exact binomial counts) — this test's false-failure rate.
func TestStatedSampleCounts(t *testing.T) {
	for _, c := range []struct {
		name     string
		factor   float64
		conf     float64
		violates bool
	}{
		{"l2laplace", 1, testConfidence, false},
		{"l2laplace", 0.9, 0.95, true},
		{"gaussian", 1, testConfidence, false},
		{"gaussian", 0.9, 0.95, true},
	} {
		t.Run(fmt.Sprintf("%s×%g", c.name, c.factor), func(t *testing.T) {
			delta := 0.0
			if c.name == "gaussian" {
				if testtier.Quick() {
					t.Skip("6·10^7 samples per side: the long tier")
				}
				delta = 1e-5
			}
			spec, err := For(c.name, 1, delta, Options{NoiseFactor: c.factor})
			if err != nil {
				t.Fatal(err)
			}
			n := spec.Samples
			if n == 0 {
				n = DefaultSamples
			}
			r, err := Run(context.Background(), spec, n, c.conf, noise.Seeded(26))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s noise ×%g, %d samples: bound %.4f on %s (%.1f s)", c.name, c.factor, n, r.EpsilonLowerBound, r.Event, r.Seconds)
			if r.Violation != c.violates {
				t.Errorf("violation %v, want %v: %+v", r.Violation, c.violates, r)
			}
			if !c.violates && r.EpsilonLowerBound < 0.8 {
				t.Errorf("bound %.3f too weak for a correct mechanism: %+v", r.EpsilonLowerBound, r)
			}
		})
	}
}

// The gaussian events sit where the claimed mechanism's privacy loss is
// 0.80ε … ε: a Gaussian built for (ε, δ) has, on {L ≥ ε}, exactly
// P₁ − e^ε·P₀ = δ (the tight point of its privacy curve), which checks the
// thresholds against the analytic calibration.
func TestGaussianEventsAtTheClaim(t *testing.T) {
	const eps, delta = 1.0, 1e-5
	spec, err := For("gaussian", eps, delta, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Events) != 2*len(gaussianLossLevels) || spec.Samples != GaussianSamples {
		t.Fatalf("%d events, %d samples", len(spec.Events), spec.Samples)
	}
	m, err := mechanism.NewGaussian(eps, delta, mechanism.Sensitivity{Value: 1, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitEntry}, 1, mechanism.CalibrateAnalytic)
	if err != nil {
		t.Fatal(err)
	}
	sigma := m.Sigma()
	tail := func(x float64) float64 { return 0.5 * math.Erfc(x/(sigma*math.Sqrt2)) }
	top := spec.Events[len(spec.Events)-2] // {L ≥ ε}
	if top.Kind != AtLeast {
		t.Fatalf("last level is %v", top)
	}
	p1, p0 := tail(top.T-1), tail(top.T)
	if d := p1 - math.Exp(eps)*p0; math.Abs(d-delta) > 0.01*delta {
		t.Errorf("on %v: P₁ − e^ε P₀ = %.4g, want δ = %g", top, d, delta)
	}
	for i := 0; i < len(spec.Events); i += 2 {
		up, down := spec.Events[i], spec.Events[i+1]
		if up.Kind != AtLeast || down.Kind != AtMost || math.Abs(up.T+down.T-1) > 1e-9 {
			t.Errorf("events %v, %v are not mirror images about 1/2", up, down)
		}
	}
}

// The ℓ2 Laplace statistic is ‖x‖ − ‖x − e₁‖, accurate far from the origin.
func TestL2LaplaceStatistic(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		want float64
	}{
		{[]float64{0, 0}, -1},
		{[]float64{1, 0}, 1},
		{[]float64{0.5, 7}, 0},
		{[]float64{3, 4}, 5 - math.Sqrt(20)},
		{[]float64{1e9, 0}, 1},
		{[]float64{-1e9, 0, 0}, -1},
	} {
		if got := l2LaplaceStatistic(c.x); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("statistic(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

// naiveLaplace is the textbook float sampler x + b·(±Exp) — the one the
// precision attacks break (Mironov 2012).
func naiveLaplace(src *noise.Source, x, b float64) float64 {
	e := -math.Log(1 - src.Float64())
	if src.Uint64()&1 == 0 {
		e = -e
	}
	return x + b*e
}

// precisionEvent is {0 < y < 1/4 and y is not a multiple of 2^-53}. From
// input 1, every y < 1/2 is 1 + n computed exactly (Sterbenz) with n a
// float of ulp ≥ 2^-53, so the event is impossible; from input 0 it is the
// event that the noise itself lands in (0, 1/4) off the 2^-53 grid, which
// happens often.
func precisionEvent() Event {
	return Event{Kind: Custom, Name: "y ∈ (0, 1/4) off the 2^-53 grid", In: func(y float64) bool {
		return y > 0 && y < 0.25 && y*0x1p53 != math.Trunc(y*0x1p53)
	}}
}

// Tier 3 / precision attack: the naive float Laplace is distinguishable
// with certainty on the event above (infinite privacy loss, caught), while
// the lattice sampler makes the event impossible for both inputs. False
// failure: the naive mechanism passing would need the event to occur fewer
// than ~40 times in 2·10^5 draws where ~10^4 are expected (impossible in
// practice).
func TestPrecisionAttack(t *testing.T) {
	const b = 1.0 // scale for ε = 1, sensitivity 1
	naive := Spec{Mechanism: "naive-laplace", ClaimedEpsilon: 1, Events: []Event{precisionEvent()},
		Sample: func(src *noise.Source, side int) float64 { return naiveLaplace(src, float64(side), b) }}
	r, err := Run(context.Background(), naive, 200000, testConfidence, noise.Seeded(23))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Violation || r.EpsilonLowerBound < 5 {
		t.Errorf("naive float Laplace survived the precision attack: %+v", r)
	}
	ours := naive
	ours.Mechanism = "lattice-laplace"
	ours.Sample = func(src *noise.Source, side int) float64 { return noise.SnapLaplace(src, float64(side), b) }
	r, err = Run(context.Background(), ours, 200000, testConfidence, noise.Seeded(23))
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation {
		t.Errorf("lattice Laplace failed the precision attack: %+v", r)
	}
	// And the event has zero count for both inputs.
	s := noise.Seeded(24)
	ev := precisionEvent()
	for side := range 2 {
		for range 100000 {
			if y := noise.SnapLaplace(s, float64(side), b); ev.In(y) {
				t.Fatalf("lattice output %v from input %d hits the attack event", y, side)
			}
		}
	}
}

func TestClopperPearson(t *testing.T) {
	// Known values (checked against R's binom.test, one-sided 97.5 %):
	// k = 5, n = 10 → [0.187, 0.813].
	lo, hi := ClopperPearson(5, 10, 0.025)
	if math.Abs(lo-0.1870860) > 1e-6 || math.Abs(hi-0.8129140) > 1e-6 {
		t.Errorf("CP(5, 10) = [%g, %g]", lo, hi)
	}
	if lo, hi := ClopperPearson(0, 10, 0.05); lo != 0 || math.Abs(hi-(1-math.Pow(0.05, 0.1))) > 1e-9 {
		t.Errorf("CP(0, 10) = [%g, %g]", lo, hi)
	}
}

func TestRunValidates(t *testing.T) {
	spec, _ := For("rr", 1, 0, Options{})
	for _, c := range []struct {
		n    int
		conf float64
	}{{1, 0.95}, {1000, 1}, {1000, 0}, {1000, math.NaN()}} {
		if _, err := Run(context.Background(), spec, c.n, c.conf, noise.Seeded(1)); err == nil {
			t.Errorf("n=%d conf=%v accepted", c.n, c.conf)
		}
	}
	if _, err := For("nope", 1, 0, Options{}); err == nil {
		t.Error("unknown mechanism accepted")
	}
	if _, err := For("laplace", 1, 1e-5, Options{}); err == nil {
		t.Error("δ accepted for a pure mechanism")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, spec, 100000, 0.95, noise.Seeded(1)); err == nil {
		t.Error("cancelled context ignored")
	}
}

// Tier 4 for the bounded-time modified Laplace: same claim, same audit
// (2·10^4 samples: it costs microseconds per sample). False failure ≤ 1e-6.
func TestBoundedTimeModifiedLaplace(t *testing.T) {
	spec, err := For("modlaplace", 1, 0, Options{BoundedTime: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), spec, 20000, testConfidence, noise.Seeded(25))
	if err != nil {
		t.Fatal(err)
	}
	// With 2·10^4 samples the bound on the tight event is ≈ 0.8; 0.6
	// leaves > 5 sd of slack.
	if r.Violation || r.EpsilonLowerBound < 0.6 {
		t.Errorf("bounded-time modified Laplace: %+v", r)
	}
}

func TestPilotEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sample func(src *noise.Source, side int) float64
		want   int
	}{
		{"uniform", func(src *noise.Source, side int) float64 { return src.Float64() }, 14},
		{"all failed", func(*noise.Source, int) float64 { return math.NaN() }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := PilotEvents(tc.sample, 1000, noise.Seeded(1))
			if len(ev) != tc.want {
				t.Fatalf("%d events, want %d", len(ev), tc.want)
			}
			for k := 2; k < len(ev); k += 2 {
				if ev[k].T < ev[k-2].T {
					t.Errorf("thresholds not increasing: %v then %v", ev[k-2].T, ev[k].T)
				}
			}
		})
	}
}

// A point estimate on an event never seen on the other input is +Inf; the
// JSON report carries it as null (JSON has no infinities) and keeps every
// other field.
func TestResultJSON(t *testing.T) {
	for _, c := range []struct {
		est  float64
		want string
	}{{math.Inf(1), `"epsilon_estimate":null`}, {math.NaN(), `"epsilon_estimate":null`}, {0.5, `"epsilon_estimate":0.5`}} {
		b, err := json.Marshal(Result{Mechanism: "rr", ClaimedEpsilon: 1, EpsilonLowerBound: 0.25, EpsilonEstimate: c.est, Samples: 10})
		if err != nil {
			t.Fatalf("estimate %v: %v", c.est, err)
		}
		for _, w := range []string{c.want, `"mechanism":"rr"`, `"epsilon_lower_bound":0.25`, `"samples":10`, `"violation":false`} {
			if !strings.Contains(string(b), w) {
				t.Errorf("estimate %v: %s lacks %s", c.est, b, w)
			}
		}
	}
}

// Issue 23, defect 5: the audit samples the mechanism's own Release, so a
// Release that adds half the noise it was calibrated for (the instrument
// hook of privacy/mechanism, which acts inside Release while the
// mechanism keeps claiming ε) is caught. Before, the laplace and gaussian
// audits re-sampled noise.SnapLaplace/SnapGaussian at m.Scale()/m.Sigma()
// and passed such a mechanism; the "re-implementation" case below is that
// old sampler, shown blind to the same defect. False-failure rates: the
// caught cases have true losses 2ε (laplace, l2laplace) and, for the
// gaussian, ln(P₁/P₀) ≈ 1.38 on {L ≥ 0.3ε} with ≈ 4800 vs 1200 hits, ≈ 6
// sd above the claim even after the 1 − 10⁻⁶ Bonferroni bounds; a miss
// has probability < 10⁻⁹. The blind case passes unless the correct
// sampler is flagged (≤ 10⁻⁶).
func TestReleasePathAudited(t *testing.T) {
	half := &mechanism.Instrument{NoiseFactor: 0.5}
	for _, name := range []string{"laplace", "gaussian", "l2laplace"} {
		t.Run(name, func(t *testing.T) {
			delta := 0.0
			if name == "gaussian" {
				delta = 1e-5
			}
			spec, err := For(name, 1, delta, Options{Instrument: half})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), spec, 200000, testConfidence, noise.Seeded(23))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Violation {
				t.Errorf("a Release adding half its noise was not caught: %+v", r)
			}
		})
	}
	t.Run("re-implementation is blind", func(t *testing.T) {
		l1 := mechanism.Sensitivity{Value: 1, Norm: mechanism.L1, Relation: mechanism.ReplaceOne, Unit: privacy.UnitEntry}
		m, err := mechanism.NewLaplace(1, l1, 1)
		if err != nil {
			t.Fatal(err)
		}
		broken := m.Instrumented(half)
		spec, err := For("laplace", 1, 0, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The old audit: noise re-sampled at the broken mechanism's Scale().
		spec.Sample = func(src *noise.Source, side int) float64 {
			return noise.SnapLaplace(src, float64(side), broken.Scale())
		}
		r, err := Run(context.Background(), spec, 200000, testConfidence, noise.Seeded(23))
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation {
			t.Errorf("re-sampling at Scale() cannot see a broken Release, yet: %+v", r)
		}
	})
}

// MaxLowerBound is what Run reports for an event seen on every sample of
// one side and none of the other — the most any mechanism can show with n
// samples (so a claim above it cannot be contradicted); deterministic.
func TestMaxLowerBound(t *testing.T) {
	for _, n := range []int{100, 1200} {
		spec := Spec{Mechanism: "separating", ClaimedEpsilon: 100, Events: []Event{{Kind: AtLeast, T: 0.5}, {Kind: AtMost, T: 0.5}},
			Sample: func(_ *noise.Source, side int) float64 { return float64(side) }}
		r, err := Run(context.Background(), spec, n, 0.95, noise.Seeded(1))
		if err != nil {
			t.Fatal(err)
		}
		if most := MaxLowerBound(n, 0.95, len(spec.Events), 0); math.Abs(r.EpsilonLowerBound-most) > 1e-9 || r.Violation {
			t.Errorf("n = %d: bound %v, MaxLowerBound %v, violation %v", n, r.EpsilonLowerBound, most, r.Violation)
		}
	}
}
