package jointdp

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"

	"github.com/privrec/privrec/privacy/noise"
)

// Step rules for Frank–Wolfe.
const (
	// StepConst is the seed's η = 1/T in every iteration.
	StepConst = "1/T"
	// StepClassic is the textbook η_t = 2/(t+1) (t = 1, 2, …).
	StepClassic = "2/(t+1)"
	// StepLineSearch minimises the objective exactly along the FW direction
	// (non-private FW only: it reads the data).
	StepLineSearch = "linesearch"
)

// stepSize returns η_t for a data-independent rule.
func stepSize(rule string, t, T int) (float64, error) {
	switch rule {
	case StepConst, "":
		return 1 / float64(T), nil
	case StepClassic:
		return 2 / float64(t+1), nil
	}
	return 0, fmt.Errorf("jointdp: unknown step rule %q (want %q or %q)", rule, StepConst, StepClassic)
}

// Reach is the share of the nuclear-norm bound k that T Frank–Wolfe steps
// of a data-independent rule can put into the iterate: from Y_0 = 0,
// Y_T = Σ_t η_t Π_{s>t}(1−η_s)·G_t with ‖G_t‖_* = k, so ‖Y_T‖_* ≤
// (1 − Π_t(1−η_t))·k. The seed's constant η = 1/T gives 1 − (1 − 1/T)^T
// (0.64 at T = 20, → 1 − 1/e): with it, Algorithm 1 never leaves the ball
// of radius 0.64k, and on data whose best fit has norm k it stops at
// 0.64 of it however large T is. 2/(t+1) starts with η_1 = 1 and reaches
// k at once (Reach 1).
func Reach(rule string, T int) (float64, error) {
	if T < 1 {
		return 0, fmt.Errorf("jointdp: iterations T must be ≥ 1, got %d", T)
	}
	keep := 1.0
	for t := 1; t <= T; t++ {
		eta, err := stepSize(rule, t, T)
		if err != nil {
			return 0, err
		}
		keep *= 1 - eta
	}
	return 1 - keep, nil
}

// Factors is a low-rank matrix Y = U Vᵀ with U (M × Rank) and V (N × Rank)
// row-major.
type Factors struct {
	M, N, Rank int
	U, V       []float64
}

// At is Y_ij.
func (f *Factors) At(i, j int) float64 {
	var s float64
	u, v := f.U[i*f.Rank:(i+1)*f.Rank], f.V[j*f.Rank:(j+1)*f.Rank]
	for k := range u {
		s += u[k] * v[k]
	}
	return s
}

// FWOptions configures non-private Frank–Wolfe.
type FWOptions struct {
	// K is the nuclear-norm bound k (> 0).
	K float64
	// T is the number of iterations (the rank of the result is at most T).
	T int
	// Step is StepLineSearch (default), StepConst or StepClassic.
	Step string
	// Workers is the number of goroutines (0: GOMAXPROCS).
	Workers int
	// Rand seeds the Lanczos start vector (nil: a fixed seed).
	Rand *noise.Source
	// Progress, if set, is called after each iteration with the
	// objective ½|Ω|⁻¹‖P_Ω(Y − Y*)‖²_F reached (FW is not private: the
	// objective is a statistic of the raw data).
	Progress func(done, total int, objective float64)
}

// FWResult is the output of FrankWolfe.
type FWResult struct {
	Factors
	// Objective is ½|Ω|⁻¹‖P_Ω(Y − Y*)‖²_F after each iteration.
	Objective []float64
	// Steps are the η_t used.
	Steps []float64
	// Products is the number of sparse AᵀA·x products (two streaming
	// passes over Ω each) spent by the eigensolver.
	Products int
}

// sparseResidual is A = P_Ω(Y − Y*) held on Ω (res); Y on Ω is res + Y*.
type sparseResidual struct {
	p      *Problem
	res    []float64
	chunks [][2]int
	parts  [][]float64 // per-worker n-vectors
	muls   int         // AᵀA products so far
}

func (r *sparseResidual) a(k int64) float64 { return r.res[k] }

