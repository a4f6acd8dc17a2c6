package completion

import (
	"context"
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/tensor"
)

// ALS (the default solver). The objective over the observed entries Ω is
//
//	Σ_Ω (x_ijk − x̂_ijk)² + λ (Σ_i ‖a_i‖² + Σ_j ‖b_j‖² + Σ_k ‖c_k − c̄‖²)
//	  + λ_g ‖G‖² + λ_b (‖α‖² + ‖β‖² + ‖γ‖²),
//
// x̂_ijk = μ + α_i + β_j + γ_k + CP or Tucker term. Every ridge is in
// pseudo-observations, one per row (not weighted by the row's count: on
// a held-out 10 % of MovieLens-100K's ua.base, RMSE 0.918 against 0.924
// for the count-weighted ridge of Zhou et al.'s ALS-WR, which is what the
// seed's per-visit SGD decay amounts to). The biases α, β, γ are present
// with Config.Biases; μ is unpenalised. The day rows c_k are shrunk toward
// c̄ = dayPrior (all ones for CP, e_1 for Tucker), not toward zero: with
// c_k = c̄ the model is a matrix factorisation of users × items plus the
// biases, so the day effects are deviations from a constant day profile
// (shrunk toward zero instead: 0.927 there).
//
// One sweep solves, for each mode in turn, every row's (d + 1)-dimensional
// ridge problem in (row, bias) exactly with the other modes fixed — the
// model is linear in one row of one mode for CP and Tucker alike; LAPACK's
// Cholesky through gonum — then (Tucker) the core's d³-dimensional ridge
// problem (Cholesky on normal equations formed as Σ_i a_i a_iᵀ ⊗ Σ w wᵀ
// with w = b_j ⊗ c_k for d³ ≤ 64; conjugate gradients warm-started at
// the current core beyond), then a rescaling along the model's scale
// ambiguity that lowers the ridge (balance), then μ as the mean residual.
// No step increases the objective (tested). With entries missing this is the
// missing-data form of CP-ALS and of Tucker's alternating (HOOI-style)
// updates; the factors are not orthonormalised, the ridge fixes their
// scale.
//
// Rows of a mode are independent given the other modes, so they are solved
// by up to two goroutines on disjoint row ranges; the core's normal
// equations are summed over two fixed halves of the users in a fixed
// order. A seed gives the same model with one goroutine or two (tested).

