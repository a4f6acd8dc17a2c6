package methods

import (
	"math"
	"testing"

	"github.com/privrec/privrec/privacy/mechanism"
)

// The statistics of the raw releases, on hand-made draws (deterministic).
func TestAuditRawStatistics(t *testing.T) {
	g := func(clean, noised []float64, sigma, rho float64) mechanism.Draw {
		return mechanism.Draw{Mechanism: "gaussian", Clean: clean, Noised: noised, Scale: sigma, Sensitivity: 2, Rho: rho}
	}
	lap := func(clean, noised []float64, b, eps float64) mechanism.Draw {
		return mechanism.Draw{Mechanism: "laplace", Clean: clean, Noised: noised, Scale: b, Sensitivity: 1, Epsilon: eps}
	}
	// Side 0 releases (0, 5), side 1 (2, 5): only the first coordinate
	// differs, and the statistic is the Gaussian privacy loss
	// (y − 1)·2/σ² there.
	runs := [2][][]mechanism.Draw{
		{{g([]float64{0, 5}, []float64{0.3, 5.1}, 2, 0.5)}, {g([]float64{0, 5}, []float64{-1, 4}, 2, 0.5)}},
		{{g([]float64{2, 5}, []float64{2.2, 5}, 2, 0.5)}, {g([]float64{2, 5}, []float64{1, 6}, 2, 0.5)}},
	}
	st := newRawStatistic(runs, commonDraws(runs))
	if st == nil || st.active != 1 {
		t.Fatalf("raw statistic %+v, want one differing coordinate", st)
	}
	if got, want := st.of([]mechanism.Draw{g([]float64{0, 5}, []float64{3, 0}, 2, 0.5)}), (3.0-1)*2/4; math.Abs(got-want) > 1e-12 {
		t.Errorf("gaussian statistic %v, want %v", got, want)
	}
	// A run whose later releases vary: the common prefix is used.
	runs[1][1] = append(runs[1][1], lap([]float64{0}, []float64{1}, 1, 1))
	if n := commonDraws(runs); n != 1 {
		t.Errorf("common draws %d, want 1", n)
	}
	runs[1][0] = []mechanism.Draw{lap([]float64{0}, []float64{1}, 1, 1)}
	if n := commonDraws(runs); n != 0 {
		t.Errorf("common draws %d, want 0 (different mechanisms)", n)
	}

	// The release check: the first additive release, its sensitivity
	// measured on the pair (ℓ1 for Laplace, ℓ∞ per coordinate), Δ̂ the
	// larger of declared and realised.
	pair := [2][][]mechanism.Draw{
		{{{Mechanism: "rr"}, lap([]float64{0, 0}, []float64{0.5, 1}, 1, 1)}, {{Mechanism: "rr"}, lap([]float64{0, 0}, []float64{-1, 2}, 1, 1)}},
		{{{Mechanism: "rr"}, lap([]float64{1, 1}, []float64{0, 0}, 1, 1)}, {{Mechanism: "rr"}, lap([]float64{1, 1}, []float64{3, 3}, 1, 1)}},
	}
	rc := newReleaseCheck(pair, commonDraws(pair), false)
	if rc == nil || rc.index != 1 || rc.realised != 2 || rc.derived != 2 || rc.reach() != 2 {
		t.Fatalf("release check %+v: want release 2, realised ℓ1 2 > declared 1", rc)
	}
	if rc := newReleaseCheck(pair, commonDraws(pair), true); rc.realised != 1 || rc.derived != 1 {
		t.Errorf("per-coordinate release check %+v: want realised ℓ∞ 1", rc)
	}
	rc.design.Group = 3
	// The noise in units of Δ̂ = 2, shifted by K = 3 on side 1.
	d := []mechanism.Draw{{Mechanism: "rr"}, lap([]float64{3, 0}, []float64{3.5, 0}, 1, 1)}
	if got := rc.of(d, false); math.Abs(got-0.25) > 1e-12 {
		t.Errorf("statistic %v, want 0.25", got)
	}
	if got := rc.of(d, true); math.Abs(got-3.25) > 1e-12 {
		t.Errorf("shifted statistic %v, want 3.25", got)
	}
	// Coordinates that move between runs: unmeasured, no reach.
	pair[1][1][1].Clean = []float64{7, 1}
	if rc := newReleaseCheck(pair, commonDraws(pair), false); !math.IsNaN(rc.realised) || rc.reach() != 0 || rc.derived != 1 {
		t.Errorf("varying release check %+v: want an unmeasured sensitivity", rc)
	}
	if rc := newReleaseCheck([2][][]mechanism.Draw{{{{Mechanism: "rr"}}}, {{{Mechanism: "rr"}}}}, 1, false); rc != nil {
		t.Errorf("randomized response alone has no release check: %+v", rc)
	}
}

// Keyed releases (mechanism.Draw.Keys) are compared key by key: two runs
// covering the same items in another order are the same release, with
// the same clean values by key; the raw statistic and the release check's
// sensitivity follow the keys, not the positions (deterministic).
func TestAuditKeyedDraws(t *testing.T) {
	k := func(keys []string, clean, noised []float64) mechanism.Draw {
		return mechanism.Draw{Mechanism: "gaussian", Keys: keys, Clean: clean, Noised: noised, Scale: 1, Sensitivity: 1, Rho: 0.5}
	}
	// Side 0: entry "a" = 0, "b" = 0 in two orders; side 1: "a" = 3.
	runs := [2][][]mechanism.Draw{
		{{k([]string{"a", "b"}, []float64{0, 0}, []float64{0, 0})}, {k([]string{"b", "a"}, []float64{0, 0}, []float64{0, 0})}},
		{{k([]string{"a", "b"}, []float64{3, 0}, []float64{3, 0})}, {k([]string{"b", "a"}, []float64{0, 3}, []float64{0, 3})}},
	}
	if n := commonDraws(runs); n != 1 {
		t.Fatalf("common draws %d, want 1", n)
	}
	st := newRawStatistic(runs, 1)
	if st.active != 1 {
		t.Errorf("active keys %d, want 1 (a)", st.active)
	}
	// y = 3 on key "a" at position 1: (3 − 1.5)·3/1 = 4.5.
	if got := st.of([]mechanism.Draw{k([]string{"b", "a"}, []float64{0, 3}, []float64{7, 3})}); math.Abs(got-4.5) > 1e-12 {
		t.Errorf("keyed statistic %v, want 4.5", got)
	}
	rc := newReleaseCheck(runs, commonDraws(runs), false)
	if rc == nil || math.Abs(rc.realised-3) > 1e-12 {
		t.Fatalf("release check %+v, want realised 3 (key a moved by 3)", rc)
	}
	// Without keys the positions disagree between runs: unmeasurable.
	for s := range runs {
		for _, r := range runs[s] {
			r[0].Keys = nil
		}
	}
	if rc := newReleaseCheck(runs, commonDraws(runs), false); !math.IsNaN(rc.realised) {
		t.Errorf("unkeyed: realised %v, want NaN (the coordinates move between runs)", rc.realised)
	}
}
