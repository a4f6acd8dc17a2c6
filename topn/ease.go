package topn

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// EASE solves Steck's "Embarrassingly Shallow Autoencoders" (WWW 2019) on
// the Gram matrix g (m × m): B = argmin ‖X − XB‖² + λ‖B‖² subject to
// diag(B) = 0, in closed form P = (G + λI)⁻¹, B_ij = −P_ij / P_jj (i ≠ j).
// A user with indicator vector x scores item j by (xB)_j. The result is
// returned transposed, as the rows of a model's V: row j of Bt is column
// j of B (so a user's score of j is her indicator · Bt[j]).
//
// The inverse goes through gonum's Cholesky; it costs O(m³), so callers
// bound m (the covered items).
func EASE(g *mat.SymDense, lambda float64) (Bt *mat.Dense, err error) {
	m := g.SymmetricDim()
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return nil, fmt.Errorf("ease: λ = %g must be finite and > 0", lambda)
	}
	a := mat.NewSymDense(m, nil)
	a.CopySym(g)
	for i := range m {
		a.SetSym(i, i, a.At(i, i)+lambda)
	}
	var ch mat.Cholesky
	if !ch.Factorize(a) {
		return nil, fmt.Errorf("ease: G + λI is not positive definite (λ = %g too small for this Gram)", lambda)
	}
	var p mat.SymDense
	if err := ch.InverseTo(&p); err != nil {
		return nil, fmt.Errorf("ease: inverting G + λI: %w", err)
	}
	Bt = mat.NewDense(m, m, nil)
	raw := p.RawSymmetric()
	for j := range m {
		d := raw.Data[j*raw.Stride+j]
		row := Bt.RawRowView(j)
		for i := range m {
			var pij float64
			if i >= j {
				pij = raw.Data[j*raw.Stride+i]
			} else {
				pij = raw.Data[i*raw.Stride+j]
			}
			row[i] = -pij / d
		}
		row[j] = 0
	}
	return Bt, nil
}

// Denoise returns the part of the symmetric g above a noise floor: its
// eigenpairs with eigenvalue > keep, each shrunk by shrink (λ − shrink),
// as Q diag(λ − shrink) Qᵀ, and how many were kept. For a Gram plus
// Gaussian noise of standard deviation σ per entry, the noise's
// eigenvalues lie within ±2σ√m (its spectral edge): eigenvalues above it
// carry signal.
func Denoise(g *mat.SymDense, keep, shrink float64) (*mat.SymDense, int, error) {
	m := g.SymmetricDim()
	q, err := Spectrum(g, keep, shrink)
	if err != nil {
		return nil, 0, err
	}
	out := mat.NewSymDense(m, nil)
	if q == nil {
		return out, 0, nil
	}
	_, r := q.Dims()
	out.SymOuterK(1, q)
	return out, r, nil
}

// Spectrum returns the eigenpairs of the symmetric g with eigenvalue
// > keep as the columns of an m × r matrix, column e the eigenvector
// scaled by √(λ_e − shrink) (0 when λ_e < shrink), in increasing order of
// eigenvalue, so that Q Qᵀ is Denoise's matrix; nil when none is kept.
// Its last columns are low-rank item factors of the denoised g.
func Spectrum(g *mat.SymDense, keep, shrink float64) (*mat.Dense, error) {
	m := g.SymmetricDim()
	var eig mat.EigenSym
	if !eig.Factorize(g, true) {
		return nil, fmt.Errorf("denoise: eigendecomposition failed")
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	var cols []int
	for k, l := range vals {
		if l > keep {
			cols = append(cols, k)
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	q := mat.NewDense(m, len(cols), nil)
	for c, k := range cols {
		s := math.Sqrt(math.Max(vals[k]-shrink, 0))
		for i := range m {
			q.Set(i, c, vecs.At(i, k)*s)
		}
	}
	return q, nil
}
