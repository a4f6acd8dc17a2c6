package onebit

import (
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/lapack/gonum"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// The nuclear-ball projection needs only the singular values above a soft
// threshold, usually a few dozen of min(d1, d2). gonum offers only the full
// SVD (mat.SVD), which on a 943 × 1682 matrix costs seconds, so the top
// singular triplets are computed here by block subspace iteration with
// Rayleigh–Ritz, warm-started from the previous projection's right singular
// vectors (the solvers move little between iterations). The heavy work is
// the two products A·V and Aᵀ·Q per sweep, done by gonum's Dgemm or Sgemm
// (which split large products over all cores) or in compressed rows for a
// sparse A; the small QR and eigenproblems are gonum's. Small matrices get
// the exact spectrum from the Gram matrix (gramTop).

// triplets is a truncated SVD U diag(S) Vᵀ with S in decreasing order.
type triplets struct {
	U *mat.Dense // d1 × k
	S []float64
	V *mat.Dense // d2 × k
}

// subspaceSVD returns approximate top-b singular triplets of a by block
// subspace iteration with Rayleigh–Ritz, started from start's columns (d2 ×
// anything; the rest random from rnd). Each sweep costs two products with
// a (W = A V, B = Aᵀ Q with Q = orth(W)); the Ritz values come from the
// small b × b matrix BᵀB = Qᵀ A Aᵀ Q (their squares), so A ≈ Q R Σ (B R Σ⁻¹)ᵀ.
// It stops when the Ritz values that the soft threshold at tau keeps (and
// the next one) moved by at most tol·σ₁ in a sweep, or after maxSweeps, or
// at once when all b are above the threshold. startS, when it holds b
// values (the previous call's, for a nearby matrix), counts as the values
// before the first sweep, so a warm start can stop after one sweep.
// Ritz values approach the singular values from below, and the computed
// U, V have orthonormal columns up to rounding whatever the accuracy.
func subspaceSVD(a blockOp, b int, tau, tol float64, maxSweeps int, start *mat.Dense, startS []float64, rnd func() float64) (triplets, int, bool) {
	d1, d2 := a.Dims()
	b = min(b, d1, d2)
	it := newSubspaceIter(a, b, rnd)
	v := startBlock(start, d2, b, rnd)
	prev := make([]float64, b)
	havePrev := copy(prev, startS) == b
	var t triplets
	sweeps := 0
	for sweeps < maxSweeps {
		sweeps++
		var ok bool
		if t, ok = it.sweep(v); !ok {
			return triplets{}, sweeps, false
		}
		v = t.V
		_, k := softThreshold(t.S, tau)
		if k == b {
			// Every Ritz value is above the threshold: the block is too
			// small, which more sweeps cannot fix (the caller grows it).
			break
		}
		conv := (sweeps > 1 || havePrev) && settled(t.S, prev, min(k+1, b), tol)
		copy(prev, t.S)
		if conv {
			break
		}
	}
	return t, sweeps, true
}

// settled reports whether the first k values of s moved by at most
// tol·s₀ from prev.
func settled(s, prev []float64, k int, tol float64) bool {
	for i := range k {
		if math.Abs(s[i]-prev[i]) > tol*math.Max(s[0], 1e-300) {
			return false
		}
	}
	return true
}

// startBlock is the d2 × b start block: start's first columns (when it
// has d2 rows), the rest random from rnd.
func startBlock(start *mat.Dense, d2, b int, rnd func() float64) *mat.Dense {
	v := mat.NewDense(d2, b, nil)
	nStart := 0
	if start != nil {
		if r, c := start.Dims(); r == d2 {
			nStart = min(c, b)
			v.Slice(0, d2, 0, nStart).(*mat.Dense).Copy(start.Slice(0, d2, 0, nStart))
		}
	}
	for j := nStart; j < b; j++ {
		for i := range d2 {
			v.Set(i, j, rnd()-0.5)
		}
	}
	return v
}

// subspaceIter holds a subspace iteration's operator and scratch.
type subspaceIter struct {
	a      blockOp
	b      int
	q, bm  *mat.Dense // A V (orthonormalised), Aᵀ Q
	h      *mat.SymDense
	es     mat.EigenSym
	ev     mat.Dense
	rev    *mat.Dense
	s      []float64
	rnd    func() float64
	d1, d2 int
}

func newSubspaceIter(a blockOp, b int, rnd func() float64) *subspaceIter {
	d1, d2 := a.Dims()
	return &subspaceIter{a: a, b: b, q: mat.NewDense(d1, b, nil), bm: mat.NewDense(d2, b, nil), h: mat.NewSymDense(b, nil),
		rev: mat.NewDense(b, b, nil), s: make([]float64, b), rnd: rnd, d1: d1, d2: d2}
}

// sweep is one sweep from the block v: W = A V, Q = orth(W), B = Aᵀ Q,
// and the Ritz triplets from the eigenproblem of BᵀB.
func (it *subspaceIter) sweep(v *mat.Dense) (triplets, bool) {
	b, s := it.b, it.s
	it.a.mulTo(it.q, v)
	orthonormalize(it.q)
	it.a.mulTTo(it.bm, it.q) // B = Aᵀ Q, d2 × b
	it.h.SymOuterK(1, it.bm.T())
	if !it.es.Factorize(it.h, true) {
		return triplets{}, false
	}
	lam := it.es.Values(nil) // ascending
	it.es.VectorsTo(&it.ev)
	for j := range b {
		s[j] = math.Sqrt(math.Max(lam[b-1-j], 0))
		for i := range b {
			it.rev.Set(i, j, it.ev.At(i, b-1-j))
		}
	}
	// Left vectors U = Q R; right V = B R Σ⁻¹, whose columns are
	// orthonormal to rounding (BᵀB R = R Λ) where σ is not tiny; the
	// others only seed the next sweep, so they are replaced by random
	// vectors.
	u := mat.NewDense(it.d1, b, nil)
	u.Mul(it.q, it.rev)
	vn := mat.NewDense(it.d2, b, nil)
	vn.Mul(it.bm, it.rev)
	for j := range b {
		if s[j] > 1e-7*s[0] {
			inv := 1 / s[j]
			for i := range it.d2 {
				vn.Set(i, j, vn.At(i, j)*inv)
			}
		} else {
			for i := range it.d2 {
				vn.Set(i, j, it.rnd()-0.5)
			}
		}
	}
	return triplets{U: u, S: append([]float64(nil), s...), V: vn}, true
}

// blockOp is a matrix seen through its products with dense blocks.
type blockOp interface {
	Dims() (r, c int)
	mulTo(dst, v *mat.Dense)  // dst = A v
	mulTTo(dst, q *mat.Dense) // dst = Aᵀ q
}

// denseOp is a dense matrix (gonum's Dgemm, parallel over the cores).
type denseOp struct{ a *mat.Dense }

func (o denseOp) Dims() (int, int)         { return o.a.Dims() }
func (o denseOp) mulTo(dst, v *mat.Dense)  { dst.Mul(o.a, v) }
func (o denseOp) mulTTo(dst, q *mat.Dense) { dst.Mul(o.a.T(), q) }

// dense32Op is a dense matrix whose products are computed in single
// precision (gonum's Sgemm does about 1.4 times the work per second of
// Dgemm): the subspace iteration only needs the block products to steer
// its vectors, and every vector it returns is re-orthonormalised or
// checked in double precision (the certificate's nuclear-norm bound uses
// the vectors actually returned, whatever their accuracy).
type dense32Op struct {
	d1, d2 int
	a      []float32
}

// newDense32Op converts z (d1 × d2 row-major) into buf (reused when large
// enough).
func newDense32Op(z []float64, d1, d2 int, buf []float32) dense32Op {
	if cap(buf) < len(z) {
		buf = make([]float32, len(z))
	}
	buf = buf[:len(z)]
	for i, v := range z {
		buf[i] = float32(v)
	}
	return dense32Op{d1: d1, d2: d2, a: buf}
}

func (o dense32Op) Dims() (int, int) { return o.d1, o.d2 }

func to32(m *mat.Dense) blas32.General {
	r, c := m.Dims()
	out := blas32.General{Rows: r, Cols: c, Stride: c, Data: make([]float32, r*c)}
	for i := range r {
		row := m.RawRowView(i)
		for j, v := range row {
			out.Data[i*c+j] = float32(v)
		}
	}
	return out
}

func from32(dst *mat.Dense, g blas32.General) {
	for i := range g.Rows {
		row := dst.RawRowView(i)
		for j := range row {
			row[j] = float64(g.Data[i*g.Stride+j])
		}
	}
}

func (o dense32Op) mulTo(dst, v *mat.Dense) {
	_, b := v.Dims()
	out := blas32.General{Rows: o.d1, Cols: b, Stride: b, Data: make([]float32, o.d1*b)}
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, blas32.General{Rows: o.d1, Cols: o.d2, Stride: o.d2, Data: o.a}, to32(v), 0, out)
	from32(dst, out)
}

