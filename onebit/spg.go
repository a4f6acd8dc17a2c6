package onebit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Problem is a one-bit completion problem: a D1 × D2 matrix observed as signs
// Y[k] ∈ {−1, +1} at (Rows[k], Cols[k]).
type Problem struct {
	D1, D2     int
	Rows, Cols []int32
	Y          []float64
}

// Validate checks shapes, indices and that every sign is ±1.
func (p *Problem) Validate() error {
	if p.D1 <= 0 || p.D2 <= 0 {
		return fmt.Errorf("onebit: empty %d × %d problem", p.D1, p.D2)
	}
	if len(p.Rows) != len(p.Y) || len(p.Cols) != len(p.Y) {
		return fmt.Errorf("onebit: %d rows, %d columns and %d signs", len(p.Rows), len(p.Cols), len(p.Y))
	}
	if len(p.Y) == 0 {
		return errors.New("onebit: no observations")
	}
	for k, y := range p.Y {
		if y != 1 && y != -1 {
			return fmt.Errorf("onebit: observation %d has sign %g, want ±1", k, y)
		}
		if r, c := p.Rows[k], p.Cols[k]; r < 0 || int(r) >= p.D1 || c < 0 || int(c) >= p.D2 {
			return fmt.Errorf("onebit: observation %d at (%d, %d) outside %d × %d", k, r, c, p.D1, p.D2)
		}
	}
	return nil
}

// Options configure the SPG solver.
type Options struct {
	Link       Link
	Tau, Alpha float64
	// MaxIter bounds SPG iterations (default 500); with Gradient set it is
	// the exact number of iterations.
	MaxIter int
	// OptTol stops when the projected step ‖P(X − αg) − X‖_∞/min(α, 1) (α
	// the spectral step; an upper bound on the unit-step measure) falls
	// below it (default 1e-4).
	OptTol float64
	// ProgTol stops when the objective changes by less than ProgTol times its
	// size (default 1e-9).
	ProgTol float64
	// Memory is the non-monotone line search's window (default 10).
	Memory int
	// StallTol and StallWindow stop the solver when the objective fell by
	// less than StallTol times its size over the last StallWindow
	// iterations (defaults 1e-5 and 10): with projections accurate to
	// about ProjTol·α the projected step rarely falls below OptTol.
	StallTol    float64
	StallWindow int
	// StepCap bounds the spectral step so that no entry of X − step·g
	// moves by more than StepCap·Alpha (default 2).
	StepCap float64
	// Linear, when set (one value per observation), adds Σ Linear[k]·X_k to
	// the objective (objective perturbation).
	Linear []float64
	// Gradient, when set, replaces each iteration's gradient on Ω (in place)
	// before it is used: gradient perturbation. The solver then takes
	// exactly MaxIter steps X ← P(X − γ g̃) with the spectral step γ computed
	// from the perturbed gradients only, no line search and no
	// data-dependent stopping, so every decision is post-processing of the
	// perturbed gradients.
	Gradient func(iter int, g []float64) error
	// Solver is "dr" (the default): Douglas–Rachford splitting between
	// the nuclear ball and the entrywise loss-plus-box, Anderson
	// accelerated, stopped by a certified duality gap (dr.go); or "spg":
	// the spectral projected gradient method with Dykstra projections onto
	// C (the previous solver, kept as a reference).
	Solver string
	// GapTol: DR stops when f(X̂) minus a proven lower bound on the
	// optimum is at most GapTol·|f(X̂)| (default 1e-3), so the returned
	// objective is within that fraction of the optimum.
	GapTol float64
	// Rho, Relax and AAMemory are DR's penalty ρ (default 1.2·L''(0) of
	// the link, times 1 + the mean |Linear|), over-relaxation γ (default
	// 1.6) and Anderson memory (default 5; negative: no acceleration).
	Rho, Relax float64
	AAMemory   int
	// ProjIter is the number of DR iterations of each projection onto C in
	// gradient perturbation (default 1; warm-started from the previous
	// projection; the result is in C whatever the number).
	ProjIter int
	// ProjTol configures SPG's Dykstra projection (see Projector); FullSVD
	// makes every nuclear projection use a full SVD (both solvers).
	ProjTol float64
	FullSVD bool
	// Rand is the non-private randomness for the subspace iteration's start
	// vectors (required).
	Rand func() float64
	// Progress, when set, is told after each iteration.
	Progress func(done, total int)
}

