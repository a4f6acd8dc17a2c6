package completion

import (
	"context"
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/tensor"
)

// ALS (the default solver). The objective over the observed entries Ω is
//
//	Σ_Ω (x_ijk − x̂_ijk)² + λ Σ_i n_i‖a_i‖² + λ Σ_j n_j‖b_j‖² + λ Σ_k n_k‖c_k‖²
//	  + λ_g |Ω| ‖G‖² + λ_b (‖α‖² + ‖β‖² + ‖γ‖²),
//
// x̂_ijk = μ + α_i + β_j + γ_k + CP or Tucker term, where n_i is the number
// of observed entries in row i of its mode (the weighted ridge of Zhou et
// al.'s ALS-WR, "Large-scale parallel collaborative filtering for the
// Netflix prize": it is the objective the seed's per-entry SGD descends,
// whose decay λ is applied at every visit of a row) and the biases α, β, γ
// (present with Config.Biases) are damped by λ_b pseudo-observations, as
// the bias baseline damps them. The Tucker core's λ_g is per entry too.
//
// One sweep solves, for each mode in turn, every row's (d + 1)-dimensional
// ridge problem in (row, bias) exactly with the other modes fixed — the
// model is linear in one row of one mode for CP and Tucker alike — then
// (Tucker) the core's d³-dimensional ridge problem by conjugate gradients
// warm-started at the current core, then μ as the mean residual. Each step
// cannot increase the objective. With observed entries missing this is
// the missing-data form of CP-ALS and of Tucker's alternating (HOOI-style)
// updates; the factors are not orthonormalised, the ridge fixes their
// scale.
//
// Rows of a mode are independent given the other modes, so they are solved
// by up to two goroutines on disjoint row ranges; the core's normal
// equations are summed over two fixed halves of the entries in a fixed
// order. A seed gives the same model with one goroutine or two.

// modeIndex lists the entries of every row of one mode: the entries of
// row r are ent[off[r]:off[r+1]].
type modeIndex struct {
	off []int
	ent []int32
}

func buildIndex(t *tensor.Tensor) [3]modeIndex {
	var out [3]modeIndex
	for mode, idx := range [3][]int32{t.I, t.J, t.K} {
		n := t.Dims[mode]
		off := make([]int, n+1)
		for _, i := range idx {
			off[i+1]++
		}
		for r := range n {
			off[r+1] += off[r]
		}
		pos := append([]int(nil), off[:n]...)
		ent := make([]int32, len(idx))
		for e, i := range idx {
			ent[pos[i]] = int32(e)
			pos[i]++
		}
		out[mode] = modeIndex{off: off, ent: ent}
	}
	return out
}

// alsSolver runs ALS sweeps on one training tensor.
type alsSolver struct {
	t       *tensor.Tensor
	cfg     Config
	m       *Model
	idx     [3]modeIndex
	workers int
	// core solve scratch (Tucker)
	cg [6][]float64
}

func newALS(t *tensor.Tensor, cfg Config, m *Model) *alsSolver {
	w := cfg.Workers
	if w == 0 {
		w = 2
	}
	return &alsSolver{t: t, cfg: cfg, m: m, idx: buildIndex(t), workers: w}
}

// sweep updates every mode's rows, the core and μ once.
func (s *alsSolver) sweep(ctx context.Context) error {
	for mode := range 3 {
		if err := s.updateMode(ctx, mode); err != nil {
			return err
		}
	}
	if s.m.Kind == tensor.Tucker {
		if err := s.updateCore(ctx); err != nil {
			return err
		}
	}
	if s.cfg.Biases {
		s.updateMean()
	}
	return nil
}

// rows returns the factor rows of mode and of the two other modes, in
// mode order, for entry e.
func (s *alsSolver) rowsOf(e int32) (a, b, c []float64) {
	d, m := s.m.Rank, s.m
	return m.A[int(s.t.I[e])*d:][:d], m.B[int(s.t.J[e])*d:][:d], m.C[int(s.t.K[e])*d:][:d]
}