func (o dense32Op) mulTTo(dst, q *mat.Dense) {
	_, b := q.Dims()
	out := blas32.General{Rows: o.d2, Cols: b, Stride: b, Data: make([]float32, o.d2*b)}
	blas32.Gemm(blas.Trans, blas.NoTrans, 1, blas32.General{Rows: o.d1, Cols: o.d2, Stride: o.d2, Data: o.a}, to32(q), 0, out)
	from32(dst, out)
}

// sparseOp is a matrix in compressed rows (the splitting's first
// nuclear projection: 2·prox(0) is zero off Ω).
type sparseOp struct {
	d1, d2 int
	rowPtr []int
	col    []int32
	val    []float64
}

// newSparseOp returns z (d1 × d2, row-major) in compressed rows if it has
// at most maxNNZ non-zeros.
func newSparseOp(z []float64, d1, d2, maxNNZ int) (*sparseOp, bool) {
	nnz := 0
	for _, v := range z {
		if v != 0 {
			nnz++
			if nnz > maxNNZ {
				return nil, false
			}
		}
	}
	o := &sparseOp{d1: d1, d2: d2, rowPtr: make([]int, d1+1), col: make([]int32, 0, nnz), val: make([]float64, 0, nnz)}
	for i := range d1 {
		for j, v := range z[i*d2 : (i+1)*d2] {
			if v != 0 {
				o.col = append(o.col, int32(j))
				o.val = append(o.val, v)
			}
		}
		o.rowPtr[i+1] = len(o.val)
	}
	return o, true
}

