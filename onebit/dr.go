package onebit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// The default solver: Douglas–Rachford splitting (equivalently ADMM) of
//
//	min Σ_ij φ_ij(X_ij)  subject to  ‖X‖_* ≤ τ,
//
// where φ_ij is the entry's loss (zero off Ω) plus the indicator of
// |X_ij| ≤ α — or, for the projection onto C, ½(X_ij − Z_ij)² plus that
// indicator. Both parts have cheap proximal maps: φ's is entrywise (a
// one-dimensional Newton solve on Ω, a clip elsewhere), the nuclear ball's
// is one nuclear projection. One iteration on the state s is
//
//	W = prox_{φ/ρ}(s),  X = P_nuc(2W − s),  s ← s + γ(X − W),
//
// so the whole solve costs one nuclear projection per iteration — against
// SPG's one projection onto C per step, each needing many nuclear
// projections in Dykstra's algorithm. The iteration is accelerated by
// over-relaxation (γ = 1.6) and Anderson acceleration of the fixed-point
// map (Fu, Zhang and Boyd, "Anderson accelerated Douglas–Rachford
// splitting"), safeguarded: an accelerated point whose residual ‖X − W‖
// grew is replaced by the plain step. The nuclear projection keeps its
// singular subspace from one iteration to the next and does one sweep of
// subspace iteration per call (the subspace converges along the
// iterations, as the matrices it tracks do).
//
// Output and certificate. X is in the nuclear ball; W in the box. The
// returned estimate X̂ = c·clip_α(X) is in C exactly: clipping to the box
// changes X by D = X − clip(X), whose nuclear norm is at most the sum of
// D's row (or column) norms, so ‖clip(X)‖_* ≤ ‖X‖_* + min(Σ‖D_i·‖,
// Σ‖D_·j‖) and c = min(1, τ/that bound). Λ = ρ(s − W) is a subgradient of
// φ at W (the prox's optimality condition), so by weak duality
//
//	f* ≥ D(Λ) = φ(W) − ⟨Λ, W⟩ − τ‖Λ‖_op,
//
// and f(X̂) − D(Λ) bounds X̂'s suboptimality. The solver stops when that
// gap is at most GapTol·|f(X̂)|; ‖Λ‖_op is estimated by Lanczos on the
// Gram matrix of Λ (Λ is sparse for the loss: off Ω it is non-zero only
// where the box is active) and, before stopping, certified: a Cholesky
// factorisation of μI − ΛΛᵀ succeeding proves ‖Λ‖_op² < μ.

// drTerm is the entrywise part φ of the splitting.
type drTerm interface {
	// prox writes w = argmin_w φ(w) + (ρ/2)‖w − s‖² for every entry.
	prox(w, s []float64, rho float64)
	// value is φ at x, a point in the box (the indicator is not
	// evaluated).
	value(x []float64) float64
	// convex reports whether φ is convex (otherwise the dual bound is not
	// valid and the solver stops on stalling progress instead).
	convex() bool
}

// lossTerm is φ = Σ_Ω L(X_ij, y) + Linear·X on Ω, plus the box.
type lossTerm struct {
	p     *Problem
	link  Link
	lin   []float64
	alpha float64
	// pos[g] is the flat index of observed entry group g; obs[start[g]:
	// start[g+1]] its observations (more than one when an entry was
	// observed more than once).
	pos   []int
	start []int32
	obs   []int32
	conv  bool
	prev  []float64 // scratch: the last prox values on Ω
}

func newLossTerm(p *Problem, link Link, lin []float64, alpha float64) *lossTerm {
	m := len(p.Y)
	order := make([]int32, m)
	for k := range m {
		order[k] = int32(k)
	}
	flat := flatIndex(p)
	slices.SortStableFunc(order, func(a, b int32) int { return flat[a] - flat[b] })
	t := &lossTerm{p: p, link: link, lin: lin, alpha: alpha, obs: order}
	for k, o := range order {
		if k == 0 || flat[o] != flat[order[k-1]] {
			t.pos = append(t.pos, flat[o])
			t.start = append(t.start, int32(k))
		}
	}
	t.start = append(t.start, int32(m))
	t.conv = convexOnBox(link, alpha)
	return t
}

func (t *lossTerm) convex() bool { return t.conv }

func (t *lossTerm) prox(w, s []float64, rho float64) {
	a := t.alpha
	// The previous prox values on Ω start Newton's method (w still holds
	// them; zero on the first call).
	prev := t.prev
	if prev == nil {
		prev = make([]float64, len(t.pos))
		t.prev = prev
	}
	for g, i := range t.pos {
		prev[g] = w[i]
	}
	if math.IsInf(a, 1) {
		copy(w, s)
	} else {
		for i, v := range s {
			w[i] = math.Max(-a, math.Min(a, v))
		}
	}
	for g, i := range t.pos {
		obs := t.obs[t.start[g]:t.start[g+1]]
		if _, ok := t.link.(Logistic); ok && len(obs) == 1 {
			// A linear term l·w shifts the prox's centre to v − l/ρ.
			v := s[i]
			if t.lin != nil {
				v -= t.lin[obs[0]] / rho
			}
			w[i] = proxLogistic(t.p.Y[obs[0]], v, prev[g], rho, a)
			continue
		}
		w[i] = t.proxEntry(obs, s[i], prev[g], rho)
	}
}

