package topn

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// IALSOptions configure IALS. The loss is Rendle et al.'s (RecSys 2022):
//
//	Σ_{(u,i) observed} (w_u·h_i − 1)² + α₀ Σ_{u,i} (w_u·h_i)²
//	  + λ Σ_u (|I_u| + α₀|I|)^ν ‖w_u‖² + λ Σ_i (|U_i| + α₀|U|)^ν ‖h_i‖²
//
// (|I| items, |U| users, |I_u| user u's items, |U_i| item i's users).
type IALSOptions struct {
	Rank   int
	Alpha0 float64 // weight α₀ of the unobserved pairs
	Lambda float64 // λ
	Nu     float64 // ν: the frequency scaling of λ (1: λ grows with the count)
	Epochs int
	// CGSteps is the number of conjugate-gradient steps per row and
	// half-epoch, warm-started from the row's previous value (Takács et
	// al.: 3 is nearly as good as an exact solve).
	CGSteps int
	// InitScale is the standard deviation of the initial item factors
	// (times 1/√Rank).
	InitScale float64
	Rand      *rand.Rand
	Workers   int
	// Progress, when set, is told each finished epoch.
	Progress func(done, total int)
}

// Check validates the options (a random source aside).
func (o *IALSOptions) Check() error {
	switch {
	case o.Rank < 1 || o.Rank > 4096:
		return fmt.Errorf("ials: rank %d must be in [1, 4096]", o.Rank)
	case !(o.Alpha0 >= 0) || math.IsInf(o.Alpha0, 0):
		return fmt.Errorf("ials: α₀ = %g must be finite and ≥ 0", o.Alpha0)
	case !(o.Lambda > 0) || math.IsInf(o.Lambda, 0):
		return fmt.Errorf("ials: λ = %g must be finite and > 0", o.Lambda)
	case !(o.Nu >= 0 && o.Nu <= 2):
		return fmt.Errorf("ials: ν = %g must be in [0, 2]", o.Nu)
	case o.Epochs < 1 || o.CGSteps < 1:
		return fmt.Errorf("ials: epochs and CG steps must be ≥ 1")
	case !(o.InitScale > 0) || math.IsInf(o.InitScale, 0):
		return fmt.Errorf("ials: the initial scale %g must be finite and > 0", o.InitScale)
	}
	return nil
}

// IALS fits item factors H (items × rank, row-major) and user factors W
// (users × rank) to the interactions.
func IALS(ctx context.Context, x *Interactions, o IALSOptions) (W, H []float64, err error) {
	if err := o.Check(); err != nil {
		return nil, nil, err
	}
	if o.Rand == nil {
		return nil, nil, fmt.Errorf("ials: a random source is needed")
	}
	k := o.Rank
	H = make([]float64, x.NumItems*k)
	W = make([]float64, x.NumUsers*k)
	sd := o.InitScale / math.Sqrt(float64(k))
	for i := range H {
		H[i] = o.Rand.NormFloat64() * sd
	}
	xt := x.Transpose()
	for e := range o.Epochs {
		if err := HalfStep(ctx, x, H, W, k, o.Alpha0, RegFor(o.Lambda, o.Nu, o.Alpha0, x.NumItems), o.CGSteps, o.Workers); err != nil {
			return nil, nil, err
		}
		if err := HalfStep(ctx, xt, W, H, k, o.Alpha0, RegFor(o.Lambda, o.Nu, o.Alpha0, x.NumUsers), o.CGSteps, o.Workers); err != nil {
			return nil, nil, err
		}
		if o.Progress != nil {
			o.Progress(e+1, o.Epochs)
		}
	}
	return W, H, nil
}

// RegFor is the regularisation of a row with n interactions when the
// other side has m rows: λ·(n + α₀·m)^ν.
func RegFor(lambda, nu, alpha0 float64, m int) func(n int) float64 {
	return func(n int) float64 { return lambda * math.Pow(float64(n)+alpha0*float64(m), nu) }
}

// Gramian is FᵀF for the row-major rows × k matrix f (k × k, row-major).
func Gramian(f []float64, k int) []float64 {
	g := make([]float64, k*k)
	for r := 0; r+k <= len(f); r += k {
		row := f[r : r+k]
		for p, a := range row {
			if a == 0 {
				continue
			}
			gp := g[p*k : p*k+k]
			for q, b := range row {
				gp[q] += a * b
			}
		}
	}
	return g
}

// HalfStep updates every row of solve (one per row of x) given the fixed
// side fixed: row r minimises Σ_{j∈x_r} (s·f_j − 1)² + α₀ Σ_j (s·f_j)² +
// reg(|x_r|)‖s‖², by cgSteps conjugate-gradient steps from its current
// value.
func HalfStep(ctx context.Context, x *Interactions, fixed, solve []float64, k int, alpha0 float64, reg func(n int) float64, cgSteps, w int) error {
	g := Gramian(fixed, k)
	for i := range g {
		g[i] *= alpha0
	}
	w = workers(w)
	type scratch struct{ r, p, ap []float64 }
	scr := make([]scratch, w)
	for i := range scr {
		scr[i] = scratch{make([]float64, k), make([]float64, k), make([]float64, k)}
	}
	return parallel(ctx, x.NumUsers, w, 32, func(wk, lo, hi int) {
		s := &scr[wk]
		for u := lo; u < hi; u++ {
			items := x.Row(u)
			row := solve[u*k : u*k+k]
			lam := reg(len(items))
			cgRow(g, fixed, items, k, lam, row, cgSteps, s.r, s.p, s.ap)
		}
	})
}

// apply computes out = (G + Σ_j f_j f_jᵀ + λI)·v for the rows f_j of
// fixed listed in items, through gonum's BLAS (its assembly dot and axpy
// kernels: 3× a plain Go loop at rank 128).
func apply(g, fixed []float64, items []int32, k int, lam float64, v, out []float64) {
	var b gonum.Implementation
	copy(out, v)
	b.Dgemv(blas.NoTrans, k, k, 1, g, k, v, 1, lam, out, 1)
	for _, j := range items {
		f := fixed[int(j)*k : int(j)*k+k]
		b.Daxpy(k, b.Ddot(k, f, 1, v, 1), f, 1, out, 1)
	}
}

// cgRow runs steps of conjugate gradient on (G + Σ f fᵀ + λI)·s = Σ f
// from the current s.
func cgRow(g, fixed []float64, items []int32, k int, lam float64, s []float64, steps int, r, p, ap []float64) {
	apply(g, fixed, items, k, lam, s, ap)
	for q := range r {
		r[q] = -ap[q]
	}
	for _, j := range items {
		f := fixed[int(j)*k : int(j)*k+k]
		for q := range r {
			r[q] += f[q]
		}
	}
	copy(p, r)
	rr := dot(r, r)
	for range steps {
		if rr < 1e-20 {
			return
		}
		apply(g, fixed, items, k, lam, p, ap)
		alpha := rr / dot(p, ap)
		for q := range s {
			s[q] += alpha * p[q]
			r[q] -= alpha * ap[q]
		}
		rr2 := dot(r, r)
		beta := rr2 / rr
		rr = rr2
		for q := range p {
			p[q] = r[q] + beta*p[q]
		}
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i, x := range a {
		s += x * b[i]
	}
	return s
}
