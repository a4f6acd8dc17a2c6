package methods_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/metrics"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// triples builds a matrix from (user, item, rating) triples.
func triples(t *testing.T, rows ...[3]any) *ratings.Matrix {
	t.Helper()
	b := ratings.NewBuilder(ratings.DupError)
	for k, r := range rows {
		if err := b.Add(r[0].(string), r[1].(string), float64(r[2].(int)), int64(k+1)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// popularityModel is a rank-0 public model whose score of an item is its
// bias: every user's list is the items in bias order, minus her history.
func popularityModel() *model.Model {
	return &model.Model{Method: "hand", Output: model.Scores, Items: []string{"a", "b", "c", "d", "e", "f"},
		ItemBias: []float64{6, 5, 4, 3, 2, 1}}
}

// TestEvaluateHeldOutByHand: user 1 (history a) gets b c d e f and wants
// c and an item the model does not know; user 2 (history b, c) gets a d e
// f and wants a; user 3 has targets but no history (skipped); user 4 a
// history but no targets (not scored).
func TestEvaluateHeldOutByHand(t *testing.T) {
	hist := triples(t, [3]any{"1", "a", 5}, [3]any{"2", "b", 4}, [3]any{"2", "c", 5}, [3]any{"4", "d", 5}, [3]any{"4", "e", 4})
	tgt := triples(t, [3]any{"1", "c", 5}, [3]any{"1", "zz", 5}, [3]any{"2", "a", 4}, [3]any{"3", "a", 5})
	l := func(r int) float64 { return 1 / math.Log2(float64(r)+1) }
	want := struct {
		recall, ndcg, cover, pop, popHist map[int]float64
		mrr                               float64
	}{
		recall:  map[int]float64{1: 0.5, 2: 0.75, 3: 0.75},
		ndcg:    map[int]float64{1: 0.5, 2: (l(2)/(l(1)+l(2)) + 1) / 2, 3: (l(2)/(l(1)+l(2)) + 1) / 2},
		cover:   map[int]float64{1: 2.0 / 6, 2: 4.0 / 6, 3: 5.0 / 6},
		pop:     map[int]float64{1: 15, 2: 25, 3: (30 + (10+40+50)/3.0) / 2},
		popHist: map[int]float64{1: 1, 2: 1, 3: 1}, // f, the only item nobody has, is never in a top 3
		mrr:     0.75,
	}
	popularity := map[string]float64{"a": 10, "b": 20, "c": 30, "d": 40, "e": 50, "f": 60, "not-an-item": 99}
	for _, tc := range []struct {
		name    string
		workers int
		pop     map[string]float64
		wantPop map[int]float64
	}{
		{"one worker", 1, popularity, want.pop},
		{"two workers", 2, popularity, want.pop},
		{"more workers than users", 7, popularity, want.pop},
		{"popularity from the histories", 2, nil, want.popHist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := methods.EvaluateHeldOut(context.Background(), popularityModel(), hist, tgt,
				methods.HeldOutOptions{Ks: []int{1, 2, 3}, Popularity: tc.pop, Workers: tc.workers})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Users != 2 || rep.Skipped != 1 || rep.Method != "hand" {
				t.Fatalf("users %d skipped %d method %q", rep.Users, rep.Skipped, rep.Method)
			}
			near := func(what string, k int, got, w float64) {
				if math.Abs(got-w) > 1e-12 {
					t.Errorf("%s@%d = %g, want %g", what, k, got, w)
				}
			}
			for _, k := range []int{1, 2, 3} {
				near("recall", k, rep.Recall[k], want.recall[k])
				near("ndcg", k, rep.NDCG[k], want.ndcg[k])
				near("coverage", k, rep.Coverage[k], want.cover[k])
				near("popularity", k, rep.Popularity[k], tc.wantPop[k])
			}
			near("mrr", 0, rep.MRR, want.mrr)
		})
	}
}

func TestEvaluateHeldOutErrors(t *testing.T) {
	hist := triples(t, [3]any{"1", "a", 5})
	tgt := triples(t, [3]any{"1", "b", 5})
	other := triples(t, [3]any{"9", "b", 5})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name          string
		ctx           context.Context
		m             *model.Model
		history, tgts *ratings.Matrix
		ks            []int
	}{
		{"k = 0", context.Background(), popularityModel(), hist, tgt, []int{0, 10}},
		{"no common user", context.Background(), popularityModel(), hist, other, nil},
		{"no items", context.Background(), &model.Model{Method: "empty"}, hist, tgt, nil},
		{"dense model", context.Background(), &model.Model{Method: "dense", Items: []string{"a", "b"}, Users: []string{"1"}, Dense: []float64{1, 2}}, hist, tgt, nil},
		{"cancelled", cancelled, popularityModel(), hist, tgt, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := methods.EvaluateHeldOut(tc.ctx, tc.m, tc.history, tc.tgts, methods.HeldOutOptions{Ks: tc.ks}); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestEvaluateHeldOutMatchesPerUser: over 100 users (several blocks),
// with 1 to 3 workers, EvaluateHeldOut gives the means of
// metrics.HeldOut on each user's RankFor list.
func TestEvaluateHeldOutMatchesPerUser(t *testing.T) {
	const nItems, rank = 40, 5
	m := &model.Model{Method: "lowrank", Output: model.Scores, Rank: rank, FoldLambda: 0.1}
	for i := range nItems {
		m.Items = append(m.Items, fmt.Sprint("i", i))
		for c := range rank {
			m.V = append(m.V, math.Sin(float64(i*rank+c)))
		}
	}
	var hist, tgt [][3]any
	for u := range 100 {
		for i := range nItems {
			switch (u*7 + i) % 9 {
			case 0, 1:
				hist = append(hist, [3]any{fmt.Sprint(u), fmt.Sprint("i", i), 1 + (u+i)%5})
			case 2:
				tgt = append(tgt, [3]any{fmt.Sprint(u), fmt.Sprint("i", i), 5})
			}
		}
	}
	h, g := triples(t, hist...), triples(t, tgt...)
	ks := []int{3, 10}
	var wantR, wantN [2]float64
	var wantRR float64
	n := 0
	for u := range int32(g.NumUsers()) {
		id := g.Users.Name(u)
		hu, _ := h.Users.Lookup(id)
		items, vals := h.UserRatings(hu)
		st, err := m.FoldInUser(id, items, vals)
		if err != nil {
			t.Fatal(err)
		}
		var skip []int32
		for _, it := range items {
			i, _ := m.ItemIndex(it)
			skip = append(skip, i)
		}
		ranked := m.RankFor(st, 10, skip, nil)
		tItems, _ := g.UserRow(u)
		tg := map[int32]bool{}
		for _, it := range tItems {
			i, _ := m.ItemIndex(g.Items.Name(it))
			tg[i] = true
		}
		r, nd, rr, ok := metrics.HeldOut(ranked, tg, ks)
		if !ok {
			continue
		}
		n++
		wantRR += rr
		for q := range ks {
			wantR[q] += r[q]
			wantN[q] += nd[q]
		}
	}
	for _, workers := range []int{1, 2, 3} {
		rep, err := methods.EvaluateHeldOut(context.Background(), m, h, g, methods.HeldOutOptions{Ks: ks, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Users != n || math.Abs(rep.MRR-wantRR/float64(n)) > 1e-12 {
			t.Fatalf("workers %d: %d users (want %d), MRR %g (want %g)", workers, rep.Users, n, rep.MRR, wantRR/float64(n))
		}
		for q, k := range ks {
			if math.Abs(rep.Recall[k]-wantR[q]/float64(n)) > 1e-12 || math.Abs(rep.NDCG[k]-wantN[q]/float64(n)) > 1e-12 {
				t.Fatalf("workers %d @%d: recall %g ndcg %g, want %g %g", workers, k, rep.Recall[k], rep.NDCG[k], wantR[q]/float64(n), wantN[q]/float64(n))
			}
		}
	}
}
