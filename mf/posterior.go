package mf

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// itemPrior is the empirical prior of the item factors in the pooled
// Gram's eigenbasis Q (S̄ = Q·diag(s)·Qᵀ): in direction k an item's factor
// deviates from its prior mean (the public Init with PriorRidge, else 0)
// with variance p_k, and the unclipped rating noise adds variance α_k·g
// to a right-hand side whose Gram is g in that direction.
type itemPrior struct {
	q     *mat.Dense // d × d, the columns are the directions
	s     []float64  // S̄'s eigenvalues
	p     []float64  // the factors' variance around the prior mean
	alpha []float64  // the rating noise per unit of Gram
	tau2  float64    // the release's noise variance on a right-hand side
	used  []bool     // the directions with information (the others keep the prior mean)
}

// posteriorFit estimates the item prior from every active item's released
// right-hand side (post-processing: only released sums, public weights and
// the public noise scale enter). In direction k an item's raw estimate
// x = h̃_k/g − m̃_k (g = W_j·s_k) has E[x²] = p_k + α_k/g + τ²/g²; p_k and
// α_k are the weighted least-squares fit of x² − τ²/g² on (1, 1/g) over
// the items, each weighted by the inverse square of its expected x²
// (iterated, since the weights depend on the fit).
//
// Hand-written rather than a library regression: a two-parameter weighted
// fit in closed form, re-weighted a few times.
func posteriorFit(o *DPALSOptions, keptH []float64, S []float64, d int, tau float64) (*itemPrior, error) {
	full := mat.NewSymDense(d, nil)
	for a := range d {
		for b := a; b < d; b++ {
			full.SetSym(a, b, S[a*d+b])
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(full, true) {
		return nil, fmt.Errorf("DPALS: the pooled Gram's eigendecomposition failed")
	}
	pr := &itemPrior{q: new(mat.Dense), s: eig.Values(nil), p: make([]float64, d), alpha: make([]float64, d), tau2: tau * tau}
	eig.VectorsTo(pr.q)
	n := len(o.Active)
	ht, mt, m := make([]float64, d), make([]float64, d), make([]float64, d)
	// xs[k] holds the (g, x²) pairs of direction k.
	xs := make([][]dirObs, d)
	// Directions in which the users' rows hardly vary (S̄'s eigenvalue
	// below 10⁻⁹ of the largest: a feature no user's row uses) carry no
	// information on the items; their factors stay at the prior mean.
	smax := 0.0
	for _, x := range pr.s {
		smax = math.Max(smax, x)
	}
	pr.used = make([]bool, d)
	for k, x := range pr.s {
		pr.used[k] = x > 1e-9*smax
	}
	for j := range n {
		wj := math.Max(o.PoolWeights[j], 0)
		if !o.Active[j] || wj == 0 {
			continue
		}
		pr.rotate(keptH[j*d:(j+1)*d], ht)
		o.priorMean(j, d, m)
		pr.rotate(m, mt)
		for k := range d {
			g := wj * pr.s[k]
			if !pr.used[k] || !(g > 0) {
				continue
			}
			x := ht[k]/g - mt[k]
			xs[k] = append(xs[k], dirObs{g, x * x})
		}
	}
	for k := range d {
		p, alpha := fitDirection(xs[k], pr.tau2, true)
		// Where the items' Grams span a narrow range, p and α/g are hard
		// to tell apart and the fit may put everything into α (p → 0, all
		// items pinned to the prior mean): then the fit without rating
		// noise stands (p absorbs it: less shrinkage, never a collapse).
		if p0, _ := fitDirection(xs[k], pr.tau2, false); p < 0.01*p0 {
			p, alpha = p0, 0
		}
		pr.p[k], pr.alpha[k] = p, alpha
	}
	// In a direction the users' rows hardly use, even the most rated
	// items' Gram is small, x² is mostly the release's noise and p_k is a
	// small difference of large numbers: a fit far above the others' is
	// noise, and a large p_k lets the items' factors follow that noise.
	// The factors' spread is capped at twice the median direction's.
	var ps []float64
	for k := range d {
		if pr.used[k] {
			ps = append(ps, pr.p[k])
		}
	}
	if len(ps) > 0 {
		sort.Float64s(ps)
		limit := 2 * ps[len(ps)/2]
		for k := range d {
			pr.p[k] = math.Min(pr.p[k], limit)
		}
	}
	return pr, nil
}

// dirObs is one item's raw estimate in one direction: its Gram g there and
// x², x = h̃/g − m̃.
type dirObs struct{ g, x2 float64 }

// fitDirection fits E[x²] = p + α/g + τ²/g² to one direction's estimates
// by weighted least squares, each weighted by the inverse square of its
// expected x² and re-weighted 8 times (α fixed at 0 without withAlpha).
func fitDirection(xs []dirObs, tau2 float64, withAlpha bool) (p, alpha float64) {
	// Start from the mean square of the raw estimates weighted by g²,
	// which the most rated items dominate.
	p = 1
	var num, den float64
	for _, ob := range xs {
		num += ob.g * ob.g * ob.x2
		den += ob.g * ob.g
	}
	if den > 0 && num > 0 {
		p = num / den
	}
	for range 8 {
		var s0, s1, s2, t0, t1 float64
		for _, ob := range xs {
			e := p + alpha/ob.g + tau2/(ob.g*ob.g)
			w := 1 / (e * e)
			y := ob.x2 - tau2/(ob.g*ob.g)
			z := 1 / ob.g
			s0 += w
			s1 += w * z
			s2 += w * z * z
			t0 += w * y
			t1 += w * z * y
		}
		if !(s0 > 0) {
			break
		}
		np, na := t0/s0, 0.0
		if det := s0*s2 - s1*s1; withAlpha && det > 1e-12*s0*s2 {
			np = (t0*s2 - t1*s1) / det
			na = (s0*t1 - s1*t0) / det
		}
		if na < 0 {
			na, np = 0, t0/s0
		}
		p, alpha = math.Max(np, 1e-9), na
	}
	return p, alpha
}

// rotate writes Qᵀx into out.
func (pr *itemPrior) rotate(x, out []float64) {
	mat.NewVecDense(len(out), out).MulVec(pr.q.T(), mat.NewVecDense(len(x), x))
}

// priorMean writes item j's prior mean into m: its public initial factors
// when the item solves shrink toward them (PriorRidge), else zero.
func (o *DPALSOptions) priorMean(j, d int, m []float64) {
	clear(m)
	if o.PriorRidge && o.Init != nil {
		copy(m, o.Init[j*o.Rank:(j+1)*o.Rank])
	}
}

// solvePosterior writes item j's posterior-mean factors under the prior pr
// into V (and, with bias refinement, its bias): with G̃ = Qᵀ·sys·Q its
// Gram in the prior's basis, A = diag(α_k·G̃_kk) + τ²·I the noise of its
// right-hand side h̃ = Qᵀh and P = diag(p),
// ṽ = (G̃A⁻¹G̃ + P⁻¹)⁻¹ (G̃A⁻¹h̃ + P⁻¹m̃), v = Q·ṽ. Where the release's
// noise τ² is small against the Gram this is the ridge solve with
// λ = α/p; where it dominates, the item keeps its prior mean but for
// what its Gram can carry above the noise.
//
// gramNoise is the variance per entry of the release's noise that sys
// carries (a_j²·σ²/2 for a share a_j of the item's own noised block): the
// solve uses the noisy Gram G + E in place of G, which leaves −E·v in the
// right-hand side, an error of variance ≈ gramNoise·E‖v‖² per coordinate
// (E‖v‖² = Σ_k p_k + ‖m‖² under the prior), added to τ².
func (o *DPALSOptions) solvePosterior(pr *itemPrior, j, d int, sys []float64, gramNoise float64, h, V, itemBias []float64) error {
	full := mat.NewSymDense(d, nil)
	for a := range d {
		for b := a; b < d; b++ {
			full.SetSym(a, b, sys[a*d+b])
		}
	}
	var gt mat.Dense
	gt.Product(pr.q.T(), full, pr.q)
	ht, mt, m := make([]float64, d), make([]float64, d), make([]float64, d)
	pr.rotate(h, ht)
	o.priorMean(j, d, m)
	pr.rotate(m, mt)
	tau2 := pr.tau2
	if gramNoise > 0 {
		v2 := 0.0
		for a := range d {
			v2 += mt[a] * mt[a]
			if pr.used[a] {
				v2 += pr.p[a]
			}
		}
		tau2 += gramNoise * v2
	}
	// Only the directions with information are solved for; the others
	// keep the prior mean, and their part of the Gram moves to the
	// right-hand side: h̃_I − G̃_IN·m̃_N.
	var idx []int
	vt := append([]float64(nil), mt...)
	for a := range d {
		if pr.used[a] {
			idx = append(idx, a)
		} else {
			for b := range d {
				ht[b] -= gt.At(b, a) * mt[a]
			}
		}
	}
	r := len(idx)
	if r > 0 {
		// G̃A⁻¹ over the used directions (A diagonal: column scaling).
		ga := mat.NewDense(r, r, nil)
		gi := mat.NewDense(r, r, nil)
		for x, a := range idx {
			for y, b := range idx {
				gi.Set(x, y, gt.At(a, b))
				ga.Set(x, y, gt.At(a, b)/(pr.alpha[b]*math.Max(gt.At(b, b), 0)+tau2))
			}
		}
		var lhs mat.Dense
		lhs.Mul(ga, gi)
		hi := mat.NewVecDense(r, nil)
		for x, a := range idx {
			hi.SetVec(x, ht[a])
		}
		rhs := mat.NewVecDense(r, nil)
		rhs.MulVec(ga, hi)
		sym := mat.NewSymDense(r, nil)
		for x, a := range idx {
			rhs.SetVec(x, rhs.AtVec(x)+mt[a]/pr.p[a])
			for y := x; y < r; y++ {
				v := (lhs.At(x, y) + lhs.At(y, x)) / 2
				if x == y {
					v += 1 / pr.p[a]
				}
				sym.SetSym(x, y, v)
			}
		}
		var ch mat.Cholesky
		if !ch.Factorize(sym) {
			return fmt.Errorf("DPALS: the posterior system of item %d is not positive definite", j)
		}
		var sol mat.VecDense
		if err := ch.SolveVecTo(&sol, rhs); err != nil {
			return fmt.Errorf("DPALS: item %d: %w", j, err)
		}
		for x, a := range idx {
			vt[a] = sol.AtVec(x)
		}
	}
	var v mat.VecDense
	v.MulVec(pr.q, mat.NewVecDense(d, vt))
	k := o.Rank
	for c := range k {
		V[j*k+c] = v.AtVec(c)
	}
	if d > k {
		itemBias[j] += o.BiasScale * v.AtVec(k)
	}
	return nil
}
