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

	// The release check: a leading pure release with ε ≥ 0.5 alone; else
	// Gaussian releases up to a summed ρ of 1.
	rc := newReleaseCheck([]mechanism.Draw{lap([]float64{0}, []float64{0.5}, 1, 1), lap([]float64{0}, []float64{0}, 1, 1)})
	if len(rc.mech) != 1 || rc.eps != 1 || rc.rho != 0 || rc.stop != 1 || rc.maxLoss() != 1 {
		t.Errorf("pure release check %+v", rc)
	}
	// Laplace: (|z| − |z − Δ|)/b, z the noise, shifted by Δ on side 1.
	d := []mechanism.Draw{lap([]float64{3}, []float64{3.25}, 1, 1)}
	if got := rc.of(d, false); math.Abs(got-(0.25-0.75)) > 1e-12 {
		t.Errorf("laplace statistic %v, want −0.5", got)
	}
	if got := rc.of(d, true); math.Abs(got-(1.25-0.25)) > 1e-12 {
		t.Errorf("shifted laplace statistic %v, want 1", got)
	}
	draws := []mechanism.Draw{g([]float64{0}, []float64{1}, 2, 0.4), g([]float64{0}, []float64{1}, 2, 0.4), g([]float64{0}, []float64{1}, 2, 0.4)}
	rc = newReleaseCheck(draws)
	if len(rc.mech) != 2 || rc.eps != 0 || math.Abs(rc.rho-0.8) > 1e-12 || rc.stop != 2 || !math.IsInf(rc.maxLoss(), 1) {
		t.Errorf("gaussian release check %+v: want the first two releases, ρ = 0.8", rc)
	}
	if got, want := rc.of(draws, true), 2*(1+2-1)*2/4.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("shifted gaussian statistic %v, want %v", got, want)
	}
	if rc := newReleaseCheck([]mechanism.Draw{{Mechanism: "rr"}}); rc != nil {
		t.Errorf("randomized response alone has no release check: %+v", rc)
	}
}
