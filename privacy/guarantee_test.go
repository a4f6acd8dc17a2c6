package privacy

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestGuaranteeString(t *testing.T) {
	tests := []struct {
		g    Guarantee
		want []string
	}{
		{Guarantee{Epsilon: 1, Unit: UnitEntry, Notion: Central, Status: Proven}, []string{"ε = 1", "any single rating", "central", "status proven"}},
		{Guarantee{Epsilon: 2, Delta: 1e-6, Rho: 0.1, Unit: UnitUser, Notion: Joint, Status: Proven}, []string{"δ = 1e-06", "ρ = 0.1", "all the ratings of any one user", "joint"}},
		{Guarantee{Epsilon: 3.9, ClaimedEpsilon: 1, Unit: UnitEntry, Notion: Local, Status: Proven, Note: "why"}, []string{"claims ε = 1", "local", "why"}},
		{NoPrivacy(UnitEntry, "raw data"), []string{"No differential-privacy guarantee", "raw data"}},
		{Guarantee{Epsilon: 1, Unit: UnitEntry, Notion: Central, Status: Proven, Reproducible: true}, []string{"WARNING", "seeded"}},
	}
	for _, tt := range tests {
		s := tt.g.String()
		for _, w := range tt.want {
			if !strings.Contains(s, w) {
				t.Errorf("%q lacks %q", s, w)
			}
		}
	}
}

func TestGuaranteeJSON(t *testing.T) {
	for _, g := range []Guarantee{
		{Epsilon: 1.5, Delta: 1e-6, Rho: 0.2, Unit: UnitUser, Notion: Joint, Status: AsClaimed, ClaimedEpsilon: 0.5, Note: "n", Reproducible: true},
		NoPrivacy(UnitEntry, "none"),
	} {
		b, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"epsilon", "delta", "unit", "notion", "status"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s lacks %q", b, k)
			}
		}
		var back Guarantee
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != g {
			t.Errorf("round trip %+v → %s → %+v", g, b, back)
		}
	}
	if b, _ := json.Marshal(NoPrivacy(UnitUser, "")); !strings.Contains(string(b), `"epsilon":null`) {
		t.Errorf("infinite ε not null: %s", b)
	}
}

// FuzzGuaranteeJSON: the decoder never panics, and whatever it accepts
// re-encodes and decodes to the same value.
func FuzzGuaranteeJSON(f *testing.F) {
	f.Add([]byte(`{"epsilon":1,"delta":0,"unit":"entry","notion":"central","status":"proven"}`))
	f.Add([]byte(`{"epsilon":null,"status":"none"}`))
	f.Add([]byte(`{"epsilon":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var g Guarantee
		if err := json.Unmarshal(b, &g); err != nil {
			return
		}
		out, err := json.Marshal(g)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", g, err)
		}
		var back Guarantee
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("decode own output %s: %v", out, err)
		}
		same := back == g || (math.IsNaN(g.Epsilon) && math.IsInf(back.Epsilon, 1))
		if !same {
			t.Errorf("%+v → %s → %+v", g, out, back)
		}
	})
}

func TestGuaranteeValidate(t *testing.T) {
	ok := Guarantee{Epsilon: 1, Delta: 1e-6, Rho: 0.1, Unit: UnitUser, Notion: Joint, Status: Proven}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid guarantee rejected: %v", err)
	}
	if err := NoPrivacy(UnitEntry, "").Validate(); err != nil {
		t.Errorf("NoPrivacy rejected: %v", err)
	}
	bad := []func(g *Guarantee){
		func(g *Guarantee) { g.Unit = "row" },
		func(g *Guarantee) { g.Notion = "" },
		func(g *Guarantee) { g.Status = "maybe" },
		func(g *Guarantee) { g.Epsilon = math.NaN() },
		func(g *Guarantee) { g.Epsilon = -1 },
		func(g *Guarantee) { g.Epsilon = math.Inf(1) },
		func(g *Guarantee) { g.Delta = 1 },
		func(g *Guarantee) { g.Rho = math.NaN() },
		func(g *Guarantee) { g.ClaimedEpsilon = math.Inf(1) },
	}
	for i, f := range bad {
		g := ok
		f(&g)
		if g.Validate() == nil {
			t.Errorf("case %d: %+v accepted", i, g)
		}
	}
}