// Solution is the solver's result.
type Solution struct {
	// X is the final iterate, D1 × D2 row-major, in C.
	X []float64
	// Factors, when non-nil, is a low-rank form of X: X = U diag(S) Vᵀ.
	Factors *triplets
	// Iterations taken, final Objective, final projected step ‖d‖_∞.
	Iterations int
	Objective  float64
	ProjStep   float64
	// Stop says why the solver stopped.
	Stop string
	// Gap (DR only) is Objective minus a proven lower bound on the
	// optimum (+Inf when none was proved: non-convex adjusted link,
	// matrices too large to certify, or SPG).
	Gap float64
	// Projection statistics.
	Projections, Sweeps, DykstraIters, Fallbacks int
}

// Rank is the number of factor columns (0 if no factorisation is held).
func (s *Solution) Rank() int {
	if s.Factors == nil {
		return 0
	}
	return len(s.Factors.S)
}

// objective evaluates f and its gradient on Ω at the values xo (X on Ω).
func objective(p *Problem, link Link, lin, xo, g []float64) float64 {
	var f float64
	for k, x := range xo {
		fk, gk := link.Loss(x, p.Y[k])
		if lin != nil {
			fk += lin[k] * x
			gk += lin[k]
		}
		f += fk
		if g != nil {
			g[k] = gk
		}
	}
	return f
}

// Solve minimises the negative log-likelihood of the observed signs over C
// by the spectral projected gradient method (Birgin, Martínez and Raydan's
// SPG as used by Davenport et al.): a Barzilai–Borwein step α, the projected
// direction d = P_C(X − αg) − X, and a non-monotone Armijo backtracking
// along d (quadratic interpolation, reference value the largest of the last
// Memory objectives). Iterates stay in C (convex combinations of points of
// C).
func Solve(ctx context.Context, p *Problem, opt Options) (*Solution, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := opt.setDefaults(len(p.Y)); err != nil {
		return nil, err
	}
	switch opt.Solver {
	case "", "dr":
		if opt.Gradient != nil {
			return solveNoisy(ctx, p, opt, nil, nil)
		}
		return solveDR(ctx, p, opt)
	case "spg":
	default:
		return nil, fmt.Errorf("onebit: unknown solver %q (want dr or spg)", opt.Solver)
	}
	s, err := newSPG(p, opt)
	if err != nil {
		return nil, err
	}
	if opt.Gradient != nil {
		return solveNoisy(ctx, p, opt, s.pr, s.idx)
	}
	return s.run(ctx)
}

// setDefaults checks the options Solve needs and fills the defaults.
func (opt *Options) setDefaults(observations int) error {
	if opt.Link == nil {
		return errors.New("onebit: no link")
	}
	if opt.Rand == nil {
		return errors.New("onebit: Options.Rand is required")
	}
	if opt.MaxIter <= 0 {
		opt.MaxIter = 500
	}
	if opt.OptTol <= 0 {
		opt.OptTol = 1e-4
	}
	if opt.ProgTol <= 0 {
		opt.ProgTol = 1e-9
	}
	if opt.Memory <= 0 {
		opt.Memory = 10
	}
	if opt.StepCap <= 0 {
		opt.StepCap = 10
	}
	if opt.StallWindow <= 0 {
		opt.StallWindow = 10
	}
	if opt.StallTol <= 0 {
		opt.StallTol = 1e-5
	}
	if opt.Linear != nil && len(opt.Linear) != observations {
		return fmt.Errorf("onebit: %d linear terms for %d observations", len(opt.Linear), observations)
	}
	return nil
}

// spgStepFrac: Dykstra's tolerance is also at most spgStepFrac·Tol·α·‖g‖_∞
// (a fraction of the largest move; Tol shrinks when the solver tightens
// it).
const spgStepFrac = 5.0

