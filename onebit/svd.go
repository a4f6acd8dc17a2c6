package onebit

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// The nuclear-ball projection needs only the singular values above a soft
// threshold, usually a few dozen of min(d1, d2). gonum offers only the full
// SVD (mat.SVD), which on a 943 × 1682 matrix costs seconds, so the top
// singular triplets are computed here by block subspace iteration with
// Rayleigh–Ritz, warm-started from the previous projection's right singular
// vectors (SPG moves little between iterations). The heavy work is the two
// dense products A·V and Aᵀ·Q per sweep, done by gonum's Dgemm, which splits
// large products over all cores; the small QR and SVD are gonum's.

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
func subspaceSVD(a *mat.Dense, b int, tau, tol float64, maxSweeps int, start *mat.Dense, startS []float64, rnd func() float64) (triplets, int, bool) {
	d1, d2 := a.Dims()
	b = min(b, d1, d2)
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
	q := mat.NewDense(d1, b, nil)
	bm := mat.NewDense(d2, b, nil)
	h := mat.NewSymDense(b, nil)
	var es mat.EigenSym
	var ev mat.Dense
	rev := mat.NewDense(b, b, nil)
	prev := make([]float64, b)
	havePrev := copy(prev, startS) == b
	s := make([]float64, b)
	var t triplets
	sweeps := 0
	for sweeps < maxSweeps {
		sweeps++
		q.Mul(a, v)
		orthonormalize(q)
		bm.Mul(a.T(), q) // B = Aᵀ Q, d2 × b
		h.SymOuterK(1, bm.T())
		if !es.Factorize(h, true) {
			return triplets{}, sweeps, false
		}
		lam := es.Values(nil) // ascending
		es.VectorsTo(&ev)
		for j := range b {
			s[j] = math.Sqrt(math.Max(lam[b-1-j], 0))
			for i := range b {
				rev.Set(i, j, ev.At(i, b-1-j))
			}
		}
		// Left vectors U = Q R; right V = B R Σ⁻¹, whose columns are
		// orthonormal to rounding (BᵀB R = R Λ) where σ is not tiny; the
		// others only seed the next sweep, so they are replaced by random
		// vectors.
		u := mat.NewDense(d1, b, nil)
		u.Mul(q, rev)
		vn := mat.NewDense(d2, b, nil)
		vn.Mul(bm, rev)
		for j := range b {
			if s[j] > 1e-7*s[0] {
				inv := 1 / s[j]
				for i := range d2 {
					vn.Set(i, j, vn.At(i, j)*inv)
				}
			} else {
				for i := range d2 {
					vn.Set(i, j, rnd()-0.5)
				}
			}
		}
		v = vn
		t = triplets{U: u, S: append([]float64(nil), s...), V: vn}
		_, k := softThreshold(s, tau)
		if k == b {
			// Every Ritz value is above the threshold: the block is too
			// small, which more sweeps cannot fix (the caller grows it).
			break
		}
		k = min(k+1, b)
		conv := sweeps > 1 || havePrev
		for i := range k {
			if math.Abs(s[i]-prev[i]) > tol*math.Max(s[0], 1e-300) {
				conv = false
				break
			}
		}
		copy(prev, s)
		if conv {
			break
		}
	}
	return t, sweeps, true
}

// gramSVD returns the singular triplets of a from the eigendecomposition of
// its Gram matrix A Aᵀ (or Aᵀ A, the smaller): eigenvalues σ_i², eigenvectors
// the singular vectors of that side, the other side's vectors Aᵀ u_i / σ_i.
// Only σ_i > 1e-7·σ₁ are returned (below that the division loses accuracy;
// such values are far below any soft threshold met in practice, and
// dropping them only makes the nuclear norm look smaller by at most
// m·1e-7·σ₁). Much cheaper than gonum's SVD: one symmetric rank-k update
// and one m × m eigendecomposition.
func gramSVD(a *mat.Dense) (triplets, bool) {
	d1, d2 := a.Dims()
	m := min(d1, d2)
	g := mat.NewSymDense(m, nil)
	var wide mat.Matrix = a // m × n
	if d1 > d2 {
		wide = a.T()
	}
	g.SymOuterK(1, wide)
	var es mat.EigenSym
	if !es.Factorize(g, true) {
		return triplets{}, false
	}
	lam := es.Values(nil) // ascending
	var ev mat.Dense
	es.VectorsTo(&ev)
	s1 := math.Sqrt(math.Max(lam[m-1], 0))
	k := 0
	for k < m && math.Sqrt(math.Max(lam[m-1-k], 0)) > 1e-7*s1 {
		k++
	}
	if k == 0 {
		return triplets{S: nil, U: mat.NewDense(d1, 1, nil), V: mat.NewDense(d2, 1, nil)}, true
	}
	us := mat.NewDense(m, k, nil)
	s := make([]float64, k)
	for j := range k {
		s[j] = math.Sqrt(lam[m-1-j])
		for i := range m {
			us.Set(i, j, ev.At(i, m-1-j))
		}
	}
	// Other side: W = wideᵀ U diag(1/σ), n × k.
	_, n := wide.Dims()
	w := mat.NewDense(n, k, nil)
	w.Mul(wide.T(), us)
	for j := range k {
		inv := 1 / s[j]
		for i := range n {
			w.Set(i, j, w.At(i, j)*inv)
		}
	}
	if d1 <= d2 {
		return triplets{U: us, S: s, V: w}, true
	}
	return triplets{U: w, S: s, V: us}, true
}

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
