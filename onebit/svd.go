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

// subspaceSVD returns the top b singular triplets of a (approximately: the
// Ritz values converge from below), iterating until the relative change of
// the leading want values falls under tol or maxSweeps is reached. start,
// when non-nil, provides initial right vectors (d2 × anything); the rest are
// filled from rnd.
func subspaceSVD(a *mat.Dense, b, want int, start *mat.Dense, tol float64, maxSweeps int, rnd func() float64) (triplets, int) {
	d1, d2 := a.Dims()
	if b > min(d1, d2) {
		b = min(d1, d2)
	}
	want = min(want, b)
	v := mat.NewDense(d2, b, nil)
	nStart := 0
	if start != nil {
		_, c := start.Dims()
		nStart = min(c, b)
		v.Slice(0, d2, 0, nStart).(*mat.Dense).Copy(start.Slice(0, d2, 0, nStart))
	}
	for j := nStart; j < b; j++ {
		for i := range d2 {
			v.Set(i, j, rnd()-0.5)
		}
	}
	w := mat.NewDense(d1, b, nil)
	q := mat.NewDense(d1, b, nil)
	z := mat.NewDense(d2, b, nil)
	var svd mat.SVD
	prev := make([]float64, b)
	var t triplets
	sweeps := 0
	for sweeps < maxSweeps {
		sweeps++
		w.Mul(a, v)
		q.Copy(w)
		orthonormalize(q)
		z.Mul(a.T(), q)               // Aᵀ Q
		svd.Factorize(z, mat.SVDThin) // Z = P Σ Rᵀ, so A ≈ Q R Σ Pᵀ
		s := svd.Values(nil)
		var p, r mat.Dense
		svd.UTo(&p)
		svd.VTo(&r)
		u := mat.NewDense(d1, b, nil)
		u.Mul(q, &r)
		t = triplets{U: u, S: s, V: &p}
		v = &p
		conv := true
		for i := range want {
			if math.Abs(s[i]-prev[i]) > tol*math.Max(s[0], 1e-300) {
				conv = false
				break
			}
		}
		copy(prev, s)
		if conv && sweeps > 1 {
			break
		}
	}
	return t, sweeps
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