func (o *sparseOp) Dims() (int, int) { return o.d1, o.d2 }

func (o *sparseOp) mulTo(dst, v *mat.Dense) {
	dst.Zero()
	if _, b := v.Dims(); b == 1 {
		for i := range o.d1 {
			var sum float64
			for p := o.rowPtr[i]; p < o.rowPtr[i+1]; p++ {
				sum += o.val[p] * v.At(int(o.col[p]), 0)
			}
			dst.Set(i, 0, sum)
		}
		return
	}
	for i := range o.d1 {
		row := dst.RawRowView(i)
		for p := o.rowPtr[i]; p < o.rowPtr[i+1]; p++ {
			floats.AddScaled(row, o.val[p], v.RawRowView(int(o.col[p])))
		}
	}
}

func (o *sparseOp) mulTTo(dst, q *mat.Dense) {
	dst.Zero()
	if _, b := q.Dims(); b == 1 {
		for i := range o.d1 {
			qi := q.At(i, 0)
			for p := o.rowPtr[i]; p < o.rowPtr[i+1]; p++ {
				j := int(o.col[p])
				dst.Set(j, 0, dst.At(j, 0)+o.val[p]*qi)
			}
		}
		return
	}
	for i := range o.d1 {
		qi := q.RawRowView(i)
		for p := o.rowPtr[i]; p < o.rowPtr[i+1]; p++ {
			floats.AddScaled(dst.RawRowView(int(o.col[p])), o.val[p], qi)
		}
	}
}

