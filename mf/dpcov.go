package mf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/statistic"
)

// CovOptions configure CovFeatures. Everything here is public; the
// ratings are the only private input.
type CovOptions struct {
	// Items are the items the covariance covers (public: chosen from
	// released counts), at most a few thousand — the released matrix is
	// dense, len(Items)² values.
	Items []int
	// Rank is the number of eigenvectors kept.
	Rank int
	// Mean, ItemBias and UserDamping centre each user's ratings exactly
	// as the DPALS user side does (userResiduals); Clip R bounds the
	// centred rating.
	Mean        float64
	ItemBias    []float64
	UserDamping float64
	Clip        float64
	// Release adds the noise (a Gaussian calibrated for CovDim(len(Items))
	// coordinates and sensitivity CovSensitivity(Clip)); Noise is its
	// source.
	Release Releaser
	Noise   *noise.Source
	// Rand starts the subspace iteration.
	Rand    *rand.Rand
	Workers int
}

// CovSensitivity is the ℓ2 (Frobenius) sensitivity √2·R² of the released
// item covariance (statistic.CovSensitivity, where the proof is).
func CovSensitivity(clip float64) float64 { return statistic.CovSensitivity(clip) }

// CovDim is the number of coordinates the covariance release has for m
// items (the upper triangle).
func CovDim(m int) int { return statistic.CovDim(m) }

