package onebit

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Projector projects d1 × d2 matrices onto C = {‖X‖_* ≤ Tau, ‖X‖_∞ ≤ Alpha}.
// It keeps the last singular vectors to warm-start the next projection and
// is not safe for concurrent use.
type Projector struct {
	D1, D2     int
	Tau, Alpha float64
	// Tol is Dykstra's stopping tolerance: iterate until the nuclear-ball
	// and box iterates differ by at most Tol·Alpha in every entry (default
	// 1e-2; the solver tightens it when a direction fails to descend). The
	// returned point is always exactly in C (see Project).
	Tol float64
	// StepTol, when positive, is a further absolute bound on Dykstra's
	// tolerance: the solver sets it to a fraction of the step it is
	// projecting, so that the projection's error stays small next to the
	// move.
	StepTol float64
	// MaxDykstra bounds Dykstra's iterations per call (default 10; the
	// warm start carries the work over to the next call).
	MaxDykstra int
	// FullSVD uses gonum's complete SVD for every nuclear projection (the
	// slow reference the partial SVD is checked against).
	FullSVD bool
	// ExactDim: matrices with min(d1, d2) ≤ ExactDim get the exact spectrum
	// from the Gram matrix (default 400); larger ones the subspace
	// iteration.
	ExactDim int
	// SweepTol and MaxSweeps stop the subspace iteration: when no kept
	// singular value moved by more than SweepTol relative to σ₁ in a sweep
	// (default 1e-4), or after MaxSweeps sweeps (default 20).
	SweepTol  float64
	MaxSweeps int
	// NoWarmStart makes every projection start Dykstra from zero
	// increments (the textbook algorithm; slower inside SPG).
	NoWarmStart bool
	// ColdSubspace makes a call without start vectors (the first) use
	// the subspace iteration from random vectors, up to ColdSweeps sweeps
	// (default 8), instead of the exact spectrum of the Gram matrix; the
	// block still doubles while every Ritz value is above the threshold.
	ColdSubspace bool
	ColdSweeps   int
	// SparseInput: matrices with at most 1/16 of their entries non-zero
	// go to the subspace iteration in compressed rows.
	SparseInput bool
	// Single makes the subspace iteration's block products single
	// precision (see dense32Op).
	Single bool
	buf32  []float32
	// BlockMargin is the number of subspace-iteration vectors beyond the
	// last call's rank (0: max(16, rank/4)).
	BlockMargin int

	rnd         func() float64
	warmDykstra bool       // q holds the last call's box increment
	warm        *mat.Dense // last right singular vectors
	warmS       []float64  // and values
	rank        int        // last rank

	// Stats, cumulative.
	NuclearProjections int // nuclear-ball projections
	Sweeps             int // subspace-iteration sweeps
	DykstraIters       int // Dykstra iterations beyond the first nuclear projection
	Fallbacks          int // full SVDs taken because the partial one did not settle
	Tightened          int // times the solver tightened Tol

	q, qn, w, y, tmp []float64
}

// NewProjector returns a projector for d1 × d2 matrices; rnd seeds the
// subspace iteration's random start vectors (non-private randomness).
// alpha = +Inf drops the max-norm constraint: C is the nuclear ball alone,
// one nuclear projection per call (the problem the 1BMC reference code
// solves on MovieLens).
func NewProjector(d1, d2 int, tau, alpha float64, rnd func() float64) (*Projector, error) {
	if d1 <= 0 || d2 <= 0 {
		return nil, fmt.Errorf("onebit: empty %d × %d matrix", d1, d2)
	}
	if !(tau > 0) || math.IsInf(tau, 0) || !(alpha > 0) {
		return nil, fmt.Errorf("onebit: τ = %g must be finite and positive and α = %g positive", tau, alpha)
	}
	return &Projector{D1: d1, D2: d2, Tau: tau, Alpha: alpha, Tol: 1e-2, MaxDykstra: 10, SweepTol: 1e-4, MaxSweeps: 20, rnd: rnd}, nil
}