// lapack64Impl is gonum's pure-Go LAPACK (the routines gramTop needs are
// not all in lapack64's wrappers).
var lapack64Impl gonum.Implementation

// softThreshold returns θ ≥ 0 with Σ max(s_i − θ, 0) = tau for s sorted in
// decreasing order with Σ s_i > tau, and the number of values above θ.
func softThreshold(s []float64, tau float64) (float64, int) {
	var cum float64
	for k := range s {
		cum += s[k]
		theta := (cum - tau) / float64(k+1)
		if k+1 == len(s) || s[k+1] <= theta {
			return math.Max(theta, 0), k + 1
		}
	}
	return 0, len(s)
}

// fullSVD is the exact (and slow) reference: gonum's complete SVD.
func fullSVD(a *mat.Dense) (triplets, bool) {
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDThin) {
		return triplets{}, false
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	s := svd.Values(nil)
	if !sort.SliceIsSorted(s, func(i, j int) bool { return s[i] > s[j] }) {
		return triplets{}, false
	}
	return triplets{U: &u, S: s, V: &v}, true
}

// orthonormalize replaces the columns of q (m × n, m ≥ n) by an orthonormal
// basis of their span (Householder QR; thin Q via LAPACK's Dorgqr, which
// gonum's mat.QR does not expose: its QTo builds the full m × m Q).
func orthonormalize(q *mat.Dense) {
	g := q.RawMatrix()
	n := g.Cols
	tau := make([]float64, n)
	work := make([]float64, 1)
	lapack64.Geqrf(g, tau, work, -1)
	lw := int(work[0])
	lapack64.Orgqr(g, tau, work, -1)
	lw = max(lw, int(work[0]), n)
	work = make([]float64, lw)
	lapack64.Geqrf(g, tau, work, lw)
	lapack64.Orgqr(g, tau, work, lw)
}

// gramTop returns the singular triplets of a that a projection onto the
// nuclear ball of radius tau keeps — those above the soft threshold θ with
// Σ (σ_i − θ)₊ = tau — or inside = true (and no triplets) when Σ σ_i ≤ tau.
// It works on the Gram matrix G = A Aᵀ of the smaller side (eigenvalues
// σ_i², eigenvectors the singular vectors of that side, the other side's
// vectors Aᵀu_i/σ_i), and computes only the eigenvectors it needs: G is reduced to tridiagonal form
// T = Qᵀ G Q (LAPACK's Dsytrd), all eigenvalues come from T (Dsterf), the
// kept ones' eigenvectors by inverse iteration on T, reorthogonalised
// within clusters of close eigenvalues as LAPACK's Dstein does, and are
// mapped back by Q (Dormqr). gonum's complete eigendecomposition (Dsteqr,
// which rotates an m × m matrix of vectors) costs 3–5 times as much for
// m ≈ 1000. Singular values below 1e-7·σ₁ are treated as 0 (the Gram
// route loses their accuracy; they are far below any threshold met).
func gramTop(a *mat.Dense, tau float64) (t triplets, inside bool, ok bool) {
	return gramTopK(a, tau, 0)
}

// gramTopK is gramTop with keep > 0: the triplets of the keep largest
// singular values above 1e-10·σ₁ (tau ignored).
func gramTopK(a *mat.Dense, tau float64, keep int) (t triplets, inside bool, ok bool) {
	d1, d2 := a.Dims()
	var wide mat.Matrix = a // m × n
	if d1 > d2 {
		wide = a.T()
	}
	tri := gramTridiagonal(wide)
	lam, ok := tri.eigenvalues()
	if !ok {
		return triplets{}, false, false
	}
	m := tri.m
	s := make([]float64, m) // descending singular values
	for i := range m {
		s[i] = math.Sqrt(math.Max(lam[m-1-i], 0))
	}
	k, done, inside := keptCount(s, tau, keep, d1, d2)
	if done != nil {
		return *done, inside, true
	}
	z, ok := tri.topVectors(lam, k)
	if !ok {
		return triplets{}, false, false
	}
	tri.backTransform(z)
	w := otherSide(wide, z, s[:k])
	sk := slices.Clone(s[:k])
	if d1 <= d2 {
		return triplets{U: z, S: sk, V: w}, false, true
	}
	return triplets{U: w, S: sk, V: z}, false, true
}

