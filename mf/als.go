package mf

import (
	"context"
	"fmt"
	"math"
)

// ALSOptions configure ALS.
type ALSOptions struct {
	// Rank is the number of factor columns k.
	Rank int
	// Lambda is the weighted-λ regularisation of the factors: a row with n
	// ratings is penalised λ·n·‖x‖² (Zhou, Wilkinson, Schreiber, Pan,
	// "Large-scale parallel collaborative filtering for the Netflix
	// prize", 2008).
	Lambda float64
	// BiasLambda is the weighted penalty λ_b·n·b² on each bias. With
	// these weights ALS and SGD minimise the same objective,
	// Σ_(u,i) (r − μ − b_u − b_i − p_u·q_i)² + λ(‖p_u‖² + ‖q_i‖²) +
	// λ_b(b_u² + b_i²).
	BiasLambda float64
	// Iterations is the number of sweeps (users, then items).
	Iterations int
	// InitScale is the standard deviation of the initial item factors.
	InitScale float64
	// Workers bounds the goroutines (0: GOMAXPROCS).
	Workers int
	// Norm draws the initial factors (standard normal).
	Norm func() float64
	// Progress, when set, is told after every iteration.
	Progress func(Iteration)

	// snapshot, when set (tests and tuning), gets the model after every
	// iteration.
	snapshot func(it int, f *Factors)
}

func (o *ALSOptions) check() error {
	if err := checkRank(o.Rank); err != nil {
		return err
	}
	if !(o.Lambda > 0) || math.IsInf(o.Lambda, 0) {
		return fmt.Errorf("λ must be finite and > 0, got %g", o.Lambda)
	}
	if !(o.BiasLambda >= 0) || math.IsInf(o.BiasLambda, 0) {
		return fmt.Errorf("bias λ must be finite and ≥ 0, got %g", o.BiasLambda)
	}
	if o.Iterations < 1 {
		return fmt.Errorf("iterations must be ≥ 1, got %d", o.Iterations)
	}
	if o.Norm == nil {
		return fmt.Errorf("ALS needs a source of normal draws for its initialisation")
	}
	return nil
}

// ALS fits a biased rank-k model to p by alternating least squares: with
// the item side fixed, each user's row and bias solve one (k+1)×(k+1)
// ridge system, and vice versa. The offset is the mean rating.
func ALS(ctx context.Context, p *Problem, o ALSOptions) (*Factors, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	k := o.Rank
	f := &Factors{Rank: k, Mean: p.Mean(),
		U: make([]float64, p.NumUsers*k), V: make([]float64, p.NumItems*k),
		UserBias: make([]float64, p.NumUsers), ItemBias: make([]float64, p.NumItems)}
	for i := range f.V {
		f.V[i] = o.InitScale * o.Norm()
	}
	w := workers(o.Workers)
	scr := newScratch(w, k+1)
	prevV := make([]float64, len(f.V)+len(f.ItemBias))
	for it := range o.Iterations {
		users := side{ptr: p.RowPtr, idx: p.RowCol, val: p.RowVal, other: f.V, otherBias: f.ItemBias, out: f.U, outBias: f.UserBias}
		if err := users.solve(ctx, k, f.Mean, o.Lambda, o.BiasLambda, w, scr); err != nil {
			return nil, err
		}
		copy(prevV, f.V)
		copy(prevV[len(f.V):], f.ItemBias)
		items := side{ptr: p.ColPtr, idx: p.ColRow, val: p.ColVal, other: f.U, otherBias: f.UserBias, out: f.V, outBias: f.ItemBias}
		if err := items.solve(ctx, k, f.Mean, o.Lambda, o.BiasLambda, w, scr); err != nil {
			return nil, err
		}
		if o.Progress != nil {
			o.Progress(Iteration{Done: it + 1, Total: o.Iterations, Change: relChange(prevV, f.V, f.ItemBias)})
		}
		if o.snapshot != nil {
			o.snapshot(it+1, f)
		}
	}
	return f, nil
}

// relChange is ‖(v, b) − prev‖/‖(v, b)‖.
func relChange(prev, v, b []float64) float64 {
	var d, n float64
	for i, x := range v {
		d += (x - prev[i]) * (x - prev[i])
		n += x * x
	}
	for i, x := range b {
		y := prev[len(v)+i]
		d += (x - y) * (x - y)
		n += x * x
	}
	if n == 0 {
		return 0
	}
	return math.Sqrt(d / n)
}

// side is one half-step of ALS: the rows of a CSR (ptr, idx, val) solved
// against the fixed factors of the other side.
type side struct {
	ptr          []int64
	idx          []int32
	val          []float32
	other        []float64
	otherBias    []float64
	out, outBias []float64
}

// scratch is per-worker memory for the (k+1)-systems.
type scratch struct {
	a, b, c, y [][]float64
	g          []gramBuf
}

func newScratch(w, d int) *scratch {
	s := &scratch{a: make([][]float64, w), b: make([][]float64, w), c: make([][]float64, w), y: make([][]float64, w), g: make([]gramBuf, w)}
	for i := range w {
		s.a[i] = make([]float64, d*d)
		s.b[i] = make([]float64, d)
		s.c[i] = make([]float64, d)
	}
	return s
}

// solve computes every row's factors and bias: with x_j = (v_j, 1) and
// y_j = r_j − μ − b_j over the row's ratings,
//
//	[x; b] = (Σ x_j x_jᵀ + diag(λn, …, λn, λ_b·n))⁻¹ Σ y_j x_j.
//
// A row without ratings gets zeros.
func (s side) solve(ctx context.Context, k int, mean, lambda, biasLambda float64, w int, scr *scratch) error {
	n := len(s.ptr) - 1
	d := k + 1
	return parallelRows(ctx, n, w, 64, func(wk, lo, hi int) error {
		a, b, sv := scr.a[wk], scr.b[wk], scr.c[wk][:k]
		for r := lo; r < hi; r++ {
			beg, end := s.ptr[r], s.ptr[r+1]
			out := s.out[r*k : r*k+k]
			cnt := int(end - beg)
			if cnt == 0 {
				clear(out)
				s.outBias[r] = 0
				continue
			}
			clear(a)
			clear(b)
			clear(sv)
			idx := s.idx[beg:end]
			// The targets y_j, Σ x_j x_jᵀ and Σ y_j x_j in one pass, then
			// the bias column: Σ x_j (its last coordinate 1) and n.
			if cap(scr.y[wk]) < cnt {
				scr.y[wk] = make([]float64, cnt)
			}
			y := scr.y[wk][:cnt]
			for t, j := range idx {
				y[t] = float64(s.val[int(beg)+t]) - mean - s.otherBias[j]
				b[k] += y[t]
				axpy(1, s.other[int(j)*k:int(j)*k+k], sv)
			}
			gramAdd(a, d, k, s.other, idx, nil, y, b, &scr.g[wk])
			for p, x := range sv {
				a[p*d+k] = x
			}
			reg := lambda * float64(cnt)
			for p := range k {
				a[p*d+p] += reg
			}
			a[k*d+k] = float64(cnt) * (1 + biasLambda)
			if !cholSolve(a, d, b) {
				return fmt.Errorf("ALS: the system of row %d is not positive definite", r)
			}
			copy(out, b[:k])
			s.outBias[r] = b[k]
		}
		return nil
	})
}
