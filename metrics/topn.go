package metrics

import "math"

// HeldOut scores one held-out user's ranked list (best first, her history
// already left out) against her target items, in the strong-generalisation
// protocol of Liang, Krishnan, Hoffman and Jebara ("Variational
// Autoencoders for Collaborative Filtering", WWW 2018):
//
//   - Recall@k = hits in the top k / min(k, |targets|) (so a perfect list
//     scores 1 even when she has more targets than k);
//   - NDCG@k with binary gains, normalised by the ideal list of
//     min(k, |targets|) hits;
//   - the reciprocal rank of the first hit in the list (0 without one).
//
// ok is false when she has no targets (such users are left out of
// averages).
func HeldOut(ranked []int32, targets map[int32]bool, ks []int) (recall, ndcg []float64, rr float64, ok bool) {
	if len(targets) == 0 {
		return nil, nil, 0, false
	}
	recall, ndcg = make([]float64, len(ks)), make([]float64, len(ks))
	maxK := 0
	for _, k := range ks {
		maxK = max(maxK, k)
	}
	// hitsAt[r] and dcgAt[r]: hits and DCG in the first r positions.
	n := min(maxK, len(ranked))
	hitsAt := make([]int, n+1)
	dcgAt := make([]float64, n+1)
	for r := range n {
		hitsAt[r+1], dcgAt[r+1] = hitsAt[r], dcgAt[r]
		if targets[ranked[r]] {
			hitsAt[r+1]++
			dcgAt[r+1] += 1 / math.Log2(float64(r)+2)
			if rr == 0 {
				rr = 1 / float64(r+1)
			}
		}
	}
	for q, k := range ks {
		if k <= 0 {
			continue
		}
		c := min(k, n)
		m := min(k, len(targets))
		var idcg float64
		for r := range m {
			idcg += 1 / math.Log2(float64(r)+2)
		}
		recall[q] = float64(hitsAt[c]) / float64(m)
		ndcg[q] = dcgAt[c] / idcg
	}
	return recall, ndcg, rr, true
}
