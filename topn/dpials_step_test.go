package topn

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/statistic"
)

// tri is T(a·wwᵀ) written out from its definition: the upper triangle row
// by row, the off-diagonal entries ×√2.
func tri(w []float64, a float64) []float64 {
	var out []float64
	for p := range w {
		for q := p; q < len(w); q++ {
			v := a * w[p] * w[q]
			if q != p {
				v *= math.Sqrt2
			}
			out = append(out, v)
		}
	}
	return out
}

// A user's part has the layout StatsLayout documents: per covered column
// [c·r·T(w̃w̃ᵀ), c·s·w̃] (no Gram when r = 0), then g·T(w̃w̃ᵀ), whether the
// global block is one key or spans several (cut at the end).
func TestUserContributionLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		name string
		sc   StepScales
		k    int
	}{{"gram", StepScales{Gram: 0.7, RHS: 1.3, Global: 0.4}, 4}, {"no gram, 3 global keys", StepScales{Gram: 0, RHS: 1.3, Global: 0.4}, 4}, {"no gram, k=1", StepScales{RHS: 2, Global: 0.5}, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 7
			cols, err := NewColumns(n, []int{5, 2, 0})
			if err != nil {
				t.Fatal(err)
			}
			f := []float64{0.5, 0, 2, 0, 0, 1.5, 0}
			items := []int32{0, 1, 2, 4}
			w := make([]float64, tc.k)
			for p := range w {
				w[p] = r.NormFloat64()
			}
			ClipRow(w, 2)
			lay := StatsLayout{K: tc.k, Items: 3, Gram: tc.sc.Gram > 0}
			got := make([]float64, lay.Len())
			UserContribution(got, lay, tc.sc, cols, f, items, w)
			norm := (1 - 1e-12) / math.Sqrt(0.5*0.5+2*2) // StepWeights keeps a hair inside Σc² ≤ 1
			want := make([]float64, lay.Len())
			for _, j := range []int{0, 2} {
				c := f[j] * norm
				blk := want[int(cols[j])*lay.PerItem():]
				if lay.Gram {
					copy(blk, tri(w, c*tc.sc.Gram))
					blk = blk[lay.Tri():]
				}
				for p, v := range w {
					blk[p] = c * tc.sc.RHS * v
				}
			}
			copy(want[lay.Global():], tri(w, tc.sc.Global))
			if d := diffNorm(got, want); d > 1e-12 {
				t.Fatalf("part differs from the layout by %g:\n got %v\nwant %v", d, got, want)
			}
		})
	}
}

// stepFixture is a small random dp-ials step: interactions, item factors
// and its statistic.
func stepFixture(t *testing.T, seed uint64, sc StepScales) (*Interactions, *StepStatistic) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 31))
	const users, items, k = 400, 11, 5
	x := smallInteractions(r, users, items, 0.35)
	h := make([]float64, items*k)
	for i := range h {
		h[i] = r.NormFloat64() * 0.5
	}
	cols, err := NewColumns(items, []int{4, 1, 0, 9, 6, 2, 7})
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float64, items)
	for j := range f {
		if cols[j] >= 0 {
			f[j] = math.Pow(1+r.Float64()*100, -0.25)
		}
	}
	st, err := NewStepStatistic(1, k, h, 0.2, 0.05, 1, 1.7, cols, f, sc)
	if err != nil {
		t.Fatal(err)
	}
	return x, st
}

// The in-process kernel (SumMatrix) returns exactly — bit for bit — the
// double-double sum of the contributions that any engine forms
// (statistic.Sum of Contribute, of a statistic rebuilt from its JSON plan
// as a Beam worker does), and Contribute is Factors expanded at their keys.
func TestStepStatisticEngines(t *testing.T) {
	for _, sc := range []StepScales{{Gram: 1, RHS: 1, Global: 0.3}, {Gram: 0, RHS: 1.2, Global: 0.5}} {
		x, st := stepFixture(t, 5, sc)
		row := func(u int) statistic.Row { return statistic.Row{Items: x.Row(u)} }
		kind, plan, err := statistic.Encode(st)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := statistic.Decode(kind, plan)
		if err != nil {
			t.Fatal(err)
		}
		want, err := statistic.Sum(context.Background(), x.NumUsers, row, dec)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []int{1, 3} {
			got, err := st.SumMatrix(context.Background(), x, w)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != st.Spec().Dim {
				t.Fatalf("%d coordinates, spec %d", len(got), st.Spec().Dim)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("gram %v, %d workers: coordinate %d is %v in process, %v summed from the contributions", sc.Gram > 0, w, i, got[i], want[i])
				}
			}
		}
		// Factors expanded at their keys, as a combiner keyed by item does.
		per := st.SlabDim()
		fac := statistic.NewDD(st.Keys() * per)
		slab := make([]float64, per)
		z, _ := statistic.Zero(kind)
		for u := range x.NumUsers {
			dec.(statistic.Factored).Factors(row(u), func(key int, f []float64) {
				if key < 0 || key >= st.Keys() {
					t.Fatalf("key %d of %d", key, st.Keys())
				}
				z.(statistic.Factored).Expand(f, slab)
				fac.AddAt(key*per, slab)
			})
		}
		got := fac.Result()
		for i, v := range got {
			if i < len(want) && v != want[i] || i >= len(want) && v != 0 {
				t.Fatalf("gram %v: factored coordinate %d is %v, contributions %v", sc.Gram > 0, i, v, want[i])
			}
		}
		var n2 float64
		for _, v := range want {
			n2 += v * v
		}
		if !(n2 > 0) {
			t.Fatal("the statistic is zero: the fixture tests nothing")
		}
	}
}

// A plan that does not hold together is refused when decoded.
func TestStepStatisticValidate(t *testing.T) {
	_, st := stepFixture(t, 6, StepScales{Gram: 1, RHS: 1, Global: 0.3})
	for _, tc := range []struct {
		name string
		mut  func(s *StepStatistic)
	}{
		{"step 0", func(s *StepStatistic) { s.Step = 0 }},
		{"short factors", func(s *StepStatistic) { s.H = s.H[1:] }},
		{"NaN factor", func(s *StepStatistic) { s.H[3] = math.NaN() }},
		{"negative weight", func(s *StepStatistic) { s.Weights[4] = -1 }},
		{"weight without column", func(s *StepStatistic) { s.Weights[3] = 1 }},
		{"column past covered", func(s *StepStatistic) { s.Columns[3] = 40 }},
		{"zero gamma", func(s *StepStatistic) { s.Gamma = 0 }},
		{"zero rhs scale", func(s *StepStatistic) { s.Scales.RHS = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &StepStatistic{Step: st.Step, Rank: st.Rank, H: append([]float64(nil), st.H...), Alpha0: st.Alpha0, Lambda: st.Lambda, Nu: st.Nu,
				Gamma: st.Gamma, Columns: append(Columns(nil), st.Columns...), Weights: append([]float64(nil), st.Weights...), Scales: st.Scales}
			tc.mut(c)
			kind, plan, err := statistic.Encode(c)
			if err != nil {
				if tc.name == "NaN factor" {
					return // JSON cannot carry NaN: refused at encoding
				}
				t.Fatal(err)
			}
			if _, err := statistic.Decode(kind, plan); err == nil {
				t.Error("decoded a bad plan")
			}
		})
	}
}
