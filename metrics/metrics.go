// Package metrics scores predictions: rating error (RMSE, MAE), matrix
// recovery error (ARE), sign accuracy, and top-k recommendation quality
// (precision@k, recall@k, NDCG@k).
package metrics

import (
	"fmt"
	"math"
)

// RMSE is the root mean squared error of pred against truth.
func RMSE(pred, truth []float64) (float64, error) {
	if err := same(pred, truth); err != nil {
		return 0, err
	}
	var s float64
	for i := range pred {
		d := pred[i] - truth[i]
		s += d * d
	}
	return math.Sqrt(s / float64(len(pred))), nil
}

// MAE is the mean absolute error of pred against truth.
func MAE(pred, truth []float64) (float64, error) {
	if err := same(pred, truth); err != nil {
		return 0, err
	}
	var s float64
	for i := range pred {
		s += math.Abs(pred[i] - truth[i])
	}
	return s / float64(len(pred)), nil
}

// ARE is the relative squared error ‖M̂ − M‖²_F / ‖M‖²_F over all entries
// given (seed 000's metric; pass whole matrices flattened).
func ARE(est, truth []float64) (float64, error) {
	if err := same(est, truth); err != nil {
		return 0, err
	}
	var num, den float64
	for i := range est {
		d := est[i] - truth[i]
		num += d * d
		den += truth[i] * truth[i]
	}
	if den == 0 {
		return 0, fmt.Errorf("metrics: ARE of an all-zero truth is undefined")
	}
	return num / den, nil
}

// SignAccuracy is the fraction of entries where pred and truth have the
// same sign (a zero prediction counts as +1, matching sign(x) ≥ 0 → +1).
func SignAccuracy(pred, truth []float64) (float64, error) {
	if err := same(pred, truth); err != nil {
		return 0, err
	}
	ok := 0
	for i := range pred {
		if (pred[i] >= 0) == (truth[i] >= 0) {
			ok++
		}
	}
	return float64(ok) / float64(len(pred)), nil
}

func same(a, b []float64) error {
	if len(a) != len(b) {
		return fmt.Errorf("metrics: %d predictions for %d truths", len(a), len(b))
	}
	if len(a) == 0 {
		return fmt.Errorf("metrics: no values to score")
	}
	return nil
}

// TopK holds one user's top-k quality.
type TopK struct {
	Precision, Recall, NDCG float64
}

// RankingQuality scores one user's ranked list against her set of
// relevant items at cut-off k: precision@k = hits/k, recall@k =
// hits/|relevant|, and NDCG@k with binary gains (DCG = Σ 1/log2(rank+1) over hits, normalised by
// the ideal ordering). ok is false when the user has no relevant items
// (such users are skipped in averages, the usual convention).
func RankingQuality(ranked []int32, relevant map[int32]bool, k int) (q TopK, ok bool) {
	if len(relevant) == 0 || k <= 0 {
		return TopK{}, false
	}
	hits := 0
	var dcg float64
	for r, it := range ranked {
		if r >= k {
			break
		}
		if relevant[it] {
			hits++
			dcg += 1 / math.Log2(float64(r)+2)
		}
	}
	var idcg float64
	for r := range min(k, len(relevant)) {
		idcg += 1 / math.Log2(float64(r)+2)
	}
	return TopK{
		Precision: float64(hits) / float64(k),
		Recall:    float64(hits) / float64(len(relevant)),
		NDCG:      dcg / idcg,
	}, true
}
