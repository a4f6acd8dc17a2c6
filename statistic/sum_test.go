package statistic

import (
	"context"
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