// proxLogistic is proxEntry for one logistic observation: Newton on
// g(w) = −y·σ(−yw) + ρ(w − v), safeguarded by bisection, one exponential
// per step.
func proxLogistic(y, v, w0, rho, a float64) float64 {
	// g is increasing with g(v − 1/ρ) < 0 < g(v + 1/ρ) (|L'| < 1), so
	// the unconstrained root lies in that bracket; clipped to the box it
	// is the prox. The box ends are evaluated only when Newton's method
	// heads for them.
	lo, hi := v-1/rho, v+1/rho
	if lo >= a {
		return a
	}
	if hi <= -a {
		return -a
	}
	loBox, hiBox := false, false // whether lo, hi are box ends not yet evaluated
	if lo < -a {
		lo, loBox = -a, true
	}
	if hi > a {
		hi, hiBox = a, true
	}
	w := w0
	if !(w > lo && w < hi) {
		w = math.Max(lo, math.Min(hi, v))
		if !(w > lo && w < hi) {
			w = lo + (hi-lo)/2
		}
	}
	for range 100 {
		sg := sigmoid(-y * w)
		d, c := -y*sg+rho*(w-v), sg*(1-sg)+rho
		if d > 0 {
			hi, hiBox = w, false
		} else {
			lo, loBox = w, false
		}
		if math.Abs(d) <= 1e-13*(1+rho*math.Abs(w)) || hi-lo <= 4e-16*(1+math.Abs(w)) {
			return w
		}
		wn := w - d/c
		switch {
		case wn >= hi && hiBox:
			// Heading past the upper box end: the prox is a if g(a) ≤ 0.
			sa := sigmoid(-y * a)
			if -y*sa+rho*(a-v) <= 0 {
				return a
			}
			hiBox = false
			wn = lo + (hi-lo)/2
		case wn <= lo && loBox:
			sa := sigmoid(y * a)
			if -y*sa+rho*(-a-v) >= 0 {
				return -a
			}
			loBox = false
			wn = lo + (hi-lo)/2
		case !(wn > lo && wn < hi):
			wn = lo + (hi-lo)/2
		}
		w = wn
	}
	return w
}

// proxEntry returns argmin_{|w| ≤ α} Σ_k L_k(w) + (ρ/2)(w − v)², started
// at w0, by Newton's method safeguarded by bisection on the derivative g,
// which is increasing where the loss is convex (for a non-convex adjusted
// link the bisection still ends at a stationary point).
func (t *lossTerm) proxEntry(obs []int32, v, w0, rho float64) float64 {
	link, lin, y := t.link, t.lin, t.p.Y
	g := func(w float64) (float64, float64) {
		d, c := rho*(w-v), rho
		for _, k := range obs {
			_, dk := link.Loss(w, y[k])
			d += dk
			if lin != nil {
				d += lin[k]
			}
			c += curvature(link, w, y[k])
		}
		return d, c
	}
	a := t.alpha
	lo, hi := -a, a
	if math.IsInf(a, 1) {
		// Expand a bracket around v.
		lo, hi = v-1, v+1
		for d, _ := g(lo); d > 0; d, _ = g(lo) {
			lo -= 2 * (hi - lo)
		}
		for d, _ := g(hi); d < 0; d, _ = g(hi) {
			hi += 2 * (hi - lo)
		}
	} else {
		if d, _ := g(lo); d >= 0 {
			return lo
		}
		if d, _ := g(hi); d <= 0 {
			return hi
		}
	}
	w := w0
	if !(w > lo && w < hi) {
		w = math.Max(lo, math.Min(hi, v))
	}
	for range 100 {
		d, c := g(w)
		if d > 0 {
			hi = w
		} else {
			lo = w
		}
		if math.Abs(d) <= 1e-13*(1+rho*math.Abs(w)) || hi-lo <= 4e-16*(1+math.Abs(w)) {
			return w
		}
		wn := w - d/c
		if !(wn > lo && wn < hi) {
			wn = lo + (hi-lo)/2
		}
		w = wn
	}
	return w
}

func (t *lossTerm) value(x []float64) float64 {
	var f float64
	for g, i := range t.pos {
		for _, k := range t.obs[t.start[g]:t.start[g+1]] {
			fk, _ := t.link.Loss(x[i], t.p.Y[k])
			if t.lin != nil {
				fk += t.lin[k] * x[i]
			}
			f += fk
		}
	}
	return f
}

// curvature is L”(x) for sign y: analytic for the logistic and probit
// links, a central difference of the derivative otherwise (clipped at 0:
// it only steers Newton's method, which bisection safeguards).
func curvature(link Link, x, y float64) float64 {
	switch l := link.(type) {
	case Logistic:
		s := sigmoid(-y * x)
		return s * (1 - s)
	case Probit:
		z := y * x / l.Sigma
		m := invMills(z)
		return m * (z + m) / (l.Sigma * l.Sigma)
	}
	h := 1e-5 * (1 + math.Abs(x))
	_, gp := link.Loss(x+h, y)
	_, gm := link.Loss(x-h, y)
	return math.Max((gp-gm)/(2*h), 0)
}

