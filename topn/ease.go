package topn

import (
	"fmt"
	"math"
	"math/rand/v2"

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

// Denoise returns the part of the symmetric g above a noise floor as a
// factor W (m × r) with g ≈ W Wᵀ: its r eigenpairs with eigenvalue >
// keep, each shrunk by shrink (column k of W is √(λ_k − shrink)·q_k). For
// a Gram plus Gaussian noise of standard deviation σ per entry, the
// noise's eigenvalues lie within ±2σ√m (its spectral edge): eigenvalues
// above it carry signal.
//
// Only the eigenpairs above the floor are needed, a few dozen to a few
// hundred of a matrix of up to a few thousand rows, and gonum's EigenSym
// computes all of them (O(m³), a minute at m = 900): they come from
// topEigen's randomised subspace iteration on g + shift·I (which makes the
// noise's negative eigenvalues small in magnitude), with the number asked
// for doubled until the smallest found is below the floor. rng starts the
// iteration (non-private randomness).
func Denoise(g *mat.SymDense, keep, shrink float64, rng *rand.Rand) (*mat.Dense, error) {
	return DenoiseRank(g, keep, shrink, g.SymmetricDim(), rng)
}

// DenoiseRank is Denoise keeping at most maxRank eigenpairs (the largest):
// a caller that needs only the leading few (dp-ials' initial factors)
// does not pay for the subspace iteration's doublings beyond them.
func DenoiseRank(g *mat.SymDense, keep, shrink float64, maxRank int, rng *rand.Rand) (*mat.Dense, error) {
	m := g.SymmetricDim()
	maxRank = max(1, min(maxRank, m))
	shift := math.Max(shrink, 0)
	sh := mat.NewSymDense(m, nil)
	sh.CopySym(g)
	for i := range m {
		sh.SetSym(i, i, sh.At(i, i)+shift)
	}
	var vals []float64
	var vecs *mat.Dense
	for r := min(16, maxRank); ; r = min(2*r, maxRank) {
		vals, vecs = topEigen(sh, r, rng)
		if vals[r-1]-shift <= keep || r == maxRank {
			break
		}
	}
	var cols []int
	for k, l := range vals {
		if l-shift > keep && shrunk(l-shift, shrink) > 0 {
			cols = append(cols, k)
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	w := mat.NewDense(m, len(cols), nil)
	for c, k := range cols {
		s := math.Sqrt(shrunk(vals[k]-shift, shrink))
		for i := range m {
			w.Set(i, c, vecs.At(i, k)*s)
		}
	}
	return w, nil
}

// shrunk is the eigenvalue kept for an observed x above the noise's
// spectral edge: x − edge (soft thresholding; the spiked-Wigner optimal
// shrinker θ(1 − edge²/4θ²), θ = (x + √(x² − edge²))/2, lost 0.004 of
// validation Recall@20 on MovieLens-1M at ε = 1 and 8).
func shrunk(x, edge float64) float64 {
	return math.Max(x-edge, 0)
}

// LowRankEASE solves EASE on the low-rank Gram W Wᵀ (W m × r) with ridge
// λ without forming an m × m matrix. With M = W(λI + WᵀW)⁻¹Wᵀ = Z Zᵀ,
// Z = W(λI + WᵀW)^(−1/2), EASE's P = (W Wᵀ + λI)⁻¹ = (I − M)/λ, so
// B_ij = −P_ij/P_jj = M_ij/(1 − M_jj) for i ≠ j (and M_jj < 1). A user
// with items h scores j by (Σ_{i∈h} Z_i)·Z_j/(1 − ‖Z_j‖²). It returns the
// item vectors V_j = Z_j/(1 − ‖Z_j‖²) (m × r); a user's row
// Σ_{i∈h} Z_i is recovered from them (ZFromV), so the model needs V only
// (fold-in "ease-lowrank").
func LowRankEASE(w *mat.Dense, lambda float64) (*mat.Dense, error) {
	if !(lambda > 0) || math.IsInf(lambda, 0) {
		return nil, fmt.Errorf("ease: λ = %g must be finite and > 0", lambda)
	}
	m, r := w.Dims()
	a := mat.NewSymDense(r, nil)
	a.SymOuterK(1, w.T())
	for k := range r {
		a.SetSym(k, k, a.At(k, k)+lambda)
	}
	var eig mat.EigenSym
	if !eig.Factorize(a, true) {
		return nil, fmt.Errorf("ease: eigendecomposition of λI + WᵀW failed")
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	// (λI + WᵀW)^(−1/2) = U diag(1/√μ) Uᵀ.
	isq := mat.NewDense(r, r, nil)
	for p := range r {
		for q := range r {
			var s float64
			for k, mu := range vals {
				s += vecs.At(p, k) * vecs.At(q, k) / math.Sqrt(mu)
			}
			isq.Set(p, q, s)
		}
	}
	var z mat.Dense
	z.Mul(w, isq)
	v := mat.NewDense(m, r, nil)
	for j := range m {
		row := z.RawRowView(j)
		n2 := 0.0
		for _, x := range row {
			n2 += x * x
		}
		out := v.RawRowView(j)
		for k, x := range row {
			out[k] = x / (1 - n2)
		}
	}
	return v, nil
}

// ZFromV inverts V_j = Z_j/(1 − ‖Z_j‖²) for one item: with a = ‖Z_j‖ and
// b = ‖V_j‖, a = b(1 − a²) has the one root a = (√(1 + 4b²) − 1)/(2b) in
// [0, 1), so Z_j = V_j·(1 − a²).
func ZFromV(v, z []float64) {
	var b2 float64
	for _, x := range v {
		b2 += x * x
	}
	s := 1.0
	if b2 > 0 {
		b := math.Sqrt(b2)
		a := (math.Sqrt(1+4*b2) - 1) / (2 * b)
		s = 1 - a*a
	}
	for k, x := range v {
		z[k] = x * s
	}
}
