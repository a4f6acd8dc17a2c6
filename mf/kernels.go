package mf

import "math"

// The inner loops of the least-squares solvers. They are hand-written
// rather than gonum calls because the systems are small (rank + 1 ≤ a few
// hundred) and there are millions of them: gonum's Dsyrk on a gathered
// n×k block and its Cholesky (through lapack64.Potrf on a mat.SymDense)
// pay per-call dispatch, allocation and bounds checks that cost more than
// the arithmetic at these sizes (BenchmarkGram and BenchmarkSolve compare
// both; see docs/mf.md). The accumulation reads eight factor rows per
// pass over the triangle, so each element of the Gram matrix is loaded
// and stored once per eight ratings (20 % faster than four; a
// register-tiled variant — 2×4 tiles of the triangle accumulated over
// gathered rows — was 1.5× slower: the Go compiler spills its
// accumulators).

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
// (w nil: all 1); and, when h is not nil, Σ_t w_t·z_t·x_t to h (z nil:
// all 1) in the same pass, so each row is loaded once.
func gramAdd(a []float64, lda, k int, f []float64, idx []int32, w, z, h []float64) {
	n := len(idx)
	t := 0
	row := func(t int) []float64 { j := int(idx[t]) * k; return f[j : j+k : j+k] }
	wt := func(t int) float64 {
		if w == nil {
			return 1
		}
		return w[t]
	}
	zt := func(t int) float64 {
		if z == nil {
			return 1
		}
		return z[t]
	}
	for ; t+8 <= n; t += 8 {
		x0, x1, x2, x3 := row(t), row(t+1), row(t+2), row(t+3)
		x4, x5, x6, x7 := row(t+4), row(t+5), row(t+6), row(t+7)
		w0, w1, w2, w3 := wt(t), wt(t+1), wt(t+2), wt(t+3)
		w4, w5, w6, w7 := wt(t+4), wt(t+5), wt(t+6), wt(t+7)
		for p := range k {
			a0, a1, a2, a3 := w0*x0[p], w1*x1[p], w2*x2[p], w3*x3[p]
			a4, a5, a6, a7 := w4*x4[p], w5*x5[p], w6*x6[p], w7*x7[p]
			r := a[p*lda+p : p*lda+k]
			m := len(r)
			y0, y1, y2, y3 := x0[p:k][:m], x1[p:k][:m], x2[p:k][:m], x3[p:k][:m]
			y4, y5, y6, y7 := x4[p:k][:m], x5[p:k][:m], x6[p:k][:m], x7[p:k][:m]
			for q := range r {
				r[q] += (a0*y0[q] + a1*y1[q] + a2*y2[q] + a3*y3[q]) + (a4*y4[q] + a5*y5[q] + a6*y6[q] + a7*y7[q])
			}
		}
		if h != nil {
			b0, b1, b2, b3 := w0*zt(t), w1*zt(t+1), w2*zt(t+2), w3*zt(t+3)
			b4, b5, b6, b7 := w4*zt(t+4), w5*zt(t+5), w6*zt(t+6), w7*zt(t+7)
			hh := h[:k]
			for q := range hh {
				hh[q] += (b0*x0[q] + b1*x1[q] + b2*x2[q] + b3*x3[q]) + (b4*x4[q] + b5*x5[q] + b6*x6[q] + b7*x7[q])
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
		if h != nil {
			axpy(w0*zt(t), x0, h)
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