// convexOnBox reports whether the link's loss is convex on [−α, α]: always
// for the logistic and probit links (log-concave h); for other links
// (input perturbation's adjusted link, convex only when the flip
// probabilities are small against h's range on the box) it checks the
// derivative for monotonicity on a fine grid.
func convexOnBox(link Link, alpha float64) bool {
	switch l := link.(type) {
	case Logistic, Probit:
		return true
	case Flipped:
		if l.P1 == 0 && l.P2 == 0 {
			return convexOnBox(l.Base, alpha)
		}
	}
	a := alpha
	if math.IsInf(a, 1) {
		a = 40
	}
	for _, y := range []float64{-1, 1} {
		const steps = 4000
		_, prev := link.Loss(-a, y)
		for k := 1; k <= steps; k++ {
			_, d := link.Loss(-a+2*a*float64(k)/steps, y)
			if d < prev-1e-12*(1+math.Abs(prev)) {
				return false
			}
			prev = d
		}
	}
	return true
}

// projTerm is φ = ½‖X − Z‖² plus the box: the projection onto C.
type projTerm struct {
	z     []float64
	alpha float64
}

func (t *projTerm) convex() bool { return true }

func (t *projTerm) prox(w, s []float64, rho float64) {
	a := t.alpha
	inv := 1 / (1 + rho)
	for i, v := range s {
		w[i] = math.Max(-a, math.Min(a, (t.z[i]+rho*v)*inv))
	}
}

func (t *projTerm) value(x []float64) float64 {
	var f float64
	for i, v := range x {
		d := v - t.z[i]
		f += d * d
	}
	return f / 2
}

// drConfig holds the splitting's parameters.
type drConfig struct {
	rho     float64 // penalty ρ
	relax   float64 // over-relaxation γ ∈ (0, 2)
	memory  int     // Anderson memory (0: no acceleration)
	maxIter int
	gapTol  float64 // stop when f(X̂) − D ≤ gapTol·max(1, |f(X̂)|)
	// resTol, when positive, also stops when ‖X − W‖_F ≤ resTol·max(1,
	// ‖W‖_F) (the projection inside gradient perturbation, where no
	// certificate is computed).
	resTol float64
	// checkEvery: the dual bound is computed every checkEvery iterations
	// once the best objective fell by less than 5·gapTol (relative) in the
	// last iteration (the gap is then typically within a few times
	// gapTol; earlier checks would only cost time), and at the last
	// iteration.
	checkEvery int
	// stallTol, stallWindow: for a non-convex φ, stop when the best
	// objective fell by less than stallTol (relative) over stallWindow
	// iterations.
	stallTol    float64
	stallWindow int
	progress    func(done, total int)
}

// drSolver carries the state between calls (warm starts: gradient
// perturbation projects ten nearby matrices in a row).
type drSolver struct {
	d1, d2     int
	tau, alpha float64
	nuc        *Projector
	s, w, x, a []float64
	g          []float64
	best       []float64
	bestT      triplets
	aa         *anderson

	// Cumulative statistics.
	iterations, rejected, certChecks int
}

func newDRSolver(d1, d2 int, tau, alpha float64, rnd func() float64, fullSVD bool) (*drSolver, error) {
	nuc, err := NewProjector(d1, d2, tau, alpha, rnd)
	if err != nil {
		return nil, err
	}
	nuc.MaxSweeps = 1
	nuc.ColdSubspace = true
	nuc.SparseInput = true
	nuc.BlockMargin = drBlockMargin
	nuc.Single = !drDouble
	nuc.FullSVD = fullSVD
	n := d1 * d2
	return &drSolver{d1: d1, d2: d2, tau: tau, alpha: alpha, nuc: nuc,
		s: make([]float64, n), w: make([]float64, n), x: make([]float64, n), a: make([]float64, n), g: make([]float64, n)}, nil
}

// drDouble turns off single-precision block products (tests).
var drDouble = false

// drBlockMargin is the splitting's subspace-iteration margin (see
// Projector.BlockMargin).
var drBlockMargin = 0

// drResult is one solve's outcome.
type drResult struct {
	// X is the estimate X̂ = c·clip(X) ∈ C (dense, the solver's own slice,
	// valid until the next call).
	X []float64
	// Factors is c·X in low-rank form (nil if X was not from a nuclear
	// projection with a shrink); it has X̂'s signs.
	Factors    *triplets
	Objective  float64 // φ(X̂)
	Dual       float64 // certified lower bound on the optimum (−Inf if none)
	Iterations int
	Stop       string
	Certified  bool
}

// nucBound returns an upper bound on the nuclear norm of U diag(S) Vᵀ that
// does not rely on the columns being orthonormal: Σ S_i ‖u_i‖ ‖v_i‖.
func nucBound(t triplets) float64 {
	var b float64
	for j, s := range t.S {
		b += math.Abs(s) * colNorm(t.U, j) * colNorm(t.V, j)
	}
	return b
}

