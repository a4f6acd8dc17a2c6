package onebit

import (
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
	// MaxDykstra bounds Dykstra's iterations (default 30).
	MaxDykstra int
	// FullSVD uses gonum's complete SVD for every nuclear projection (the
	// slow reference the partial SVD is checked against).
	FullSVD bool

	rnd  func() float64
	warm *mat.Dense // last right singular vectors
	rank int        // last rank

	// Stats, cumulative.
	NuclearProjections int // nuclear-ball projections
	Sweeps             int // subspace-iteration sweeps
	DykstraIters       int // Dykstra iterations beyond the first nuclear projection
	Fallbacks          int // full SVDs taken because the partial one did not settle
	Tightened          int // times the solver tightened Tol

	p, q, x, y, tmp []float64
}

// NewProjector returns a projector for d1 × d2 matrices; rnd seeds the
// subspace iteration's random start vectors (non-private randomness).
func NewProjector(d1, d2 int, tau, alpha float64, rnd func() float64) (*Projector, error) {
	if d1 <= 0 || d2 <= 0 {
		return nil, fmt.Errorf("onebit: empty %d × %d matrix", d1, d2)
	}
	if !(tau > 0) || math.IsInf(tau, 0) || !(alpha > 0) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("onebit: τ = %g and α = %g must be finite and positive", tau, alpha)
	}
	return &Projector{D1: d1, D2: d2, Tau: tau, Alpha: alpha, Tol: 1e-2, MaxDykstra: 30, rnd: rnd}, nil
}

// Project writes into dst the projection of z onto C (dst and z may be the
// same slice). It returns the low-rank form of the result: dst =
// scale · U diag(S) Vᵀ (U, S, V nil when z was already inside the nuclear
// ball and the box, or when the result is just z clipped).
//
// Exactness: if the nuclear projection of z already lies in the box, it is
// the projection onto C. Otherwise Dykstra's algorithm alternates the two
// projections until its two iterates agree to Tol·α entrywise; the result is
// the last nuclear-ball iterate Y scaled by min(1, α/‖Y‖_∞), which lies in
// both sets (scaling toward 0 keeps a point in a ball centred at 0).
func (pr *Projector) Project(dst, z []float64) (t triplets, scale float64, err error) {
	n := pr.D1 * pr.D2
	if len(z) != n || len(dst) != n {
		return triplets{}, 0, fmt.Errorf("onebit: project: %d and %d values for a %d × %d matrix", len(dst), len(z), pr.D1, pr.D2)
	}
	if pr.y == nil {
		pr.y = make([]float64, n)
	}
	inside, t, err := pr.nuclear(pr.y, z)
	if err != nil {
		return triplets{}, 0, err
	}
	if inside {
		// z is in the nuclear ball: the box projection is feasible if it
		// stays in the ball, which clipping does when it only shrinks
		// entries toward 0 … but clipping can raise the nuclear norm, so
		// fall through to Dykstra unless z is already in the box.
		if maxAbs(z) <= pr.Alpha {
			copy(dst, z)
			return triplets{}, 1, nil
		}
	} else if maxAbs(pr.y) <= pr.Alpha {
		copy(dst, pr.y)
		return t, 1, nil
	}
	// Dykstra: x₀ = z, p = q = 0; y = P_nuc(x + p), p ← x + p − y;
	// x = P_box(y + q), q ← y + q − x.
	if pr.p == nil {
		pr.p, pr.q, pr.x, pr.tmp = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	}
	x, p, q, y, tmp := pr.x, pr.p, pr.q, pr.y, pr.tmp
	copy(x, z)
	clear(p)
	clear(q)
	// The first nuclear projection is in y already (p = 0).
	for i := range n {
		p[i] = x[i] - y[i]
	}
	a := pr.Alpha
	for it := 0; ; it++ {
		gap := 0.0
		for i := range n {
			v := y[i] + q[i]
			c := math.Max(-a, math.Min(a, v))
			q[i] = v - c
			gap = math.Max(gap, math.Abs(c-y[i]))
			x[i] = c
		}
		if gap <= pr.Tol*a || it >= pr.MaxDykstra {
			break
		}
		pr.DykstraIters++
		for i := range n {
			tmp[i] = x[i] + p[i]
		}
		if inside, t, err = pr.nuclear(y, tmp); err != nil {
			return triplets{}, 0, err
		}
		if inside {
			t = triplets{}
		}
		for i := range n {
			p[i] = tmp[i] - y[i]
		}
	}
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

func maxAbs(x []float64) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// nuclear writes into dst the projection of z onto {‖X‖_* ≤ Tau} and
// reports whether z was inside (dst = z). It computes the top singular
// values by subspace iteration with a block grown (doubled) until the soft
// threshold θ is passed: the block holds every value above θ and at least
// one below. It decides z is inside the ball when Σ_top σ + √(m−b)·‖rest‖_F
// ≤ τ (the rest's nuclear norm is at most √rank times its Frobenius norm).
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
	b := max(pr.rank+pr.rank/2+4, 8)
	for {
		var t triplets
		if pr.FullSVD || b > m/2 {
			var ok bool
			if t, ok = fullSVD(a); !ok {
				return false, triplets{}, fmt.Errorf("onebit: SVD of the iterate failed (non-finite values?)")
			}
			if !pr.FullSVD {
				pr.Fallbacks++
			}
			b = m
		} else {
			var sweeps int
			t, sweeps = subspaceSVD(a, b, b-2, pr.warm, 1e-8, 30, pr.rnd)
			pr.Sweeps += sweeps
		}
		var sum, sq float64
		for _, s := range t.S {
			sum += s
			sq += s * s
		}
		rest := math.Sqrt(math.Max(0, fro2-sq)) * math.Sqrt(float64(m-len(t.S)))
		if sum+rest <= pr.Tau {
			copy(dst, z)
			return true, triplets{}, nil
		}
		if sum > pr.Tau {
			theta, k := softThreshold(t.S, pr.Tau)
			if k < len(t.S) || b == m {
				pr.warm = t.V
				pr.rank = k
				kept := triplets{U: sliceCols(t.U, k), S: make([]float64, k), V: sliceCols(t.V, k)}
				for i := range k {
					kept.S[i] = t.S[i] - theta
				}
				compose(dst, kept, pr.D1, pr.D2)
				return false, kept, nil
			}
		}
		pr.warm = t.V
		b = min(2*b, m)
	}
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
