package metrics

import (
	"math"
	"testing"
)

// TestHeldOutByHand checks HeldOut against values worked out by hand: the
// min(k, |targets|) denominator, NDCG's ideal list, targets no list can
// contain (unknown items, negative keys) and a non-positive cut-off.
func TestHeldOutByHand(t *testing.T) {
	l := func(r int) float64 { return 1 / math.Log2(float64(r)+1) } // gain at 1-based rank r
	five := map[int32]bool{10: true, 11: true, 12: true, 13: true, 14: true}
	for _, tc := range []struct {
		name         string
		ranked       []int32
		targets      map[int32]bool
		ks           []int
		recall, ndcg []float64
		rr           float64
	}{
		{"more targets than k", []int32{10, 1, 11, 2, 12}, five, []int{2, 5},
			[]float64{1.0 / 2, 3.0 / 5}, []float64{l(1) / (l(1) + l(2)), (l(1) + l(3) + l(5)) / (l(1) + l(2) + l(3) + l(4) + l(5))}, 1},
		{"hit at rank 3 only", []int32{1, 2, 10, 3}, map[int32]bool{10: true, 20: true}, []int{3, 4},
			[]float64{0.5, 0.5}, []float64{l(3) / (l(1) + l(2)), l(3) / (l(1) + l(2))}, 1.0 / 3},
		{"unknown targets count in |targets|", []int32{10, 1}, map[int32]bool{10: true, -1: true, -2: true}, []int{2},
			[]float64{0.5}, []float64{l(1) / (l(1) + l(2))}, 1},
		{"k = 0 scores 0", []int32{10}, map[int32]bool{10: true}, []int{0, 1}, []float64{0, 1}, []float64{0, 1}, 1},
		{"empty list", nil, map[int32]bool{10: true}, []int{5}, []float64{0}, []float64{0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, ndcg, rr, ok := HeldOut(tc.ranked, tc.targets, tc.ks)
			if !ok {
				t.Fatal("not scored")
			}
			for q, k := range tc.ks {
				if math.Abs(rec[q]-tc.recall[q]) > 1e-12 || math.Abs(ndcg[q]-tc.ndcg[q]) > 1e-12 {
					t.Errorf("@%d: recall %g ndcg %g, want %g and %g", k, rec[q], ndcg[q], tc.recall[q], tc.ndcg[q])
				}
			}
			if math.Abs(rr-tc.rr) > 1e-12 {
				t.Errorf("rr = %g, want %g", rr, tc.rr)
			}
		})
	}
}