func colNorm(a *mat.Dense, j int) float64 {
	return mat.Norm(a.ColView(j), 2)
}

// feasible writes into dst the point c·clip(x) ∈ C given an upper bound nb
// on ‖x‖_* and returns c.
func (d *drSolver) feasible(dst, x []float64, nb float64) float64 {
	a := d.alpha
	if math.IsInf(a, 1) {
		c := math.Min(1, d.tau/nb)
		for i, v := range x {
			dst[i] = c * v
		}
		return c
	}
	var rows float64
	col := make([]float64, d.d2)
	for i := range d.d1 {
		var r2 float64
		row := x[i*d.d2 : (i+1)*d.d2]
		for j, v := range row {
			if e := math.Abs(v) - a; e > 0 {
				r2 += e * e
				col[j] += e * e
			}
		}
		rows += math.Sqrt(r2)
	}
	var cols float64
	for _, v := range col {
		cols += math.Sqrt(v)
	}
	c := 1.0
	if bound := nb + math.Min(rows, cols); bound > d.tau {
		c = d.tau / bound
	}
	for i, v := range x {
		dst[i] = c * math.Max(-a, math.Min(a, v))
	}
	return c
}

// solve runs the splitting on term from the current state (zero on the
// first call, the last call's s and singular subspace after).
func (d *drSolver) solve(ctx context.Context, term drTerm, cfg drConfig) (*drResult, error) {
	r := d.start(term, cfg)
	for it := 0; ; it++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e, err := r.evaluate()
		if err != nil {
			return nil, err
		}
		r.keepBest(it, e)
		stop, err := r.stopping(it, e)
		if err != nil {
			return nil, err
		}
		if stop {
			break
		}
		// Next point.
		if d.aa != nil {
			d.aa.step(d.s, d.g, cfg.relax)
		} else {
			floats.AddScaled(d.s, cfg.relax, d.g)
		}
	}
	return r.result(), nil
}

// drRun is the state of one solve.
type drRun struct {
	d     *drSolver
	term  drTerm
	cfg   drConfig
	res   *drResult
	bestC float64 // the scale c of the best point
	// rLast is the last accepted residual (Anderson's safeguard); trail
	// the best objective per iteration (the stall test); prevBest and
	// sinceCheck gate the dual bound's computation.
	rLast, prevBest float64
	trail           []float64
	sinceCheck      int
}

// drEval is the map T evaluated at s: the residual ‖g‖ = ‖X − W‖, ‖W‖,
// the nuclear iterate's triplets and an upper bound on its nuclear norm.
type drEval struct {
	r, wn, nb float64
	t         triplets
}

func (d *drSolver) start(term drTerm, cfg drConfig) *drRun {
	n := d.d1 * d.d2
	if d.best == nil {
		d.best = make([]float64, n)
	}
	if cfg.memory > 0 && d.aa == nil {
		d.aa = newAnderson(cfg.memory, n)
	}
	if d.aa != nil {
		d.aa.reset()
	}
	return &drRun{d: d, term: term, cfg: cfg, res: &drResult{Objective: math.Inf(1), Dual: math.Inf(-1)},
		bestC: 1, rLast: math.Inf(1), prevBest: math.Inf(1)}
}

// evaluate evaluates T at s; an accelerated point that did worse than the
// last accepted one is replaced by the plain step from that point.
func (r *drRun) evaluate() (drEval, error) {
	d := r.d
	e, err := r.eval()
	if err != nil {
		return e, err
	}
	if d.aa != nil && d.aa.extrapolated && e.r > r.rLast {
		d.rejected++
		d.aa.fallback(d.s)
		if e, err = r.eval(); err != nil {
			return e, err
		}
	}
	r.rLast = e.r
	return e, nil
}

// eval computes T at s: w, x and g = x − w.
func (r *drRun) eval() (drEval, error) {
	d := r.d
	n := d.d1 * d.d2
	s, w, x, g := d.s, d.w, d.x, d.g
	r.term.prox(w, s, r.cfg.rho)
	for i := range n {
		d.a[i] = 2*w[i] - s[i]
	}
	inside, t, err := d.nuc.nuclear(x, d.a)
	if err != nil {
		return drEval{}, err
	}
	var nb float64
	if inside {
		// X = 2W − s, inside the ball by the projection's test; the
		// bound used for X̂ must not rely on estimated singular
		// values: ‖X‖_* ≤ √rank·‖X‖_F.
		t = triplets{}
		nb = math.Sqrt(float64(min(d.d1, d.d2))) * floats.Norm(x, 2)
	} else {
		nb = nucBound(t)
	}
	var r2, w2 float64
	for i := range n {
		e := x[i] - w[i]
		g[i] = e
		r2 += e * e
		w2 += w[i] * w[i]
	}
	return drEval{r: math.Sqrt(r2), wn: math.Sqrt(w2), nb: nb, t: t}, nil
}

