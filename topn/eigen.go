package topn

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/internal/subspace"
)

// eigenIters is the number of subspace iterations of topEigen. With r
// wanted and b = r + oversample(r) columns, the k-th eigenvector's error
// falls like (λ_{b+1}/λ_k)^iters: the directions well above the noise
// floor converge in a few iterations; those just above it carry little
// weight after the shrinkage by the edge. Checked against gonum's dense
// EigenSym (TestTopEigenMatchesDense) and on MovieLens-1M's dp-ease
// (docs/topn.md: the same Recall@20 as 60 iterations of mf.TopEigen's
// Gram–Schmidt, at a sixth of the CPU).
const eigenIters = 20

// oversample is the number of extra columns for r wanted.
func oversample(r int) int { return max(10, r/4) }

// topEigen returns the r largest eigenvalues of the symmetric positive
// semi-definite-plus-shift g (descending) and their eigenvectors (m × r),
// by randomised subspace iteration (Halko, Martinsson and Tropp, "Finding
// Structure with Randomness", SIAM Review 2011) whose every step is a
// BLAS-3 product on all cores: Y = G·Q (Dsymm through a dense copy:
// gonum's Dgemm runs in parallel), then Q = orth(Y) by CholeskyQR2
// (Yᵀ Y, its Cholesky factor, a triangular solve; twice for orthogonality
// to machine precision), and a Rayleigh–Ritz step at the end. rng draws
// the starting block (non-private randomness).
func topEigen(g *mat.SymDense, r int, rng *rand.Rand) ([]float64, *mat.Dense) {
	m := g.SymmetricDim()
	r = max(1, min(r, m))
	b := min(m, r+oversample(r))
	full := subspace.Dense(g)
	q := mat.NewDense(m, b, nil)
	qd := q.RawMatrix().Data
	for i := range qd {
		qd[i] = rng.NormFloat64()
	}
	y := mat.NewDense(m, b, nil)
	orth(q)
	for range eigenIters {
		y.Mul(full, q)
		orth(y)
		q, y = y, q
	}
	// Rayleigh–Ritz: the eigenpairs of Qᵀ G Q.
	return subspace.RayleighRitz(full, q, r)
}

// orth makes the columns of y orthonormal in place (CholeskyQR2: Y ←
// Y R⁻¹ with Rᵀ R = Yᵀ Y, twice). A Gram matrix too ill-conditioned for
// Cholesky gets a relative jitter on its diagonal; columns that vanish
// stay small rather than fail.
func orth(y *mat.Dense) {
	for range 2 {
		cholQR(y)
	}
}

func cholQR(y *mat.Dense) {
	_, b := y.Dims()
	yy := mat.NewSymDense(b, nil)
	yy.SymOuterK(1, y.T())
	var tr float64
	for i := range b {
		tr += yy.At(i, i)
	}
	jitter := 0.0
	for range 8 {
		a := blas64.Symmetric{N: b, Stride: b, Data: append([]float64(nil), yy.RawSymmetric().Data...), Uplo: blas.Upper}
		for i := range b {
			a.Data[i*b+i] += jitter
		}
		if _, ok := lapack64.Potrf(a); ok {
			// Y ← Y R⁻¹ (R upper triangular: Rᵀ R = Yᵀ Y).
			blas64.Trsm(blas.Right, blas.NoTrans, 1, blas64.Triangular{N: b, Stride: b, Data: a.Data, Uplo: blas.Upper, Diag: blas.NonUnit}, y.RawMatrix())
			return
		}
		jitter = math.Max(jitter*100, 1e-13*tr/float64(b)+math.SmallestNonzeroFloat64)
	}
}
