package mf

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/internal/subspace"
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
	// DropDiagonal sets the released matrix's diagonal to zero before the
	// eigenvectors are taken. On sparse ratings each item's own variance
	// (the diagonal, growing with its number of ratings) outweighs the
	// structure items share, and the top eigenvectors then point at the
	// most rated items instead of at the taste directions; the
	// off-diagonal part keeps the shared structure (diagonal deletion, as
	// in PCA with missing data).
	DropDiagonal bool
	// Rand starts the subspace iteration.
	Rand    *rand.Rand
	Workers int
	// Engine, when set, sums the covariance (CovStatistic) in place of the
	// in-process sum over the Problem (which may then be nil).
	Engine statistic.Engine
}

// CovSensitivity is the ℓ2 (Frobenius) sensitivity √2·R² of the released
// item covariance (statistic.CovSensitivity, where the proof is).
func CovSensitivity(clip float64) float64 { return statistic.CovSensitivity(clip) }

// CovDim is the number of coordinates the covariance release has for m
// items (the upper triangle).
func CovDim(m int) int { return statistic.CovDim(m) }

// covKind is CovStatistic's kind for statistic.Decode.
const covKind = "covariance"

func init() { statistic.Register(covKind, func() statistic.Contribution { return new(CovStatistic) }) }

// CovStatistic is the item covariance statistic (statistic.Covariance has
// its sensitivity): user i's part is x_i x_iᵀ over the covered items, its
// upper triangle in statistic.UpperIndex layout, with x_ij = c_i·y_ij, y_ij
// her rating centred as the DPALS user side does (centre: the public
// offset and item biases, her own damped bias) and clipped to ±Clip, and
// c_i = 1/√m_i over her m_i covered items.
type CovStatistic struct {
	Items       []int     `json:"items"`
	Mean        float64   `json:"mean"`
	ItemBias    []float64 `json:"item_bias"`
	UserDamping float64   `json:"user_damping"`
	Clip        float64   `json:"clip"`

	pos []int32 // item → covered position (−1: not covered); Validate builds it
}

// covScratch is one worker's buffers for CovStatistic.pairs.
type covScratch struct {
	res  []float64
	idx  []int32
	x    []float64
	perm []int32
	sq   []int32
	sx   []float64
}

// Kind implements statistic.Contribution.
func (st *CovStatistic) Kind() string { return covKind }

// Spec implements statistic.Contribution.
func (st *CovStatistic) Spec() statistic.Spec { return statistic.Covariance(len(st.Items), st.Clip) }

// Validate checks the plan and builds the item positions.
func (st *CovStatistic) Validate() error {
	n := len(st.ItemBias)
	if len(st.Items) == 0 || n == 0 {
		return fmt.Errorf("covariance features: %d covered items, %d item biases", len(st.Items), n)
	}
	if !(st.Clip > 0) || math.IsInf(st.Clip, 0) || math.IsNaN(st.Mean) || math.IsInf(st.Mean, 0) || !(st.UserDamping >= 0) || math.IsInf(st.UserDamping, 0) {
		return fmt.Errorf("covariance features: clip %g, mean %g and user damping %g must be finite (clip > 0, damping ≥ 0)", st.Clip, st.Mean, st.UserDamping)
	}
	st.pos = make([]int32, n)
	for j := range st.pos {
		st.pos[j] = -1
	}
	for q, j := range st.Items {
		if j < 0 || j >= n || st.pos[j] >= 0 {
			return fmt.Errorf("covariance features: item %d out of range or repeated", j)
		}
		st.pos[j] = int32(q)
	}
	return nil
}

// covered fills s.idx and s.x with a user's covered positions and her
// x_ij = c·clip(y_ij, ±R), her row (items, vals) on the catalogue.
func (st *CovStatistic) covered(s *covScratch, items []int32, vals []float32) {
	if cap(s.res) < len(items) {
		s.res = make([]float64, len(items))
	}
	res := s.res[:len(items)]
	centre(items, vals, st.Mean, st.UserDamping, st.ItemBias, res)
	s.idx, s.x = s.idx[:0], s.x[:0]
	for t, j := range items {
		if q := st.pos[j]; q >= 0 {
			s.idx = append(s.idx, q)
			s.x = append(s.x, max(-st.Clip, min(st.Clip, res[t])))
		}
	}
	if len(s.idx) == 0 {
		return
	}
	// c = 1/√m_i, rounded so that Σ c² ≤ 1 holds in floating point.
	c := 1 / math.Sqrt(float64(len(s.idx))) * (1 - 1e-12)
	for t := range s.x {
		s.x[t] *= c
	}
}

// pairs calls add(p, q, x_p·x_q) for each pair p ≤ q of a user's covered
// positions, her row (items, vals) on the catalogue.
func (st *CovStatistic) pairs(s *covScratch, items []int32, vals []float32, add func(lo, hi int32, v float64)) {
	st.covered(s, items, vals)
	// Every pair once, into the upper triangle (row ≤ column).
	for t, qa := range s.idx {
		xa := s.x[t]
		for r := t; r < len(s.idx); r++ {
			add(min(qa, s.idx[r]), max(qa, s.idx[r]), xa*s.x[r])
		}
	}
}