// keepBest evaluates the primal point X̂ = c·clip(X) of iteration it and
// keeps it if it is the best so far.
func (r *drRun) keepBest(it int, e drEval) {
	d, res := r.d, r.res
	d.iterations++
	res.Iterations = it + 1
	c := d.feasible(d.a, d.x, e.nb)
	f := r.term.value(d.a)
	if f < res.Objective {
		res.Objective = f
		copy(d.best, d.a)
		r.bestC = c
		d.bestT = e.t
		if e.t.U != nil {
			d.bestT = triplets{U: e.t.U, S: slices.Clone(e.t.S), V: e.t.V}
		}
	}
	if debugDR != nil {
		debugDR("dr it %d f %.8g best %.8g r %.3g |w| %.3g c %.6f rank %d sweeps %d", it, f, res.Objective, e.r, e.wn, c, len(e.t.S), d.nuc.Sweeps)
	}
	if r.cfg.progress != nil {
		r.cfg.progress(it+1, r.cfg.maxIter)
	}
}

// stopping applies the stopping rules after iteration it (setting
// res.Stop): the duality gap, the residual, the stall of a non-convex
// loss, the iteration limit.
func (r *drRun) stopping(it int, e drEval) (bool, error) {
	cfg, res := r.cfg, r.res
	scale := math.Max(1, math.Abs(res.Objective))
	gated := r.prevBest-res.Objective < 5*cfg.gapTol*scale
	r.prevBest = res.Objective
	if gated {
		r.sinceCheck++
	}
	if cfg.gapTol > 0 && ((gated && r.sinceCheck >= max(cfg.checkEvery, 1)) || it+1 >= cfg.maxIter) {
		r.sinceCheck = 0
		if err := r.checkGap(it, scale); err != nil {
			return false, err
		}
		if res.Stop != "" {
			return true, nil
		}
	}
	if cfg.resTol > 0 && e.r <= cfg.resTol*math.Max(1, e.wn) {
		res.Stop = fmt.Sprintf("residual ‖X − W‖ %.3g ≤ %.3g·‖W‖", e.r, cfg.resTol)
		return true, nil
	}
	if !r.term.convex() && cfg.stallWindow > 0 {
		r.trail = append(r.trail, res.Objective)
		if k := len(r.trail) - 1 - cfg.stallWindow; k >= 0 && r.trail[k]-res.Objective < cfg.stallTol*scale {
			res.Stop = fmt.Sprintf("objective decreased by less than %.3g (relative) over %d iterations (non-convex loss: no certificate)", cfg.stallTol, cfg.stallWindow)
			return true, nil
		}
	}
	if it+1 >= cfg.maxIter {
		res.Stop = "iteration limit"
		return true, nil
	}
	return false, nil
}

// checkGap estimates the dual bound and, when the estimated gap is within
// gapTol, certifies it where it can (setting res.Stop when the solver
// stops).
func (r *drRun) checkGap(it int, scale float64) error {
	d, cfg, res := r.d, r.cfg, r.res
	lb, err := d.dualBound(r.term, cfg.rho, false)
	if err != nil {
		return err
	}
	if debugDR != nil {
		debugDR("dr it %d dual estimate %.8g gap %.3g", it, lb, res.Objective-lb)
	}
	if res.Objective-lb > cfg.gapTol*scale {
		return nil
	}
	switch {
	case !r.term.convex():
		res.Stop = fmt.Sprintf("estimated duality gap %.3g ≤ %.3g·|f| (not a certificate: the loss is not convex)", res.Objective-lb, cfg.gapTol)
	case min(d.d1, d.d2) > certifyDim:
		res.Stop = fmt.Sprintf("estimated duality gap %.3g ≤ %.3g·|f| (not certified: the matrix is too large for the Gram certificate)", res.Objective-lb, cfg.gapTol)
	default:
		d.certChecks++
		if lb, err = d.dualBound(r.term, cfg.rho, true); err != nil {
			return err
		}
		res.Dual = math.Max(res.Dual, lb)
		if res.Objective-res.Dual <= cfg.gapTol*scale {
			res.Certified = true
			res.Stop = fmt.Sprintf("duality gap %.3g ≤ %.3g·|f|", res.Objective-res.Dual, cfg.gapTol)
		}
	}
	return nil
}

// result is the best point with its factors scaled by its c.
func (r *drRun) result() *drResult {
	d, res := r.d, r.res
	res.X = d.best
	if d.bestT.U != nil {
		ft := &triplets{U: d.bestT.U, S: make([]float64, len(d.bestT.S)), V: d.bestT.V}
		for i, v := range d.bestT.S {
			ft.S[i] = r.bestC * v
		}
		res.Factors = ft
	}
	return res
}

// debugDR, when set (tests only), is told about each iteration.
var debugDR func(format string, args ...any)

