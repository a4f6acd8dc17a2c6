package mechanism

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
)

// The instrument hook (audits only): the copy keeps the guarantee, scales
// the noise it adds, and shows every release to the tap; an inactive
// instrument changes nothing. Deterministic (seeded noise).
func TestInstrument(t *testing.T) {
	l1 := Sensitivity{Value: 1, Norm: L1, Relation: ReplaceOne, Unit: privacy.UnitEntry}
	m, err := NewLaplace(1, l1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if m.Instrumented(nil) != m || m.Instrumented(&Instrument{NoiseFactor: 1}) != m {
		t.Error("an inactive instrument must return the mechanism itself")
	}
	var seen []Draw
	inst := &Instrument{NoiseFactor: 0.5, Tap: func(d Draw) error {
		d.Clean, d.Noised = slices.Clone(d.Clean), slices.Clone(d.Noised)
		seen = append(seen, d)
		return nil
	}}
	mi := m.Instrumented(inst)
	if mi.Guarantee() != m.Guarantee() || mi.Scale() != m.Scale() {
		t.Errorf("instrumented copy claims %+v, scale %v; want the original's", mi.Guarantee(), mi.Scale())
	}
	x := []float64{1, 2, 3}
	if err := mi.Release(noise.Seeded(3), x); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || !slices.Equal(seen[0].Clean, []float64{1, 2, 3}) || !slices.Equal(seen[0].Noised, x) ||
		seen[0].Scale != 0.5*m.Scale() || seen[0].Sensitivity != 1 || seen[0].Epsilon != m.Guarantee().Epsilon {
		t.Errorf("tap saw %+v (released %v)", seen, x)
	}
	stop := errors.New("stop")
	inst.Tap = func(Draw) error { return stop }
	if err := mi.Release(noise.Seeded(3), x); !errors.Is(err, stop) {
		t.Errorf("a tap's error must reach the caller, got %v", err)
	}

	// Randomized response: built for ε/factor, same guarantee; the tap's
	// error (Randomize cannot return one) is kept for Err.
	rr, err := NewRandomizedResponse(1)
	if err != nil {
		t.Fatal(err)
	}
	ri := rr.Instrumented(&Instrument{NoiseFactor: 0.5, Tap: func(Draw) error { return stop }})
	p1, _ := ri.FlipProbabilities()
	if want := 1 / (1 + math.E*math.E); math.Abs(p1-want) > 1e-12 || ri.Guarantee() != rr.Guarantee() {
		t.Errorf("instrumented rr flips with %v (want %v for ε = 2), claims %+v", p1, want, ri.Guarantee())
	}
	ri.Randomize(noise.Seeded(4), true)
	if !errors.Is(ri.inst.Err(), stop) {
		t.Errorf("rr tap error not kept: %v", ri.inst.Err())
	}
	if err := (&Instrument{NoiseFactor: -1}).Check(); err == nil {
		t.Error("a negative noise factor must be refused")
	}
}
