package statistic

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// seq is a test contribution: user u adds vals[u] to coordinate 0.
type seq struct{ vals []float64 }

func (s seq) Kind() string { return "test-seq" }
func (s seq) Spec() Spec   { return Spec{Name: "a test sum", Dim: 1} }
func (s seq) Contribute(r Row, add func(int, float64)) {
	add(0, s.vals[r.Items[0]])
}

// Sum is compensated: 10¹⁶, a thousand ones and −10¹⁶ sum to exactly
// 1 000 (a plain float64 sum gives 0), in any order of the large terms.
func TestSumCompensated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first int
	}{{"large first", 0}, {"large in the middle", 500}} {
		t.Run(tc.name, func(t *testing.T) {
			vals := make([]float64, 0, 1002)
			for k := range 1000 {
				if k == tc.first {
					vals = append(vals, 1e16)
				}
				vals = append(vals, 1)
			}
			vals = append(vals, -1e16)
			v, err := Sum(context.Background(), len(vals), func(u int) Row { return Row{Items: []int32{int32(u)}} }, seq{vals})
			if err != nil {
				t.Fatal(err)
			}
			if v[0] != 1000 {
				t.Errorf("sum = %v, want 1000", v[0])
			}
		})
	}
}

// Per-worker DD sums merged by Merged equal one DD over every value, bit
// for bit, however the values are split among the parts (some empty) and
// added with Add or AddAt (10¹⁶ and −10¹⁶ among values of 10⁻¹⁰ … 10¹⁰,
// so that the rounding errors are large). Deterministic seeds.
func TestMergedIndependentOfSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 8
	vals := make([][n]float64, 2000)
	for k := range vals {
		for i := range n {
			vals[k][i] = r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10))
		}
	}
	vals[10][0], vals[1500][0] = 1e16, -1e16
	one := NewDD(n)
	for k := range vals {
		one.AddAt(0, vals[k][:])
	}
	want := one.Result()
	for trial := range 10 {
		parts := make([]DD, 1+r.IntN(5))
		for k := range vals {
			p := &parts[r.IntN(len(parts))]
			if p.Hi == nil {
				*p = NewDD(n)
			}
			for i, x := range vals[k] {
				p.Add(i, x)
			}
		}
		got := Merged(parts, n)
		for i := range n {
			if got[i] != want[i] {
				t.Fatalf("trial %d (%d parts), coordinate %d: %v, one sum gives %v", trial, len(parts), i, got[i], want[i])
			}
		}
	}
	if got := Merged(make([]DD, 3), n); len(got) != n || got[0] != 0 {
		t.Errorf("empty parts: %v", got)
	}
}