// Project writes into dst the projection of z onto C (dst and z may be the
// same slice). It returns the low-rank form of the result: dst =
// scale · U diag(S) Vᵀ (U, S, V nil when z was already inside the nuclear
// ball and the box, or when the last nuclear iterate was z itself).
//
// Exactness: if the nuclear projection of z already lies in the box, it is
// the projection onto C. Otherwise Dykstra's algorithm alternates the two
// projections until its two iterates agree to Tol·α entrywise; the result is
// the last nuclear-ball iterate Y scaled by min(1, α/‖Y‖_∞), which lies in
// both sets (scaling toward 0 keeps a point in a ball centred at 0), and
// ‖Y‖_∞ ≤ α(1 + Tol), so the scaling moves it by at most Tol·α entrywise.
//
// Warm start: Dykstra's algorithm is block-coordinate minimisation of the
// dual of the projection problem over the two increments p, q (Gaffke and
// Mathar 1989; Tibshirani 2017, "Dykstra's algorithm, ADMM, and coordinate
// descent"), with the primal iterate x = z − p − q; it converges from any
// starting increments. When the previous call ran Dykstra, this call starts
// from its box increment q, which SPG's small steps change little: a round
// or two instead of dozens.
func (pr *Projector) Project(dst, z []float64) (t triplets, scale float64, err error) {
	n := pr.D1 * pr.D2
	if len(z) != n || len(dst) != n {
		return triplets{}, 0, fmt.Errorf("onebit: project: %d and %d values for a %d × %d matrix", len(dst), len(z), pr.D1, pr.D2)
	}
	if pr.y == nil {
		pr.y = make([]float64, n)
	}
	a := pr.Alpha
	if pr.q == nil {
		pr.q, pr.qn, pr.w, pr.tmp = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	}
	q, qn, w, y, tmp := pr.q, pr.qn, pr.w, pr.y, pr.tmp
	if !pr.warmDykstra || pr.NoWarmStart {
		clear(q)
	}
	copy(w, q)
	tol := pr.Tol * a
	if pr.StepTol > 0 {
		tol = math.Min(tol, pr.StepTol)
	}
	tk := 1.0
	prevGap := math.Inf(1)
	for it := 0; ; it++ {
		for i := range n {
			tmp[i] = z[i] - w[i]
		}
		inside, tt, err := pr.nuclear(y, tmp)
		if err != nil {
			return triplets{}, 0, err
		}
		if inside {
			tt = triplets{}
		}
		t = tt
		// Dual step: qn = shrink(y + w, α), i.e. y + w − P_box(y + w).
		gap := 0.0
		for i := range n {
			v := y[i] + w[i]
			c := math.Max(-a, math.Min(a, v))
			qn[i] = v - c
			gap = math.Max(gap, math.Abs(c-y[i]))
		}
		if gap <= tol || it >= pr.MaxDykstra {
			if debugProj != nil {
				debugProj("dykstra rounds %d gap %.3g tol %.3g", it, gap, tol)
			}
			copy(q, qn)
			break
		}
		pr.DykstraIters++
		// Nesterov extrapolation, restarted when the gap grows.
		tn := (1 + math.Sqrt(1+4*tk*tk)) / 2
		beta := (tk - 1) / tn
		if gap > prevGap || !dykstraAccel {
			tn, beta = 1, 0
		}
		prevGap = gap
		for i := range n {
			w[i] = qn[i] + beta*(qn[i]-q[i])
			q[i] = qn[i]
		}
		tk = tn
	}
	pr.warmDykstra = true
	m := maxAbs(y)
	scale = 1.0
	if m > a {
		scale = a / m
	}
	for i := range n {
		dst[i] = scale * y[i]
	}
	return t, scale, nil
}

// dykstraAccel turns on the Nesterov extrapolation of the dual step (tests
// may switch it off to compare with the textbook algorithm).
var dykstraAccel = true

// debugProj, when set (tests only), is told about each projection.
var debugProj func(format string, args ...any)

// errNonFinite reports a failed decomposition (non-finite input).
var errNonFinite = errors.New("onebit: decomposition of the iterate failed (non-finite values?)")

func maxAbs(x []float64) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// nuclear writes into dst the projection of z onto {‖X‖_* ≤ Tau} and
// reports whether z was inside (dst = z). A cheap test √min(d1,d2)·‖z‖_F ≤ τ
// skips the work. Small matrices (min(d1, d2) ≤ ExactDim) take the exact
// spectrum from the Gram matrix; larger ones a warm-started block
// subspace iteration (both in svd.go); FullSVD takes gonum's complete SVD (the slow
// reference). Whatever the accuracy of the singular triplets, the result
// Σ (σ_i − θ)₊ u_i v_iᵀ has orthonormal u, v and Σ (σ_i − θ)₊ = τ, so it
// lies in the ball exactly; inaccuracy only moves it away from the exact
// projection.
func (pr *Projector) nuclear(dst, z []float64) (bool, triplets, error) {
	pr.NuclearProjections++
	a := mat.NewDense(pr.D1, pr.D2, z)
	m := min(pr.D1, pr.D2)
	var fro2 float64
	for _, v := range z {
		fro2 += v * v
	}
	if math.Sqrt(float64(m)*fro2) <= pr.Tau {
		copy(dst, z)
		return true, triplets{}, nil
	}
	exactDim := pr.ExactDim
	if exactDim == 0 {
		exactDim = 400
	}
	switch {
	case pr.FullSVD:
		t, ok := fullSVD(a)
		if !ok {
			return false, triplets{}, errNonFinite
		}
		return pr.shrink(dst, z, t)
	case m <= exactDim:
		return pr.exact(dst, z, a, false)
	}
	return pr.subspace(dst, z, a, fro2)
}