// bias is μ + α_i + β_j + γ_k at entry e, leaving out mode skip's bias
// (skip = 3: none left out).
func (s *alsSolver) bias(e int32, skip int) float64 {
	m := s.m
	if m.BA == nil {
		return m.Offset
	}
	v := m.Offset
	if skip != 0 {
		v += m.BA[s.t.I[e]]
	}
	if skip != 1 {
		v += m.BB[s.t.J[e]]
	}
	if skip != 2 {
		v += m.BC[s.t.K[e]]
	}
	return v
}

// partial fills z (length d) with ∂x̂/∂(row of mode) at entry e.
func (s *alsSolver) partial(mode int, e int32, z []float64) {
	d := s.m.Rank
	a, b, c := s.rowsOf(e)
	if s.m.Kind == tensor.CP {
		u, v := b, c
		switch mode {
		case 1:
			u, v = a, c
		case 2:
			u, v = a, b
		}
		for r := range d {
			z[r] = u[r] * v[r]
		}
		return
	}
	G := s.m.G
	clear(z[:d])
	for p := range d {
		for q := range d {
			row := G[(p*d+q)*d:][:d]
			switch mode {
			case 0: // Σ_qt g_pqt b_q c_t
				var t float64
				for r, g := range row {
					t += g * c[r]
				}
				z[p] += b[q] * t
			case 1: // Σ_pt g_pqt a_p c_t
				var t float64
				for r, g := range row {
					t += g * c[r]
				}
				z[q] += a[p] * t
			case 2: // Σ_pq g_pqt a_p b_q
				ab := a[p] * b[q]
				for r, g := range row {
					z[r] += ab * g
				}
			}
		}
	}
}

func (s *alsSolver) factor(mode int) (f, bias []float64) {
	switch mode {
	case 0:
		return s.m.A, s.m.BA
	case 1:
		return s.m.B, s.m.BB
	}
	return s.m.C, s.m.BC
}

// updateMode solves every row of mode given the other modes.
func (s *alsSolver) updateMode(ctx context.Context, mode int) error {
	n := s.t.Dims[mode]
	if s.workers == 1 || n < 2 {
		return s.solveRows(ctx, mode, 0, n)
	}
	// split the rows where half of the entries are done
	off := s.idx[mode].off
	cut := 0
	for cut < n && off[cut] < off[n]/2 {
		cut++
	}
	var errs [2]error
	var wg sync.WaitGroup
	wg.Go(func() { errs[1] = s.solveRows(ctx, mode, cut, n) })
	errs[0] = s.solveRows(ctx, mode, 0, cut)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *alsSolver) solveRows(ctx context.Context, mode, from, to int) error {
	d := s.m.Rank
	k := d
	f, bias := s.factor(mode)
	if bias != nil {
		k++
	}
	gram := make([]float64, k*k)
	rhs := make([]float64, k)
	z := make([]float64, k)
	sym := mat.NewSymDense(k, gram)
	var chol mat.Cholesky
	x := mat.NewVecDense(k, nil)
	b := mat.NewVecDense(k, rhs)
	ix := s.idx[mode]
	for r := from; r < to; r++ {
		if (r-from)&255 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		ents := ix.ent[ix.off[r]:ix.off[r+1]]
		row := f[r*d:][:d]
		if len(ents) == 0 {
			clear(row)
			if bias != nil {
				bias[r] = 0
			}
			continue
		}
		clear(gram)
		clear(rhs)
		for _, e := range ents {
			s.partial(mode, e, z)
			y := s.t.Val[e] - s.bias(e, mode)
			if bias != nil {
				z[d] = 1
			}
			for p := range k {
				zp := z[p]
				rhs[p] += y * zp
				g := gram[p*k:][:k]
				for q := p; q < k; q++ {
					g[q] += zp * z[q]
				}
			}
		}
		lam := s.cfg.Lambda
		for p := range d {
			gram[p*k+p] += lam
			if mode == 2 { // day rows are shrunk toward dayPrior
				rhs[p] += lam * dayPrior(s.m.Kind, p)
			}
		}
		if bias != nil {
			gram[d*k+d] += s.cfg.BiasDamping
		}
		// mat.SymDense reads the upper triangle.
		if !chol.Factorize(sym) {
			// singular (λ = 0 and too few entries): least-norm fallback by
			// a tiny ridge
			for p := range k {
				gram[p*k+p] += 1e-9 * (1 + gram[p*k+p])
			}
			if !chol.Factorize(sym) {
				return fmt.Errorf("completion: ALS row %d of mode %d: singular normal equations", r, mode+1)
			}
		}
		if err := chol.SolveVecTo(x, b); err != nil {
			return fmt.Errorf("completion: ALS row %d of mode %d: %w", r, mode+1, err)
		}
		copy(row, x.RawVector().Data[:d])
		if bias != nil {
			bias[r] = x.AtVec(d)
		}
	}
	return nil
}

