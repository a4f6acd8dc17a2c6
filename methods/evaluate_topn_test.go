package methods_test

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/methods"
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
