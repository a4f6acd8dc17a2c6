package jointdp

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// DPFWOptions configures private Frank–Wolfe (Algorithm 1).
type DPFWOptions struct {
	// K is the nuclear-norm bound k.
	K float64
	// Plan holds the T Gram mechanisms (T = len(Plan.Mechs) iterations)
	// and the clip L that each user's row (and her iterate) is clipped to
	// (PlanDPFW). The solver adds noise only through these mechanisms.
	Plan *GramPlan
	// Beta is the failure probability in the bias of λ̂ (default 1/3, as in
	// Theorem 3.2); BiasScale multiplies the bias (default 1; 0 is allowed
	// via NoBias).
	Beta      float64
	BiasScale float64
	NoBias    bool
	// Step is StepConst (the paper's 1/T, default) or StepClassic; both are
	// data-independent (a line search would read the private data).
	Step string
	// Noise is the privacy noise source (required); Rand seeds Lanczos.
	Noise, Rand *noise.Source
	Workers     int
	Progress    func(done, total int)
	// Instrument, when set, is attached to every mechanism of the plan
	// (mechanism.Instrument: an audit's noise factor and tap); nil for
	// releases.
	Instrument *mechanism.Instrument
}

// Broadcast is what the global component publishes after release t: the
// top eigenvector v̂ of the noisy Gram matrix and the biased λ̂. Everything
// in it is a function of the noisy releases only (public).
type Broadcast struct {
	V      []float64
	Lambda float64 // λ̂^biased = √max(θ̂,0) + bias
}

// PublicState is the public part of a DPFW run: enough, with one user's own
// ratings, to recompute her row (LocalRow).
type PublicState struct {
	N          int
	K, L       float64
	T          int
	Step       string
	Broadcasts []Broadcast
}

// DPFWResult is the output of PrivateFrankWolfe.
type DPFWResult struct {
	// Factors: U's row i is user i's coefficients, computed by her local
	// step (private to her); V's columns are the public v̂_t.
	Factors
	Public PublicState
	// Sigmas are the σ of the T releases (from the plan's mechanisms).
	Sigmas []float64
}

// ---------------------------------------------------------------------
// Local component: user i's side. It reads her own row and the public
// broadcasts, keeps her iterate, and hands back only A_iᵀA_i, added into
// an Aggregate that nobody can read before noise is added.

// local is one user's state: her row of Π_L(P_Ω(Y*)) (items, vals·scale),
// her iterate Y_i on Ω (y) and her coefficients (Y_i = Σ_t coef_t v̂_tᵀ).
type local struct {
	items []int32
	vals  []float32
	scale float64
	y     []float64
	coef  []float64
}

func (l *local) resid(k int) float64 { return l.y[k] - l.scale*float64(l.vals[k]) }

// update applies broadcast b (iteration t, step eta): û_i = A_i v̂/λ̂,
// Y_i ← Π_{L,Ω}((1−η)Y_i − ηk û_i v̂ᵀ).
func (l *local) update(b *Broadcast, t int, eta, k, L float64) {
	var s float64
	for q, it := range l.items {
		s += l.resid(q) * b.V[it]
	}
	var uh float64
	if b.Lambda > 0 {
		uh = s / b.Lambda
	}
	g := -eta * k * uh
	var nrm2 float64
	for q, it := range l.items {
		l.y[q] = (1-eta)*l.y[q] + g*b.V[it]
		nrm2 += l.y[q] * l.y[q]
	}
	for s := 0; s < t-1; s++ {
		l.coef[s] *= 1 - eta
	}
	l.coef[t-1] = g
	if nrm := math.Sqrt(nrm2); nrm > L {
		c := L / nrm
		for q := range l.y {
			l.y[q] *= c
		}
		for s := 0; s < t; s++ {
			l.coef[s] *= c
		}
	}
}

