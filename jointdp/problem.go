package jointdp

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/privrec/privrec/ratings"
)

// Problem is the observed matrix P_Ω(Y*) held as the users' rows in
// compressed sparse row form (a view of a ratings.Matrix, not a copy). Row
// i is user i's private record: only her local step may read it.
type Problem struct {
	M, N int
	Ptr  []int64
	Cols []int32
	Vals []float32
}

// NewProblem views a rating matrix as a Problem; the values are the targets
// Y*_ij (centre them first if the method wants centred data).
func NewProblem(r *ratings.Matrix) (*Problem, error) {
	if r.NumUsers() == 0 || r.NumItems() == 0 {
		return nil, fmt.Errorf("jointdp: empty matrix (%d users × %d items)", r.NumUsers(), r.NumItems())
	}
	ptr, cols, vals, _ := r.CSR()
	for _, v := range vals {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("jointdp: rating matrix holds a non-finite value")
		}
	}
	return &Problem{M: r.NumUsers(), N: r.NumItems(), Ptr: ptr, Cols: cols, Vals: vals}, nil
}

// Len is |Ω|.
func (p *Problem) Len() int { return len(p.Cols) }

// Row returns user i's observed items and ratings.
func (p *Problem) Row(i int) ([]int32, []float32) {
	a, b := p.Ptr[i], p.Ptr[i+1]
	return p.Cols[a:b], p.Vals[a:b]
}

// rowNorm is ‖P_Ω(Y*_i)‖₂.
func rowNorm(vals []float32) float64 {
	var s float64
	for _, v := range vals {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// clipScales returns, per user, the factor min(1, L/‖P_Ω(Y*_i)‖) of the
// projection Π_L onto the ℓ2 ball of radius L. Each factor depends only on
// that user's own row (a local step). L = +Inf keeps every row.
func (p *Problem) clipScales(L float64) []float64 {
	s := make([]float64, p.M)
	for i := range p.M {
		_, v := p.Row(i)
		s[i] = 1
		if nr := rowNorm(v); nr > L {
			s[i] = L / nr
		}
	}
	return s
}

// chunks splits the users into w contiguous ranges with about equal
// numbers of ratings (the work is proportional to ratings, not users).
func (p *Problem) chunks(w int) [][2]int {
	if w < 1 {
		w = 1
	}
	if w > p.M {
		w = p.M
	}
	out := make([][2]int, 0, w)
	total := p.Ptr[p.M]
	start := 0
	for c := 1; c <= w; c++ {
		target := total * int64(c) / int64(w)
		end := start
		for end < p.M && (p.Ptr[end] < target || end == start) {
			end++
		}
		if c == w {
			end = p.M
		}
		if end > start {
			out = append(out, [2]int{start, end})
		}
		start = end
	}
	return out
}

// workers resolves a requested worker count (0 = GOMAXPROCS).
func workers(w int) int {
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	return w
}

// parallel runs f on each chunk of users in its own goroutine and returns
// the first error.
func parallel(ctx context.Context, chunks [][2]int, f func(w, lo, hi int) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(chunks) == 1 {
		return f(0, chunks[0][0], chunks[0][1])
	}
	var wg sync.WaitGroup
	errs := make([]error, len(chunks))
	for w, c := range chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = f(w, c[0], c[1])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