// dualBound returns D(Λ) = φ(W) − ⟨Λ, W⟩ − τ‖Λ‖_op for Λ = ρ(s − W) at
// the current state (w = prox(s) from the last evaluation). With certify
// false, ‖Λ‖_op is Lanczos's estimate (a lower bound, so D may be slightly
// too high); with certify true it is an upper bound μ proved by a Cholesky
// factorisation of μ²I − G, G the Gram matrix of Λ on the smaller side —
// D is then a proven lower bound on the optimum up to rounding. For
// matrices with min(d1, d2) > certifyDim the Gram matrix is too large to
// factorise and −Inf is returned when certify is set.
func (d *drSolver) dualBound(term drTerm, rho float64, certify bool) (float64, error) {
	n := d.d1 * d.d2
	lam := d.a // scratch (the feasible point was already evaluated)
	var lw float64
	for i := range n {
		l := rho * (d.s[i] - d.w[i])
		lam[i] = l
		lw += l * d.w[i]
	}
	if certify && min(d.d1, d.d2) > certifyDim {
		return math.Inf(-1), nil
	}
	// Lanczos on Λ Λᵀ (or Λᵀ Λ, the smaller), by products with Λ: in
	// compressed rows when Λ is sparse (the loss), dense otherwise.
	m := min(d.d1, d.d2)
	var op blockOp
	if sp, ok := newSparseOp(lam, d.d1, d.d2, len(lam)/8); ok {
		op = sp
	} else {
		op = denseOp{mat.NewDense(d.d1, d.d2, lam)}
	}
	tmp := mat.NewDense(max(d.d1, d.d2), 1, nil)
	mul := func(dst, x []float64) {
		xv := mat.NewDense(m, 1, x)
		out := mat.NewDense(m, 1, dst)
		if d.d1 <= d.d2 {
			t := tmp.Slice(0, d.d2, 0, 1).(*mat.Dense)
			op.mulTTo(t, xv)
			op.mulTo(out, t)
		} else {
			t := tmp.Slice(0, d.d1, 0, 1).(*mat.Dense)
			op.mulTo(t, xv)
			op.mulTTo(out, t)
		}
	}
	est := lanczosMaxFn(m, mul, 30, d.nuc.rnd)
	op2 := est
	if certify {
		var ok bool
		op2, ok = certifyMax(gramOf(lam, d.d1, d.d2), est)
		if !ok {
			return math.Inf(-1), nil
		}
	}
	return term.value(d.w) - lw - d.tau*math.Sqrt(math.Max(op2, 0)), nil
}

// certifyDim bounds the Gram matrices the certificate factorises.
const certifyDim = 2500

// gramOf returns the Gram matrix of the d1 × d2 matrix a on its smaller
// side (A Aᵀ or Aᵀ A), from its non-zeros when it is sparse.
func gramOf(a []float64, d1, d2 int) *mat.SymDense {
	nnz := 0
	for _, v := range a {
		if v != 0 {
			nnz++
		}
	}
	m := min(d1, d2)
	g := mat.NewSymDense(m, nil)
	if nnz > len(a)/8 {
		am := mat.NewDense(d1, d2, a)
		if d1 <= d2 {
			g.SymOuterK(1, am)
		} else {
			g.SymOuterK(1, am.T())
		}
		return g
	}
	// Group the non-zeros by the larger side's index; each group adds the
	// outer product of its values (indexed on the smaller side).
	other := max(d1, d2)
	cnt := make([]int32, other+1)
	for i := range d1 {
		for j := range d2 {
			if a[i*d2+j] != 0 {
				if d1 <= d2 {
					cnt[j+1]++
				} else {
					cnt[i+1]++
				}
			}
		}
	}
	for k := range other {
		cnt[k+1] += cnt[k]
	}
	idx := make([]int32, nnz)
	val := make([]float64, nnz)
	fill := slices.Clone(cnt[:other])
	for i := range d1 {
		for j := range d2 {
			if v := a[i*d2+j]; v != 0 {
				grp, small := j, i
				if d1 > d2 {
					grp, small = i, j
				}
				idx[fill[grp]] = int32(small)
				val[fill[grp]] = v
				fill[grp]++
			}
		}
	}
	raw := g.RawSymmetric()
	for grp := range other {
		lo, hi := cnt[grp], cnt[grp+1]
		for p := lo; p < hi; p++ {
			ip, vp := int(idx[p]), val[p]
			for q := p; q < hi; q++ {
				iq := int(idx[q])
				r, c := ip, iq
				if r > c {
					r, c = c, r
				}
				raw.Data[r*raw.Stride+c] += vp * val[q]
			}
		}
	}
	return g
}

// lanczosMax estimates the largest eigenvalue of the symmetric positive
// semi-definite g by k steps of Lanczos with full reorthogonalisation (a
// lower bound: a Ritz value).
func lanczosMax(g *mat.SymDense, k int, rnd func() float64) float64 {
	m := g.SymmetricDim()
	return lanczosMaxFn(m, func(dst, x []float64) {
		mat.NewVecDense(m, dst).MulVec(g, mat.NewVecDense(m, x))
	}, k, rnd)
}

