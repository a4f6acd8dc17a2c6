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