// exact projects with the exact spectrum from the Gram matrix (gramTop);
// with warm its right vectors start the next subspace iteration.
func (pr *Projector) exact(dst, z []float64, a *mat.Dense, warm bool) (bool, triplets, error) {
	t, inside, ok := gramTop(a, pr.Tau)
	if !ok {
		return false, triplets{}, errNonFinite
	}
	if inside {
		copy(dst, z)
		return true, triplets{}, nil
	}
	if warm {
		pr.warm, pr.warmS = t.V, t.S
	}
	return pr.shrink(dst, z, t)
}

// subspace projects with the top triplets from a block subspace
// iteration, doubling the block until the kept values fit in it (fro2 is
// ‖z‖²_F).
func (pr *Projector) subspace(dst, z []float64, a *mat.Dense, fro2 float64) (bool, triplets, error) {
	m := min(pr.D1, pr.D2)
	margin := pr.BlockMargin
	if margin <= 0 {
		margin = max(16, pr.rank/4)
	}
	b := max(pr.rank+margin, 32)
	cold := pr.warm == nil && pr.ColdSubspace
	for {
		sweepsMax := pr.MaxSweeps
		if cold && b <= m/2 {
			sweepsMax = pr.ColdSweeps
			if sweepsMax <= 0 {
				sweepsMax = 8
			}
		} else if b > m/2 || pr.warm == nil {
			// No start vectors (first call) or a block too large: the
			// exact spectrum is cheaper than many sweeps.
			pr.Fallbacks++
			return pr.exact(dst, z, a, true)
		}
		t, sweeps, ok := subspaceSVD(pr.blockOp(z, a), b, pr.Tau, pr.SweepTol, sweepsMax, pr.warm, pr.warmS, pr.rnd)
		pr.Sweeps += sweeps
		if debugProj != nil {
			_, k := softThreshold(t.S, pr.Tau)
			debugProj("subspace b %d sweeps %d k %d", b, sweeps, k)
		}
		if !ok {
			return false, triplets{}, errNonFinite
		}
		pr.warm, pr.warmS = t.V, t.S
		var sum, sq float64
		for _, s := range t.S {
			sum += s
			sq += s * s
		}
		// The rest's nuclear norm is at most √(its rank)·‖rest‖_F.
		rest := math.Sqrt(math.Max(0, fro2-sq)) * math.Sqrt(float64(m-len(t.S)))
		if sum+rest <= pr.Tau {
			copy(dst, z)
			return true, triplets{}, nil
		}
		if sum > pr.Tau {
			if _, k := softThreshold(t.S, pr.Tau); k < len(t.S) {
				return pr.shrink(dst, z, t)
			}
		}
		b *= 2
	}
}

// blockOp is z (the dense a) as the subspace iteration multiplies it: in
// single precision with Single, in compressed rows with SparseInput when
// at most 1/16 of it is non-zero.
func (pr *Projector) blockOp(z []float64, a *mat.Dense) blockOp {
	var op blockOp = denseOp{a}
	if pr.Single {
		o32 := newDense32Op(z, pr.D1, pr.D2, pr.buf32)
		pr.buf32 = o32.a
		op = o32
	}
	if pr.SparseInput {
		if sp, ok := newSparseOp(z, pr.D1, pr.D2, len(z)/16); ok {
			op = sp
		}
	}
	return op
}

// shrink soft-thresholds the singular values of t at the θ that brings
// their sum to Tau, writes U diag(σ − θ)₊ Vᵀ into dst and returns the kept
// triplets; if Σσ ≤ Tau it copies z (the input) into dst and reports it
// inside.
func (pr *Projector) shrink(dst, z []float64, t triplets) (bool, triplets, error) {
	var sum float64
	for _, s := range t.S {
		sum += s
	}
	if sum <= pr.Tau {
		copy(dst, z)
		return true, triplets{}, nil
	}
	theta, k := softThreshold(t.S, pr.Tau)
	kept := triplets{U: sliceCols(t.U, k), S: make([]float64, k), V: sliceCols(t.V, k)}
	for i := range k {
		kept.S[i] = t.S[i] - theta
	}
	pr.rank = k
	compose(dst, kept, pr.D1, pr.D2)
	return false, kept, nil
}

func sliceCols(a *mat.Dense, k int) *mat.Dense {
	r, _ := a.Dims()
	return mat.DenseCopyOf(a.Slice(0, r, 0, k))
}

// compose writes U diag(S) Vᵀ into dst (d1 × d2 row-major).
func compose(dst []float64, t triplets, d1, d2 int) {
	k := len(t.S)
	us := mat.DenseCopyOf(t.U)
	for j := range k {
		for i := range d1 {
			us.Set(i, j, us.At(i, j)*t.S[j])
		}
	}
	out := mat.NewDense(d1, d2, dst)
	out.Mul(us, t.V.T())
}