// lanczosMaxFn is lanczosMax for the m × m operator x ↦ mul(dst, x).
func lanczosMaxFn(m int, mul func(dst, x []float64), k int, rnd func() float64) float64 {
	k = min(k, m)
	q := make([][]float64, 0, k+1)
	v := make([]float64, m)
	for i := range m {
		v[i] = 1 + 0.1*(rnd()-0.5)
	}
	floats.Scale(1/floats.Norm(v, 2), v)
	q = append(q, v)
	alpha := make([]float64, k)
	beta := make([]float64, k)
	steps := k
	for j := range k {
		w := make([]float64, m)
		mul(w, q[j])
		alpha[j] = floats.Dot(w, q[j])
		// Full reorthogonalisation (twice).
		for range 2 {
			for i := 0; i <= j; i++ {
				floats.AddScaled(w, -floats.Dot(w, q[i]), q[i])
			}
		}
		beta[j] = floats.Norm(w, 2)
		if beta[j] <= 1e-12*math.Abs(alpha[0]) || j == k-1 {
			steps = j + 1
			break
		}
		floats.Scale(1/beta[j], w)
		q = append(q, w)
	}
	t := mat.NewSymDense(steps, nil)
	for j := range steps {
		t.SetSym(j, j, alpha[j])
		if j+1 < steps {
			t.SetSym(j, j+1, beta[j])
		}
	}
	var es mat.EigenSym
	if !es.Factorize(t, false) {
		return 0
	}
	vals := es.Values(nil)
	return vals[len(vals)-1]
}

// certifyMax returns μ ≥ λ_max(g), proved by a successful Cholesky
// factorisation of μI − g (positive definite iff every eigenvalue of g is
// below μ), trying μ = est·(1 + δ) for growing δ. The margin δ also covers
// the factorisation's rounding errors (of order m·ε_mach·‖g‖), which are far
// below the smallest δ tried.
func certifyMax(g *mat.SymDense, est float64) (float64, bool) {
	m := g.SymmetricDim()
	var tr float64
	for i := range m {
		tr = math.Max(tr, g.At(i, i))
	}
	if tr == 0 {
		return 0, true // g = 0 (a PSD matrix with a zero diagonal)
	}
	floor := 1e-9 * tr * float64(m)
	h := mat.NewSymDense(m, nil)
	var ch mat.Cholesky
	for _, delta := range []float64{1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1} {
		mu := est*(1+delta) + floor
		h.CopySym(g)
		raw := h.RawSymmetric()
		for i := range m {
			for j := i; j < m; j++ {
				raw.Data[i*raw.Stride+j] = -raw.Data[i*raw.Stride+j]
			}
			raw.Data[i*raw.Stride+i] += mu
		}
		if ch.Factorize(h) {
			if debugDR != nil {
				debugDR("certified ‖Λ‖² < %.10g (estimate %.10g, δ %g)", mu, est, delta)
			}
			return mu, true
		}
	}
	return 0, false
}

// anderson is type-II Anderson acceleration of s ← s + γg with memory m.
// The differences are kept as the columns of two n × m row-major matrices
// (a ring buffer over the columns), so that the combination is one pass
// over memory (a matrix–vector product) rather than 2m vector updates.
type anderson struct {
	m     int
	df    *mat.Dense // n × m: differences of the steps f = γg
	e     *mat.Dense // n × m: differences of s plus those of f
	dots  []float64  // m × m: dots[i*m+j] = ⟨df_i, df_j⟩
	head  int
	count int
	sPrev []float64
	fPrev []float64
	col   []float64 // scratch: the new df column
	has   bool
	// extrapolated: the last step was an accelerated one (not the plain
	// step), so the safeguard may reject it.
	extrapolated bool
}

func newAnderson(m, n int) *anderson {
	return &anderson{m: m, sPrev: make([]float64, n), fPrev: make([]float64, n), col: make([]float64, n),
		df: mat.NewDense(n, m, nil), e: mat.NewDense(n, m, nil), dots: make([]float64, m*m)}
}

func (a *anderson) reset() { a.count, a.head, a.has, a.extrapolated = 0, 0, false, false }

// fallback replaces s by the plain step from the last accepted point and
// clears the memory.
func (a *anderson) fallback(s []float64) {
	for i := range s {
		s[i] = a.sPrev[i] + a.fPrev[i]
	}
	a.reset()
}

