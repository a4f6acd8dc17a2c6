package jointdp

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy/noise"
)

// symOp applies a symmetric n × n operator: dst = A·x.
type symOp func(dst, x []float64) error

// eigOptions controls topEigen.
type eigOptions struct {
	// Tol is the relative residual ‖A v − θ v‖ ≤ Tol·|θ| at which the top
	// Ritz pair is accepted.
	Tol float64
	// Steps is the Krylov dimension before an explicit restart.
	Steps int
	// Restarts bounds the number of restarts.
	Restarts int
}

func (o eigOptions) withDefaults(n int) eigOptions {
	if o.Tol <= 0 {
		o.Tol = 1e-7
	}
	if o.Steps <= 0 {
		o.Steps = 40
	}
	if o.Steps > n {
		o.Steps = n
	}
	if o.Restarts <= 0 {
		o.Restarts = 20
	}
	return o
}

// topEigen returns the algebraically largest eigenvalue of the symmetric
// operator op and a unit eigenvector, by Lanczos with full
// reorthogonalisation and explicit restarts from the current Ritz vector.
// start (may be nil) warm-starts the iteration; rnd supplies a random start
// otherwise. It is hand-written because gonum offers dense eigensolvers
// only, and the operators here are either sparse products AᵀA (which must
// not be formed) or dense matrices whose top pair alone is needed each
// iteration (a full dense eigendecomposition costs O(n³) every time).
func topEigen(ctx context.Context, op symOp, n int, start []float64, rnd *noise.Source, o eigOptions) (float64, []float64, error) {
	o = o.withDefaults(n)
	v := make([]float64, n)
	if len(start) == n && floats.Norm(start, 2) > 0 {
		copy(v, start)
	} else {
		for i := range v {
			v[i] = rnd.NormFloat64()
		}
	}
	var theta float64
	for restart := 0; restart <= o.Restarts; restart++ {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		th, ritz, res, err := lanczosRun(ctx, op, v, o.Steps, o.Tol)
		if err != nil {
			return 0, nil, err
		}
		theta, v = th, ritz
		if res <= o.Tol*math.Max(math.Abs(theta), 1e-300) {
			return theta, v, nil
		}
	}
	// Not converged to Tol: the Ritz pair is still the best estimate found;
	// Frank–Wolfe tolerates an approximate linear oracle (slack γ).
	return theta, v, nil
}

// lanczosRun runs up to k Lanczos steps from q1, stopping early once the
// top Ritz pair's residual estimate β_j·|s_j| is at most tol·|θ|, and
// returns the top Ritz value, its (unit) Ritz vector and that estimate.
func lanczosRun(ctx context.Context, op symOp, q1 []float64, k int, tol float64) (float64, []float64, float64, error) {
	n := len(q1)
	Q := make([][]float64, 0, k)
	q := make([]float64, n)
	copy(q, q1)
	nrm := floats.Norm(q, 2)
	if nrm == 0 {
		return 0, nil, 0, fmt.Errorf("jointdp: zero start vector")
	}
	floats.Scale(1/nrm, q)
	alpha := make([]float64, 0, k)
	beta := make([]float64, 0, k)
	w := make([]float64, n)
	var th float64
	var s []float64
	var lastBeta float64
	for j := 0; j < k; j++ {
		if j%8 == 7 {
			if err := ctx.Err(); err != nil {
				return 0, nil, 0, err
			}
		}
		Q = append(Q, q)
		if err := op(w, q); err != nil {
			return 0, nil, 0, err
		}
		a := floats.Dot(w, q)
		alpha = append(alpha, a)
		// Full reorthogonalisation (twice is enough, Kahan–Parlett).
		for pass := 0; pass < 2; pass++ {
			for _, qq := range Q {
				floats.AddScaled(w, -floats.Dot(w, qq), qq)
			}
		}
		b := floats.Norm(w, 2)
		th, s = tridiagTop(alpha, beta)
		lastBeta = b
		scale := math.Max(math.Abs(th), math.Sqrt(floats.Dot(alpha, alpha)))
		if b <= 1e-13*math.Max(scale, 1e-300) || j == n-1 {
			lastBeta = 0 // invariant subspace: the Ritz pair is exact
			break
		}
		if j == k-1 || (j >= 2 && b*math.Abs(s[len(s)-1]) <= tol*math.Abs(th)) {
			break
		}
		beta = append(beta, b)
		q = make([]float64, n)
		floats.ScaleTo(q, 1/b, w)
	}
	ritz := make([]float64, n)
	for j, qq := range Q {
		floats.AddScaled(ritz, s[j], qq)
	}
	if nr := floats.Norm(ritz, 2); nr > 0 {
		floats.Scale(1/nr, ritz)
	}
	res := math.Abs(lastBeta * s[len(s)-1])
	return th, ritz, res, nil
}

