package transform

import (
	"math"
	"runtime"
	"sync"

	"github.com/privrec/privrec/ratings"
)

// BiScaling is the fitted model of BiScale: a rating y of user u on item i
// became x = (y − RowShift[u] − ColShift[i]) / (RowScale[u]·ColScale[i]).
// Invert undoes it (for predictions on the bi-scaled scale).
type BiScaling struct {
	RowShift, ColShift []float64 // α_u, β_i
	RowScale, ColScale []float64 // τ_u, γ_i (> 0)
	// Iterations is the number of sweeps run; Converged says whether the
	// parameters stopped moving (change below 1e-9) before the limit.
	Iterations int
	Converged  bool
	// MaxDeviation is measured on the result: the largest |row or column
	// mean| and |row or column variance − 1| over the rows and columns
	// whose scale could be fitted (at least two ratings that are not all
	// equal after centring). 0 means exact bi-standardisation.
	MaxDeviation float64
}

// Apply maps a rating y of (u, i) onto the bi-scaled scale.
func (b *BiScaling) Apply(u, i int32, y float64) float64 {
	return (y - b.RowShift[u] - b.ColShift[i]) / (b.RowScale[u] * b.ColScale[i])
}

// Invert maps a bi-scaled value x of (u, i) back to the rating scale.
func (b *BiScaling) Invert(u, i int32, x float64) float64 {
	return b.RowShift[u] + b.ColShift[i] + b.RowScale[u]*b.ColScale[i]*x
}

// DefaultBiScaleIters is the sweep limit BiScale uses for iters ≤ 0.
const DefaultBiScaleIters = 500

// biScaleTol is the parameter change below which BiScale stops.
const biScaleTol = 1e-9

// BiScale standardises the rows and the columns of m together, so that on
// the observed entries every row and every column has mean 0 and variance
// 1 (the biScale procedure of Hastie, Mazumder, Lee & Zadeh, "Matrix
// completion and low-rank SVD via fast alternating least squares", JMLR
// 2015; seed 004 bi-scales MovieLens per time slice). It fits the model
//
//	x_ui = (y_ui − α_u − β_i) / (τ_u γ_i)
//
// by alternating the four fixed-point equations, each exact given the
// others: column means 0 (β), row means 0 (α), row variances 1 (τ), column
// variances 1 (γ); after each sweep it makes the α average 0 (the model
// does not identify α+c, β−c). It stops when no parameter moves by more
// than 1e-9 (relative for scales) or after iters sweeps (iters ≤ 0:
// DefaultBiScaleIters).
//
// Convergence: each equation is solved exactly given the others, like the
// Sinkhorn iteration for scaling; we know no convergence proof for every
// sparsity pattern. On dense or moderately sparse data it converges
// linearly in tens of sweeps (see the tests), so the returned BiScaling
// says whether it converged and how far from exact standardisation the
// result is (MaxDeviation). Rows or columns with fewer than two ratings, or
// no spread, keep scale 1 (their variance cannot be made 1); their means
// are still made 0.
//
// The work of each half-sweep is split over the available cores.
func BiScale(m *ratings.Matrix, iters int) (*ratings.Matrix, BiScaling) {
	if iters <= 0 {
		iters = DefaultBiScaleIters
	}
	nu, ni := m.NumUsers(), m.NumItems()
	b := BiScaling{
		RowShift: make([]float64, nu), ColShift: make([]float64, ni),
		RowScale: ones(nu), ColScale: ones(ni),
	}
	alpha, beta, tau, gamma := b.RowShift, b.ColShift, b.RowScale, b.ColScale
	prevA, prevB := make([]float64, nu), make([]float64, ni)
	prevT, prevG := make([]float64, nu), make([]float64, ni)

	for it := 1; it <= iters; it++ {
		copy(prevA, alpha)
		copy(prevB, beta)
		copy(prevT, tau)
		copy(prevG, gamma)
		// β_i: weighted column mean of y − α with weights 1/τ, so Σ_u x_ui = 0.
		weightedMeans(ni, m.ItemCol, alpha, tau, beta)
		// α_u: weighted row mean of y − β with weights 1/γ.
		weightedMeans(nu, m.UserRow, beta, gamma, alpha)
		// τ_u² = mean over the row of ((y − α − β)/γ)².
		parallel(nu, func(lo, hi int) {
			for u := lo; u < hi; u++ {
				items, vals := m.UserRow(int32(u))
				var s float64
				for k, i := range items {
					r := (float64(vals[k]) - alpha[u] - beta[i]) / gamma[i]
					s += r * r
				}
				tau[u] = fittedScale(s, len(items))
			}
		})
		// γ_i² = mean over the column of ((y − α − β)/τ)².
		parallel(ni, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				users, vals := m.ItemCol(int32(i))
				var s float64
				for k, u := range users {
					r := (float64(vals[k]) - alpha[u] - beta[i]) / tau[u]
					s += r * r
				}
				gamma[i] = fittedScale(s, len(users))
			}
		})
		normaliseBiScaling(m, alpha, beta)
		b.Iterations = it
		if maxChange(prevA, alpha, false) <= biScaleTol && maxChange(prevB, beta, false) <= biScaleTol &&
			maxChange(prevT, tau, true) <= biScaleTol && maxChange(prevG, gamma, true) <= biScaleTol {
			b.Converged = true
			break
		}
	}
	out := m.MapValues(func(e ratings.Entry) float32 {
		return float32(b.Apply(e.User, e.Item, float64(e.Value)))
	})
	b.MaxDeviation = standardDeviation(out, tau, gamma)
	return out, b
}

