package mf

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSGDGridVisitsEveryRatingOnce: the grid of offsets visits each rating
// of the Problem exactly once per pass, with its own user, item and
// centred value, whichever offset width it uses; and SGD gives the same
// factors with 16- and 32-bit offsets.
func TestSGDGridVisitsEveryRatingOnce(t *testing.T) {
	lr := newLowRank(t, 300, 120, 3, 0.2, 0.1, 5)
	p := lr.train
	var fits [][]float64
	for _, short := range []int64{1 << 16, 0} {
		maxShortRow = short
		t.Cleanup(func() { maxShortRow = 1 << 16 })
		g := newGrid(p, 4, 3, rand.New(rand.NewPCG(1, 1)))
		if (g.off16 != nil) != (short > 0) {
			t.Fatalf("offset width: 16-bit %v with rows up to %d", g.off16 != nil, short)
		}
		seen := make([]int, p.Len())
		for b := range 16 {
			g.each(b, func(u, it int, r float32) {
				items, vals := p.RowCol[p.RowPtr[u]:p.RowPtr[u+1]], p.RowVal[p.RowPtr[u]:p.RowPtr[u+1]]
				k, ok := slices.BinarySearch(items, int32(it))
				if !ok || r != float32(float64(vals[k])-3) {
					t.Fatalf("block %d: rating (%d, %d, %g) is not in the data", b, u, it, r)
				}
				seen[p.RowPtr[u]+int64(k)]++
			})
		}
		for t0, c := range seen {
			if c != 1 {
				t.Fatalf("rating %d visited %d times", t0, c)
			}
		}
		f, err := SGD(context.Background(), p, SGDOptions{Rank: 4, Lambda: 0.02, LearnRate: 0.1, Iterations: 3, InitScale: 0.1, Workers: 2, Bins: 5, Rand: rand.New(rand.NewPCG(9, 9))})
		if err != nil {
			t.Fatal(err)
		}
		fits = append(fits, append(f.U, f.V...))
	}
	if !slices.Equal(fits[0], fits[1]) {
		t.Error("16- and 32-bit offsets give different factors")
	}
}
