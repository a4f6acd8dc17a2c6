package recovery

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/privrec/privrec/ldp"
)

// Shrinking toward a private mean. At the per-cell ε a whole-catalogue
// report affords, the recovered matrix can predict worse than a constant
// (its level and biases are pinned down by nothing but noise). Shrink
// replaces it by
//
//	μ + ½ Σ_f w_f (M_f − μ),
//
// μ a private estimate of the mean rating (from the clients' mean reports,
// ldp.MeanReporter), M_0 and M_1 the recoveries from the two halves of the
// cells — fold f holds the cells (i, j) with p.inFold(i, j) = f, a fixed
// pseudo-random halving — and w_f ∈
// [0, MaxWeight] a weight chosen on the OTHER fold's reports, which M_f never saw
// (cross-fitting). The squared loss of μ + w·g (g = M_f − μ) on the rated
// cells of the other fold, relative to μ, is w²A − 2wB with
// A = Σ_rated g² and B = Σ_rated g·(θ − μ); it is below 0 for 0 < w < 2B/A.
// A and B are estimated without knowing which cells are rated, from the
// mechanism's known output law (unbiased per cell, heldOut), with standard
// errors s_A, s_B; the weight is the conservative
//
//	w = clamp((B̂ − z·s_B) / (Â + z·s_A), 0, MaxWeight),
//
// which is ≤ B/A — so the fold's predictor is no worse than μ — whenever
// B ≥ B̂ − z·s_B and A ≤ Â + z·s_A (each fails with probability ≈ 0.13 %
// at z = 3 under the normal approximation, which the sums over many cells
// justify; z = 2, ≈ 2.3 % each, let a fold with no signal through on one
// MovieLens-100K collection of four tried). Where the reports carry no signal the weights are 0 and the
// model predicts μ; where they do, w → B/A, which exceeds 1 when the
// nuclear norm has shrunk a fold's recovery more than its noise warrants
// (≈ 1.4 on the synthetic test at ε = 4). Averaging the two folds'
// predictors is no worse than the worse of them (the squared loss is
// convex). This is beyond the seed paper, whose estimator has no level to
// fall back on.

// ShrinkZ is the default z of the weights' confidence bounds, and
// MaxWeight the largest weight (a guard against a vanishing Â + z·s_A;
// any w ≤ B/A keeps the guarantee).
const (
	ShrinkZ   = 3.0
	MaxWeight = 2.0
)

// Shrinkage records how Shrink combined the two folds.
type Shrinkage struct {
	// Target is μ in report units.
	Target float64
	// Weights[f] is fold f's weight; A, B their estimates on the other
	// fold and SA, SB their standard errors; Folds the two recoveries.
	Weights, A, B, SA, SB [2]float64
	Folds                 [2]*Result
}

// fold returns the sub-problem of the present reports in fold f (cells
// with p.inFold(i, j) = f, i and j the row and column indices of p, which
// number the whole population's rows and columns that have reports).
func (p *Problem) fold(f int) *Problem {
	q := *p
	q.half = f + 1
	q.Ptr = make([]int64, p.Rows+1)
	var n int64
	for i := range p.Rows {
		for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
			if p.inFold(i, int(p.Col[k])) == f {
				n++
			}
		}
		q.Ptr[i+1] = n
	}
	q.Col, q.Z = make([]int32, 0, n), make([]float64, 0, n)
	for i := range p.Rows {
		for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
			if p.inFold(i, int(p.Col[k])) == f {
				q.Col = append(q.Col, p.Col[k])
				q.Z = append(q.Z, p.Z[k])
			}
		}
	}
	return &q
}

// Shrink recovers each fold of p with o, weighs each on the other fold's
// reports and returns the combined matrix μ + ½ Σ_f w_f (M_f − μ), with
// mu = μ in report units (see the comment above). z ≤ 0 means ShrinkZ.
func Shrink(ctx context.Context, p *Problem, o Options, mu, z float64) (*Result, *Shrinkage, error) {
	if math.IsNaN(mu) || math.IsInf(mu, 0) {
		return nil, nil, fmt.Errorf("recovery: the shrinkage target %v is not finite", mu)
	}
	if p.half != 0 {
		return nil, nil, fmt.Errorf("recovery: Shrink needs a whole problem, not a fold")
	}
	if z <= 0 {
		z = ShrinkZ
	}
	sh := &Shrinkage{Target: mu}
	for f := range 2 {
		q := p.fold(f)
		if len(q.Z) == 0 {
			return nil, nil, fmt.Errorf("recovery: fold %d holds no report", f)
		}
		res, err := Recover(ctx, q, o)
		if err != nil {
			return nil, nil, fmt.Errorf("recovery: fold %d: %w", f, err)
		}
		sh.Folds[f] = res
		a, b, va, vb := p.heldOut(1-f, res, mu, o.Workers)
		sh.A[f], sh.B[f], sh.SA[f], sh.SB[f] = a, b, math.Sqrt(va), math.Sqrt(vb)
		w := 0.0
		if hi := a + z*sh.SA[f]; hi > 0 {
			w = math.Max(0, math.Min(MaxWeight, (b-z*sh.SB[f])/hi))
		}
		sh.Weights[f] = w
	}
	return combine(p, sh), sh, nil
}

