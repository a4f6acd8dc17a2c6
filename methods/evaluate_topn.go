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
	ks, maxK, err := heldOutCutoffs(opt.Ks)
	if err != nil {
		return nil, err
	}
	if m.NumItems() == 0 {
		return nil, fmt.Errorf("the model has no items")
	}
	e := &heldOutEval{m: m, history: history, targets: targets, ks: ks, maxK: maxK,
		pop: heldOutPopularity(m, history, opt.Popularity), bs: m.NewBatchScorer()}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := make([]*heldOutAcc, workers)
	var wg sync.WaitGroup
	for w := range workers {
		parts[w] = e.newAcc()
		wg.Go(func() { e.run(ctx, parts[w], w, workers) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.report(parts)
}

// heldOutCutoffs are the cut-offs k (default 10, 20, 50, 100) and the
// largest.
func heldOutCutoffs(ks []int) ([]int, int, error) {
	if len(ks) == 0 {
		ks = []int{10, 20, 50, 100}
	}
	maxK := 0
	for _, k := range ks {
		if k <= 0 {
			return nil, 0, fmt.Errorf("cut-off k = %d must be ≥ 1", k)
		}
		maxK = max(maxK, k)
	}
	return ks, maxK, nil
}

// heldOutPopularity is each model item's popularity: from byID when set,
// else the held-out users' own histories counted.
func heldOutPopularity(m *model.Model, history *ratings.Matrix, byID map[string]float64) []float64 {
	pop := make([]float64, m.NumItems())
	if byID != nil {
		for id, p := range byID {
			if i, ok := m.ItemIndex(id); ok {
				pop[i] = p
			}
		}
		return pop
	}
	for i := range int32(history.NumItems()) {
		if mi, ok := m.ItemIndex(history.Items.Name(i)); ok {
			pop[mi] = float64(history.ItemCount(i))
		}
	}
	return pop
}

// heldOutEval is one held-out evaluation: the model, the users' histories
// and targets, the cut-offs and the items' popularity.
type heldOutEval struct {
	m                *model.Model
	history, targets *ratings.Matrix
	ks               []int
	maxK             int
	pop              []float64
	bs               *model.BatchScorer
}

// heldOutAcc is one worker's sums, per cut-off where a slice.
type heldOutAcc struct {
	recall, ndcg, pop []float64
	rr                float64
	users, skipped    int
	seen              [][]bool // per k: items recommended
	err               error
}

// heldOutUser is one held-out user folded in: her state, the items of her
// history (not ranked) and her targets.
type heldOutUser struct {
	st     *model.UserState
	skip   []int32
	tItems []int32
}

func (e *heldOutEval) newAcc() *heldOutAcc {
	nk, nItems := len(e.ks), e.m.NumItems()
	a := &heldOutAcc{recall: make([]float64, nk), ndcg: make([]float64, nk), pop: make([]float64, nk), seen: make([][]bool, nk)}
	for q := range a.seen {
		a.seen[q] = make([]bool, nItems)
	}
	return a
}

// run scores worker w's share of the held-out users into a: blocks of
// heldOutBlock users, scored together (model.BatchScorer).
func (e *heldOutEval) run(ctx context.Context, a *heldOutAcc, w, workers int) {
	bufs := make([][]float64, heldOutBlock)
	for j := range bufs {
		bufs[j] = make([]float64, e.m.NumItems())
	}
	nU := e.targets.NumUsers()
	for b := w; b*heldOutBlock < nU; b += workers {
		if ctx.Err() != nil {
			return
		}
		users := e.foldIn(a, int32(b*heldOutBlock), int32(min((b+1)*heldOutBlock, nU)))
		if a.err != nil {
			return
		}
		states := make([]*model.UserState, len(users))
		for j, us := range users {
			states[j] = us.st
		}
		e.bs.Scores(states, bufs[:len(users)])
		for j, us := range users {
			e.score(a, bufs[j], us)
		}
	}
}

// foldIn folds in the users lo … hi−1 of targets that have targets, each
// from her own history (as her device does); those without a history are
// counted as skipped.
func (e *heldOutEval) foldIn(a *heldOutAcc, lo, hi int32) []heldOutUser {
	var users []heldOutUser
	for u := lo; u < hi; u++ {
		tItems, _ := e.targets.UserRow(u)
		if len(tItems) == 0 {
			continue
		}
		id := e.targets.Users.Name(u)
		hu, ok := e.history.Users.Lookup(id)
		if !ok || e.history.UserCount(hu) == 0 {
			a.skipped++
			continue
		}
		hist, vals := e.history.UserRatings(hu)
		st, err := e.m.FoldInUser(id, hist, vals)
		if err != nil {
			a.err = fmt.Errorf("user %q: %w", id, err)
			return nil
		}
		users = append(users, heldOutUser{st, e.m.Indices(hist), tItems})
	}
	return users
}

// score ranks one user's unseen items by her scores and adds her metrics
// to a; targets the model does not know count as misses.
func (e *heldOutEval) score(a *heldOutAcc, scores []float64, us heldOutUser) {
	ranked := model.TopIndices(scores, e.maxK, us.skip)
	tg := make(map[int32]bool, len(us.tItems))
	unknown := int32(-1)
	for _, it := range us.tItems {
		if i, ok := e.m.ItemIndex(e.targets.Items.Name(it)); ok {
			tg[i] = true
		} else {
			tg[unknown] = true
			unknown--
		}
	}
	rec, ndcg, rr, ok := metrics.HeldOut(ranked, tg, e.ks)
	if !ok {
		return
	}
	a.users++
	a.rr += rr
	for q, k := range e.ks {
		a.recall[q] += rec[q]
		a.ndcg[q] += ndcg[q]
		top := ranked[:min(k, len(ranked))]
		var p float64
		for _, i := range top {
			a.seen[q][i] = true
			p += e.pop[i]
		}
		if len(top) > 0 {
			a.pop[q] += p / float64(len(top))
		}
	}
}

// report merges the workers' sums (in worker order) into the means.
func (e *heldOutEval) report(parts []*heldOutAcc) (*HeldOutReport, error) {
	m, nItems := e.m, e.m.NumItems()
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
	for q, k := range e.ks {
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