// step moves s to the next point given g = X − W at s (the plain step is
// s + γg).
func (a *anderson) step(s, g []float64, gamma float64) {
	n, m := len(s), a.m
	if a.has {
		h := a.head
		df, e := a.df.RawMatrix(), a.e.RawMatrix()
		for i := range n {
			f := gamma * g[i]
			dfi := f - a.fPrev[i]
			a.col[i] = dfi
			df.Data[i*df.Stride+h] = dfi
			e.Data[i*e.Stride+h] = s[i] - a.sPrev[i] + dfi
			a.sPrev[i] = s[i]
			a.fPrev[i] = f
		}
		a.count = min(a.count+1, m)
		// ⟨df_new, df_j⟩ for every column: one pass, DFᵀ·df_new.
		d := mat.NewVecDense(m, nil)
		d.MulVec(a.df.T(), mat.NewVecDense(n, a.col))
		for j := range a.count {
			a.dots[h*m+j], a.dots[j*m+h] = d.AtVec(j), d.AtVec(j)
		}
		a.head = (h + 1) % m
	} else {
		copy(a.sPrev, s)
		for i := range n {
			a.fPrev[i] = gamma * g[i]
		}
	}
	a.has = true
	a.extrapolated = false
	q := a.count
	if q == 0 {
		floats.Add(s, a.fPrev)
		return
	}
	// θ = argmin ‖f − ΔF θ‖ by the normal equations (Tikhonov-regularised),
	// over the q filled columns (the others are zero until filled).
	rhsAll := mat.NewVecDense(m, nil)
	rhsAll.MulVec(a.df.T(), mat.NewVecDense(n, a.fPrev))
	G := mat.NewSymDense(q, nil)
	rhs := mat.NewVecDense(q, nil)
	var tr float64
	for i := range q {
		for j := i; j < q; j++ {
			G.SetSym(i, j, a.dots[i*m+j])
		}
		rhs.SetVec(i, rhsAll.AtVec(i))
		tr += a.dots[i*m+i]
	}
	for i := range q {
		G.SetSym(i, i, G.At(i, i)+1e-10*tr)
	}
	var ch mat.Cholesky
	var theta mat.VecDense
	if !ch.Factorize(G) || ch.SolveVecTo(&theta, rhs) != nil {
		floats.Add(s, a.fPrev)
		a.reset()
		return
	}
	// s ← s + f − E θ.
	th := mat.NewVecDense(m, nil)
	for j := range q {
		th.SetVec(j, theta.AtVec(j))
	}
	floats.Add(s, a.fPrev)
	blas64.Gemv(blas.NoTrans, -1, a.e.RawMatrix(), th.RawVector(), 1, blas64.Vector{N: n, Inc: 1, Data: s})
	a.extrapolated = true
}

// drDefaults fills DR's settings from the options.
func drDefaults(opt Options, rhoDefault float64) drConfig {
	cfg := drConfig{rho: opt.Rho, relax: opt.Relax, memory: opt.AAMemory, maxIter: opt.MaxIter, gapTol: opt.GapTol,
		checkEvery: 2, stallTol: 1e-5, stallWindow: 10, progress: opt.Progress}
	if !(cfg.rho > 0) {
		cfg.rho = rhoDefault
	}
	if !(cfg.relax > 0 && cfg.relax < 2) {
		cfg.relax = 1.6
	}
	if cfg.memory == 0 {
		cfg.memory = 5
	} else if cfg.memory < 0 {
		cfg.memory = 0
	}
	if !(cfg.gapTol > 0) {
		cfg.gapTol = 1e-3
	}
	return cfg
}

// projectionConfig is the setting of the projections inside gradient
// perturbation: opt.ProjIter iterations (default 1) warm-started from the
// previous projection, ρ = 0.1, stopping early on the relative residual
// 1e-3 (no certificate: the Gram matrix of a dense Λ is costly). The
// exact projections of gradient perturbation's noisy iterates have ranks
// in the hundreds on MovieLens-100K, each nuclear projection then costs
// seconds, and an exact projection needs tens of them; one iteration per
// step keeps the K steps to K nuclear projections. (For exact
// projections, many iterations, ρ ≈ 30 converges fastest in the tests.)
func projectionConfig(opt Options) drConfig {
	rho, iters := 0.1, opt.ProjIter
	if iters <= 0 {
		iters = 1
	}
	if projRho > 0 {
		rho = projRho
	}
	if projIter > 0 {
		iters = projIter
	}
	cfg := drDefaults(Options{Rho: rho, AAMemory: opt.AAMemory, Relax: opt.Relax, MaxIter: iters}, 1)
	cfg.gapTol = 0
	cfg.resTol = 1e-3
	return cfg
}

// Measurement hooks (tests only).
var (
	projRho  float64
	projIter int
)

// solveDR minimises the loss over C by the splitting (dr.go).
func solveDR(ctx context.Context, p *Problem, opt Options) (*Solution, error) {
	d, err := newDRSolver(p.D1, p.D2, opt.Tau, opt.Alpha, opt.Rand, opt.FullSVD)
	if err != nil {
		return nil, err
	}
	term := newLossTerm(p, opt.Link, opt.Linear, opt.Alpha)
	// ρ: 1.2 times the loss's curvature at 0, times 1 + the mean size of
	// the linear term (objective perturbation's noise pushes many more
	// entries onto the box, where a larger ρ converges faster: on
	// MovieLens-100K at ε = 1, 34 iterations instead of 46; at ε = 4, 27
	// instead of 25).
	rho := 1.2 * curvature(opt.Link, 0, 1)
	if opt.Linear != nil {
		var mean float64
		for _, l := range opt.Linear {
			mean += math.Abs(l)
		}
		rho *= 1 + mean/float64(len(opt.Linear))
	}
	cfg := drDefaults(opt, rho)
	res, err := d.solve(ctx, term, cfg)
	if err != nil {
		return nil, err
	}
	if res.Iterations == 0 {
		return nil, errNoIterations
	}
	sol := &Solution{X: res.X, Factors: res.Factors, Iterations: res.Iterations, Objective: res.Objective, Stop: res.Stop,
		Gap: res.Objective - res.Dual, Projections: d.nuc.NuclearProjections, Sweeps: d.nuc.Sweeps, Fallbacks: d.nuc.Fallbacks}
	return sol, nil
}

// errNoIterations is returned when a solve made no iteration.
var errNoIterations = errors.New("onebit: the splitting made no iteration")