// spg is the state of one SPG solve.
type spg struct {
	p    *Problem
	opt  Options
	pr   *Projector
	idx  []int // flat index of each observation
	n, m int
	x    []float64 // iterate, starts at 0 ∈ C
	z    []float64 // x − αg, then its projection
	xo   []float64 // x on Ω
	xn   []float64 // trial point on Ω
	g    []float64
	gn   []float64
	f    float64
	// history holds the last Memory objectives (the line search's
	// reference), trail every accepted one (the stall test).
	history, trail []float64
	alpha          float64
	retries        int // step reductions in this iteration
	// trust bounds the step after a step reduction, then grows by half
	// per accepted iteration: the steps that met a non-descent direction
	// (an inexact projection far outside C) are not retried at once.
	trust   float64
	factors *triplets
	sol     *Solution
}

func newSPG(p *Problem, opt Options) (*spg, error) {
	pr, err := NewProjector(p.D1, p.D2, opt.Tau, opt.Alpha, opt.Rand)
	if err != nil {
		return nil, err
	}
	if opt.ProjTol > 0 {
		pr.Tol = opt.ProjTol
	}
	pr.FullSVD = opt.FullSVD
	n, m := p.D1*p.D2, len(p.Y)
	s := &spg{p: p, opt: opt, pr: pr, idx: flatIndex(p), n: n, m: m,
		x: make([]float64, n), z: make([]float64, n), xo: make([]float64, m), xn: make([]float64, m),
		g: make([]float64, m), gn: make([]float64, m), alpha: 1, trust: math.Inf(1)}
	s.f = objective(p, opt.Link, opt.Linear, s.xo, s.g)
	s.history, s.trail = []float64{s.f}, []float64{s.f}
	s.sol = &Solution{X: s.x, Gap: math.Inf(1)}
	return s, nil
}

// run iterates until a stopping rule or MaxIter.
func (s *spg) run(ctx context.Context) (*Solution, error) {
	sol := s.sol
	for it := 0; it < s.opt.MaxIter; it++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		retry, err := s.iterate(it)
		if err != nil {
			return nil, err
		}
		if retry {
			it--
			continue
		}
		if sol.Stop != "" {
			break
		}
	}
	if sol.Stop == "" {
		sol.Stop = "iteration limit"
	}
	sol.X = s.x
	sol.Objective = s.f
	sol.Factors = s.factors
	sol.Projections, sol.Sweeps, sol.DykstraIters, sol.Fallbacks = s.pr.NuclearProjections, s.pr.Sweeps, s.pr.DykstraIters, s.pr.Fallbacks
	return sol, nil
}

// iterate takes iteration it: it reports retry when the iteration is to
// be taken again (tighter projection or shorter step) and sets sol.Stop
// when the solver stops.
func (s *spg) iterate(it int) (retry bool, err error) {
	tr, scale, err := s.project()
	if err != nil {
		return false, err
	}
	dInf, dd, gtd := s.direction()
	sol := s.sol
	// ‖P(X − tg) − X‖ is non-decreasing in t and ‖P(X − tg) − X‖/t
	// non-increasing, so dInf/min(α, 1) bounds the unit-step measure
	// ‖P(X − g) − X‖_∞ from above whatever the (capped) step α.
	sol.ProjStep = dInf / math.Min(s.alpha, 1)
	if sol.ProjStep < s.opt.OptTol {
		s.stop(it, fmt.Sprintf("projected step %.3g below %.3g", sol.ProjStep, s.opt.OptTol))
		return false, nil
	}
	if debugProj != nil {
		debugProj("it %d f %.6g dInf %.3g gtd %.3g step %.3g", it, s.f, dInf, gtd, s.alpha)
	}
	if gtd > -1e-12*math.Max(1, math.Abs(s.f)) {
		// An inexact projection can give a non-descent direction:
		// retry with a tighter projection, then with a shorter step
		// (z nearer C, so the projection is easier), before giving up.
		if s.shorten() {
			return true, nil
		}
		s.stop(it, "directional derivative no longer negative")
		return false, nil
	}
	t, fn, ok := s.lineSearch(gtd, dInf)
	if !ok {
		if tighten(s.pr) {
			return true, nil
		}
		s.stop(it, "line search failed")
		return false, nil
	}
	s.accept(it, t, fn, dd, tr, scale)
	return false, nil
}

func (s *spg) stop(it int, why string) {
	s.sol.Stop = why
	s.sol.Iterations = it
}