// sortedCovered is covered with the user's positions sorted: s.sq and
// s.sx (the in-process sum's layout, covBatch).
func (st *CovStatistic) sortedCovered(s *covScratch, items []int32, vals []float32) {
	st.covered(s, items, vals)
	if cap(s.perm) < len(s.idx) {
		s.perm = make([]int32, len(s.idx))
	}
	perm := s.perm[:len(s.idx)]
	for t := range perm {
		perm[t] = int32(t)
	}
	slices.SortFunc(perm, func(x, y int32) int { return cmp.Compare(s.idx[x], s.idx[y]) })
	if cap(s.sq) < len(perm) {
		s.sq, s.sx = make([]int32, len(perm)), make([]float64, len(perm))
	}
	s.sq, s.sx = s.sq[:len(perm)], s.sx[:len(perm)]
	for t, o := range perm {
		s.sq[t], s.sx[t] = s.idx[o], s.x[o]
	}
}

// Contribute implements statistic.Contribution.
func (st *CovStatistic) Contribute(r statistic.Row, add func(i int, x float64)) {
	var s covScratch
	m := len(st.Items)
	st.pairs(&s, r.Items, r.Vals, func(lo, hi int32, v float64) { add(statistic.UpperIndex(m, int(lo), int(hi)), v) })
}

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
	if o.Release == nil || o.Noise == nil || o.Rand == nil || (o.Engine == nil && (p == nil || len(o.ItemBias) != p.NumItems)) {
		return nil, nil, fmt.Errorf("covariance features: a releaser, noise and random source, the ratings or an engine, and one item bias per item are needed")
	}
	if !(o.Clip > 0) || math.IsInf(o.Clip, 0) {
		return nil, nil, fmt.Errorf("covariance features: the clip must be finite and > 0, got %g", o.Clip)
	}
	st := &CovStatistic{Items: o.Items, Mean: o.Mean, ItemBias: o.ItemBias, UserDamping: o.UserDamping, Clip: o.Clip}
	if err := st.Validate(); err != nil {
		return nil, nil, err
	}
	var C *mat.SymDense
	if o.Engine != nil {
		v, err := o.Engine.Sum(ctx, st)
		if err != nil {
			return nil, nil, fmt.Errorf("summing the item covariance: %w", err)
		}
		C = statistic.UnpackUpper(m, v)
	} else if C, err = st.sum(ctx, p, o.Workers); err != nil {
		return nil, nil, err
	}
	if err := releaseGram(o.Release, o.Noise, C); err != nil {
		return nil, nil, fmt.Errorf("releasing the item covariance: %w", err)
	}
	if o.DropDiagonal {
		DropDiagonal(C)
	}
	vals, vecs = TopEigen(C, o.Rank, o.Rand)
	return vals, vecs, nil
}

// DropDiagonal sets c's diagonal to zero (CovOptions.DropDiagonal says
// why).
func DropDiagonal(c *mat.SymDense) {
	for a := range c.SymmetricDim() {
		c.SetSym(a, a, 0)
	}
}

