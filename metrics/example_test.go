package metrics_test

import (
	"fmt"

	"github.com/privrec/privrec/metrics"
)

func ExampleRMSE() {
	pred := []float64{3.5, 4, 2}
	truth := []float64{4, 4, 1}
	rmse, _ := metrics.RMSE(pred, truth)
	mae, _ := metrics.MAE(pred, truth)
	fmt.Printf("RMSE %.3f, MAE %.3f\n", rmse, mae)
	// Output: RMSE 0.645, MAE 0.500
}

func ExampleRankingQuality() {
	// The user liked items 3 and 7; the model ranked 7 first and 3 fourth.
	ranked := []int32{7, 1, 2, 3}
	q, _ := metrics.RankingQuality(ranked, map[int32]bool{3: true, 7: true}, 3)
	fmt.Printf("precision@3 %.3f, recall@3 %.3f, NDCG@3 %.3f\n", q.Precision, q.Recall, q.NDCG)
	// Output: precision@3 0.333, recall@3 0.500, NDCG@3 0.613
}
