package topn

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/privrec/privrec/ratings"
)

// Interactions is a binary users × items matrix in compressed rows: user
// u interacted with items Idx[Ptr[u]:Ptr[u+1]] (increasing).
type Interactions struct {
	NumUsers, NumItems int
	Ptr                []int64
	Idx                []int32
}

// FromMatrix takes every rating of m as an interaction (filter first with
// transform.Positives to keep ratings ≥ a threshold).
func FromMatrix(m *ratings.Matrix) *Interactions {
	ptr, col, _, _ := m.CSR()
	return &Interactions{NumUsers: m.NumUsers(), NumItems: m.NumItems(), Ptr: ptr, Idx: col}
}

// Row is user u's items.
func (x *Interactions) Row(u int) []int32 { return x.Idx[x.Ptr[u]:x.Ptr[u+1]] }

// Len is the number of interactions.
func (x *Interactions) Len() int { return len(x.Idx) }

// Counts is each item's number of users.
func (x *Interactions) Counts() []float64 {
	c := make([]float64, x.NumItems)
	for _, j := range x.Idx {
		c[j]++
	}
	return c
}

// SampleUsers keeps each user with probability share (drawn from rng, in
// user order): the sampled users' rows, renumbered, on the same items.
func (x *Interactions) SampleUsers(share float64, rng *rand.Rand) *Interactions {
	s := &Interactions{NumItems: x.NumItems, Ptr: []int64{0}}
	for u := range x.NumUsers {
		if rng.Float64() < share {
			s.Idx = append(s.Idx, x.Row(u)...)
			s.Ptr = append(s.Ptr, int64(len(s.Idx)))
			s.NumUsers++
		}
	}
	return s
}

// Transpose is the items × users view.
func (x *Interactions) Transpose() *Interactions {
	t := &Interactions{NumUsers: x.NumItems, NumItems: x.NumUsers, Ptr: make([]int64, x.NumItems+1), Idx: make([]int32, len(x.Idx))}
	for _, j := range x.Idx {
		t.Ptr[j+1]++
	}
	for j := range x.NumItems {
		t.Ptr[j+1] += t.Ptr[j]
	}
	next := make([]int64, x.NumItems)
	copy(next, t.Ptr[:x.NumItems])
	for u := range x.NumUsers {
		for _, j := range x.Row(u) {
			t.Idx[next[j]] = int32(u)
			next[j]++
		}
	}
	return t
}

// workers resolves a worker count (0: GOMAXPROCS).
func workers(n int) int {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return max(n, 1)
}

// parallel runs f over [0, n) in chunks on w goroutines (rows differ in
// cost, so chunks are taken from a shared counter); f gets its worker's
// index for per-worker scratch. It stops early when ctx is done.
func parallel(ctx context.Context, n, w, chunk int, f func(worker, lo, hi int)) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	for wk := range w {
		wg.Go(func() {
			for ctx.Err() == nil {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= n {
					return
				}
				f(wk, lo, min(n, lo+chunk))
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}
