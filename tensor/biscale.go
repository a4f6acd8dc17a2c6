package tensor

import (
	"fmt"
	"math"
	"slices"
)

// Affine is one centre and scale of the bi-scaling.
type Affine struct{ Centre, Scale float64 }

// Scaling is a bi-scaling of each day slice (mode-3 slice) of a tensor, as
// the seed applies to MovieLens (after Hastie et al.'s biScale): in slice k,
//
//	z_ijk = (x_ijk − μ_k − α_ik − β_jk) / (τ_ik γ_jk),
//
// so that, where a row or column has enough entries, its entries in the
// slice have mean 0 and variance 1. Rows or columns a slice does not
// contain have centre 0 and scale 1 (so an unseen user on a known day is
// predicted from the day mean and the item's terms, and so on).
//
// This is the tensor-slice analogue of the matrix bi-scaling in package
// transform; it is written here because it works on coordinate slices and
// must be stored with a tensor model for evaluation.
type Scaling struct {
	Days int
	// Mean[k] is μ_k (the slice mean; 0 for empty slices).
	Mean []float64
	// Row[i·Days + k] and Col[j·Days + k] are the terms present in slice k.
	Row, Col map[int64]Affine
}

// minScaleCount is the smallest number of entries a row or column needs in
// a slice for its scale to be estimated (with one entry the centred
// residual is 0 and its variance undefined).
const minScaleCount = 2

// BiScaleDays bi-scales every day slice of t with iters alternating rounds
// and returns the scaled tensor and the scaling.
func BiScaleDays(t *Tensor, iters int) (*Tensor, *Scaling, error) {
	if iters <= 0 {
		return nil, nil, fmt.Errorf("tensor: bi-scaling needs at least one iteration, got %d", iters)
	}
	K := t.Dims[2]
	s := &Scaling{Days: K, Mean: make([]float64, K), Row: map[int64]Affine{}, Col: map[int64]Affine{}}
	bySlice := make([][]int, K)
	for e := range t.Len() {
		bySlice[t.K[e]] = append(bySlice[t.K[e]], e)
	}
	out := t.Clone()
	for k, idx := range bySlice {
		if len(idx) == 0 {
			continue
		}
		var mu float64
		for _, e := range idx {
			mu += t.Val[e]
		}
		mu /= float64(len(idx))
		s.Mean[k] = mu
		// Dense local indices for the rows and columns present.
		rows, cols := map[int32]int{}, map[int32]int{}
		ri, ci := make([]int, len(idx)), make([]int, len(idx))
		for n, e := range idx {
			r, ok := rows[t.I[e]]
			if !ok {
				r = len(rows)
				rows[t.I[e]] = r
			}
			c, ok := cols[t.J[e]]
			if !ok {
				c = len(cols)
				cols[t.J[e]] = c
			}
			ri[n], ci[n] = r, c
		}
		alpha, tau := make([]float64, len(rows)), ones(len(rows))
		beta, gamma := make([]float64, len(cols)), ones(len(cols))
		rn, cn := make([]float64, len(rows)), make([]float64, len(cols))
		for n := range idx {
			rn[ri[n]]++
			cn[ci[n]]++
		}
		rs, cs := make([]float64, len(rows)), make([]float64, len(cols))
		rw, cw := make([]float64, len(rows)), make([]float64, len(cols))
		for range iters {
			// centres: weighted means that make every row's and column's
			// scaled entries sum to zero (Hastie et al.'s biScale)
			weightedCentres(idx, t.Val, mu, ri, ci, beta, gamma, rs, rw, alpha)
			weightedCentres(idx, t.Val, mu, ci, ri, alpha, tau, cs, cw, beta)
			clear(rs)
			for n, e := range idx {
				z := (t.Val[e] - mu - alpha[ri[n]] - beta[ci[n]]) / gamma[ci[n]]
				rs[ri[n]] += z * z
			}
			for r := range tau {
				tau[r] = scaleOf(rs[r], rn[r])
			}
			clear(cs)
			for n, e := range idx {
				z := (t.Val[e] - mu - alpha[ri[n]] - beta[ci[n]]) / tau[ri[n]]
				cs[ci[n]] += z * z
			}
			for c := range gamma {
				gamma[c] = scaleOf(cs[c], cn[c])
			}
		}
		for i, r := range rows {
			s.Row[int64(i)*int64(K)+int64(k)] = Affine{alpha[r], tau[r]}
		}
		for j, c := range cols {
			s.Col[int64(j)*int64(K)+int64(k)] = Affine{beta[c], gamma[c]}
		}
		for n, e := range idx {
			out.Val[e] = (t.Val[e] - mu - alpha[ri[n]] - beta[ci[n]]) / (tau[ri[n]] * gamma[ci[n]])
		}
	}
	return out, s, nil
}