// sum is the in-process sum of st over p's users on w workers. Users are
// taken in batches: each batch's covered entries are laid out sorted by
// position (covTiles), then the upper triangle is cut into covTile ×
// covTile tiles that the workers share out, each adding the batch's pairs
// that fall in it. A tile's part of the accumulator stays in the core's
// cache, where scattering a user's pairs over the whole m × m matrix
// missed it on almost every pair (this loop was most of dpals' time at
// 480 000 users). Each entry gets the same products as from pairs,
// summed in double-double form (statistic.DD), so the sum is the float64
// nearest the exact one whatever the split — the float64s statistic.Sum
// and privrec-beam's combine give from the same parts (a plain float64
// sum differs by rounding, which the release's noise lattice turns into a
// different released value now and then at large populations). One
// accumulator serves every worker: each tile is one worker's at a time.
// It holds each entry's high and low parts side by side (statistic.DD's
// arithmetic, but one cache line per entry where DD's two slices cost
// two).
func (st *CovStatistic) sum(ctx context.Context, p *Problem, w int) (*mat.SymDense, error) {
	m := len(st.Items)
	w = workers(w)
	acc := make([]float64, 2*m*m)
	nt := (m + covTile - 1) / covTile
	var tiles [][2]int32 // the upper triangle's tiles, the diagonal band first
	for d := range nt {
		for a := 0; a+d < nt; a++ {
			tiles = append(tiles, [2]int32{int32(a), int32(a + d)})
		}
	}
	b := &covBatch{nt: nt}
	scr := make([]covScratch, w)
	for lo := 0; lo < p.NumUsers; lo += covBatchUsers {
		hi := min(p.NumUsers, lo+covBatchUsers)
		if err := b.fill(ctx, st, p, lo, hi, w, scr); err != nil {
			return nil, err
		}
		err := parallelRows(ctx, len(tiles), w, 1, func(_, tlo, thi int) error {
			for _, t := range tiles[tlo:thi] {
				b.addTile(acc, m, int(t[0]), int(t[1]))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// The lower triangle stays zero, as mat.SymDense reads the upper.
	out := make([]float64, m*m)
	for i := range out {
		out[i] = acc[2*i] + acc[2*i+1] // as statistic.DD.Result
	}
	return mat.NewSymDense(m, out), nil
}

// The tiled covariance sum's sizes: a tile's accumulator (covTile² entries
// of two float64, 1 MiB) stays in the cache — BenchmarkCovSum (4 801
// items, 10 000 users, loaded machine): with plain float64 sums tiles of
// 512 were 3.2× faster than one m × m accumulator and 128 only 1.2× (a
// visit per user per tile); with the double-double entries side by side
// 256 took 4.0–5.6 s against 7.9–10.8 s for 512 — and a batch of users'
// entries (≈ 12 bytes each) stays a few tens of MB. Variables only so
// that tests can make them small enough to cross tiles and batches on
// small data.
var (
	covTile       = 256
	covBatchUsers = 1 << 14
)

// covBatch is a batch of users' covered entries, each user's sorted by
// position: user u's are idx/x[ptr[u]:ptr[u+1]], and off[t·nUsr+u] is
// where her positions reach tile t·covTile (tile-major, so that a tile's
// pass over the users reads its offsets in order).
type covBatch struct {
	nt   int
	ptr  []int
	idx  []int32
	x    []float64
	off  []int
	nUsr int
}

// fill lays out users lo … hi−1 of p (in parallel; each user's entries
// written at her offset, so the layout does not depend on w).
func (b *covBatch) fill(ctx context.Context, st *CovStatistic, p *Problem, lo, hi, w int, scr []covScratch) error {
	n := hi - lo
	b.nUsr = n
	b.ptr = slices.Grow(b.ptr[:0], n+1)[:n+1]
	b.ptr[0] = 0
	for u := range n {
		c := 0
		for _, j := range p.RowCol[p.RowPtr[lo+u]:p.RowPtr[lo+u+1]] {
			if st.pos[j] >= 0 {
				c++
			}
		}
		b.ptr[u+1] = b.ptr[u] + c
	}
	total := b.ptr[n]
	b.idx = slices.Grow(b.idx[:0], total)[:total]
	b.x = slices.Grow(b.x[:0], total)[:total]
	b.off = slices.Grow(b.off[:0], n*(b.nt+1))[:n*(b.nt+1)]
	off := b.off
	return parallelRows(ctx, n, w, 256, func(wk, ulo, uhi int) error {
		s := &scr[wk]
		for u := ulo; u < uhi; u++ {
			beg, end := p.RowPtr[lo+u], p.RowPtr[lo+u+1]
			st.sortedCovered(s, p.RowCol[beg:end], p.RowVal[beg:end])
			at := b.ptr[u]
			copy(b.idx[at:], s.sq)
			copy(b.x[at:], s.sx)
			e := 0
			for t := range b.nt + 1 {
				for e < len(s.sq) && int(s.sq[e]) < t*covTile {
					e++
				}
				off[t*n+u] = at + e
			}
		}
		return nil
	})
}

// addTile adds the batch's pairs whose row falls in tile ta and column in
// tile tb (ta ≤ tb) to the upper triangle of a (m × m, row-major, each
// entry's high and low parts side by side), user by user.
func (b *covBatch) addTile(a []float64, ld, ta, tb int) {
	n := b.nUsr
	ra, rb := b.off[ta*n:(ta+2)*n], b.off[tb*n:(tb+2)*n]
	for u := range n {
		rlo, rhi, clo, chi := ra[u], ra[n+u], rb[u], rb[n+u]
		if rlo == rhi || clo == chi {
			continue
		}
		cols, cx := b.idx[clo:chi], b.x[clo:chi]
		for r := rlo; r < rhi; r++ {
			qa, xa := int(b.idx[r]), b.x[r]
			row := a[2*qa*ld : 2*qa*ld+2*ld]
			from := 0
			if ta == tb {
				from = r - clo // pairs p ≤ q only
			}
			for c := from; c < len(cols); c++ {
				q := 2 * int(cols[c])
				s, e := statistic.TwoSum(row[q], xa*cx[c])
				row[q] = s
				row[q+1] += e
			}
		}
	}
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
	full := subspace.Dense(c)
	z := mat.NewDense(m, b, nil)
	for range 60 {
		z.Mul(full, q)
		orthonormalize(z)
		q, z = z, q
	}
	// Rayleigh–Ritz: eigenpairs of qᵀ c q.
	return subspace.RayleighRitz(full, q, r)
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
