package onebit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// Mechanism names one of the seed's five variants.
type Mechanism string

// The mechanisms.
const (
	Clear Mechanism = "clear" // no noise
	InP   Mechanism = "inp"   // randomised response on the observed signs
	ObjP  Mechanism = "objp"  // random linear term in the objective
	GraP  Mechanism = "grap"  // Laplace noise on clamped gradients, K iterations
	OutP  Mechanism = "outp"  // Laplace noise on the completed matrix
)

// Config configures Run.
type Config struct {
	Mechanism Mechanism
	// Epsilon is the privacy parameter (ignored by Clear).
	Epsilon float64
	// P1, P2 are InP's flip probabilities for +1 and −1; both 0 means the
	// seed's symmetric choice p = 1/(1 + e^ε).
	P1, P2 float64
	// Clamp is GraP's C: gradient entries are clamped to [−C, C] (default
	// 0.5; negative: no clamping, sensitivity from the link's Δ).
	Clamp float64
	// Iterations is GraP's K (default 10).
	Iterations int
	// ProjIter is GraP's number of DR iterations per projection onto C
	// (default 1; see Options.ProjIter).
	ProjIter int
	// Noise is the privacy randomness (noise.Secure() for releases).
	Noise *noise.Source
	// Instrument, when set, is attached to the mechanism the plan
	// calibrates (mechanism.Instrument: an audit's noise factor and tap);
	// nil for releases.
	Instrument *mechanism.Instrument
	// Solver configures SPG (Link, Tau, Alpha, tolerances, Rand).
	Solver Options
}

// Result is a mechanism's output.
type Result struct {
	Solution *Solution
	// Dense is OutP's released matrix (X plus noise), D1 × D2 row-major; nil
	// otherwise (the release is Solution.X).
	Dense     []float64
	Guarantee privacy.Guarantee
	// Info holds facts that are safe to print: for private mechanisms only
	// what is post-processing of the noisy release or public.
	Info map[string]any
}

// Run applies one mechanism to p: for a private one it calibrates the
// mechanism once (Calibrate, from the shape and the budget only), then
// draws every bit of privacy noise through it.
func Run(ctx context.Context, p *Problem, cfg Config) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	opt := cfg.Solver
	if opt.Link == nil {
		return nil, errors.New("onebit: no link function")
	}
	info := map[string]any{"link": opt.Link.Name(), "tau": opt.Tau, "alpha": AlphaParam(opt.Alpha)}
	if cfg.Mechanism == Clear {
		return runClear(ctx, p, opt, info)
	}
	plan, err := planRun(p, cfg)
	if err != nil {
		return nil, err
	}
	switch plan.Mechanism {
	case InP:
		return runInP(ctx, p, cfg, plan, info)
	case ObjP:
		return runObjP(ctx, p, cfg, plan, info)
	case GraP:
		return runGraP(ctx, p, cfg, plan, info)
	case OutP:
		return runOutP(ctx, p, cfg, plan, info)
	}
	return nil, fmt.Errorf("onebit: unknown mechanism %q (want clear, inp, objp, grap or outp)", cfg.Mechanism)
}

// runClear solves without noise; every fact of the run may be reported.
func runClear(ctx context.Context, p *Problem, opt Options, info map[string]any) (*Result, error) {
	sol, err := Solve(ctx, p, opt)
	if err != nil {
		return nil, err
	}
	info["iterations"], info["objective"], info["stop"], info["rank"] = sol.Iterations, sol.Objective, sol.Stop, sol.Rank()
	info["solver"] = opt.Solver
	if opt.Solver == "" {
		info["solver"] = "dr"
	}
	if !math.IsInf(sol.Gap, 1) {
		info["gap"] = sol.Gap // the objective minus a proven lower bound on the optimum
	}
	return &Result{Solution: sol, Guarantee: ClearGuarantee(), Info: info}, nil
}

// planRun is a private mechanism's plan: calibrated from the shape and
// the budget only, with the audit's instrument attached.
func planRun(p *Problem, cfg Config) (*Plan, error) {
	opt := cfg.Solver
	if cfg.Noise == nil {
		return nil, errors.New("onebit: a private mechanism needs a noise source")
	}
	if math.IsInf(opt.Alpha, 1) && (cfg.Mechanism == OutP || (opt.Link.Name() != "logit" && (cfg.Mechanism == ObjP || (cfg.Mechanism == GraP && cfg.Clamp < 0)))) {
		return nil, fmt.Errorf("onebit: %s needs a finite α (its noise is calibrated to α)", cfg.Mechanism)
	}
	plan, err := Calibrate(cfg, p.D1, p.D2, len(p.Y))
	if err != nil {
		return nil, err
	}
	if plan.RR != nil {
		plan.RR = plan.RR.Instrumented(cfg.Instrument)
	}
	if plan.Laplace != nil {
		plan.Laplace = plan.Laplace.Instrumented(cfg.Instrument)
	}
	return plan, nil
}