// combine builds μ + ½ Σ_f w_f (M_f − μ) as one Result: the offset and
// biases averaged with the weights, the factors side by side (a fold of
// weight 0 contributes none).
func combine(p *Problem, sh *Shrinkage) *Result {
	mu := sh.Target
	out := &Result{Offset: mu, UserBias: make([]float64, p.Rows), ItemBias: make([]float64, p.Cols)}
	for f, r := range sh.Folds {
		if w := sh.Weights[f] / 2; w > 0 {
			out.Offset += w * (r.Offset - mu)
			if r.UserBias != nil {
				for i, b := range r.UserBias {
					out.UserBias[i] += w * b
				}
				for j, b := range r.ItemBias {
					out.ItemBias[j] += w * b
				}
			}
			out.Rank += r.Rank
		}
	}
	out.U, out.V = make([]float64, p.Rows*out.Rank), make([]float64, p.Cols*out.Rank)
	c0 := 0
	for f, r := range sh.Folds {
		w := sh.Weights[f] / 2
		if w == 0 || r.Rank == 0 {
			continue
		}
		for i := range p.Rows {
			for c := range r.Rank {
				out.U[i*out.Rank+c0+c] = w * r.U[i*r.Rank+c]
			}
		}
		for j := range p.Cols {
			copy(out.V[j*out.Rank+c0:j*out.Rank+c0+r.Rank], r.V[j*r.Rank:(j+1)*r.Rank])
		}
		c0 += r.Rank
	}
	// The facts of the folds' solves, for the report: iterations and the
	// estimated number of true ratings add up; the solution is zero when
	// neither half found a low-rank part; λ and ρ are the first half's.
	out.Zero = true
	for _, r := range sh.Folds {
		out.Iterations += r.Iterations
		out.SEstimate += r.SEstimate
		out.Zero = out.Zero && r.Zero
	}
	out.Lambda, out.Rho, out.Residual, out.ZNorm = sh.Folds[0].Lambda, sh.Folds[0].Rho, sh.Folds[0].Residual, sh.Folds[0].ZNorm
	out.NoiseOpNorm, out.Rule = sh.Folds[0].NoiseOpNorm, sh.Folds[0].Rule
	return out
}

// heldOut estimates, over the cells (i, j) of fold e within p's rows and
// columns, A = Σ_rated g² and B = Σ_rated g·(θ − μ), g = M − μ, M = r's
// matrix and θ the true rating (report units), and bounds the variances of
// the estimates. Per cell, with P the presence of a report and Z its value,
// the mechanism's law (π₁, π₀ the presence rates of rated and missing
// cells, a₁ + b₁θ and a₀ the means of present reports) gives the unbiased
// ĉ = (P − π₀)/(π₁ − π₀) of 1[rated] and
// ŝ = (P·Z − π₀a₀ − ĉ(π₁a₁ − π₀a₀))/(π₁b₁) of 1[rated]·θ; then
// Â = Σ ĉ g², B̂ = Σ g(ŝ − μĉ). The cells are independent given the
// truth, so Var Â ≤ Σ g⁴·V_c and Var B̂ ≤ Σ g²·V_t, V_c and V_t the largest
// variances of ĉ and ŝ − μĉ over the states a cell can be in (missing, or
// rated anything on the scale; cellVariances) — bounds that hold whatever
// the truth, without the signal a plug-in Σ g²(ŝ − μĉ)² would count as
// noise. O(Rows·Cols·rank), on workers goroutines.
func (p *Problem) heldOut(e int, r *Result, mu float64, workers int) (a, b, va, vb float64) {
	m := p.Model
	gap := m.PresentRated - m.PresentMissing
	c0 := -m.PresentMissing / gap // ĉ of an absent report
	c1 := (1 - m.PresentMissing) / gap
	base := m.PresentMissing * m.MeanMissing
	lift := m.PresentRated*m.MeanRatedA - base
	den := m.PresentRated * m.MeanRatedB
	s0 := (-base - c0*lift) / den // ŝ of an absent report
	vc, vt := p.cellVariances(mu)
	if workers <= 0 {
		workers = 2
	}
	var mu_ sync.Mutex
	var wg sync.WaitGroup
	rows := make(chan int, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			z := make([]float64, p.Cols)
			present := make([]bool, p.Cols)
			var sa, sb, sg4, sg2 float64
			for i := range rows {
				for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
					present[p.Col[k]], z[p.Col[k]] = true, p.Z[k]
				}
				ui := r.U[i*r.Rank : (i+1)*r.Rank]
				lvl := r.Offset
				if r.UserBias != nil {
					lvl += r.UserBias[i]
				}
				for j := range p.Cols {
					if p.inFold(i, j) != e {
						continue
					}
					g := lvl - mu
					if r.ItemBias != nil {
						g += r.ItemBias[j]
					}
					vj := r.V[j*r.Rank : (j+1)*r.Rank]
					for c, u := range ui {
						g += u * vj[c]
					}
					c, s := c0, s0
					if present[j] {
						c = c1
						s = (z[j] - base - c1*lift) / den
					}
					g2 := g * g
					t := s - mu*c
					sa += c * g2
					sb += g * t
					sg4 += g2 * g2
					sg2 += g2
				}
				for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
					present[p.Col[k]] = false
				}
			}
			mu_.Lock()
			a, b, va, vb = a+sa, b+sb, va+sg4*vc, vb+sg2*vt
			mu_.Unlock()
		}()
	}
	for i := range p.Rows {
		rows <- i
	}
	close(rows)
	wg.Wait()
	return a, b, va, vb
}

