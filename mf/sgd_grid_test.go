package mf

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSGDGridVisitsEveryRatingOnce: the grid visits each rating of the
// Problem exactly once per pass, with its own user, item and centred
// value, whichever widths it stores items and values in; and SGD gives
// the same factors with every storage.
func TestSGDGridVisitsEveryRatingOnce(t *testing.T) {
	lr := newLowRank(t, 300, 120, 3, 0.2, 0.1, 5)
	p := lr.train
	halves := *p // values on a half-star scale (codes) ...
	halves.RowVal = make([]float32, len(p.RowVal))
	for k, v := range p.RowVal {
		halves.RowVal[k] = float32(min(max(int(2*v), 2), 10)) / 2
	}
	t.Cleanup(func() { maxNarrowItems = 1 << 16 })
	for _, data := range []struct {
		name  string
		p     *Problem
		codes bool
	}{{"continuous values", p, false}, {"half stars", &halves, true}} {
		var fits [][]float64
		for _, narrow := range []int{1 << 16, 0} {
			maxNarrowItems = narrow
			g := newGrid(data.p, 4, 3, rand.New(rand.NewPCG(1, 1)))
			if (g.item16 != nil) != (narrow > 0) || (g.code != nil) != data.codes {
				t.Fatalf("%s: 16-bit items %v, codes %v", data.name, g.item16 != nil, g.code != nil)
			}
			inv := make([]int, len(g.perm))
			for i, j := range g.perm {
				inv[j] = i
			}
			seen := make([]int, data.p.Len())
			for b := range 16 {
				g.each(b, func(u, it int, r float32) {
					a, e := data.p.RowPtr[u], data.p.RowPtr[u+1]
					k, ok := slices.BinarySearch(data.p.RowCol[a:e], int32(inv[it]))
					if !ok || r != float32(float64(data.p.RowVal[a+int64(k)])-3) {
						t.Fatalf("%s block %d: rating (%d, %d, %g) is not in the data", data.name, b, u, inv[it], r)
					}
					seen[a+int64(k)]++
				})
			}
			for k, c := range seen {
				if c != 1 {
					t.Fatalf("%s: rating %d visited %d times", data.name, k, c)
				}
			}
			f, err := SGD(context.Background(), data.p, SGDOptions{Rank: 4, Lambda: 0.02, LearnRate: 0.1, Iterations: 3, InitScale: 0.1, Workers: 2, Bins: 5, Rand: rand.New(rand.NewPCG(9, 9))})
			if err != nil {
				t.Fatal(err)
			}
			fits = append(fits, append(append(f.U, f.V...), f.ItemBias...))
		}
		if !slices.Equal(fits[0], fits[1]) {
			t.Errorf("%s: 16- and 32-bit items give different factors", data.name)
		}
	}
}