// keptCount returns how many of the singular values s (descending) gramTopK
// keeps: with keep > 0 those among the keep largest above 1e-10·σ₁;
// otherwise those above the soft threshold at tau, after setting the
// values below 1e-7·σ₁ to 0. When no vectors are needed it returns the
// result in done (inside: Σ σ_i ≤ tau).
func keptCount(s []float64, tau float64, keep, d1, d2 int) (k int, done *triplets, inside bool) {
	if keep > 0 {
		for k < min(keep, len(s)) && s[k] > 1e-10*s[0] {
			k++
		}
		if k == 0 {
			return 0, &triplets{S: nil, U: mat.NewDense(d1, 1, nil), V: mat.NewDense(d2, 1, nil)}, false
		}
		return k, nil, false
	}
	for i := range s {
		if s[i] <= 1e-7*s[0] {
			s[i] = 0
		}
	}
	if floats.Sum(s) <= tau {
		return 0, &triplets{S: s}, true
	}
	_, k = softThreshold(s, tau)
	return k, nil, false
}

// tridiag is the Gram matrix G = W Wᵀ of an m × n matrix W reduced to
// tridiagonal form T = Qᵀ G Q (LAPACK's Dsytrd, lower): diagonal dg,
// off-diagonal e, Q's reflectors in full (m × m) and tauR; dl, dd and du
// are scratch for the tridiagonal solves.
type tridiag struct {
	m           int
	full        []float64
	dg, e, tauR []float64
	dl, dd, du  []float64
}

func gramTridiagonal(wide mat.Matrix) *tridiag {
	m, _ := wide.Dims()
	g := mat.NewSymDense(m, nil)
	g.SymOuterK(1, wide)
	raw := g.RawSymmetric() // upper triangle, row-major
	// Dsytrd with uplo = Lower reads the lower triangle (row-major): copy
	// the upper triangle to a full square array.
	lda := m
	full := make([]float64, m*m)
	for i := range m {
		for j := i; j < m; j++ {
			v := raw.Data[i*raw.Stride+j]
			full[i*lda+j], full[j*lda+i] = v, v
		}
	}
	impl := lapack64Impl
	dg := make([]float64, m)
	e := make([]float64, max(m-1, 1))
	tauR := make([]float64, max(m-1, 1))
	work := make([]float64, 1)
	impl.Dsytrd(blas.Lower, m, full, lda, dg, e, tauR, work, -1)
	work = make([]float64, max(int(work[0]), 1))
	impl.Dsytrd(blas.Lower, m, full, lda, dg, e, tauR, work, len(work))
	return &tridiag{m: m, full: full, dg: dg, e: e, tauR: tauR}
}

// eigenvalues returns T's eigenvalues in ascending order (Dsterf).
func (tr *tridiag) eigenvalues() ([]float64, bool) {
	lam := slices.Clone(tr.dg)
	off := slices.Clone(tr.e[:max(tr.m-1, 0)])
	if !lapack64Impl.Dsterf(tr.m, lam, off) {
		return nil, false
	}
	return lam, true
}

// norm1 is ‖T‖₁.
func (tr *tridiag) norm1() float64 {
	var tnorm float64
	for i := range tr.m {
		r := math.Abs(tr.dg[i])
		if i > 0 {
			r += math.Abs(tr.e[i-1])
		}
		if i < tr.m-1 {
			r += math.Abs(tr.e[i])
		}
		tnorm = math.Max(tnorm, r)
	}
	return tnorm
}

// machEps is the float64 machine epsilon.
const machEps = 2.220446049250313e-16