// addGram returns A_iᵀA_i to the global component by adding it to one
// worker's share of the Aggregate (upper triangle; a user's items are
// sorted, so col ≥ row). buf is scratch space for her residual row.
func (l *local) addGram(g *gramPart, buf []float64) []float64 {
	n := g.n
	a := buf[:0]
	for q := range l.items {
		a = append(a, l.resid(q))
	}
	items := l.items
	m := len(items)
	p := 0
	// Two rows at a time: each a_q and its column index is loaded once for
	// both (register blocking: BenchmarkGramPass used about 1.2× less CPU
	// than with one row at a time).
	for ; p+1 < m; p += 2 {
		a0, a1 := a[p], a[p+1]
		i0, i1 := int(items[p]), int(items[p+1])
		r0 := g.upper[i0*n : i0*n+n]
		r1 := g.upper[i1*n : i1*n+n]
		r0[i0] += a0 * a0
		r0[i1] += a0 * a1
		aq := a[p+1 : m]
		iq := items[p+1 : m]
		for q := 1; q < len(aq); q++ {
			c, x := iq[q], aq[q]
			r0[c] += a0 * x
			r1[c] += a1 * x
		}
		r1[i1] += a1 * a1
	}
	if p < m {
		i0 := int(items[p])
		g.upper[i0*n+i0] += a[p] * a[p]
	}
	return a
}

// ---------------------------------------------------------------------
// The aggregate and the global component.

// gramPart is one worker's partial sum of A_iᵀA_i (upper triangle of an
// n × n row-major array).
type gramPart struct {
	n     int
	upper []float64
}

// Aggregate is Σ_i A_iᵀA_i, held in per-worker parts. Its contents leave
// only through release, which adds Gaussian noise first: it is the privacy
// boundary between the users' local steps and the global component.
type Aggregate struct {
	n     int
	parts []gramPart
}

func newAggregate(n, w int) *Aggregate {
	a := &Aggregate{n: n, parts: make([]gramPart, w)}
	for i := range a.parts {
		a.parts[i] = gramPart{n: n, upper: make([]float64, n*n)}
	}
	return a
}

func (a *Aggregate) reset() {
	for _, p := range a.parts {
		clear(p.upper)
	}
}

// release returns Σ_i A_iᵀA_i + N, the noise N added by mech (symmetric,
// i.i.d. on and above the diagonal: mechanism.Gaussian.ReleaseSym).
func (a *Aggregate) release(src *noise.Source, mech *mechanism.Gaussian) (*mat.SymDense, error) {
	n := a.n
	w := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			var s float64
			for _, p := range a.parts {
				s += p.upper[i*n+j]
			}
			w.SetSym(i, j, s)
		}
	}
	if err := mech.ReleaseSym(src, w); err != nil {
		return nil, fmt.Errorf("jointdp: releasing the Gram matrix: %w", err)
	}
	return w, nil
}

// global is the global component: it sees only the released (noisy) Gram
// matrices and produces the broadcasts.
type global struct {
	n     int
	beta  float64
	scale float64 // bias multiplier
	prev  []float64
	rnd   *noise.Source
}

// step turns one noisy Gram matrix into a broadcast: v̂ = top eigenvector,
// λ̂² = top eigenvalue, λ̂^biased = λ̂ + scale·n^¼·√(σ ln(n/β)).
func (g *global) step(ctx context.Context, w *mat.SymDense, sigma float64) (Broadcast, error) {
	theta, v, err := topEigen(ctx, denseSymOp(w), g.n, g.prev, g.rnd, eigOptions{Tol: 1e-8, Steps: 40})
	if err != nil {
		return Broadcast{}, err
	}
	g.prev = v
	lam := math.Sqrt(math.Max(theta, 0))
	bias := g.scale * math.Pow(float64(g.n), 0.25) * math.Sqrt(sigma*math.Log(float64(g.n)/g.beta))
	return Broadcast{V: v, Lambda: lam + bias}, nil
}