// project sets z = P_C(x − αg) after capping α: the trial point moves no
// entry by more than StepCap·α. The spectral step grows large once
// entries rest on the box (their gradient does not vanish there), and a
// point far outside C costs many Dykstra rounds for a move that the box
// mostly undoes.
func (s *spg) project() (triplets, float64, error) {
	var gInf float64
	for _, v := range s.g {
		gInf = math.Max(gInf, math.Abs(v))
	}
	if gInf > 0 {
		s.alpha = math.Min(s.alpha, s.opt.StepCap*s.opt.Alpha/gInf)
	}
	s.alpha = math.Min(s.alpha, s.trust)
	s.pr.StepTol = spgStepFrac * s.pr.Tol * s.alpha * gInf
	copy(s.z, s.x)
	for k := range s.m {
		s.z[s.idx[k]] -= s.alpha * s.g[k]
	}
	return s.pr.Project(s.z, s.z)
}

// direction returns ‖d‖_∞ and ‖d‖² of d = z − x (its size is the
// stationarity measure) and the directional derivative gᵀd.
func (s *spg) direction() (dInf, dd, gtd float64) {
	for i := range s.n {
		d := s.z[i] - s.x[i]
		dInf = math.Max(dInf, math.Abs(d))
		dd += d * d
	}
	for k := range s.m {
		gtd += s.g[k] * (s.z[s.idx[k]] - s.xo[k])
	}
	return dInf, dd, gtd
}

// shorten makes the next try more exact: a tighter projection, else (at
// most twice per iteration) a step ten times shorter. It reports whether
// it could.
func (s *spg) shorten() bool {
	if tighten(s.pr) {
		return true
	}
	if s.retries < 2 && s.alpha > 1e-6 {
		s.retries++
		s.alpha /= 10
		s.trust = s.alpha
		return true
	}
	return false
}

// lineSearch is the non-monotone Armijo backtracking along d from t = 1:
// it returns the accepted t with the objective there (gradient in gn, the
// point on Ω in xn), or ok = false.
func (s *spg) lineSearch(gtd, dInf float64) (t, fn float64, ok bool) {
	ref := slices.Max(s.history)
	t = 1.0
	for ls := 0; ls < 50; ls++ {
		for k := range s.m {
			s.xn[k] = s.xo[k] + t*(s.z[s.idx[k]]-s.xo[k])
		}
		fn = objective(s.p, s.opt.Link, s.opt.Linear, s.xn, s.gn)
		if fn <= ref+1e-4*t*gtd && !math.IsNaN(fn) {
			return t, fn, true
		}
		// Quadratic interpolation, safeguarded to [0.1t, 0.5t].
		tq := -gtd * t * t / (2 * (fn - s.f - t*gtd))
		if math.IsNaN(tq) || tq < 0.1*t {
			tq = 0.1 * t
		} else if tq > 0.5*t {
			tq = 0.5 * t
		}
		t = tq
		if t*dInf < 1e-14 {
			break
		}
	}
	return t, fn, false
}

// accept moves x ← x + t d (s = t d, y = gn − g give the next spectral
// step) and tests convergence.
func (s *spg) accept(it int, t, fn, dd float64, tr triplets, scale float64) {
	var sty float64
	for k := range s.m {
		sty += (s.xn[k] - s.xo[k]) * (s.gn[k] - s.g[k])
	}
	sts := t * t * dd
	if t == 1 {
		copy(s.x, s.z)
		s.factors = lowRankOf(tr, scale)
	} else {
		for i := range s.n {
			s.x[i] += t * (s.z[i] - s.x[i])
		}
		s.factors = nil
	}
	copy(s.xo, s.xn)
	s.g, s.gn = s.gn, s.g
	fOld := s.f
	s.f = fn
	s.history = append(s.history, s.f)
	if len(s.history) > s.opt.Memory {
		s.history = s.history[1:]
	}
	s.alpha = bbStep(sts, sty)
	s.retries = 0
	s.trust *= 1.5
	s.sol.Iterations = it + 1
	if s.opt.Progress != nil {
		s.opt.Progress(it+1, s.opt.MaxIter)
	}
	s.sol.Stop = s.converged(fOld)
}