// modeIndex holds the entries of one mode grouped by row: the entries of
// row r are ent[off[r]:off[r+1]], packed so that a row's solve reads them
// sequentially.
type modeIndex struct {
	off []int
	ent []entry
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
		ent := make([]entry, len(idx))
		for e, i := range idx {
			ent[pos[i]] = entry{t.I[e], t.J[e], t.K[e], t.Val[e]}
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
	// proj holds, for a Tucker mode update, the core contracted with one
	// factor row: T_k[p][q] = Σ_t g_pqt c_kt per day (modes 1 and 2) or
	// U_i[q][t] = Σ_p a_ip g_pqt per user (mode 3), d² values each.
	proj []float64
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
	s.balance()
	if s.cfg.Biases {
		s.updateMean()
	}
	return nil
}

// balance rescales the user and item factors against each other (CP,
// per component) or against the core (Tucker) so that the ridge penalty
// is smallest for the same model values: a_r·s, b_r/s with s² =
// ‖b_r‖/‖a_r‖ (CP), A·s, G/s with s⁴ = λ_g‖G‖²/(λ‖A‖²) and likewise B
// (Tucker). The fit is unchanged and the penalty does not grow, so the
// objective still never increases; it spares ALS the many sweeps it
// otherwise spends drifting along the model's scale ambiguity.
func (s *alsSolver) balance() {
	m, d := s.m, s.m.Rank
	lam := s.cfg.Lambda
	if lam == 0 {
		return
	}
	if m.Kind == tensor.CP {
		for r := range d {
			var na, nb float64
			for i := range m.Dims[0] {
				na += m.A[i*d+r] * m.A[i*d+r]
			}
			for j := range m.Dims[1] {
				nb += m.B[j*d+r] * m.B[j*d+r]
			}
			if !(na > 0 && nb > 0) {
				continue
			}
			sc := math.Pow(nb/na, 0.25)
			for i := range m.Dims[0] {
				m.A[i*d+r] *= sc
			}
			for j := range m.Dims[1] {
				m.B[j*d+r] /= sc
			}
		}
		return
	}
	if s.cfg.LambdaG == 0 {
		return
	}
	for _, f := range [][]float64{m.A, m.B} {
		var nf, ng float64
		for _, v := range f {
			nf += v * v
		}
		for _, v := range m.G {
			ng += v * v
		}
		if !(nf > 0 && ng > 0) {
			continue
		}
		sc := math.Pow(s.cfg.LambdaG*ng/(lam*nf), 0.25)
		for x := range f {
			f[x] *= sc
		}
		for x := range m.G {
			m.G[x] /= sc
		}
	}
}

// rowsOf returns the factor rows of entry x.
func (s *alsSolver) rowsOf(x entry) (a, b, c []float64) {
	d, m := s.m.Rank, s.m
	return m.A[int(x.i)*d:][:d], m.B[int(x.j)*d:][:d], m.C[int(x.k)*d:][:d]
}

// bias is μ + α_i + β_j + γ_k at entry x, leaving out mode skip's bias
// (skip = 3: none left out).
func (s *alsSolver) bias(x entry, skip int) float64 {
	m := s.m
	if m.BA == nil {
		return m.Offset
	}
	v := m.Offset
	if skip != 0 {
		v += m.BA[x.i]
	}
	if skip != 1 {
		v += m.BB[x.j]
	}
	if skip != 2 {
		v += m.BC[x.k]
	}
	return v
}

// partial fills z (length d) with ∂x̂/∂(row of mode) at entry x.
func (s *alsSolver) partial(mode int, x entry, z []float64) {
	d := s.m.Rank
	a, b, c := s.rowsOf(x)
	if s.m.Kind == tensor.CP {
		u, v := b, c
		switch mode {
		case 1:
			u, v = a, c
		case 2:
			u, v = a, b
		}
		z, u, v = z[:len(u)], u[:len(u)], v[:len(u)]
		for r := range u {
			z[r] = u[r] * v[r]
		}
		return
	}
	var P []float64
	switch mode {
	case 0, 1:
		P = s.proj[int(x.k)*d*d:][:d*d]
	case 2:
		P = s.proj[int(x.i)*d*d:][:d*d]
	}
	switch mode {
	case 0: // z_p = Σ_q b_q T_k[p][q]
		for p := range d {
			var v float64
			for q, t := range P[p*d : p*d+d] {
				v += b[q] * t
			}
			z[p] = v
		}
	case 1: // z_q = Σ_p a_p T_k[p][q]
		clear(z[:d])
		for p := range d {
			ap := a[p]
			for q, t := range P[p*d : p*d+d] {
				z[q] += ap * t
			}
		}
	case 2: // z_t = Σ_q b_q U_i[q][t]
		clear(z[:d])
		for q := range d {
			bq := b[q]
			for t, u := range P[q*d : q*d+d] {
				z[t] += bq * u
			}
		}
	}
}

// project fills s.proj for a Tucker update of mode.
func (s *alsSolver) project(mode int) {
	d, G := s.m.Rank, s.m.G
	rows, f := s.m.C, s.t.Dims[2]
	if mode == 2 {
		rows, f = s.m.A, s.t.Dims[0]
	}
	if len(s.proj) != f*d*d {
		s.proj = make([]float64, f*d*d)
	}
	for k := range f {
		v := rows[k*d : k*d+d]
		P := s.proj[k*d*d : k*d*d+d*d]
		clear(P)
		for p := range d {
			for q := range d {
				g := G[(p*d+q)*d : (p*d+q)*d+d]
				if mode == 2 { // U[q][t] += a_p g_pqt
					for t := range d {
						P[q*d+t] += v[p] * g[t]
					}
				} else { // T[p][q] = Σ_t g_pqt c_t
					var sum float64
					for t := range d {
						sum += g[t] * v[t]
					}
					P[p*d+q] = sum
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
	if s.m.Kind == tensor.Tucker && mode != 1 { // mode 2 reuses mode 1's T
		s.project(mode)
	}
	if s.workers == 1 || n < 2 {
		return s.solveRows(ctx, mode, 0, n)
	}
	cut := entryMidpoint(s.idx[mode].off, n)
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

// entryMidpoint is the first row at which half of the entries of rows
// 0…n−1 are done (off as in modeIndex): where the rows are split between
// two goroutines.
func entryMidpoint(off []int, n int) int {
	cut := 0
	for cut < n && off[cut] < off[n]/2 {
		cut++
	}
	return cut
}

func (s *alsSolver) solveRows(ctx context.Context, mode, from, to int) error {
	d := s.m.Rank
	k := d
	f, bias := s.factor(mode)
	if bias != nil {
		k++
	}
	gram := blas64.Symmetric{N: k, Stride: k, Uplo: blas.Upper, Data: make([]float64, k*k)}
	rhs := blas64.General{Rows: k, Cols: 1, Stride: 1, Data: make([]float64, k)}
	z := make([]float64, k)
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
		g, b := gram.Data, rhs.Data
		s.normalRow(mode, ents, z, g, b, k, d, bias != nil)
		lam := s.cfg.Lambda
		for p := range d {
			g[p*k+p] += lam
			if mode == 2 { // day rows are shrunk toward dayPrior
				b[p] += lam * dayPrior(s.m.Kind, p)
			}
		}
		if bias != nil {
			g[d*k+d] += s.cfg.BiasDamping
		}
		// Cholesky (LAPACK's dpotrf/dpotrs through gonum) on the upper
		// triangle; a singular system (λ = 0 and too few entries) gets a
		// tiny ridge.
		t, ok := lapack64.Potrf(gram)
		if !ok {
			s.refill(mode, ents, z, g, b, k, d, bias != nil)
			if t, ok = lapack64.Potrf(gram); !ok {
				return fmt.Errorf("completion: ALS row %d of mode %d: singular normal equations", r, mode+1)
			}
		}
		lapack64.Potrs(t, rhs)
		copy(row, b[:d])
		if bias != nil {
			bias[r] = b[d]
		}
	}
	return nil
}

// normalRow sets g (the upper triangle of k × k) and b to Σ z zᵀ and
// Σ y z over a row's entries: its normal equations before the ridge, z
// the partials (and 1 for the bias when hasBias), y the rating less the
// other modes' biases.
func (s *alsSolver) normalRow(mode int, ents []entry, z, g, b []float64, k, d int, hasBias bool) {
	clear(g)
	clear(b)
	for _, x := range ents {
		s.partial(mode, x, z)
		y := x.v - s.bias(x, mode)
		if hasBias {
			z[d] = 1
		}
		for p, zp := range z {
			b[p] += y * zp
			gp := g[p*k : p*k+k]
			for q := p; q < k; q++ {
				gp[q] += zp * z[q]
			}
		}
	}
}

// refill rebuilds a row's normal equations (destroyed by a failed
// factorisation) with a tiny extra ridge.
func (s *alsSolver) refill(mode int, ents []entry, z, g, b []float64, k, d int, hasBias bool) {
	s.normalRow(mode, ents, z, g, b, k, d, hasBias)
	for p := range k {
		reg := s.cfg.Lambda
		if p == d {
			reg = s.cfg.BiasDamping
		}
		g[p*k+p] += reg + 1e-9*(1+g[p*k+p])
		if mode == 2 && p < d {
			b[p] += s.cfg.Lambda * dayPrior(s.m.Kind, p)
		}
	}
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
		for _, x := range s.idx[0].ent[from:to] {
			a, b, c := s.rowsOf(x)
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
	s.halves(n/2, n, run)
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
	direct := D <= coreDirect
	s.coreScratch(D, direct)
	rhs, half := s.cg[0], [2][]float64{s.cg[4], s.cg[5]}
	rhsHalf := [2][]float64{make([]float64, D), make([]float64, D)}
	if direct {
		s.coreNormalByUser(rhsHalf, half)
	} else {
		n := s.t.Len()
		s.halves(n/2, n, func(h, from, to int) { s.coreRHS(rhsHalf[h], from, to) })
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for x := range rhs {
		rhs[x] = rhsHalf[0][x] + rhsHalf[1][x]
	}
	if direct {
		return s.solveCoreDirect(rhs, half)
	}
	return s.solveCoreCG(ctx, rhs, half)
}

// coreScratch sizes the core solve's scratch: the right-hand side, CG's
// three vectors and the two halves (of the Gram matrix when direct, of
// an operator product otherwise).
func (s *alsSolver) coreScratch(D int, direct bool) {
	for x := range s.cg {
		size := D
		if direct && x >= 4 {
			size = D * D
		}
		if len(s.cg[x]) != size {
			s.cg[x] = make([]float64, size)
		}
	}
}

// halves runs run(0, 0, cut) and run(1, cut, n), on two goroutines unless
// the solver has one worker.
func (s *alsSolver) halves(cut, n int, run func(h, from, to int)) {
	if s.workers == 1 {
		run(0, 0, cut)
		run(1, cut, n)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { run(1, cut, n) })
	run(0, 0, cut)
	wg.Wait()
}

// coreRHS sets acc to Σ y z over the entries from…to−1 of the user index,
// z = a_i ⊗ b_j ⊗ c_k and y the rating less its biases.
func (s *alsSolver) coreRHS(acc []float64, from, to int) {
	clear(acc)
	d := s.m.Rank
	z := make([]float64, len(acc))
	for _, x := range s.idx[0].ent[from:to] {
		a, b, c := s.rowsOf(x)
		outer(d, a, b, c, z)
		y := x.v - s.bias(x, 3)
		for w, zw := range z {
			acc[w] += y * zw
		}
	}
}

// coreNormalByUser forms the core's normal equations (right-hand side and
// the Gram matrix's upper triangle) in two halves of the users of about
// equal entry count. Within a user, Σ y w and Σ w wᵀ over w = b_j ⊗ c_k
// (d² values), then z = a_i ⊗ w gives the user's share as a_i a_iᵀ ⊗
// Σ w wᵀ: d⁴/2 per entry instead of d⁶/2.
func (s *alsSolver) coreNormalByUser(rhsHalf, half [2][]float64) {
	n1 := s.t.Dims[0]
	cut := entryMidpoint(s.idx[0].off, n1)
	s.halves(cut, n1, func(h, from, to int) { s.coreUsers(rhsHalf[h], half[h], from, to) })
}

// coreUsers sets acc and gram to the shares of users from…to−1.
func (s *alsSolver) coreUsers(acc, gram []float64, from, to int) {
	clear(acc)
	clear(gram)
	d := s.m.Rank
	d2 := d * d
	M, rw, w := make([]float64, d2*d2), make([]float64, d2), make([]float64, d2)
	ix := s.idx[0]
	for i := from; i < to; i++ {
		ents := ix.ent[ix.off[i]:ix.off[i+1]]
		if len(ents) == 0 {
			continue
		}
		s.userCoreStats(ents, M, rw, w)
		addUserCore(d, acc, gram, s.m.A[i*d:i*d+d], M, rw)
	}
}

// userCoreStats sets rw = Σ y w and M = Σ w wᵀ (upper triangle) over one
// user's entries, w = b_j ⊗ c_k (scratch).
func (s *alsSolver) userCoreStats(ents []entry, M, rw, w []float64) {
	d := s.m.Rank
	d2 := d * d
	clear(M)
	clear(rw)
	for _, x := range ents {
		_, b, c := s.rowsOf(x)
		for q := range d {
			for t := range d {
				w[q*d+t] = b[q] * c[t]
			}
		}
		y := x.v - s.bias(x, 3)
		for u, wu := range w {
			rw[u] += y * wu
			mu := M[u*d2 : u*d2+d2]
			for v := u; v < d2; v++ {
				mu[v] += wu * w[v]
			}
		}
	}
}

// addUserCore adds a ⊗ rw to acc and the upper triangle of a aᵀ ⊗ M to
// gram (D × D, D = d³).
func addUserCore(d int, acc, gram, a, M, rw []float64) {
	d2, D := d*d, len(acc)
	for p := range d {
		for u := range d2 {
			acc[p*d2+u] += a[p] * rw[u]
		}
		for p2 := p; p2 < d; p2++ {
			ap := a[p] * a[p2]
			for u := range d2 {
				row := gram[(p*d2+u)*D+p2*d2:]
				v0 := 0
				if p2 == p {
					v0 = u
				}
				for v := v0; v < d2; v++ {
					m := M[min(u, v)*d2+max(u, v)]
					row[v] += ap * m
				}
			}
		}
	}
}

// solveCoreDirect adds the halves of the Gram matrix and the ridge and
// solves for the core by Cholesky (a tiny extra ridge if singular).
func (s *alsSolver) solveCoreDirect(rhs []float64, half [2][]float64) error {
	D := len(rhs)
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
	x := mat.NewVecDense(D, s.m.G)
	if err := chol.SolveVecTo(x, mat.NewVecDense(D, rhs)); err != nil {
		return fmt.Errorf("completion: ALS core: %w", err)
	}
	return nil
}

// solveCoreCG runs at most min(D, 50) conjugate-gradient steps on the
// core's normal equations from the current core.
func (s *alsSolver) solveCoreCG(ctx context.Context, rhs []float64, half [2][]float64) error {
	G := s.m.G
	r, p, ap := s.cg[1], s.cg[2], s.cg[3]
	s.coreOp(G, ap, half)
	var rr, bb float64
	for x := range r {
		r[x] = rhs[x] - ap[x]
		p[x] = r[x]
		rr += r[x] * r[x]
		bb += rhs[x] * rhs[x]
	}
	tol := 1e-16 * max(bb, 1e-300)
	for range min(len(G), 50) {
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