// coreOp applies the core's normal-equation operator: out = Σ_e z_e (z_e·v)
// + λ_g|Ω| v, with z_e = a_i ⊗ b_j ⊗ c_k, the sum over two fixed halves
// of the entries added in a fixed order.
func (s *alsSolver) coreOp(v, out []float64, half [2][]float64) {
	d := s.m.Rank
	n := s.t.Len()
	run := func(h, from, to int) {
		acc := half[h]
		clear(acc)
		for e := from; e < to; e++ {
			a, b, c := s.rowsOf(int32(e))
			var dot float64
			for p := range d {
				for q := range d {
					ab := a[p] * b[q]
					vr := v[(p*d+q)*d:][:d]
					for r := range d {
						dot += ab * c[r] * vr[r]
					}
				}
			}
			for p := range d {
				for q := range d {
					f := dot * a[p] * b[q]
					ar := acc[(p*d+q)*d:][:d]
					for r := range d {
						ar[r] += f * c[r]
					}
				}
			}
		}
	}
	mid := n / 2
	if s.workers == 1 {
		run(0, 0, mid)
		run(1, mid, n)
	} else {
		var wg sync.WaitGroup
		wg.Go(func() { run(1, mid, n) })
		run(0, 0, mid)
		wg.Wait()
	}
	lam := s.cfg.LambdaG
	for x := range out {
		out[x] = half[0][x] + half[1][x] + lam*v[x]
	}
}

// coreDirect is the largest core (d³ values) whose normal equations are
// formed and solved by Cholesky; larger cores use conjugate gradients.
const coreDirect = 64

// outer fills z with a ⊗ b ⊗ c (index (p·d + q)·d + t).
func outer(d int, a, b, c, z []float64) {
	for p := range d {
		for q := range d {
			ab := a[p] * b[q]
			zr := z[(p*d+q)*d:][:d]
			for t := range d {
				zr[t] = ab * c[t]
			}
		}
	}
}

