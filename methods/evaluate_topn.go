package methods

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/privrec/privrec/metrics"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// heldOutBlock is how many held-out users EvaluateHeldOut scores at once.
const heldOutBlock = 32

// HeldOutOptions control a strong-generalisation evaluation.
type HeldOutOptions struct {
	// Ks are the cut-offs of Recall@k, NDCG@k and coverage (default 10,
	// 20, 50, 100).
	Ks []int
	// Popularity, when set, gives each item (by ID) its popularity — e.g.
	// its count in the training file, inside the trusted boundary — for the
	// mean popularity of recommended items; unset, the held-out users' own
	// histories are counted.
	Popularity map[string]float64
	// Workers bounds parallelism (0: GOMAXPROCS).
	Workers int
}

// HeldOutReport is the outcome of EvaluateHeldOut. Maps are keyed by k.
type HeldOutReport struct {
	Method string `json:"method"`
	// Users is the number of held-out users scored (those with ≥ 1
	// target); Skipped those with targets but no history.
	Users   int `json:"users"`
	Skipped int `json:"skipped,omitempty"`
	// Recall@k = hits/min(k, |targets|); NDCG@k with binary gains; MRR
	// the mean reciprocal rank of the first hit in the top max(k).
	Recall map[int]float64 `json:"recall"`
	NDCG   map[int]float64 `json:"ndcg"`
	MRR    float64         `json:"mrr"`
	// Coverage@k is the fraction of the model's items that appear in
	// some user's top k.
	Coverage map[int]float64 `json:"coverage"`
	// Popularity@k is the mean popularity of the recommended top-k items
	// (HeldOutOptions.Popularity).
	Popularity map[int]float64 `json:"popularity"`
	// Guarantee is the model's, in plain words.
	Guarantee string `json:"guarantee"`
}

// EvaluateHeldOut scores each held-out user of targets from her own
// history (the same user ID in history) through the public model, as her
// device would (model.FoldInUser), ranks every item not in her history and
// compares the list with her targets (metrics.HeldOut). Targets the model
// does not know count in |targets| (no list can find them).
func EvaluateHeldOut(ctx context.Context, m *model.Model, history, targets *ratings.Matrix, opt HeldOutOptions) (*HeldOutReport, error) {
	ks := opt.Ks
	if len(ks) == 0 {
		ks = []int{10, 20, 50, 100}
	}
	maxK := 0
	for _, k := range ks {
		if k <= 0 {
			return nil, fmt.Errorf("cut-off k = %d must be ≥ 1", k)
		}
		maxK = max(maxK, k)
	}
	nItems := m.NumItems()
	if nItems == 0 {
		return nil, fmt.Errorf("the model has no items")
	}
	pop := make([]float64, nItems)
	if opt.Popularity != nil {
		for id, p := range opt.Popularity {
			if i, ok := m.ItemIndex(id); ok {
				pop[i] = p
			}
		}
	} else {
		for i := range int32(history.NumItems()) {
			if mi, ok := m.ItemIndex(history.Items.Name(i)); ok {
				pop[mi] = float64(history.ItemCount(i))
			}
		}
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type acc struct {
		recall, ndcg, pop []float64
		rr                float64
		users, skipped    int
		seen              [][]bool // per k: items recommended
		err               error
	}
	parts := make([]acc, workers)
	bs := m.NewBatchScorer()
	var wg sync.WaitGroup
	nU := targets.NumUsers()
	for w := range workers {
		a := &parts[w]
		a.recall, a.ndcg, a.pop = make([]float64, len(ks)), make([]float64, len(ks)), make([]float64, len(ks))
		a.seen = make([][]bool, len(ks))
		for q := range ks {
			a.seen[q] = make([]bool, nItems)
		}
		wg.Go(func() {
			// Blocks of heldOutBlock users, scored together
			// (model.BatchScorer).
			bufs := make([][]float64, heldOutBlock)
			for j := range bufs {
				bufs[j] = make([]float64, nItems)
			}
			type user struct {
				st     *model.UserState
				skip   []int32
				tItems []int32
			}
			for b := w; b*heldOutBlock < nU; b += workers {
				if ctx.Err() != nil {
					return
				}
				var users []user
				for u := int32(b * heldOutBlock); int(u) < min((b+1)*heldOutBlock, nU); u++ {
					tItems, _ := targets.UserRow(u)
					if len(tItems) == 0 {
						continue
					}
					id := targets.Users.Name(u)
					hu, ok := history.Users.Lookup(id)
					if !ok || history.UserCount(hu) == 0 {
						a.skipped++
						continue
					}
					hist, vals := history.UserRatings(hu)
					st, err := m.FoldInUser(id, hist, vals)
					if err != nil {
						a.err = fmt.Errorf("user %q: %w", id, err)
						return
					}
					skip := m.Indices(hist)
					users = append(users, user{st, skip, tItems})
				}
				states := make([]*model.UserState, len(users))
				for j, us := range users {
					states[j] = us.st
				}
				bs.Scores(states, bufs[:len(users)])
				for j, us := range users {
					ranked := model.TopIndices(bufs[j], maxK, us.skip)
					tg := make(map[int32]bool, len(us.tItems))
					unknown := int32(-1)
					for _, it := range us.tItems {
						if i, ok := m.ItemIndex(targets.Items.Name(it)); ok {
							tg[i] = true
						} else {
							tg[unknown] = true
							unknown--
						}
					}
					rec, ndcg, rr, ok := metrics.HeldOut(ranked, tg, ks)
					if !ok {
						continue
					}
					a.users++
					a.rr += rr
					for q, k := range ks {
						a.recall[q] += rec[q]
						a.ndcg[q] += ndcg[q]
						top := ranked[:min(k, len(ranked))]
						var p float64
						for _, i := range top {
							a.seen[q][i] = true
							p += pop[i]
						}
						if len(top) > 0 {
							a.pop[q] += p / float64(len(top))
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &HeldOutReport{Method: m.Method, Recall: map[int]float64{}, NDCG: map[int]float64{},
		Coverage: map[int]float64{}, Popularity: map[int]float64{}, Guarantee: m.Guarantee.String()}
	var rr float64
	for _, a := range parts {
		if a.err != nil {
			return nil, a.err
		}
		rep.Users += a.users
		rep.Skipped += a.skipped
		rr += a.rr
	}
	if rep.Users == 0 {
		return nil, fmt.Errorf("no held-out user has both a history and targets (are the history and target files of the same users?)")
	}
	n := float64(rep.Users)
	rep.MRR = rr / n
	for q, k := range ks {
		var rs, ns, ps float64
		covered := make([]bool, nItems)
		for _, a := range parts {
			rs += a.recall[q]
			ns += a.ndcg[q]
			ps += a.pop[q]
			for i, s := range a.seen[q] {
				covered[i] = covered[i] || s
			}
		}
		rep.Recall[k], rep.NDCG[k], rep.Popularity[k] = rs/n, ns/n, ps/n
		rep.Coverage[k] = float64(countTrue(covered)) / float64(nItems)
	}
	return rep, nil
}

func countTrue(b []bool) int {
	return len(b) - len(slices.DeleteFunc(slices.Clone(b), func(x bool) bool { return x }))
}