// runInP releases every sign once through randomised response, then
// solves on the flipped signs with the flip-adjusted link
// (post-processing, so the run's facts are safe to report).
func runInP(ctx context.Context, p *Problem, cfg Config, plan *Plan, info map[string]any) (*Result, error) {
	q := *p
	q.Y = make([]float64, len(p.Y))
	for k, y := range p.Y {
		q.Y[k] = -1
		if plan.RR.Randomize(cfg.Noise, y > 0) {
			q.Y[k] = 1
		}
	}
	if err := cfg.Instrument.Err(); err != nil {
		return nil, fmt.Errorf("onebit: InP: %w", err)
	}
	p1, p2 := plan.RR.FlipProbabilities()
	opt := cfg.Solver
	flipped, err := NewFlipped(opt.Link, p1, p2)
	if err != nil {
		return nil, err
	}
	opt.Link = flipped
	sol, err := Solve(ctx, &q, opt)
	if err != nil {
		return nil, err
	}
	info["iterations"], info["stop"], info["rank"], info["p1"], info["p2"] = sol.Iterations, sol.Stop, sol.Rank(), p1, p2
	return &Result{Solution: sol, Guarantee: plan.Guarantee, Info: info}, nil
}

// runObjP draws the random linear term H (noise alone: the mechanism's
// release of a zero vector) and solves with it.
func runObjP(ctx context.Context, p *Problem, cfg Config, plan *Plan, info map[string]any) (*Result, error) {
	opt := cfg.Solver
	opt.Linear = make([]float64, len(p.Y))
	if err := plan.Laplace.Release(cfg.Noise, opt.Linear); err != nil {
		return nil, fmt.Errorf("onebit: ObjP noise: %w", err)
	}
	sol, err := Solve(ctx, p, opt)
	if err != nil {
		return nil, err
	}
	// The solver's iterations and objective read the raw signs: not reported.
	info["delta"], info["noise_scale"] = plan.Sensitivity, plan.Laplace.Scale()
	return &Result{Solution: sol, Guarantee: plan.Guarantee, Info: info}, nil
}

// runGraP takes plan.Steps steps, each on a gradient clamped to
// [−C, C] and released once through the plan's Laplace mechanism.
func runGraP(ctx context.Context, p *Problem, cfg Config, plan *Plan, info map[string]any) (*Result, error) {
	opt := cfg.Solver
	opt.MaxIter = plan.Steps
	if cfg.ProjIter > 0 {
		opt.ProjIter = cfg.ProjIter
	}
	opt.Gradient = noisyGradient(plan, cfg.Noise)
	sol, err := Solve(ctx, p, opt)
	if err != nil {
		return nil, err
	}
	info["iterations"], info["clamp"], info["noise_scale"], info["rank"] = plan.Steps, plan.Clamp, plan.Laplace.Scale(), sol.Rank()
	info["epsilon_per_iteration"] = plan.Laplace.Guarantee().Epsilon
	return &Result{Solution: sol, Guarantee: plan.Guarantee, Info: info}, nil
}

// noisyGradient is GraP's release of one gradient: clamped to [−C, C]
// (C > 0), then lattice Laplace noise (not v + float noise: PRIVACY.md).
func noisyGradient(plan *Plan, src *noise.Source) func(int, []float64) error {
	c := plan.Clamp
	return func(_ int, grad []float64) error {
		for i, v := range grad {
			if math.IsNaN(v) {
				return errors.New("onebit: NaN gradient")
			}
			if c > 0 {
				grad[i] = math.Max(-c, math.Min(c, v))
			}
		}
		if err := plan.Laplace.Release(src, grad); err != nil {
			return fmt.Errorf("onebit: GraP noise: %w", err)
		}
		return nil
	}
}

// runOutP solves without noise and releases the completed matrix once
// through the plan's Laplace mechanism.
func runOutP(ctx context.Context, p *Problem, cfg Config, plan *Plan, info map[string]any) (*Result, error) {
	sol, err := Solve(ctx, p, cfg.Solver)
	if err != nil {
		return nil, err
	}
	dense := slices.Clone(sol.X)
	if err := plan.Laplace.Release(cfg.Noise, dense); err != nil {
		return nil, fmt.Errorf("onebit: OutP noise: %w", err)
	}
	// Iterations and objective are un-noised facts of the raw data: not reported.
	info["noise_scale"], info["epsilon_per_entry"] = plan.Laplace.Scale(), plan.Laplace.Guarantee().Epsilon
	return &Result{Solution: sol, Dense: dense, Guarantee: plan.Guarantee, Info: info}, nil
}

// PerturbOutput is OutP's release: x plus the Laplace noise of the seed's
// per-entry calibration (scale ≈ 2α/ε, from mechanism.NewLaplace), returned
// with the scale. Experiments that already hold Clear's solution call it
// instead of solving again; Run draws the same noise. It returns nil and a
// NaN scale when α or ε is invalid.
func PerturbOutput(x []float64, alpha, eps float64, src *noise.Source) ([]float64, float64) {
	lap, err := newOutPLaplace(eps, alpha, max(len(x), 1))
	if err != nil {
		return nil, math.NaN()
	}
	dense := slices.Clone(x)
	if err := lap.Release(src, dense); err != nil {
		return nil, math.NaN()
	}
	return dense, lap.Scale()
}

// AlphaParam is α as a model or report parameter: the number, or "inf"
// when there is no max-norm constraint (JSON has no infinity).
func AlphaParam(alpha float64) any {
	if math.IsInf(alpha, 1) {
		return "inf"
	}
	return alpha
}