// tridiagTop returns the largest eigenvalue of the symmetric tridiagonal
// matrix with diagonal alpha and off-diagonal beta (len(alpha)−1 used), and
// its unit eigenvector.
func tridiagTop(alpha, beta []float64) (float64, []float64) {
	j := len(alpha)
	if j == 1 {
		return alpha[0], []float64{1}
	}
	t := mat.NewSymDense(j, nil)
	for i := range j {
		t.SetSym(i, i, alpha[i])
		if i+1 < j {
			t.SetSym(i, i+1, beta[i])
		}
	}
	var es mat.EigenSym
	if !es.Factorize(t, true) {
		// Fall back to the diagonal (never seen for symmetric input).
		best := 0
		for i := range alpha {
			if alpha[i] > alpha[best] {
				best = i
			}
		}
		s := make([]float64, j)
		s[best] = 1
		return alpha[best], s
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	top := j - 1 // ascending order
	s := make([]float64, j)
	mat.Col(s, top, &vecs)
	return vals[top], s
}

// topEigenDense returns the r largest eigenvalues (descending) of the
// dense symmetric matrix w and their unit eigenvectors as the columns of an
// n × r matrix. Small problems (or r a sizeable fraction of n) take gonum's
// full eigendecomposition; otherwise the pairs come one at a time from
// topEigen on w with the pairs already found deflated (moved to an
// eigenvalue below the whole spectrum), which costs O(r·k·n²) for k
// Lanczos steps instead of the O(n³) of the full decomposition (seconds,
// not tens of seconds, for n ≈ 2 000).
func topEigenDense(w *mat.SymDense, r int) ([]float64, *mat.Dense, error) {
	n := w.SymmetricDim()
	if r < 1 || r > n {
		return nil, nil, fmt.Errorf("jointdp: rank %d out of range 1..%d", r, n)
	}
	if n <= denseEigenMax || 8*r > n {
		return topEigenFull(w, r)
	}
	// Every eigenvalue of w lies in [−‖w‖_F, ‖w‖_F]; a found pair is moved
	// to −(‖w‖_F + 1), below all of them, so the next largest is on top.
	fro := mat.Norm(w, 2)
	if math.IsNaN(fro) || math.IsInf(fro, 0) {
		return nil, nil, fmt.Errorf("jointdp: eigendecomposition of a non-finite matrix")
	}
	out := mat.NewDense(n, r, nil)
	top := make([]float64, r)
	vecs := make([][]float64, 0, r)
	shifts := make([]float64, 0, r)
	mul := denseSymOp(w)
	op := func(dst, x []float64) error {
		if err := mul(dst, x); err != nil {
			return err
		}
		for k, v := range vecs {
			floats.AddScaled(dst, -shifts[k]*floats.Dot(v, x), v)
		}
		return nil
	}
	// The start vectors are not privacy noise (w is already released):
	// a fixed seed makes the result reproducible.
	rnd := noise.Seeded(1)
	for c := range r {
		th, v, err := topEigen(context.Background(), op, n, nil, rnd, eigOptions{Tol: 1e-6, Steps: 60, Restarts: 60})
		if err != nil {
			return nil, nil, err
		}
		top[c] = th
		out.SetCol(c, v)
		vecs = append(vecs, v)
		shifts = append(shifts, th+fro+1)
	}
	return top, out, nil
}

// denseEigenMax is the size up to which topEigenDense takes the full
// decomposition (about 0.1 s at n = 400).
const denseEigenMax = 400

// topEigenFull is topEigenDense by gonum's full eigendecomposition.
func topEigenFull(w *mat.SymDense, r int) ([]float64, *mat.Dense, error) {
	n := w.SymmetricDim()
	var es mat.EigenSym
	if !es.Factorize(w, true) {
		return nil, nil, fmt.Errorf("jointdp: eigendecomposition failed")
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	out := mat.NewDense(n, r, nil)
	top := make([]float64, r)
	col := make([]float64, n)
	for c := range r {
		src := n - 1 - c
		top[c] = vals[src]
		mat.Col(col, src, &vecs)
		out.SetCol(c, col)
	}
	return top, out, nil
}

// denseSymOp returns dst = w·x for a dense symmetric w as a symOp that
// splits the rows over all cores. gonum's Symv runs on one core and reads
// the packed upper triangle column-wise; here w is expanded once to full
// row-major storage (n² floats) so each row is one contiguous dot product.
func denseSymOp(w *mat.SymDense) symOp {
	n := w.SymmetricDim()
	full := make([]float64, n*n)
	raw := w.RawSymmetric()
	for i := range n {
		for j := i; j < n; j++ {
			v := raw.Data[i*raw.Stride+j]
			full[i*n+j] = v
			full[j*n+i] = v
		}
	}
	parts := min(runtime.GOMAXPROCS(0), max(1, n/64))
	return func(dst, x []float64) error {
		var wg sync.WaitGroup
		for p := range parts {
			lo, hi := p*n/parts, (p+1)*n/parts
			wg.Go(func() {
				for i := lo; i < hi; i++ {
					dst[i] = floats.Dot(full[i*n:(i+1)*n], x)
				}
			})
		}
		wg.Wait()
		return nil
	}
}
