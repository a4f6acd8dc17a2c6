package methods

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/release"
)

// als: the non-private reference matrix factorisation. It fits
// μ + b_u + b_i + p_u·q_i by minimising
// Σ_(u,i) (r − μ − b_u − b_i − p_u·q_i)² + λ(‖p_u‖² + ‖q_i‖²) + λ_b(b_u² + b_i²)
// (the penalty per rating, i.e. weighted-λ) with one of two solvers:
// blocked parallel SGD as in LIBMF (the default: the fastest to a given
// RMSE on MovieLens), or alternating least squares.
func init() {
	Register(&Method{
		Name:    "als",
		Summary: "non-private biased matrix factorisation (LIBMF-style parallel SGD, or weighted-λ ALS)",
		New:     func() Config { return NewALSConfig() },
	})
}

// ALS solver names.
const (
	SolverSGD = "sgd"
	SolverALS = "als"
)

// ALSConfig configures als. The defaults were chosen on a validation
// split of MovieLens-1M's training part and on MovieLens-100K (see
// docs/mf.md), never on a test split.
type ALSConfig struct {
	Solver     string  `json:"solver" flag:"solver" help:"sgd (blocked parallel SGD with adaptive steps, LIBMF's method) or als (alternating least squares)"`
	Rank       int     `json:"rank" flag:"rank" help:"number of latent factors"`
	Lambda     float64 `json:"lambda" flag:"lambda" help:"L2 penalty on the factors, per rating (weighted-λ; 0: the solver's default, sgd 0.05, als 0.08)"`
	BiasLambda float64 `json:"bias_lambda" flag:"bias-lambda" help:"L2 penalty on the biases, per rating"`
	Iterations int     `json:"iterations" flag:"iterations" help:"passes over the data (0: the solver's default, sgd 14, als 6)"`
	LearnRate  float64 `json:"learn_rate" flag:"learn-rate" help:"sgd: base step size η of the per-row adaptive steps η/√G"`
	InitScale  float64 `json:"init_scale" flag:"init-scale" help:"standard deviation of the initial factors (sgd: times 1/√rank)"`
}

// NewALSConfig returns the defaults.
func NewALSConfig() *ALSConfig {
	return &ALSConfig{Solver: SolverSGD, Rank: 64, BiasLambda: 0.01, LearnRate: 0.06, InitScale: 0.1}
}

// Each solver's defaults: SGD stops early (14 passes), which regularises
// beyond λ; ALS runs to its fixed point (within 0.001 RMSE after about 5
// sweeps on MovieLens-1M) and needs the larger λ.
var (
	DefaultIterations = map[string]int{SolverSGD: 14, SolverALS: 6}
	DefaultLambda     = map[string]float64{SolverSGD: 0.05, SolverALS: 0.08}
)

// Validate implements Config.
func (c *ALSConfig) Validate() error {
	if _, ok := DefaultIterations[c.Solver]; !ok {
		return fmt.Errorf("--solver must be %s or %s, got %q", SolverSGD, SolverALS, c.Solver)
	}
	if c.Rank < 1 || c.Rank > 1024 {
		return fmt.Errorf("--rank must be in [1, 1024], got %d", c.Rank)
	}
	if c.Iterations < 0 {
		return fmt.Errorf("--iterations must be ≥ 0, got %d", c.Iterations)
	}
	for _, x := range []struct {
		name     string
		v        float64
		positive bool
	}{{"lambda", c.Lambda, false}, {"bias-lambda", c.BiasLambda, false}, {"learn-rate", c.LearnRate, true}, {"init-scale", c.InitScale, false}} {
		if math.IsNaN(x.v) || math.IsInf(x.v, 0) || x.v < 0 || (x.positive && x.v == 0) {
			return fmt.Errorf("--%s must be finite and %s, got %g", x.name, map[bool]string{true: "> 0", false: "≥ 0"}[x.positive], x.v)
		}
	}
	return nil
}

// Train implements Config.
func (c *ALSConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	data := in.Ratings
	var p *mf.Problem
	if c.Solver == SolverSGD {
		p = mf.FromMatrixRows(data)
	} else {
		p = mf.FromMatrix(data)
	}
	iters, lambda := c.Iterations, c.Lambda
	if iters == 0 {
		iters = DefaultIterations[c.Solver]
	}
	if lambda == 0 {
		lambda = DefaultLambda[c.Solver]
	}
	start := time.Now()
	progress := func(it mf.Iteration) {
		if env.Log != nil {
			env.Log.Debug("als", "iteration", it.Done, "of", it.Total, "change", it.Change,
				"eta_seconds", time.Since(start).Seconds()/float64(it.Done)*float64(it.Total-it.Done))
		}
		env.iteration(it.Done, it.Total, "change", it.Change)
	}
	var f *mf.Factors
	var err error
	switch c.Solver {
	case SolverSGD:
		f, err = mf.SGD(ctx, p, mf.SGDOptions{Rank: c.Rank, Lambda: lambda, BiasLambda: c.BiasLambda, LearnRate: c.LearnRate,
			Iterations: iters, InitScale: c.InitScale, Workers: env.Workers, Rand: env.Rand.Rand(), Progress: progress})
	default:
		f, err = mf.ALS(ctx, p, mf.ALSOptions{Rank: c.Rank, Lambda: lambda, BiasLambda: c.BiasLambda,
			Iterations: iters, InitScale: c.InitScale, Workers: env.Workers, Norm: env.Rand.NormFloat64, Progress: progress})
	}
	if err != nil {
		return nil, err
	}
	m := model.New("als", data)
	if s := in.Declared.Scale; s != nil {
		m.Transform.Clamp = s
	}
	m.Rank, m.U, m.V = f.Rank, f.U, f.V
	m.Offset, m.UserBias, m.ItemBias = f.Mean, f.UserBias, f.ItemBias
	m.Params = map[string]any{"solver": c.Solver, "rank": c.Rank, "lambda": lambda, "bias_lambda": c.BiasLambda,
		"iterations": iters, "learn_rate": c.LearnRate, "init_scale": c.InitScale}
	g := privacy.NoPrivacy(privacy.UnitEntry, "A non-private baseline: the factors are fitted to the raw ratings without noise.")
	return &release.Release{Public: m, Guarantee: g, Report: release.Report{"solver": c.Solver, "rank": c.Rank, "iterations": iters}}, nil
}