// CovFeatures releases the noised item covariance of the users' centred
// ratings over o.Items and returns its top o.Rank eigenpairs: vals in
// decreasing order and vecs (len(Items) × Rank, unit columns). This is
// the item-side structure McSherry and Mironov ("Differentially Private
// Recommender Systems", KDD 2009) take from a noised covariance; here it
// serves as public item features that each user fits on her side.
func CovFeatures(ctx context.Context, p *Problem, o CovOptions) (vals []float64, vecs *mat.Dense, err error) {
	m := len(o.Items)
	if m == 0 || o.Rank < 1 || o.Rank > m {
		return nil, nil, fmt.Errorf("covariance features: rank %d over %d items", o.Rank, m)
	}
	if o.Release == nil || o.Noise == nil || o.Rand == nil || len(o.ItemBias) != p.NumItems {
		return nil, nil, fmt.Errorf("covariance features: a releaser, noise and random source and one item bias per item are needed")
	}
	if !(o.Clip > 0) || math.IsInf(o.Clip, 0) {
		return nil, nil, fmt.Errorf("covariance features: the clip must be finite and > 0, got %g", o.Clip)
	}
	pos := make([]int32, p.NumItems)
	for j := range pos {
		pos[j] = -1
	}
	for q, j := range o.Items {
		if j < 0 || j >= p.NumItems || pos[j] >= 0 {
			return nil, nil, fmt.Errorf("covariance features: item %d out of range or repeated", j)
		}
		pos[j] = int32(q)
	}
	w := workers(o.Workers)
	// One accumulator per worker (m² float64 each): users' outer products
	// are scattered into it, upper triangle only.
	acc := make([][]float64, w)
	dopt := &DPALSOptions{Mean: o.Mean, UserDamping: o.UserDamping}
	type userScratch struct {
		res []float64
		idx []int32
		x   []float64
	}
	scr := make([]userScratch, w)
	err = parallelRows(ctx, p.NumUsers, w, 256, func(wk, lo, hi int) error {
		if acc[wk] == nil {
			acc[wk] = make([]float64, m*m)
		}
		a, s := acc[wk], &scr[wk]
		for u := lo; u < hi; u++ {
			beg, end := p.RowPtr[u], p.RowPtr[u+1]
			if cap(s.res) < int(end-beg) {
				s.res = make([]float64, end-beg)
			}
			res := s.res[:end-beg]
			userResiduals(p, dopt, o.ItemBias, u, res)
			s.idx, s.x = s.idx[:0], s.x[:0]
			for t, j := range p.RowCol[beg:end] {
				if q := pos[j]; q >= 0 {
					s.idx = append(s.idx, q)
					s.x = append(s.x, max(-o.Clip, min(o.Clip, res[t])))
				}
			}
			if len(s.idx) == 0 {
				continue
			}
			// c = 1/√m_i, rounded so that Σ c² ≤ 1 holds in floating point.
			c := 1 / math.Sqrt(float64(len(s.idx))) * (1 - 1e-12)
			for t := range s.x {
				s.x[t] *= c
			}
			// Every pair once, into the upper triangle (row ≤ column).
			for t, qa := range s.idx {
				xa := s.x[t]
				for r := t; r < len(s.idx); r++ {
					lo, hi := min(qa, s.idx[r]), max(qa, s.idx[r])
					a[int(lo)*m+int(hi)] += xa * s.x[r]
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	C := mat.NewSymDense(m, nil)
	raw := C.RawSymmetric()
	for _, a := range acc {
		if a == nil {
			continue
		}
		for i := range m {
			dst, src := raw.Data[i*raw.Stride+i:i*raw.Stride+m], a[i*m+i:i*m+m]
			for t := range dst {
				dst[t] += src[t]
			}
		}
	}
	acc = nil
	if err := releaseGram(o.Release, o.Noise, C); err != nil {
		return nil, nil, fmt.Errorf("releasing the item covariance: %w", err)
	}
	vals, vecs = TopEigen(C, o.Rank, o.Rand)
	return vals, vecs, nil
}

// TopEigen returns the r eigenpairs of the symmetric c largest in
// magnitude (shift c first to make them the largest), largest first, by
// subspace iteration with oversampling and a Rayleigh–Ritz step. Only
// the top few of a matrix of a few thousand rows are needed; gonum's
// EigenSym computes all of them (O(m³)), which would dominate training,
// so the iteration is written here around gonum's matrix products.
func TopEigen(c *mat.SymDense, r int, rng *rand.Rand) ([]float64, *mat.Dense) {
	m := c.SymmetricDim()
	b := min(m, r+10)
	q := mat.NewDense(m, b, nil)
	for i := range m {
		for j := range b {
			q.Set(i, j, rng.NormFloat64())
		}
	}
	z := mat.NewDense(m, b, nil)
	for range 60 {
		z.Mul(c, q)
		orthonormalize(z)
		q, z = z, q
	}
	// Rayleigh–Ritz: eigenpairs of qᵀ c q.
	var cq, small mat.Dense
	cq.Mul(c, q)
	small.Mul(q.T(), &cq)
	s := mat.NewSymDense(b, nil)
	for i := range b {
		for j := i; j < b; j++ {
			s.SetSym(i, j, (small.At(i, j)+small.At(j, i))/2)
		}
	}
	var eig mat.EigenSym
	eig.Factorize(s, true)
	ev := eig.Values(nil)
	var w mat.Dense
	eig.VectorsTo(&w)
	var all mat.Dense
	all.Mul(q, &w)
	// Ascending from gonum: take the last r, largest first.
	vals := make([]float64, r)
	vecs := mat.NewDense(m, r, nil)
	for t := range r {
		e := b - 1 - t
		vals[t] = ev[e]
		for i := range m {
			vecs.Set(i, t, all.At(i, e))
		}
	}
	return vals, vecs
}

// orthonormalize makes the columns of a orthonormal in place (modified
// Gram–Schmidt, twice for stability; a column that vanishes is left 0).
func orthonormalize(a *mat.Dense) {
	m, b := a.Dims()
	col := make([]float64, m)
	cols := make([][]float64, b)
	for j := range b {
		cols[j] = mat.Col(nil, j, a)
	}
	for range 2 {
		for j := range b {
			copy(col, cols[j])
			for i := range j {
				d := dot(cols[i], col)
				for t := range col {
					col[t] -= d * cols[i][t]
				}
			}
			if n := math.Sqrt(dot(col, col)); n > 0 {
				for t := range col {
					col[t] /= n
				}
			}
			copy(cols[j], col)
		}
	}
	for j := range b {
		a.SetCol(j, cols[j])
	}
}
