package mf

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	lapackgonum "gonum.org/v1/gonum/lapack/gonum"
)

type lapackImpl = lapackgonum.Implementation

// The inner loops of the least-squares solvers. The systems are small
// (rank + 1 ≤ a few hundred) and there are millions of them, so what
// matters is where the arithmetic runs: gonum's assembly kernels (SSE2)
// do it about 1.3–1.5× faster than the best scalar Go loops here, but
// only when called directly on the arrays — gonum's Dsyrk on a gathered
// block (it strides through the block once per row of the result) and
// its Cholesky through mat.Cholesky (copies, allocation) are slower than
// the scalar loops. So the Gram blocks are one Dgemv per row of the
// triangle on gathered rows (gramAdd), and the solves lapack's Dpotrf
// and Dtrsv on the system itself (cholSolve); BenchmarkGram and
// BenchmarkSolve compare them with the previous hand-written loops
// (gramAdd8: eight rows per pass over the triangle, 20 % faster than
// four; cholSolveAxpy: right-looking, row-oriented).

// dot is Σ x[i]·y[i] (len(y) ≥ len(x)).
func dot(x, y []float64) float64 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy is y += a·x (len(y) ≥ len(x)).
func axpy(a float64, x, y []float64) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

// gramBlock is the number of rows gramAdd gathers into one dense block.
const gramBlock = 128

// gramBuf is gramAdd's scratch: a block of gathered rows and the same
// rows weighted.
type gramBuf struct{ x, xw []float64 }

// gramAdd adds Σ_t w_t · x_t x_tᵀ to the upper triangle of the leading
// k×k block of the row-major matrix a (row stride lda ≥ k), where x_t is
// row idx[t] of the row-major factor matrix f (stride k) and w_t = w[t]
// (w nil: all 1); and, when h is not nil, Σ_t w_t·z_t·x_t to h (z nil:
// all 1). buf (nil: allocated here) holds the gathered rows.
//
// The rows are gathered gramBlock at a time into a dense block X (and
// W = diag(w)·X), and each row p of the triangle is one matrix–vector
// product a[p, p:k] += X[:, p:k]ᵀ W[:, p] through gonum's Dgemv, whose
// assembly kernel keeps four entries of the row in registers while it
// streams four rows of the block; h += Wᵀz is one more. The sums are
// float64 throughout.
func gramAdd(a []float64, lda, k int, f []float64, idx []int32, w, z, h []float64, buf *gramBuf) {
	if buf == nil {
		buf = new(gramBuf)
	}
	if len(buf.x) < gramBlock*k {
		buf.x = make([]float64, gramBlock*k)
		buf.xw = make([]float64, gramBlock*k)
	}
	var ones [gramBlock]float64
	if z == nil && h != nil {
		for i := range ones {
			ones[i] = 1
		}
	}
	for beg := 0; beg < len(idx); beg += gramBlock {
		n := min(gramBlock, len(idx)-beg)
		x := buf.x[:n*k]
		for t, j := range idx[beg : beg+n] {
			copy(x[t*k:t*k+k], f[int(j)*k:int(j)*k+k])
		}
		xw := x
		if w != nil {
			xw = buf.xw[:n*k]
			for t, wt := range w[beg : beg+n] {
				r, s := x[t*k:t*k+k], xw[t*k:t*k+k]
				for c, v := range r {
					s[c] = wt * v
				}
			}
		}
		var zb []float64
		if z != nil {
			zb = z[beg : beg+n]
		} else {
			zb = ones[:n]
		}
		gramDense(a, lda, k, x, xw, n, zb, h)
	}
}

// gramDense adds Xᵀ·W to the upper triangle of the leading k×k block of
// a (row stride lda) and, when h is not nil, Wᵀz to h, for the dense
// row-major n×k blocks X and W (W = diag(w)·X, so Xᵀ·W is symmetric).
func gramDense(a []float64, lda, k int, x, xw []float64, n int, z, h []float64) {
	var impl gonum.Implementation
	for p := range k {
		impl.Dgemv(blas.Trans, n, k-p, 1, x[p:], k, xw[p:], k, 1, a[p*lda+p:], 1)
	}
	if h != nil {
		impl.Dgemv(blas.Trans, n, k, 1, xw, k, z, 1, 1, h, 1)
	}
}

// mirror copies the upper triangle of the k×k row-major a to the lower.
func mirror(a []float64, k int) {
	for p := range k {
		for q := p + 1; q < k; q++ {
			a[q*k+p] = a[p*k+q]
		}
	}
}

// cholSolve solves a·x = b for the symmetric positive definite k×k
// row-major a, reading only its upper triangle, which it overwrites with
// the Cholesky factor R (a = RᵀR); b is overwritten with x. It returns
// false when a is not positive definite (a pivot not positive or not
// finite). The factorisation is LAPACK's dpotrf and the two triangular
// solves dtrsv, called directly on the array: gonum's versions run
// their inner products in its assembly kernels, 1.5× faster at k = 32
// than a hand-written right-looking loop (BenchmarkSolve); it is going
// through mat.Cholesky (copies, allocation) that is slow.
func cholSolve(a []float64, k int, b []float64) bool {
	if !(lapackImpl{}).Dpotrf(blas.Upper, k, a, k) {
		return false
	}
	for i := range k {
		if math.IsInf(a[i*k+i], 0) {
			return false
		}
	}
	var impl gonum.Implementation
	impl.Dtrsv(blas.Upper, blas.Trans, blas.NonUnit, k, a, k, b, 1)
	impl.Dtrsv(blas.Upper, blas.NoTrans, blas.NonUnit, k, a, k, b, 1)
	return true
}