// PrivateFrankWolfe runs Algorithm 1. The users' local steps run in
// parallel over o.Workers goroutines (each summing its users' A_iᵀA_i into
// its own part of the Aggregate); the global step reads only the released
// noisy sum. Each user's final row (U row i) is computed by her local step.
func PrivateFrankWolfe(ctx context.Context, p *Problem, o DPFWOptions) (*DPFWResult, error) {
	if !(o.K > 0) || math.IsInf(o.K, 0) {
		return nil, fmt.Errorf("jointdp: nuclear-norm bound k must be positive and finite, got %g", o.K)
	}
	if err := o.Plan.check(p.N); err != nil {
		return nil, err
	}
	T, L := len(o.Plan.Mechs), o.Plan.L
	if o.Noise == nil {
		return nil, fmt.Errorf("jointdp: no noise source")
	}
	if o.Step == "" {
		o.Step = StepConst
	}
	if _, err := stepSize(o.Step, 1, T); err != nil {
		return nil, err
	}
	if o.Beta == 0 {
		o.Beta = 1.0 / 3
	}
	if !(o.Beta > 0 && o.Beta < 1) {
		return nil, fmt.Errorf("jointdp: β must lie in (0, 1), got %g", o.Beta)
	}
	if o.BiasScale == 0 {
		o.BiasScale = 1
	}
	if o.NoBias {
		o.BiasScale = 0
	}
	if o.BiasScale < 0 || math.IsNaN(o.BiasScale) {
		return nil, fmt.Errorf("jointdp: bias scale must be ≥ 0, got %g", o.BiasScale)
	}
	rnd := o.Rand
	if rnd == nil {
		rnd = noise.Seeded(1)
	}
	ch := p.chunks(workers(o.Workers))
	agg := newAggregate(p.N, len(ch))
	scales := p.clipScales(L)
	y := make([]float64, p.Len())
	coef := make([]float64, p.M*T)
	user := func(i int) local {
		a, b := p.Ptr[i], p.Ptr[i+1]
		return local{items: p.Cols[a:b], vals: p.Vals[a:b], scale: scales[i], y: y[a:b], coef: coef[i*T : (i+1)*T]}
	}
	gl := &global{n: p.N, beta: o.Beta, scale: o.BiasScale, rnd: rnd}
	res := &DPFWResult{Sigmas: o.Plan.Sigmas()}
	res.Public = PublicState{N: p.N, K: o.K, L: L, T: T, Step: o.Step}
	var last *Broadcast
	for t := 1; t <= T+1; t++ {
		// Local steps: apply the previous broadcast (if any), then return
		// A_iᵀA_i for the next release (not after the last update).
		var eta float64
		if last != nil {
			eta, _ = stepSize(o.Step, t-1, T)
		}
		final := t == T+1
		agg.reset()
		err := parallel(ctx, ch, func(w, lo, hi int) error {
			var buf []float64
			for i := lo; i < hi; i++ {
				if i%4096 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				l := user(i)
				if last != nil {
					l.update(last, t-1, eta, o.K, L)
				}
				if !final {
					buf = l.addGram(&agg.parts[w], buf)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if last != nil && o.Progress != nil {
			o.Progress(t-1, T)
		}
		if final {
			break
		}
		// Global step: only the noisy release is read.
		mech := o.Plan.Mechs[t-1].Instrumented(o.Instrument)
		w, err := agg.release(o.Noise, mech)
		if err != nil {
			return nil, err
		}
		b, err := gl.step(ctx, w, mech.Sigma())
		if err != nil {
			return nil, fmt.Errorf("jointdp: DPFW iteration %d: %w", t, err)
		}
		res.Public.Broadcasts = append(res.Public.Broadcasts, b)
		last = &res.Public.Broadcasts[len(res.Public.Broadcasts)-1]
	}
	f := Factors{M: p.M, N: p.N, Rank: T, U: coef, V: make([]float64, p.N*T)}
	for t, b := range res.Public.Broadcasts {
		for j, x := range b.V {
			f.V[j*T+t] = x
		}
	}
	res.Factors = f
	return res, nil
}

// LocalRow recomputes one user's coefficients (her row of U) from the
// public state and her own ratings (items sorted ascending, values on the
// training scale, e.g. centred): it replays her local steps. This is how
// a user (or her device) obtains her predictions without anyone else
// seeing her data.
func LocalRow(ps *PublicState, items []int32, vals []float32) ([]float64, error) {
	for q, it := range items {
		if it < 0 || int(it) >= ps.N {
			return nil, fmt.Errorf("jointdp: item index %d out of range", it)
		}
		if q > 0 && items[q-1] >= it {
			return nil, fmt.Errorf("jointdp: items must be sorted and distinct")
		}
	}
	if len(ps.Broadcasts) != ps.T {
		return nil, fmt.Errorf("jointdp: public state has %d broadcasts, want %d", len(ps.Broadcasts), ps.T)
	}
	scale := 1.0
	if nr := rowNorm(vals); nr > ps.L {
		scale = ps.L / nr
	}
	l := local{items: items, vals: vals, scale: scale, y: make([]float64, len(items)), coef: make([]float64, ps.T)}
	for t := 1; t <= ps.T; t++ {
		eta, err := stepSize(ps.Step, t, ps.T)
		if err != nil {
			return nil, err
		}
		l.update(&ps.Broadcasts[t-1], t, eta, ps.K, ps.L)
	}
	return l.coef, nil
}
