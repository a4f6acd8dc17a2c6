package mf

import "math"

// The inner loops of the least-squares solvers. They are hand-written
// rather than gonum calls because the systems are small (rank + 1 ≤ a few
// hundred) and there are millions of them: gonum's Dsyrk on a gathered
// n×k block and its Cholesky (through lapack64.Potrf on a mat.SymDense)
// pay per-call dispatch, allocation and bounds checks that cost more than
// the arithmetic at these sizes (BenchmarkGram and BenchmarkSolve compare
// both; see docs/mf.md). The accumulation reads four factor rows per pass
// over the triangle, so each element of the Gram matrix is loaded and
// stored once per four ratings.

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

// gramAdd adds Σ_t w_t · x_t x_tᵀ to the upper triangle of the leading
// k×k block of the row-major matrix a (row stride lda ≥ k), where x_t is
// row idx[t] of the row-major factor matrix f (stride k) and w_t = w[t]
// (w nil: all 1).
func gramAdd(a []float64, lda, k int, f []float64, idx []int32, w []float64) {
	n := len(idx)
	t := 0
	row := func(t int) []float64 { j := int(idx[t]) * k; return f[j : j+k : j+k] }
	wt := func(t int) float64 {
		if w == nil {
			return 1
		}
		return w[t]
	}
	for ; t+4 <= n; t += 4 {
		x0, x1, x2, x3 := row(t), row(t+1), row(t+2), row(t+3)
		w0, w1, w2, w3 := wt(t), wt(t+1), wt(t+2), wt(t+3)
		for p := range k {
			a0, a1, a2, a3 := w0*x0[p], w1*x1[p], w2*x2[p], w3*x3[p]
			r := a[p*lda+p : p*lda+k]
			y0, y1, y2, y3 := x0[p:k], x1[p:k], x2[p:k], x3[p:k]
			y0, y1, y2, y3 = y0[:len(r)], y1[:len(r)], y2[:len(r)], y3[:len(r)]
			for q := range r {
				r[q] += a0*y0[q] + a1*y1[q] + a2*y2[q] + a3*y3[q]
			}
		}
	}
	for ; t < n; t++ {
		x0 := row(t)
		w0 := wt(t)
		for p := range k {
			a0 := w0 * x0[p]
			r := a[p*lda+p : p*lda+k]
			y0 := x0[p:k]
			y0 = y0[:len(r)]
			for q := range r {
				r[q] += a0 * y0[q]
			}
		}
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
// false when a pivot is not positive (a not positive definite).
func cholSolve(a []float64, k int, b []float64) bool {
	// Right-looking, row-oriented (LAPACK's dpotf2, upper): every update is
	// an axpy on a contiguous row segment.
	for i := range k {
		d := a[i*k+i]
		if !(d > 0) || math.IsInf(d, 0) {
			return false
		}
		d = math.Sqrt(d)
		a[i*k+i] = d
		ri := a[i*k+i+1 : i*k+k]
		inv := 1 / d
		for q := range ri {
			ri[q] *= inv
		}
		for p := i + 1; p < k; p++ {
			c := ri[p-i-1]
			if c == 0 {
				continue
			}
			axpy(-c, ri[p-i-1:], a[p*k+p:p*k+k])
		}
	}
	// Rᵀy = b (forward), then Rx = y (backward).
	for i := range k {
		b[i] /= a[i*k+i]
		axpy(-b[i], a[i*k+i+1:i*k+k], b[i+1:k])
	}
	for i := k - 1; i >= 0; i-- {
		b[i] = (b[i] - dot(a[i*k+i+1:i*k+k], b[i+1:k])) / a[i*k+i]
	}
	return true
}