// weightedMeans sets out[x], for each of the n lines x (a user's row or
// an item's column: line(x) is its other indices o and values y), to the
// mean of y − off[o] over the line weighted by 1/scale[o], where the line
// has ratings.
func weightedMeans(n int, line func(int32) ([]int32, []float32), off, scale, out []float64) {
	parallel(n, func(lo, hi int) {
		for x := lo; x < hi; x++ {
			idx, vals := line(int32(x))
			var s, w float64
			for k, o := range idx {
				wo := 1 / scale[o]
				s += wo * (float64(vals[k]) - off[o])
				w += wo
			}
			if w > 0 {
				out[x] = s / w
			}
		}
	})
}

// fittedScale is √(s/n), or 1 when the scale cannot be fitted (fewer than
// two ratings, or no spread).
func fittedScale(s float64, n int) float64 {
	if n < 2 || !(s/float64(n) > 1e-24) {
		return 1
	}
	return math.Sqrt(s / float64(n))
}

// normaliseBiScaling fixes the additive direction along which the
// bi-scaling model is not identified (α+c, β−c), without changing any x_ui:
// it makes the average α over users with ratings 0. (The multiplicative
// direction τ·c, γ/c is left where the sweeps put it: rows or columns whose
// scale stays 1 pin it in general, and the sweeps converge like Sinkhorn's
// iteration without help.)
func normaliseBiScaling(m *ratings.Matrix, alpha, beta []float64) {
	var sa float64
	var na int
	for u := range alpha {
		if m.UserCount(int32(u)) > 0 {
			sa += alpha[u]
			na++
		}
	}
	if na == 0 {
		return
	}
	c := sa / float64(na)
	for u := range alpha {
		if m.UserCount(int32(u)) > 0 {
			alpha[u] -= c
		}
	}
	for i := range beta {
		if m.ItemCount(int32(i)) > 0 {
			beta[i] += c
		}
	}
}

// standardDeviation measures how far x is from bi-standardised: the largest
// |mean| over non-empty rows and columns, and |variance − 1| over rows and
// columns with a fitted scale (a scale of exactly 1 is treated as unfitted;
// a fitted scale equal to 1 to the last bit merely skips one check).
func standardDeviation(x *ratings.Matrix, tau, gamma []float64) float64 {
	dev := 0.0
	check := func(vals []float32, fitted bool) {
		if len(vals) == 0 {
			return
		}
		var s, ss float64
		for _, v := range vals {
			s += float64(v)
			ss += float64(v) * float64(v)
		}
		n := float64(len(vals))
		mean := s / n
		dev = max(dev, math.Abs(mean))
		if fitted {
			dev = max(dev, math.Abs(ss/n-mean*mean-1))
		}
	}
	for u := range int32(x.NumUsers()) {
		_, vals := x.UserRow(u)
		check(vals, tau[u] != 1)
	}
	for i := range int32(x.NumItems()) {
		_, vals := x.ItemCol(i)
		check(vals, gamma[i] != 1)
	}
	return dev
}

func maxChange(prev, cur []float64, relative bool) float64 {
	d := 0.0
	for k := range cur {
		c := math.Abs(cur[k] - prev[k])
		if relative {
			c /= math.Abs(prev[k])
		} else {
			c /= max(1, math.Abs(prev[k]))
		}
		d = max(d, c)
	}
	return d
}

func ones(n int) []float64 {
	s := make([]float64, n)
	for k := range s {
		s[k] = 1
	}
	return s
}

// parallel runs f over [0, n) split into one contiguous chunk per core.
// Chunks write disjoint outputs, so results do not depend on the split.
func parallel(n int, f func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), n)
	if w <= 1 || n < 1024 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := range w {
		lo, hi := k*n/w, (k+1)*n/w
		wg.Go(func() { f(lo, hi) })
	}
	wg.Wait()
}
