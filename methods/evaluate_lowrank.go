package methods

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/privrec/privrec/metrics"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

func init() {
	RegisterEvaluator(model.KindLowRank, func(ctx context.Context, path string, test *ratings.Matrix, opt EvalOptions) (*Report, error) {
		m, err := model.Load(path)
		if err != nil {
			return nil, err
		}
		return EvaluateModel(ctx, m, test, opt)
	})
}

// EvaluateFile scores the model saved at path, whatever its kind, on
// held-out ratings (in external IDs; ratings of users or items the model
// does not know are counted in Report.Dropped).
func EvaluateFile(ctx context.Context, path string, test *ratings.Matrix, opt EvalOptions) (*Report, error) {
	kind, err := model.PeekKind(path)
	if err != nil {
		return nil, err
	}
	e, err := EvaluatorFor(kind)
	if err != nil {
		return nil, err
	}
	return e(ctx, path, test, opt)
}

func ptr(x float64) *float64 { return &x }

// EvaluateModel scores a low-rank model on held-out ratings. Rating models
// get RMSE and MAE on the original scale; sign models (one-bit) get sign
// accuracy against the test ratings binarised with the model's recorded
// threshold. With opt.Truth, ARE over every entry of the truth. With
// opt.K > 0, precision@k, recall@k and NDCG@k of the model's top-k
// recommendations (training items excluded) against each test user's
// relevant items (test rating ≥ opt.Relevant, default the held-out ratings' mean;
// for sign models, test rating above the threshold).
func EvaluateModel(ctx context.Context, m *model.Model, test *ratings.Matrix, opt EvalOptions) (*Report, error) {
	rep := &Report{Method: m.Method, Guarantee: m.Guarantee.String()}
	if m.Users == nil && m.Dense == nil {
		if opt.States == nil {
			return nil, fmt.Errorf("the %s model holds no users (its per-user state is kept apart): pass the users' states (--user-state DIR)", m.Method)
		}
		var err error
		if m, err = m.Join(opt.States); err != nil {
			return nil, err
		}
	}
	signs := m.Output == model.Signs
	// Map test indices to model indices once.
	uMap := make([]int32, test.NumUsers())
	for u := range uMap {
		uMap[u] = -1
		if mu, ok := m.UserIndex(test.Users.Name(int32(u))); ok {
			uMap[u] = mu
		}
	}
	iMap := make([]int32, test.NumItems())
	for i := range iMap {
		iMap[i] = -1
		if mi, ok := m.ItemIndex(test.Items.Name(int32(i))); ok {
			iMap[i] = mi
		}
	}
	label := func(v float64) float64 {
		if v > m.Transform.Threshold {
			return 1
		}
		return -1
	}
	pred := make([]float64, 0, test.Len())
	truth := make([]float64, 0, test.Len())
	var itemSE []float64
	var itemN []int
	if opt.WorstItems > 0 && !signs {
		itemSE, itemN = make([]float64, len(m.Items)), make([]int, len(m.Items))
	}
	test.All(func(e ratings.Entry) bool {
		mu, mi := uMap[e.User], iMap[e.Item]
		if mu < 0 || mi < 0 {
			rep.Dropped++
			return true
		}
		if signs {
			pred = append(pred, m.Score(mu, mi))
			truth = append(truth, label(float64(e.Value)))
		} else {
			p := m.Predict(mu, mi)
			pred = append(pred, p)
			truth = append(truth, float64(e.Value))
			if itemSE != nil {
				d := p - float64(e.Value)
				itemSE[mi] += d * d
				itemN[mi]++
			}
		}
		return true
	})
	if itemSE != nil {
		rep.Items = worstItems(m, itemSE, itemN, opt)
	}
	rep.N = len(pred)
	if rep.N == 0 && opt.Truth == nil {
		return nil, fmt.Errorf("no held-out rating is of a user and item the model knows (%d dropped)", rep.Dropped)
	}
	if rep.N > 0 {
		if signs {
			acc, _ := metrics.SignAccuracy(pred, truth)
			rep.Accuracy = ptr(acc)
		} else {
			r, _ := metrics.RMSE(pred, truth)
			a, _ := metrics.MAE(pred, truth)
			rep.RMSE, rep.MAE = ptr(r), ptr(a)
		}
	}
	if opt.Truth != nil {
		var est, tru []float64
		var missing int
		opt.Truth.All(func(e ratings.Entry) bool {
			mu, ok1 := m.UserIndex(opt.Truth.Users.Name(e.User))
			mi, ok2 := m.ItemIndex(opt.Truth.Items.Name(e.Item))
			if !ok1 || !ok2 {
				missing++
				return true
			}
			if signs {
				est = append(est, m.Score(mu, mi))
			} else {
				est = append(est, m.Predict(mu, mi))
			}
			tru = append(tru, float64(e.Value))
			return true
		})
		if missing > 0 {
			return nil, fmt.Errorf("truth has %d entries of users or items the model does not know; ARE needs the whole matrix", missing)
		}
		are, err := metrics.ARE(est, tru)
		if err != nil {
			return nil, err
		}
		rep.ARE = ptr(are)
	}
	if opt.K > 0 && rep.N > 0 {
		if err := topK(ctx, m, test, uMap, iMap, opt, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// topK averages ranking quality over test users with at least one relevant
// item, spreading users over all cores.
func topK(ctx context.Context, m *model.Model, test *ratings.Matrix, uMap, iMap []int32, opt EvalOptions, rep *Report) error {
	thr := opt.Relevant
	strict := false
	if m.Output == model.Signs {
		thr, strict = m.Transform.Threshold, true
	} else if thr == 0 || math.IsNaN(thr) {
		thr = test.Mean() // the held-out data's own mean: evaluation, not a release
	}
	workers := runtime.GOMAXPROCS(0)
	type acc struct {
		p, r, n float64
		users   int
	}
	parts := make([]acc, workers)
	var wg sync.WaitGroup
	nU := test.NumUsers()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &parts[w]
			for u := w; u < nU; u += workers {
				if u%1024 == 0 && ctx.Err() != nil {
					return
				}
				mu := uMap[u]
				if mu < 0 {
					continue
				}
				items, vals := test.UserRow(int32(u))
				rel := map[int32]bool{}
				for k, it := range items {
					v := float64(vals[k])
					if mi := iMap[it]; mi >= 0 && (v > thr || (!strict && v == thr)) {
						rel[mi] = true
					}
				}
				recs := m.Recommend(mu, opt.K, nil)
				ranked := make([]int32, len(recs))
				for j, r := range recs {
					ranked[j], _ = m.ItemIndex(r.Item)
				}
				if q, ok := metrics.RankingQuality(ranked, rel, opt.K); ok {
					a.p += q.Precision
					a.r += q.Recall
					a.n += q.NDCG
					a.users++
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	var tot acc
	for _, a := range parts {
		tot.p += a.p
		tot.r += a.r
		tot.n += a.n
		tot.users += a.users
	}
	rep.K = opt.K
	if tot.users > 0 {
		n := float64(tot.users)
		rep.Precision, rep.Recall, rep.NDCG = ptr(tot.p/n), ptr(tot.r/n), ptr(tot.n/n)
	}
	return nil
}

// worstItems lists the opt.WorstItems items with the highest RMSE among
// those with at least opt.MinItemRatings held-out ratings, worst first
// (ties by item ID), titled from the model or opt.Titles.
func worstItems(m *model.Model, se []float64, n []int, opt EvalOptions) []ItemScore {
	minN := max(opt.MinItemRatings, 1)
	var out []ItemScore
	for i, c := range n {
		if c < minN {
			continue
		}
		s := ItemScore{Item: m.Items[i], N: c, RMSE: math.Sqrt(se[i] / float64(c))}
		if m.Titles != nil {
			s.Title = m.Titles[i]
		}
		if s.Title == "" {
			s.Title = opt.Titles[s.Item]
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ItemScore) int {
		if c := cmp.Compare(b.RMSE, a.RMSE); c != 0 {
			return c
		}
		return cmp.Compare(a.Item, b.Item)
	})
	return out[:min(len(out), opt.WorstItems)]
}