// updateCore solves the core's ridge problem: directly (Cholesky) for a
// core of at most coreDirect values, otherwise by conjugate gradients
// warm-started at the current core. Sums over the entries are formed in
// two fixed halves added in a fixed order.
func (s *alsSolver) updateCore(ctx context.Context) error {
	D := len(s.m.G)
	d := s.m.Rank
	n := s.t.Len()
	direct := D <= coreDirect
	for x := range s.cg {
		size := D
		if direct && x >= 4 {
			size = D * D
		}
		if len(s.cg[x]) != size {
			s.cg[x] = make([]float64, size)
		}
	}
	rhs, r, p, ap := s.cg[0], s.cg[1], s.cg[2], s.cg[3]
	half := [2][]float64{s.cg[4], s.cg[5]}
	var rhsHalf [2][]float64
	run := func(h, from, to int) {
		acc := rhsHalf[h]
		clear(acc)
		gram := half[h]
		if direct {
			clear(gram)
		}
		z := make([]float64, D)
		for e := from; e < to; e++ {
			a, b, c := s.rowsOf(int32(e))
			outer(d, a, b, c, z)
			y := s.t.Val[e] - s.bias(int32(e), 3)
			for x, zx := range z {
				acc[x] += y * zx
				if direct {
					g := gram[x*D:][:D]
					for w := x; w < D; w++ {
						g[w] += zx * z[w]
					}
				}
			}
		}
	}
	rhsHalf = [2][]float64{make([]float64, D), make([]float64, D)}
	if s.workers == 1 {
		run(0, 0, n/2)
		run(1, n/2, n)
	} else {
		var wg sync.WaitGroup
		wg.Go(func() { run(1, n/2, n) })
		run(0, 0, n/2)
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for x := range rhs {
		rhs[x] = rhsHalf[0][x] + rhsHalf[1][x]
	}
	G := s.m.G
	if direct {
		gram := half[0]
		for x := range gram {
			gram[x] += half[1][x]
		}
		for x := range D {
			gram[x*D+x] += s.cfg.LambdaG
		}
		var chol mat.Cholesky
		if !chol.Factorize(mat.NewSymDense(D, gram)) {
			for x := range D {
				gram[x*D+x] += 1e-9 * (1 + gram[x*D+x])
			}
			if !chol.Factorize(mat.NewSymDense(D, gram)) {
				return fmt.Errorf("completion: ALS core: singular normal equations")
			}
		}
		x := mat.NewVecDense(D, G)
		if err := chol.SolveVecTo(x, mat.NewVecDense(D, rhs)); err != nil {
			return fmt.Errorf("completion: ALS core: %w", err)
		}
		return nil
	}
	s.coreOp(G, ap, half)
	var rr, bb float64
	for x := range r {
		r[x] = rhs[x] - ap[x]
		p[x] = r[x]
		rr += r[x] * r[x]
		bb += rhs[x] * rhs[x]
	}
	tol := 1e-16 * max(bb, 1e-300)
	for range min(D, 50) {
		if rr <= tol {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s.coreOp(p, ap, half)
		var pap float64
		for x := range p {
			pap += p[x] * ap[x]
		}
		if !(pap > 0) {
			break
		}
		alpha := rr / pap
		var rr2 float64
		for x := range G {
			G[x] += alpha * p[x]
			r[x] -= alpha * ap[x]
			rr2 += r[x] * r[x]
		}
		beta := rr2 / rr
		rr = rr2
		for x := range p {
			p[x] = r[x] + beta*p[x]
		}
	}
	return nil
}

// updateMean sets μ to the mean residual.
func (s *alsSolver) updateMean() {
	m, d := s.m, s.m.Rank
	var sum float64
	for e := range s.t.Len() {
		i, j, k := int(s.t.I[e]), int(s.t.J[e]), int(s.t.K[e])
		sum += s.t.Val[e] - m.BA[i] - m.BB[j] - m.BC[k] - tensor.Eval(m.Kind, d, m.A[i*d:i*d+d], m.B[j*d:j*d+d], m.C[k*d:k*d+d], m.G)
	}
	m.Offset = sum / float64(s.t.Len())
}

// rmseClamped is the RMSE of m on t with predictions clamped to [lo, hi]
// (no clamp when hi ≤ lo).
func rmseClamped(m *Model, t *tensor.Tensor, lo, hi float64) float64 {
	if t.Len() == 0 {
		return math.NaN()
	}
	var s float64
	for e := range t.Len() {
		p := m.Predict(int(t.I[e]), int(t.J[e]), int(t.K[e]))
		if hi > lo {
			p = min(max(p, lo), hi)
		}
		s += (t.Val[e] - p) * (t.Val[e] - p)
	}
	return math.Sqrt(s / float64(t.Len()))
}

// dayPrior is the value the day factors are shrunk toward, at component
// r: 1 for CP, e_1 for Tucker. A model whose day rows equal it has no day
// effect beyond the biases: CP is then a matrix factorisation of users ×
// items, Tucker one with the core's first slice.
func dayPrior(kind tensor.Kind, r int) float64 {
	if kind == tensor.CP || r == 0 {
		return 1
	}
	return 0
}
