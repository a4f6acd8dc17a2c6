package metrics

import (
	"math"
	"testing"
)

func TestPointMetrics(t *testing.T) {
	tests := []struct {
		name        string
		pred, truth []float64
		rmse, mae   float64
		are, acc    float64
	}{
		{"exact", []float64{1, -2, 3}, []float64{1, -2, 3}, 0, 0, 0, 1},
		{"offset", []float64{2, -1, 4}, []float64{1, -2, 3}, 1, 1, 3.0 / 14, 1},
		{"signs", []float64{-1, 1}, []float64{1, -1}, 2, 2, 4, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				name string
				f    func(a, b []float64) (float64, error)
				want float64
			}{{"rmse", RMSE, tc.rmse}, {"mae", MAE, tc.mae}, {"are", ARE, tc.are}, {"acc", SignAccuracy, tc.acc}} {
				got, err := c.f(tc.pred, tc.truth)
				if err != nil || math.Abs(got-c.want) > 1e-12 {
					t.Errorf("%s = %v, %v; want %v", c.name, got, err, c.want)
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	if _, err := RMSE([]float64{1}, []float64{1, 2}); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, err := MAE(nil, nil); err == nil {
		t.Error("empty input accepted")
	}
	if _, err := ARE([]float64{1}, []float64{0}); err == nil {
		t.Error("zero truth accepted")
	}
}

func TestRankingQuality(t *testing.T) {
	rel := map[int32]bool{1: true, 5: true, 9: true}
	tests := []struct {
		name   string
		ranked []int32
		k      int
		want   TopK
	}{
		{"perfect", []int32{1, 5, 9, 2}, 3, TopK{1, 1, 1}},
		{"none", []int32{2, 3, 4}, 3, TopK{0, 0, 0}},
		// one hit at rank 2 of 2: DCG = 1/log2(3); IDCG = 1 + 1/log2(3)
		{"second", []int32{2, 9}, 2, TopK{0.5, 1.0 / 3, (1 / math.Log2(3)) / (1 + 1/math.Log2(3))}},
	}
	for _, tc := range tests {
		got, ok := RankingQuality(tc.ranked, rel, tc.k)
		if !ok || math.Abs(got.Precision-tc.want.Precision) > 1e-12 || math.Abs(got.Recall-tc.want.Recall) > 1e-12 || math.Abs(got.NDCG-tc.want.NDCG) > 1e-12 {
			t.Errorf("%s: got %+v want %+v", tc.name, got, tc.want)
		}
	}
	if _, ok := RankingQuality([]int32{1}, nil, 3); ok {
		t.Error("user without relevant items was scored")
	}
}

func TestHeldOut(t *testing.T) {
	targets := map[int32]bool{3: true, 7: true, 9: true}
	cases := []struct {
		name      string
		ranked    []int32
		ks        []int
		recall    []float64
		ndcg0, rr float64
		ok        bool
		noTargets bool
	}{
		{"perfect", []int32{3, 7, 9, 1}, []int{2, 3}, []float64{1, 1}, 1, 1, true, false},
		{"second place", []int32{1, 3, 2, 4}, []int{1, 2}, []float64{0, 0.5}, 0, 0.5, true, false},
		{"none", []int32{1, 2}, []int{2}, []float64{0}, 0, 0, true, false},
		{"short list", []int32{9}, []int{20}, []float64{1.0 / 3}, 1 / (1 + 1/math.Log2(3) + 0.5), 1, true, false},
		{"no targets", []int32{1}, []int{1}, nil, 0, 0, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := targets
			if c.noTargets {
				tg = nil
			}
			rec, ndcg, rr, ok := HeldOut(c.ranked, tg, c.ks)
			if ok != c.ok {
				t.Fatalf("ok = %v", ok)
			}
			if !ok {
				return
			}
			for q := range c.ks {
				if math.Abs(rec[q]-c.recall[q]) > 1e-12 {
					t.Errorf("recall@%d = %g, want %g", c.ks[q], rec[q], c.recall[q])
				}
			}
			if math.Abs(ndcg[0]-c.ndcg0) > 1e-12 || math.Abs(rr-c.rr) > 1e-12 {
				t.Errorf("ndcg@%d = %g (want %g), rr = %g (want %g)", c.ks[0], ndcg[0], c.ndcg0, rr, c.rr)
			}
		})
	}
}
