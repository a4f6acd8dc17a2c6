package audit

import (
	"context"
	"math"
	"testing"

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
func TestUnderNoisedCaught(t *testing.T) {
	for _, name := range []string{"laplace", "rr", "krr", "modlaplace"} {
		t.Run(name, func(t *testing.T) {
			spec, err := For(name, 1, 0, Options{NoiseFactor: 0.9})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), spec, 200000, testConfidence, noise.Seeded(22))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Violation {
				t.Errorf("under-noised %s not caught: %+v", name, r)
			}
		})
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