// weightedCentres sets out[a], for each entry n of the slice (its value
// val[idx[n]], at a = self[n] and b = other[n]), to the mean of
// y − mu − off[b] over a's entries weighted by 1/scale[b]; sum and wt are
// scratch of len(out).
func weightedCentres(idx []int, val []float64, mu float64, self, other []int, off, scale, sum, wt, out []float64) {
	clear(sum)
	clear(wt)
	for n, e := range idx {
		w := 1 / scale[other[n]]
		sum[self[n]] += w * (val[e] - mu - off[other[n]])
		wt[self[n]] += w
	}
	for a := range out {
		out[a] = sum[a] / wt[a]
	}
}

func ones(n int) []float64 {
	o := make([]float64, n)
	for x := range o {
		o[x] = 1
	}
	return o
}

// scaleOf is √(ss/n), or 1 when there are too few entries or no spread.
func scaleOf(ss, n float64) float64 {
	if n < minScaleCount {
		return 1
	}
	v := math.Sqrt(ss / n)
	if !(v > 1e-8) {
		return 1
	}
	return v
}

func (s *Scaling) terms(i, j, k int) (mu float64, r, c Affine) {
	r, c = Affine{0, 1}, Affine{0, 1}
	if k < 0 || k >= s.Days {
		return 0, r, c
	}
	if a, ok := s.Row[int64(i)*int64(s.Days)+int64(k)]; ok {
		r = a
	}
	if a, ok := s.Col[int64(j)*int64(s.Days)+int64(k)]; ok {
		c = a
	}
	return s.Mean[k], r, c
}

// Forward maps a raw value at (i, j, k) to the scaled space.
func (s *Scaling) Forward(i, j, k int, x float64) float64 {
	mu, r, c := s.terms(i, j, k)
	return (x - mu - r.Centre - c.Centre) / (r.Scale * c.Scale)
}

// Inverse maps a scaled value at (i, j, k) back to the raw scale.
func (s *Scaling) Inverse(i, j, k int, z float64) float64 {
	mu, r, c := s.terms(i, j, k)
	return mu + r.Centre + c.Centre + r.Scale*c.Scale*z
}

// Flatten returns the scaling as sorted parallel arrays (for saving).
func (s *Scaling) Flatten() (rowKeys []int64, rowVals []float64, colKeys []int64, colVals []float64) {
	flat := func(m map[int64]Affine) ([]int64, []float64) {
		keys := make([]int64, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		vals := make([]float64, 0, 2*len(keys))
		for _, k := range keys {
			vals = append(vals, m[k].Centre, m[k].Scale)
		}
		return keys, vals
	}
	rowKeys, rowVals = flat(s.Row)
	colKeys, colVals = flat(s.Col)
	return
}

// Unflatten rebuilds a Scaling from Flatten's arrays.
func Unflatten(days int, mean []float64, rowKeys []int64, rowVals []float64, colKeys []int64, colVals []float64) (*Scaling, error) {
	if len(mean) != days || len(rowVals) != 2*len(rowKeys) || len(colVals) != 2*len(colKeys) {
		return nil, fmt.Errorf("tensor: inconsistent scaling arrays")
	}
	s := &Scaling{Days: days, Mean: mean, Row: make(map[int64]Affine, len(rowKeys)), Col: make(map[int64]Affine, len(colKeys))}
	for n, k := range rowKeys {
		s.Row[k] = Affine{rowVals[2*n], rowVals[2*n+1]}
	}
	for n, k := range colKeys {
		s.Col[k] = Affine{colVals[2*n], colVals[2*n+1]}
	}
	return s, nil
}