// converged returns why the solver stops after an accepted step with
// objective s.f (fOld before), or "".
func (s *spg) converged(fOld float64) string {
	f := s.f
	if math.Abs(fOld-f) < s.opt.ProgTol*math.Max(1, math.Abs(f)) {
		return "objective change below tolerance"
	}
	s.trail = append(s.trail, f)
	if w := s.opt.StallWindow; len(s.trail) > w {
		if s.trail[len(s.trail)-1-w]-f < s.opt.StallTol*math.Max(1, math.Abs(f)) {
			return fmt.Sprintf("objective decreased by less than %.3g (relative) over %d iterations", s.opt.StallTol, w)
		}
	}
	return ""
}

// solveNoisy is gradient perturbation's loop: exactly MaxIter steps
// X ← P_C(X − γ g̃) with g̃ the perturbed gradient and γ the spectral step
// computed from the iterates and perturbed gradients only.
//
// With pr nil (the DR solver) each projection onto C is the splitting of
// dr.go on ½‖X − Z‖² plus the box, warm-started from the previous
// projection's state; with α = ∞ it is a single nuclear projection.
func solveNoisy(ctx context.Context, p *Problem, opt Options, pr *Projector, idx []int) (*Solution, error) {
	s, err := newNoisy(p, opt, pr, idx)
	if err != nil {
		return nil, err
	}
	for it := range opt.MaxIter {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.step(ctx, it); err != nil {
			return nil, err
		}
		if opt.Progress != nil {
			opt.Progress(it+1, opt.MaxIter)
		}
	}
	return s.solution(), nil
}

// noisy is the state of gradient perturbation's loop; xoPrev and gPrev
// are the last iterate on Ω and its perturbed gradient, sts the squared
// length of the last step (the spectral step's inputs).
type noisy struct {
	p       *Problem
	opt     Options
	pr      *Projector
	dr      *drSolver
	idx     []int
	n, m    int
	x, z    []float64
	xo, g   []float64
	xoPrev  []float64
	gPrev   []float64
	alpha   float64
	sts     float64
	factors *triplets
	sol     *Solution
}

// newNoisy sets up the loop; with pr nil it builds the DR solver's
// projector (and, for a finite α, the splitting).
func newNoisy(p *Problem, opt Options, pr *Projector, idx []int) (*noisy, error) {
	n, m := p.D1*p.D2, len(p.Y)
	var dr *drSolver
	if pr == nil {
		var err error
		if pr, err = NewProjector(p.D1, p.D2, opt.Tau, opt.Alpha, opt.Rand); err != nil {
			return nil, err
		}
		pr.FullSVD = opt.FullSVD
		idx = flatIndex(p)
		if !math.IsInf(opt.Alpha, 1) {
			if dr, err = newDRSolver(p.D1, p.D2, opt.Tau, opt.Alpha, opt.Rand, opt.FullSVD); err != nil {
				return nil, err
			}
		}
	}
	return &noisy{p: p, opt: opt, pr: pr, dr: dr, idx: idx, n: n, m: m,
		x: make([]float64, n), z: make([]float64, n), xo: make([]float64, m), xoPrev: make([]float64, m),
		g: make([]float64, m), gPrev: make([]float64, m), alpha: 1, sol: &Solution{}}, nil
}

// flatIndex is the flat (row-major) index of each observation.
func flatIndex(p *Problem) []int {
	idx := make([]int, len(p.Y))
	for k := range idx {
		idx[k] = int(p.Rows[k])*p.D2 + int(p.Cols[k])
	}
	return idx
}

// step is iteration it: the perturbed gradient (opt.Gradient, the
// release), then post-processing — the spectral step, the projection
// and the move.
func (s *noisy) step(ctx context.Context, it int) error {
	objective(s.p, s.opt.Link, s.opt.Linear, s.xo, s.g)
	if err := s.opt.Gradient(it, s.g); err != nil {
		return err
	}
	if it > 0 {
		var sty float64
		for k := range s.m {
			sty += (s.xo[k] - s.xoPrev[k]) * (s.g[k] - s.gPrev[k])
		}
		s.alpha = bbStep(s.sts, sty)
	}
	copy(s.z, s.x)
	for k := range s.m {
		s.z[s.idx[k]] -= s.alpha * s.g[k]
	}
	tr, scale, err := s.project(ctx)
	if err != nil {
		return err
	}
	s.sts = 0
	var dInf float64
	for i := range s.n {
		d := s.z[i] - s.x[i]
		s.sts += d * d
		dInf = math.Max(dInf, math.Abs(d))
	}
	copy(s.xoPrev, s.xo)
	copy(s.gPrev, s.g)
	s.x, s.z = s.z, s.x
	for k := range s.m {
		s.xo[k] = s.x[s.idx[k]]
	}
	s.factors = lowRankOf(tr, scale)
	s.sol.Iterations = it + 1
	s.sol.ProjStep = dInf
	return nil
}

