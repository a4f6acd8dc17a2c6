package onebit

import (
	"context"
	"errors"
	"fmt"
	"math"

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
	// Noise is the privacy randomness (noise.Secure() for releases).
	Noise *noise.Source
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

// Run applies one mechanism to p.
func Run(ctx context.Context, p *Problem, cfg Config) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	eps := cfg.Epsilon
	if cfg.Mechanism != Clear {
		if !(eps >= 0x1p-50) || math.IsInf(eps, 0) {
			return nil, fmt.Errorf("onebit: ε = %g must be finite and at least 2⁻⁵⁰", eps)
		}
		if cfg.Noise == nil {
			return nil, errors.New("onebit: a private mechanism needs a noise source")
		}
	}
	opt := cfg.Solver
	info := map[string]any{"link": opt.Link.Name(), "tau": opt.Tau, "alpha": AlphaParam(opt.Alpha)}
	if math.IsInf(opt.Alpha, 1) && (cfg.Mechanism == OutP || (opt.Link.Name() != "logit" && (cfg.Mechanism == ObjP || (cfg.Mechanism == GraP && cfg.Clamp < 0)))) {
		return nil, fmt.Errorf("onebit: %s needs a finite α (its noise is calibrated to α)", cfg.Mechanism)
	}
	var g privacy.Guarantee
	switch cfg.Mechanism {
	case Clear:
		g = ClearGuarantee()
		sol, err := Solve(ctx, p, opt)
		if err != nil {
			return nil, err
		}
		info["iterations"], info["objective"], info["stop"], info["rank"] = sol.Iterations, sol.Objective, sol.Stop, sol.Rank()
		return &Result{Solution: sol, Guarantee: g, Info: info}, nil

	case InP:
		p1, p2 := cfg.P1, cfg.P2
		if p1 == 0 && p2 == 0 {
			p1 = 1 / (1 + math.Exp(eps))
			p2 = p1
		}
		var err error
		if g, err = InPGuarantee(eps, p1, p2); err != nil {
			return nil, err
		}
		flipped, err := NewFlipped(opt.Link, p1, p2)
		if err != nil {
			return nil, err
		}
		q := *p
		q.Y = make([]float64, len(p.Y))
		for k, y := range p.Y {
			flip := p2
			if y > 0 {
				flip = p1
			}
			q.Y[k] = y
			if noise.Bernoulli(cfg.Noise, flip) {
				q.Y[k] = -y
			}
		}
		opt.Link = flipped
		sol, err := Solve(ctx, &q, opt)
		if err != nil {
			return nil, err
		}
		// The run is post-processing of the flipped signs: its facts are safe.
		info["iterations"], info["stop"], info["rank"], info["p1"], info["p2"] = sol.Iterations, sol.Stop, sol.Rank(), p1, p2
		return &Result{Solution: sol, Guarantee: g, Info: info}, nil

	case ObjP:
		delta, err := ObjDelta(opt.Link, opt.Alpha)
		if err != nil {
			return nil, err
		}
		g = ObjPGuarantee(eps, delta)
		opt.Linear = make([]float64, len(p.Y))
		for k := range opt.Linear {
			opt.Linear[k] = noise.Laplace(cfg.Noise, delta/eps)
		}
		sol, err := Solve(ctx, p, opt)
		if err != nil {
			return nil, err
		}
		info["delta"] = delta
		return &Result{Solution: sol, Guarantee: g, Info: info}, nil

	case GraP:
		k := cfg.Iterations
		if k <= 0 {
			k = 10
		}
		c := cfg.Clamp
		if c == 0 {
			c = 0.5
		}
		var delta1 float64
		if c > 0 {
			delta1 = 2 * c
		} else {
			d, err := ObjDelta(opt.Link, opt.Alpha)
			if err != nil {
				return nil, err
			}
			delta1 = d
		}
		scale, err := mechanism.LaplaceScale(eps/float64(k), delta1, 1)
		if err != nil {
			return nil, fmt.Errorf("onebit: GraP noise: %w", err)
		}
		if g, err = GraPGuarantee(eps, k, delta1, scale); err != nil {
			return nil, err
		}
		opt.MaxIter = k
		opt.Gradient = func(_ int, grad []float64) error {
			for i, v := range grad {
				if math.IsNaN(v) {
					return errors.New("onebit: NaN gradient")
				}
				if c > 0 {
					v = math.Max(-c, math.Min(c, v))
				}
				// Lattice release (not v + float noise: PRIVACY.md).
				grad[i] = noise.SnapLaplace(cfg.Noise, v, scale)
			}
			return nil
		}
		sol, err := Solve(ctx, p, opt)
		if err != nil {
			return nil, err
		}
		info["iterations"], info["clamp"], info["noise_scale"], info["rank"] = k, c, scale, sol.Rank()
		return &Result{Solution: sol, Guarantee: g, Info: info}, nil

	case OutP:
		g = OutPGuarantee(eps, opt.Alpha, opt.Tau, p.D1, p.D2)
		sol, err := Solve(ctx, p, opt)
		if err != nil {
			return nil, err
		}
		dense, scale := PerturbOutput(sol.X, opt.Alpha, eps, cfg.Noise)
		// Iterations and objective are un-noised facts of the raw data: not reported.
		info["noise_scale"] = scale
		return &Result{Solution: sol, Dense: dense, Guarantee: g, Info: info}, nil
	}
	return nil, fmt.Errorf("onebit: unknown mechanism %q (want clear, inp, objp, grap or outp)", cfg.Mechanism)
}

// PerturbOutput is OutP's release: x plus Laplace noise of scale 2α/ε on
// every entry (returned with the scale). Run uses it; experiments that
// already hold Clear's solution call it directly instead of solving again.
func PerturbOutput(x []float64, alpha, eps float64, src *noise.Source) ([]float64, float64) {
	dense := make([]float64, len(x))
	scale := 2 * alpha / eps
	for i, v := range x {
		dense[i] = noise.SnapLaplace(src, v, scale) // lattice release (PRIVACY.md)
	}
	return dense, scale
}

// AlphaParam is α as a model or report parameter: the number, or "inf"
// when there is no max-norm constraint (JSON has no infinity).
func AlphaParam(alpha float64) any {
	if math.IsInf(alpha, 1) {
		return "inf"
	}
	return alpha
}