// gramMul computes dst = AᵀA·x with one streaming pass over Ω per worker,
// each worker summing into its own n-vector. It never forms AᵀA or Y.
func (r *sparseResidual) gramMul(ctx context.Context, dst, x []float64) error {
	p := r.p
	r.muls++
	err := parallel(ctx, r.chunks, func(w, lo, hi int) error {
		z := r.parts[w]
		clear(z)
		for i := lo; i < hi; i++ {
			a, b := p.Ptr[i], p.Ptr[i+1]
			var s float64
			for k := a; k < b; k++ {
				s += r.a(k) * x[p.Cols[k]]
			}
			if s == 0 {
				continue
			}
			for k := a; k < b; k++ {
				z[p.Cols[k]] += s * r.a(k)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	copy(dst, r.parts[0])
	for _, z := range r.parts[1:] {
		floats.Add(dst, z)
	}
	return nil
}

// FrankWolfe solves min ½|Ω|⁻¹‖P_Ω(Y − Y*)‖²_F s.t. ‖Y‖_* ≤ K without
// privacy. Each iteration finds the top singular pair (λ, u, v) of the
// sparse residual A = P_Ω(Y − Y*) by Lanczos on x ↦ Aᵀ(Ax) (warm-started
// from the previous v), and moves towards G = −K u vᵀ.
func FrankWolfe(ctx context.Context, p *Problem, o FWOptions) (*FWResult, error) {
	if !(o.K > 0) || math.IsInf(o.K, 0) {
		return nil, fmt.Errorf("jointdp: nuclear-norm bound k must be positive and finite, got %g", o.K)
	}
	if o.T < 1 {
		return nil, fmt.Errorf("jointdp: iterations T must be ≥ 1, got %d", o.T)
	}
	if o.Step == "" {
		o.Step = StepLineSearch
	}
	if o.Step != StepLineSearch {
		if _, err := stepSize(o.Step, 1, o.T); err != nil {
			return nil, err
		}
	}
	rnd := o.Rand
	if rnd == nil {
		rnd = noise.Seeded(1)
	}
	ch := p.chunks(workers(o.Workers))
	r := &sparseResidual{p: p, res: make([]float64, p.Len()), chunks: ch, parts: make([][]float64, len(ch))}
	for k, x := range p.Vals {
		r.res[k] = -float64(x) // Y = 0
	}
	for w := range r.parts {
		r.parts[w] = make([]float64, p.N)
	}
	u := make([]float64, p.M)
	var us, vs [][]float64
	var wts []float64
	res := &FWResult{}
	var v []float64
	nOmega := float64(p.Len())
	type acc struct{ rd, dd, obj float64 }
	accs := make([]acc, len(ch))
	for t := 1; t <= o.T; t++ {
		theta, vt, err := topEigen(ctx, func(dst, x []float64) error { return r.gramMul(ctx, dst, x) }, p.N, v, rnd, fwEig)
		if err != nil {
			return nil, fmt.Errorf("jointdp: FW iteration %d: %w", t, err)
		}
		v = vt
		lam := math.Sqrt(math.Max(theta, 0))
		if lam == 0 {
			break // the residual is zero on Ω: Y fits the data exactly
		}
		// u = A v / λ, and the line-search inner products along
		// D = P_Ω(G − Y) with R = A: η* = −⟨R, D⟩/‖D‖².
		err = parallel(ctx, ch, func(w, lo, hi int) error {
			var rd, dd float64
			for i := lo; i < hi; i++ {
				a, b := p.Ptr[i], p.Ptr[i+1]
				var s float64
				for k := a; k < b; k++ {
					s += r.a(k) * v[p.Cols[k]]
				}
				u[i] = s / lam
				for k := a; k < b; k++ {
					d := -o.K*u[i]*v[p.Cols[k]] - (r.res[k] + float64(p.Vals[k]))
					rd += r.a(k) * d
					dd += d * d
				}
			}
			accs[w] = acc{rd: rd, dd: dd}
			return nil
		})
		if err != nil {
			return nil, err
		}
		var eta float64
		if o.Step == StepLineSearch {
			var rd, dd float64
			for _, a := range accs {
				rd += a.rd
				dd += a.dd
			}
			if dd > 0 {
				eta = min(max(-rd/dd, 0), 1)
			}
		} else {
			eta, _ = stepSize(o.Step, t, o.T)
		}
		err = parallel(ctx, ch, func(w, lo, hi int) error {
			var obj float64
			for i := lo; i < hi; i++ {
				g := -o.K * u[i]
				for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
					// Y ← (1−η)Y + η g v, so A ← (1−η)A − η Y* + η g v.
					a := (1-eta)*r.res[k] - eta*float64(p.Vals[k]) + eta*g*v[p.Cols[k]]
					r.res[k] = a
					obj += a * a
				}
			}
			accs[w].obj = obj
			return nil
		})
		if err != nil {
			return nil, err
		}
		var obj float64
		for _, a := range accs {
			obj += a.obj
		}
		for s := range wts {
			wts[s] *= 1 - eta
		}
		us = append(us, append([]float64(nil), u...))
		vs = append(vs, append([]float64(nil), v...))
		wts = append(wts, -o.K*eta)
		res.Objective = append(res.Objective, obj/(2*nOmega))
		res.Steps = append(res.Steps, eta)
		if o.Progress != nil {
			o.Progress(t, o.T, obj/(2*nOmega))
		}
	}
	res.Products = r.muls
	res.Factors = assemble(p.M, p.N, us, vs, wts)
	return res, nil
}

// assemble builds row-major factors from columns u_s, v_s and weights w_s:
// Y = Σ_s w_s u_s v_sᵀ.
func assemble(m, n int, us, vs [][]float64, wts []float64) Factors {
	r := len(us)
	f := Factors{M: m, N: n, Rank: r, U: make([]float64, m*r), V: make([]float64, n*r)}
	for s := range r {
		for i, x := range us[s] {
			f.U[i*r+s] = wts[s] * x
		}
		for j, x := range vs[s] {
			f.V[j*r+s] = x
		}
	}
	return f
}

// fwEig is the eigensolver setting for FW's linear oracle. Frank–Wolfe
// tolerates an approximate oracle (slack γ, Theorem A.1), and late in a
// run the residual's spectrum is flat, where tight tolerances cost many
// restarts for no gain: 30 Krylov steps, at most 3 restarts, 1e-4.
var fwEig = eigOptions{Tol: 1e-4, Steps: 30, Restarts: 3}
