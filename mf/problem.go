// Package mf holds privrec's matrix-factorisation solvers: weighted-λ
// alternating least squares with biases (ALS), blocked parallel
// stochastic gradient descent (SGD, the method of LIBMF), and the solver
// of user-level joint-DP ALS (DPALS), which takes its noise through a
// privacy/mechanism value and never computes a noise scale itself.
//
// The solvers work on a Problem (the ratings in user-major and item-major
// order) and return Factors: a global offset, user and item biases and
// rank-k factor rows, all float64, row-major.
package mf

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/privrec/privrec/ratings"
)

// Problem is a rating matrix as the solvers read it: compressed rows
// (users) and compressed columns (items), values as float32.
type Problem struct {
	NumUsers, NumItems int

	RowPtr []int64
	RowCol []int32
	RowVal []float32

	ColPtr []int64
	ColRow []int32
	ColVal []float32
}

// FromMatrix views a ratings.Matrix as a Problem (no copy).
func FromMatrix(m *ratings.Matrix) *Problem {
	rp, rc, rv, _ := m.CSR()
	cp, cr, cv := m.CSC()
	return &Problem{NumUsers: m.NumUsers(), NumItems: m.NumItems(),
		RowPtr: rp, RowCol: rc, RowVal: rv, ColPtr: cp, ColRow: cr, ColVal: cv}
}

// FromMatrixRows is FromMatrix with the user-major view only (the Col
// fields nil), for solvers that read rows alone (SGD): the matrix then
// never builds its item-major arrays, 8 bytes a rating.
func FromMatrixRows(m *ratings.Matrix) *Problem {
	rp, rc, rv, _ := m.CSR()
	return &Problem{NumUsers: m.NumUsers(), NumItems: m.NumItems(), RowPtr: rp, RowCol: rc, RowVal: rv}
}

// Len is the number of ratings.
func (p *Problem) Len() int { return len(p.RowCol) }

// Mean is the mean rating (0 when empty).
func (p *Problem) Mean() float64 {
	if len(p.RowVal) == 0 {
		return 0
	}
	var s float64
	for _, v := range p.RowVal {
		s += float64(v)
	}
	return s / float64(len(p.RowVal))
}

// Factors is a biased low-rank model: the score of (u, i) is
// Mean + UserBias[u] + ItemBias[i] + U[u]·V[i].
type Factors struct {
	Rank     int
	Mean     float64
	U, V     []float64 // users × Rank and items × Rank, row-major
	UserBias []float64
	ItemBias []float64
}

// Predict is the model's score for (u, i).
func (f *Factors) Predict(u, i int32) float64 {
	k := f.Rank
	s := f.Mean + f.UserBias[u] + f.ItemBias[i]
	return s + dot(f.U[int(u)*k:int(u)*k+k], f.V[int(i)*k:int(i)*k+k])
}

// RMSE is the root mean squared error of the model on p's ratings, with
// predictions clamped to [lo, hi] when lo < hi.
func (f *Factors) RMSE(p *Problem, lo, hi float64) float64 {
	var s float64
	for u := range p.NumUsers {
		for t := p.RowPtr[u]; t < p.RowPtr[u+1]; t++ {
			y := f.Predict(int32(u), p.RowCol[t])
			if lo < hi {
				y = min(max(y, lo), hi)
			}
			d := y - float64(p.RowVal[t])
			s += d * d
		}
	}
	if p.Len() == 0 {
		return 0
	}
	return math.Sqrt(s / float64(p.Len()))
}

// Iteration is what a solver reports after each iteration (to a log or
// a progress line). Change is the relative change of the item side,
// ‖V_t − V_{t−1}‖/‖V_t‖ (biases included).
type Iteration struct {
	Done, Total int
	Change      float64
}

// workers resolves a worker count (0: GOMAXPROCS).
func workers(n int) int {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return max(n, 1)
}

// parallelRows runs f over rows [0, n) on w goroutines in chunks taken
// from a shared counter (rows differ much in cost). f gets the worker's
// index so it can use per-worker scratch. It stops early when ctx is
// done and returns ctx's error, or the first error f returned.
func parallelRows(ctx context.Context, n, w, chunk int, f func(worker, lo, hi int) error) error {
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for wk := range w {
		wg.Go(func() {
			for {
				if ctx.Err() != nil {
					return
				}
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= n {
					return
				}
				if err := f(wk, lo, min(n, lo+chunk)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return firstErr
}

// checkRank validates a rank.
func checkRank(k int) error {
	if k < 1 || k > 1024 {
		return fmt.Errorf("rank must be in [1, 1024], got %d", k)
	}
	return nil
}