// project replaces z by its projection onto C: by the splitting when
// there is one, else by the projector.
func (s *noisy) project(ctx context.Context) (triplets, float64, error) {
	if s.dr == nil {
		return s.pr.Project(s.z, s.z)
	}
	res, err := s.dr.solve(ctx, &projTerm{z: s.z, alpha: s.opt.Alpha}, projectionConfig(s.opt))
	if err != nil {
		return triplets{}, 0, err
	}
	copy(s.z, res.X)
	var tr triplets
	if res.Factors != nil {
		tr = *res.Factors
	}
	return tr, 1, nil
}

func (s *noisy) solution() *Solution {
	sol, pr := s.sol, s.pr
	sol.Stop = "fixed number of iterations (gradient perturbation)"
	sol.X = s.x
	sol.Factors = s.factors
	sol.Objective = math.NaN() // not computed: it would be an un-noised statistic
	sol.Projections, sol.Sweeps, sol.DykstraIters, sol.Fallbacks = pr.NuclearProjections, pr.Sweeps, pr.DykstraIters, pr.Fallbacks
	if s.dr != nil {
		sol.Projections, sol.Sweeps, sol.Fallbacks = s.dr.nuc.NuclearProjections, s.dr.nuc.Sweeps, s.dr.nuc.Fallbacks
	}
	sol.Gap = math.Inf(1)
	return sol
}

// bbStep is the Barzilai–Borwein step sᵀs/sᵀy, reset to 1 when the
// curvature estimate is not positive or the step leaves [1e-10, 1e10].
func bbStep(sts, sty float64) float64 {
	if !(sty > 0) {
		return 1
	}
	a := sts / sty
	if !(a >= 1e-10 && a <= 1e10) {
		return 1
	}
	return a
}

// lowRankOf turns a projection's factors and scale into X's factors; nil if
// the projection did not produce a low-rank form.
func lowRankOf(t triplets, scale float64) *triplets {
	if t.U == nil {
		return nil
	}
	s := make([]float64, len(t.S))
	for i, v := range t.S {
		s[i] = v * scale
	}
	return &triplets{U: t.U, S: s, V: t.V}
}

// tighten makes the projection more exact (Dykstra tolerance ÷10, twice
// the iterations), down to 1e-4; it reports whether it could.
func tighten(pr *Projector) bool {
	if pr.Tol <= 1e-4 {
		return false
	}
	pr.Tol /= 10
	pr.MaxDykstra *= 2
	pr.Tightened++
	return true
}

// FactorsUV returns X = U Vᵀ with U = U_s √S (D1 × rank) and V = V_s √S
// (D2 × rank), row-major, from the solver's low-rank form, or from a
// truncated SVD of X (singular values below 1e-10·σ₁ dropped) when the last
// step was not a full projection step.
func (s *Solution) FactorsUV(d1, d2 int) (rank int, u, v []float64, err error) {
	t := s.Factors
	if t == nil {
		full, _, ok := gramTopK(mat.NewDense(d1, d2, slices.Clone(s.X)), 0, min(d1, d2))
		if !ok {
			return 0, nil, nil, errors.New("onebit: SVD of the solution failed")
		}
		t = &full
	}
	rank = len(t.S)
	u = make([]float64, d1*rank)
	v = make([]float64, d2*rank)
	for j, sv := range t.S {
		r := math.Sqrt(sv)
		for i := range d1 {
			u[i*rank+j] = t.U.At(i, j) * r
		}
		for i := range d2 {
			v[i*rank+j] = t.V.At(i, j) * r
		}
	}
	return rank, u, v, nil
}