// topVectors returns the eigenvectors of T for its k largest eigenvalues
// (lam ascending) by inverse iteration from deterministic start vectors,
// reorthogonalised within clusters of close eigenvalues.
func (tr *tridiag) topVectors(lam []float64, k int) (*mat.Dense, bool) {
	m := tr.m
	tnorm := tr.norm1()
	z := mat.NewDense(m, k, nil)
	ortol := 1e-3 * tnorm
	tr.dl, tr.dd, tr.du = make([]float64, max(m-1, 1)), make([]float64, m), make([]float64, max(m-1, 1))
	x := make([]float64, m)
	seed := uint64(1)
	next := func() float64 { // deterministic start vectors (xorshift)
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return float64(seed>>11)/float64(1<<53) - 0.5
	}
	clusterStart := 0
	for c := range k {
		ev := lam[m-1-c]
		if c > 0 && lam[m-c]-ev > ortol {
			clusterStart = c
		}
		for i := range x {
			x[i] = next()
		}
		if !tr.inverseIterate(x, ev+10*machEps*tnorm, tnorm, z.Slice(0, m, clusterStart, c+1).(*mat.Dense), c-clusterStart) {
			return nil, false
		}
		z.SetCol(c, x)
	}
	return z, true
}

// inverseIterate runs three steps of inverse iteration on x at shift,
// orthogonalising x against the first prior columns of cluster (twice) as
// LAPACK's Dstein does; it reports false on a non-finite vector.
func (tr *tridiag) inverseIterate(x []float64, shift, tnorm float64, cluster *mat.Dense, prior int) bool {
	m := tr.m
	dl, dd, du := tr.dl, tr.dd, tr.du
	for it := 0; it < 3; it++ {
		copy(dl, tr.e[:max(m-1, 0)])
		copy(du, tr.e[:max(m-1, 0)])
		for i := range m {
			dd[i] = tr.dg[i] - shift
		}
		if !lapack64Impl.Dgtsv(m, 1, dl[:max(m-1, 0)], dd, du[:max(m-1, 0)], x, 1) {
			// Exactly singular: move the shift and retry.
			shift += 100 * machEps * tnorm
			it--
			continue
		}
		// Orthogonalise against the cluster's earlier vectors (twice).
		for range 2 {
			for j := range prior {
				col := cluster.ColView(j).(*mat.VecDense)
				xv := mat.NewVecDense(m, x)
				xv.AddScaledVec(xv, -mat.Dot(xv, col), col)
			}
		}
		nrm := floats.Norm(x, 2)
		if !(nrm > 0) || math.IsInf(nrm, 0) {
			return false
		}
		floats.Scale(1/nrm, x)
	}
	return true
}

// backTransform maps T's eigenvectors z to G's: U = Q z, Q = diag(1, Q̃)
// with Q̃'s reflectors in full[1:, 0:m-1] (Dormtr's lower case).
func (tr *tridiag) backTransform(z *mat.Dense) {
	m, lda := tr.m, tr.m
	if m <= 1 {
		return
	}
	_, k := z.Dims()
	zr := z.RawMatrix()
	work := make([]float64, 1)
	lapack64Impl.Dormqr(blas.Left, blas.NoTrans, m-1, k, m-1, tr.full[lda:], lda, tr.tauR, zr.Data[zr.Stride:], zr.Stride, work, -1)
	work = make([]float64, max(int(work[0]), 1))
	lapack64Impl.Dormqr(blas.Left, blas.NoTrans, m-1, k, m-1, tr.full[lda:], lda, tr.tauR, zr.Data[zr.Stride:], zr.Stride, work, len(work))
}

// otherSide returns the other side's singular vectors W = wideᵀ U
// diag(1/σ) for the left vectors u of wide with singular values s.
func otherSide(wide mat.Matrix, u *mat.Dense, s []float64) *mat.Dense {
	_, n := wide.Dims()
	k := len(s)
	w := mat.NewDense(n, k, nil)
	w.Mul(wide.T(), u)
	for j := range k {
		inv := 1 / s[j]
		for i := range n {
			w.Set(i, j, w.At(i, j)*inv)
		}
	}
	return w
}