// cellVariances returns the largest variance of ĉ and of ŝ − μĉ (heldOut)
// over the states of one cell: missing, or rated θ anywhere on the scale.
// Both are affine in the presence P and in P·Z: ŝ − μĉ = P·Z/(π₁b₁) −
// P·(λ/(π₁b₁) + μ)/(π₁ − π₀) + const, λ = π₁a₁ − π₀a₀, and in a state
// where P ~ Bernoulli(π) and Z | present has mean m and variance v,
// Var P = π(1−π), Var PZ = π(v + m²) − π²m², Cov(PZ, P) = πm(1−π). For
// randomized response v is exact at every level (the mechanism's keep and
// flip probabilities follow from π₀ and π₁); for the modified Laplace
// mechanism v is its noise variance and the largest value over θ ∈ [−1, 1]
// is at an end (the variance is a convex quadratic in m).
func (p *Problem) cellVariances(mu float64) (vc, vt float64) {
	m := p.Model
	gap := m.PresentRated - m.PresentMissing
	den := m.PresentRated * m.MeanRatedB
	lift := m.PresentRated*m.MeanRatedA - m.PresentMissing*m.MeanMissing
	ca, cp := 1/den, -(lift/den+mu)/gap
	state := func(pi, mean, v float64) {
		vp := pi * (1 - pi)
		vpz := pi*(v+mean*mean) - pi*pi*mean*mean
		cov := pi * mean * (1 - pi)
		vc = math.Max(vc, vp/(gap*gap))
		vt = math.Max(vt, ca*ca*vpz+cp*cp*vp+2*ca*cp*cov)
	}
	state(m.PresentMissing, m.MeanMissing, m.NoiseVarMissing)
	switch {
	case p.Mechanism == ldp.RR && p.Levels >= 2:
		// Present given rated k: level k w.p. keep/π₁, each other level
		// w.p. b/π₁, with b = 1 − π₁ and keep = 1 − π₀.
		d := p.Levels
		b, keep := 1-m.PresentRated, 1-m.PresentMissing
		for k := 1; k <= d; k++ {
			var mean, sq float64
			for l := 1; l <= d; l++ {
				q := b / m.PresentRated
				if l == k {
					q = keep / m.PresentRated
				}
				mean += q * float64(l)
				sq += q * float64(l*l)
			}
			state(m.PresentRated, mean, sq-mean*mean)
		}
	default:
		// Laplace (normalised units, θ ∈ [−1, 1]) and clean ratings
		// (θ on the scale, no noise): the ends of the range.
		lo, hi := -1.0, 1.0
		if p.Mechanism == Clean {
			lo, hi = 0, p.Range // only the spread matters: v = 0, π₁ = 1
		}
		for _, th := range []float64{lo, hi} {
			state(m.PresentRated, m.MeanRatedA+m.MeanRatedB*th, m.NoiseVar)
		}
	}
	return vc, vt
}
