// Package completion fits CP and Tucker models to a sparse 3-way tensor,
// as in seed 004 ("differentially private tensor completion"), with the
// seed's three mechanisms — input perturbation (IP), gradient perturbation
// (GP) and output perturbation (OP) — and a sound DP-SGD variant.
// Guarantee describes, honestly, what each configuration provably gives.
//
// Solvers. The default (Defaults) is ALS with a global mean and user,
// item and day biases, λ and the number of sweeps chosen on a validation
// split of the training entries (als.go, fit.go); IP fits its noisy
// ratings the same way. The seed's per-entry SGD (Paper, Solver = SGD) is
// kept as the faithful reproduction and is what GP and OP are defined on;
// with the seed's settings it gives the models the seed-era package gave.
// DP-SGD (dpsgd.go) has its own solver: noisy clipped full-batch
// gradients, optionally with biases and a preconditioned step
// (DPSGDDefaults).
//
// SGD updates. For an observed entry x_ijk with error e = x_ijk − x̂_ijk,
// every parameter row touched moves against the gradient of
// ½e² + ½λ‖row‖² (the seed's per-entry SGD; the factor 2 of the squared
// loss is absorbed in the learning rate):
//
//	CP:     a_i ← a_i + η(e·(b_j ∘ c_k) − λ a_i), likewise b_j, c_k
//	Tucker: a_i ← a_i + η(e·∂x̂/∂a_i − λ_o a_i), likewise b_j, c_k;
//	        G ← G + η(e·(a_i ⊗ b_j ⊗ c_k) − λ_g G)
//
// SGD order and parallelism. Each pass visits every training entry once,
// in a stratified order (Gemulla et al.'s DSGD): every mode's indices are
// split in two halves of about equal entry count, giving 8 blocks; the 4
// pairs of blocks that share no index in any mode are visited in a random
// order, and the two blocks of a pair are processed at the same time by
// two goroutines (each in its own random order). The two blocks touch
// disjoint factor rows, so the result does not depend on the number of
// workers: a seed gives the same model with one goroutine or two. The
// Tucker core, shared by all entries, is updated on a private copy per
// block and the two copies' changes are added after each pair.
package completion

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/tensor"
)

// Mechanism names a privacy mechanism.
type Mechanism string

const (
	// NoMechanism trains without noise.
	NoMechanism Mechanism = ""
	// IP perturbs the observed entries with Laplace noise of scale
	// (Hi − Lo)/ε before training (seed Algorithm 1).
	IP Mechanism = "ip"
	// GP clips each gradient row of C to norm Clip and adds ℓ2-Laplace noise
	// with Δ = 2·Clip at every update (seed Algorithm 2).
	GP Mechanism = "gp"
	// OP adds ℓ2-Laplace noise with Δ = 2·τ·L·η to every row of the trained
	// C (seed Algorithm 3); L = Clip, enforced by clipping C's gradient rows.
	OP Mechanism = "op"
	// DPSGD clips each entry's whole gradient to norm Clip, sums a batch,
	// and adds Gaussian noise to every parameter (sound, zCDP-accounted).
	DPSGD Mechanism = "dpsgd"
)

// Solver names the non-private fitting algorithm.
type Solver string

const (
	// ALS is alternating ridge regression over the rows of each mode (and
	// the Tucker core), the default (als.go).
	ALS Solver = "als"
	// SGD is the seed's per-entry stochastic gradient descent; GP and OP
	// are defined on it.
	SGD Solver = "sgd"
)

// Config holds the solver's and the mechanism's parameters.
type Config struct {
	Kind tensor.Kind
	// Solver is ALS or SGD ("" = ALS). GP and OP need SGD; DP-SGD has its
	// own solver and ignores it.
	Solver Solver
	// Rank is d: CP components, or the Tucker core's side.
	Rank int
	// Passes is the number of SGD passes or ALS sweeps (with Validation:
	// the most that are run).
	Passes int
	// LR is the per-entry learning rate η (SGD, DP-SGD).
	LR float64
	// Lambda is λ (CP) or λ_o (Tucker factors); LambdaG is λ_g (core).
	// Both are per observed entry (see als.go).
	Lambda, LambdaG float64
	// LambdaGrid, when not empty, holds the candidates for λ; the one with
	// the lowest validation RMSE is used (Lambda is then ignored). It
	// needs Validation > 0 when it has more than one value.
	LambdaGrid []float64
	// Validation is the fraction of the training entries held out to
	// choose λ from LambdaGrid and the number of sweeps (stopped after
	// Patience sweeps without improvement); the model is then refitted on
	// all the training entries. 0: no hold-out, Passes sweeps with Lambda.
	Validation float64
	// Patience is the number of sweeps without a better validation RMSE
	// after which a fit stops (0: 3).
	Patience int
	// Starts is the number of initial models ALS tries with Validation,
	// each with every candidate λ (0: 1): the first has every day row at
	// the value the day rows are shrunk toward (a matrix factorisation of
	// users × items to begin with), the others random day rows.
	Starts int
	// Biases adds a global mean and user, item and day biases to the
	// model (ALS, DP-SGD): x̂ = μ + α_i + β_j + γ_k + tensor term.
	Biases bool
	// BiasDamping is λ_b, the biases' ridge in pseudo-observations (ALS);
	// DP-SGD's biases decay by λ per visit like the factors.
	BiasDamping float64
	// Precondition divides DP-SGD's noisy gradient sum, parameter by
	// parameter, by the diagonal Gauss–Newton curvature of the batch plus
	// the ridge (post-processing: the curvature depends on positions and
	// released parameters only), instead of a fixed learning rate.
	Precondition bool
	// InitScale is the standard deviation of the N(0, InitScale²) initial
	// factor (and core) entries.
	InitScale float64
	// Workers is 1 or 2 goroutines (0: 2). Results do not depend on it.
	Workers int

	Mechanism      Mechanism
	Epsilon, Delta float64
	// Instrument, when set, is attached to every mechanism of the run
	// (mechanism.Instrument: an audit's noise factor and tap); nil for
	// releases.
	Instrument *mechanism.Instrument
	// Clip is m for GP, L for OP, the per-entry clip for DP-SGD.
	Clip float64
	// Lo and Hi bound the data values (IP's sensitivity is Hi − Lo; values
	// are clamped into [Lo, Hi] before noise so that the bound holds).
	Lo, Hi float64
	// ClampNoisy clamps IP's noisy values back into [Lo, Hi] (the seed's
	// optional clamp; post-processing).
	ClampNoisy bool
	// Batch is DP-SGD's batch size (0: all training entries, one step per pass).
	Batch int
	// CentreEps, when positive, centres DP-SGD's training values on a
	// private estimate of their mean: the sum of the values clamped to
	// [Lo, Hi] is released with Laplace noise for ε = CentreEps, divided
	// by the (public) number of entries, subtracted before training and
	// stored as the model's Offset. The whole run still gives the
	// requested (ε, δ): DP-SGD gets the zCDP budget that remains.
	CentreEps float64
}

// Defaults returns the default settings: ALS with a global mean and
// user, item and day biases (damped by 5 pseudo-observations), rank 3,
// day rows shrunk toward a constant day profile, λ chosen from 100, 30,
// …, 0.01 (strongest first) and the number of sweeps (at most 50) on a
// 10 % validation split of the training entries, Tucker core λ_g = 1.
// They were chosen on the seed's synthetic tensors and on a random 10 %
// of MovieLens-100K's ua.base held out from the rest of it (docs/tensor.md).
func Defaults(kind tensor.Kind) Config {
	c := Config{Kind: kind, Solver: ALS, Rank: 3, Passes: 50, LR: 0.005, Lambda: 10,
		LambdaGrid: []float64{100, 30, 10, 3, 1, 0.3, 0.1, 0.03, 0.01},
		Validation: 0.1, Patience: 3, Starts: 2, Biases: true, BiasDamping: 5, InitScale: 0.5, Workers: 2, Clip: 1, Lo: 0, Hi: 1}
	if kind == tensor.Tucker {
		c.LambdaG = 1
	}
	return c
}

// DPSGDDefaults returns DP-SGD's default settings (the mechanism, ε and δ
// and the value range are the caller's): 5 passes of full-data noisy
// steps with a global mean and user, item and day biases, each
// parameter's step preconditioned by its Gauss–Newton curvature plus the
// ridge (factors λ = 100, Tucker core λ_g = 100, biases 25
// pseudo-observations), η = 0.5, clip 1 (methods sets a quarter of the
// declared scale's width). Chosen on a random 10 % of MovieLens-100K's
// ua.base held out from the rest of it.
func DPSGDDefaults(kind tensor.Kind) Config {
	c := Config{Kind: kind, Mechanism: DPSGD, Rank: 3, Passes: 5, LR: 0.5, Lambda: 100, Biases: true, BiasDamping: 25,
		Precondition: true, InitScale: 0.5, Workers: 2, Clip: 1}
	if kind == tensor.Tucker {
		c.LambdaG = 100
	}
	return c
}

// Paper returns the seed's synthetic-data settings for a decomposition,
// the faithful reproduction: per-entry SGD, no biases, rank 3, 100
// passes, initial factors N(0, 0.5²), CP λ = 0.01, η = 0.005; Tucker
// λ_o = 0.001, λ_g = 0.0001, η = 0.005.
func Paper(kind tensor.Kind) Config {
	c := Config{Kind: kind, Solver: SGD, Rank: 3, Passes: 100, LR: 0.005, Lambda: 0.01, InitScale: 0.5, Workers: 2, Clip: 1, Lo: 0, Hi: 1}
	if kind == tensor.Tucker {
		c.Lambda, c.LambdaG = 0.001, 0.0001
	}
	return c
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if err := c.validateSolver(); err != nil {
		return err
	}
	if err := c.validateMechanismSolver(); err != nil {
		return err
	}
	return c.validatePrivacy()
}

// validateSolver checks the model and solver settings.
func (c *Config) validateSolver() error {
	if _, err := tensor.ParseKind(string(c.Kind)); err != nil {
		return err
	}
	switch {
	case c.Rank <= 0 || c.Rank > 64:
		return fmt.Errorf("completion: rank %d not in 1..64", c.Rank)
	case c.Passes <= 0:
		return fmt.Errorf("completion: passes %d must be positive", c.Passes)
	case notNonNegative(c.LR) || c.LR == 0:
		return fmt.Errorf("completion: learning rate %v must be positive and finite", c.LR)
	case notNonNegative(c.Lambda) || notNonNegative(c.LambdaG):
		return fmt.Errorf("completion: regularisation λ = %v, λ_g = %v must be ≥ 0 and finite", c.Lambda, c.LambdaG)
	case notNonNegative(c.InitScale) || c.InitScale == 0:
		return fmt.Errorf("completion: init scale %v must be positive", c.InitScale)
	case c.Workers < 0 || c.Workers > 2:
		return fmt.Errorf("completion: workers %d not in 0..2", c.Workers)
	case c.Solver != "" && c.Solver != ALS && c.Solver != SGD:
		return fmt.Errorf("completion: unknown solver %q (want als or sgd)", c.Solver)
	case notNonNegative(c.BiasDamping):
		return fmt.Errorf("completion: bias damping %v must be ≥ 0 and finite", c.BiasDamping)
	case !(c.Validation >= 0 && c.Validation <= 0.5):
		return fmt.Errorf("completion: validation fraction %v not in [0, 0.5]", c.Validation)
	case c.Patience < 0:
		return fmt.Errorf("completion: patience %d must be ≥ 0", c.Patience)
	case len(c.LambdaGrid) > 1 && c.Validation == 0:
		return fmt.Errorf("completion: choosing λ from %d candidates needs a validation fraction > 0", len(c.LambdaGrid))
	}
	for _, l := range c.LambdaGrid {
		if notNonNegative(l) {
			return fmt.Errorf("completion: candidate λ = %v must be ≥ 0 and finite", l)
		}
	}
	return nil
}

// validateMechanismSolver checks that the solver settings suit the
// mechanism.
func (c *Config) validateMechanismSolver() error {
	if c.Mechanism != DPSGD && c.solver() == SGD && c.Biases {
		return fmt.Errorf("completion: biases need the ALS solver (or DP-SGD); the SGD solver is the seed's, without biases")
	}
	switch c.Mechanism {
	case GP, OP:
		if c.solver() != SGD {
			return fmt.Errorf("completion: %s is defined on the seed's SGD; set the solver to sgd", c.Mechanism)
		}
		if c.Validation > 0 || len(c.LambdaGrid) > 1 {
			return fmt.Errorf("completion: %s trains on the raw ratings; no validation or λ grid", c.Mechanism)
		}
	case DPSGD:
		if c.Validation > 0 || len(c.LambdaGrid) > 1 {
			return fmt.Errorf("completion: DP-SGD cannot choose λ or stop on held-out private ratings without spending privacy; set validation 0 and one λ")
		}
	}
	return nil
}

// validatePrivacy checks a private mechanism's settings.
func (c *Config) validatePrivacy() error {
	switch c.Mechanism {
	case NoMechanism:
		return nil
	case IP, GP, OP, DPSGD:
	default:
		return fmt.Errorf("completion: unknown mechanism %q", c.Mechanism)
	}
	if !(c.Epsilon >= 0x1p-50) || math.IsInf(c.Epsilon, 0) {
		return fmt.Errorf("completion: ε = %v must be finite and at least 2^-50", c.Epsilon)
	}
	switch c.Mechanism {
	case IP:
		if !finiteRange(c.Lo, c.Hi) {
			return fmt.Errorf("completion: IP needs a finite value range Lo < Hi, got [%v, %v]", c.Lo, c.Hi)
		}
	case GP, OP, DPSGD:
		if notNonNegative(c.Clip) || c.Clip == 0 {
			return fmt.Errorf("completion: clip %v must be positive and finite", c.Clip)
		}
	}
	if c.Mechanism == DPSGD && !(c.Delta > 0 && c.Delta < 1) {
		return fmt.Errorf("completion: DP-SGD needs 0 < δ < 1, got %v", c.Delta)
	}
	if c.Batch < 0 {
		return fmt.Errorf("completion: batch %d must be ≥ 0", c.Batch)
	}
	if c.CentreEps != 0 {
		if c.Mechanism != DPSGD {
			return fmt.Errorf("completion: private centring (centre ε = %v) is only for DP-SGD", c.CentreEps)
		}
		if !(c.CentreEps > 0 && c.CentreEps < c.Epsilon) {
			return fmt.Errorf("completion: centre ε = %v must be in (0, ε = %v)", c.CentreEps, c.Epsilon)
		}
		if !finiteRange(c.Lo, c.Hi) {
			return fmt.Errorf("completion: private centring needs a finite value range Lo < Hi, got [%v, %v]", c.Lo, c.Hi)
		}
	}
	return nil
}

// notNonNegative reports a setting that is not a finite number ≥ 0.
func notNonNegative(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }

// finiteRange reports whether [lo, hi] is a finite range with lo < hi.
func finiteRange(lo, hi float64) bool {
	return !math.IsNaN(lo) && !math.IsNaN(hi) && !math.IsInf(lo, 0) && !math.IsInf(hi, 0) && lo < hi
}

// Model is a fitted CP or Tucker model: factor matrices A (n1 × d),
// B (n2 × d), C (n3 × d), row-major, and for Tucker the core G
// (d × d × d, index (p·d + q)·d + t), plus a constant Offset (the private
// mean of centred DP-SGD; 0 otherwise).
//
// With biases (Config.Biases), Offset is the global mean μ and BA, BB, BC
// are the user, item and day biases α, β, γ (lengths Dims[0], Dims[1],
// Dims[2]; nil without biases).
type Model struct {
	Kind       tensor.Kind
	Rank       int
	Dims       [3]int
	A, B, C    []float64
	G          []float64
	Offset     float64
	BA, BB, BC []float64
}

// Predict is the model value at (i, j, k).
func (m *Model) Predict(i, j, k int) float64 {
	d := m.Rank
	v := m.Offset + tensor.Eval(m.Kind, d, m.A[i*d:i*d+d], m.B[j*d:j*d+d], m.C[k*d:k*d+d], m.G)
	if m.BA != nil {
		v += m.BA[i] + m.BB[j] + m.BC[k]
	}
	return v
}

// RMSE is the root mean squared error of the model on t's entries.
func (m *Model) RMSE(t *tensor.Tensor) float64 {
	if t.Len() == 0 {
		return math.NaN()
	}
	var s float64
	for e := range t.Len() {
		r := t.Val[e] - m.Predict(int(t.I[e]), int(t.J[e]), int(t.K[e]))
		s += r * r
	}
	return math.Sqrt(s / float64(t.Len()))
}

// Info reports what a training run did. Every field is a hyper-parameter,
// a count of (public) positions, or a noised-and-accounted value: the
// solver keeps no un-noised diagnostic of the private values (no training
// loss, no share of clipped gradients), so Info may be printed in full.
type Info struct {
	// Updates is the number of per-entry updates (passes × entries), or for
	// DP-SGD the number of noisy batch steps.
	Updates int `json:"updates"`
	// NoiseScale is IP's Laplace scale, GP's and OP's ℓ2-Laplace scale
	// (Δ/ε), or DP-SGD's noise standard deviation (σ·Clip).
	NoiseScale float64 `json:"noise_scale,omitempty"`
	// Sensitivity is the Δ the noise was calibrated to.
	Sensitivity float64 `json:"sensitivity,omitempty"`
	// Sigma is DP-SGD's noise multiplier, Rho its total zCDP.
	Sigma float64 `json:"sigma,omitempty"`
	Rho   float64 `json:"rho,omitempty"`
	Batch int     `json:"batch,omitempty"`
	// Offset is the private mean subtracted by centred DP-SGD.
	Offset float64 `json:"offset,omitempty"`
	// Lambda is the λ the model was fitted with (chosen on the validation
	// entries when Config.LambdaGrid has candidates); Sweeps the number of
	// ALS sweeps or SGD passes of the final fit.
	Lambda float64 `json:"lambda"`
	Sweeps int     `json:"sweeps"`
	// Guarantee is what the run provably gives (Config.Guarantee).
	Guarantee privacy.Guarantee `json:"-"`
}

// Train fits a model to t. rnd drives initialisation and shuffling, nz the
// privacy noise (it must be noise.Secure() for a real release). progress,
// when non-nil, is called after each pass.
func Train(ctx context.Context, t *tensor.Tensor, cfg Config, rnd, nz *noise.Source, progress func(done, total int)) (*Model, *Info, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if t.Len() == 0 {
		return nil, nil, fmt.Errorf("completion: no training entries")
	}
	if err := t.Validate(); err != nil {
		return nil, nil, err
	}
	if rnd == nil || (cfg.Mechanism != NoMechanism && nz == nil) {
		return nil, nil, fmt.Errorf("completion: missing random source")
	}
	cal, err := cfg.calibrate(t.Dims, t.Len())
	if err != nil {
		return nil, nil, err
	}
	cal.instrument(cfg.Instrument)
	var m *Model
	if cfg.Mechanism == DPSGD || cfg.Mechanism == GP || cfg.Mechanism == OP {
		m = initModel(cfg, t.Dims, rnd) // fit draws its own (from rnd too)
	}
	info := &Info{}
	data := t
	if cfg.Mechanism == IP {
		if data, err = PerturbInput(t, cfg.Lo, cfg.Hi, cfg.ClampNoisy, cal.ip, nz); err != nil {
			return nil, nil, err
		}
		info.Sensitivity, info.NoiseScale = cfg.Hi-cfg.Lo, cal.ip.Scale()
	}
	if cfg.Mechanism == DPSGD {
		var train *tensor.Tensor
		if train, err = startDPSGD(data, cfg, cal, m, nz, info); err != nil {
			return nil, nil, err
		}
		err = trainDPSGD(ctx, train, cfg, cal, m, rnd, nz, info, progress)
	} else if cfg.Mechanism == GP || cfg.Mechanism == OP {
		info.Lambda = cfg.Lambda
		err = trainSGD(ctx, data, cfg, cal, m, rnd, nz, info, progress)
	} else {
		m, err = fit(ctx, data, cfg, cal, rnd, info, progress)
	}
	if err != nil {
		return nil, nil, err
	}
	if cfg.Mechanism == OP {
		info.Sensitivity, info.NoiseScale = OPSensitivity(cfg), cal.op.Scale()
		if err := PerturbOutput(m, cal.op, nz); err != nil {
			return nil, nil, err
		}
	}
	if !m.finite() {
		return nil, nil, errDiverged(cfg)
	}
	if info.Guarantee, err = cfg.guarantee(cal, t); err != nil {
		return nil, nil, err
	}
	if cfg.Mechanism == DPSGD {
		info.Rho = info.Guarantee.Rho
	}
	return m, info, nil
}

// startDPSGD sets DP-SGD's starting point: flat day rows when
// preconditioned, μ mid-scale (a declared fact) or, with private
// centring, the privately released mean. It returns the tensor to train
// on: the centred one when centring without biases (with biases μ is a
// parameter, started at the private mean).
func startDPSGD(data *tensor.Tensor, cfg Config, cal *calibration, m *Model, nz *noise.Source, info *Info) (*tensor.Tensor, error) {
	if cfg.Precondition {
		flatDays(m)
	}
	if cfg.Biases && cfg.Lo < cfg.Hi {
		m.Offset = (cfg.Lo + cfg.Hi) / 2
	}
	if cal.centre == nil {
		return data, nil
	}
	centred, offset, err := centre(data, cfg.Lo, cfg.Hi, cal.centre, nz)
	if err != nil {
		return nil, err
	}
	m.Offset, info.Offset = offset, offset
	if !cfg.Biases {
		return centred, nil
	}
	return data, nil
}

// finite reports whether every parameter of m is finite.
func (m *Model) finite() bool {
	for _, f := range [][]float64{m.A, m.B, m.C, m.G, m.BA, m.BB, m.BC, {m.Offset}} {
		for _, v := range f {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}

// errDiverged is the error of a run whose parameters became non-finite.
func errDiverged(cfg Config) error {
	hint := ""
	if cfg.Mechanism != NoMechanism {
		hint = " or raise ε"
	}
	return fmt.Errorf("completion: SGD diverged (non-finite parameters); lower the learning rate%s", hint)
}

func initModel(cfg Config, dims [3]int, rnd *noise.Source) *Model {
	d := cfg.Rank
	m := &Model{Kind: cfg.Kind, Rank: d, Dims: dims}
	fill := func(n int) []float64 {
		f := make([]float64, n)
		for x := range f {
			f[x] = cfg.InitScale * rnd.NormFloat64()
		}
		return f
	}
	m.A, m.B, m.C = fill(dims[0]*d), fill(dims[1]*d), fill(dims[2]*d)
	if cfg.Kind == tensor.Tucker {
		m.G = fill(d * d * d)
	}
	if cfg.Biases {
		m.BA, m.BB, m.BC = make([]float64, dims[0]), make([]float64, dims[1]), make([]float64, dims[2])
	}
	return m
}

// flatDays sets every day row to the value the day rows are shrunk toward
// (dayPrior): the model then starts as a matrix factorisation of users ×
// items.
func flatDays(m *Model) {
	d := m.Rank
	for k := range m.Dims[2] {
		for r := range d {
			m.C[k*d+r] = dayPrior(m.Kind, r)
		}
	}
}

// solver is the configured solver (ALS when unset).
func (c Config) solver() Solver {
	if c.Solver == "" {
		return ALS
	}
	return c.Solver
}

// PerturbInput is IP (seed Algorithm 1): every observed value is clamped
// into [lo, hi] (so one value can change by at most Δ = hi − lo) and
// released through mech, a lattice Laplace mechanism calibrated to Δ for
// at least t.Len() coordinates; with clamp, the noisy value is clamped back
// into [lo, hi] (post-processing). It returns the noisy copy.
func PerturbInput(t *tensor.Tensor, lo, hi float64, clamp bool, mech *mechanism.Laplace, nz *noise.Source) (*tensor.Tensor, error) {
	out := t.Clone()
	for e, v := range out.Val {
		out.Val[e] = min(max(v, lo), hi)
	}
	if err := mech.Release(nz, out.Val); err != nil {
		return nil, fmt.Errorf("completion: input perturbation: %w", err)
	}
	if clamp {
		for e, v := range out.Val {
			out.Val[e] = min(max(v, lo), hi)
		}
	}
	return out, nil
}

// centre returns t's values minus a private estimate of their mean: the
// sum of the values clamped to [lo, hi] (ℓ1 sensitivity hi − lo when one
// value changes) released through mech, divided by the public count.
func centre(t *tensor.Tensor, lo, hi float64, mech *mechanism.Laplace, nz *noise.Source) (*tensor.Tensor, float64, error) {
	var sum float64
	for _, v := range t.Val {
		sum += min(max(v, lo), hi)
	}
	noisy, err := mech.ReleaseScalar(nz, sum)
	if err != nil {
		return nil, 0, fmt.Errorf("completion: private mean: %w", err)
	}
	mean := min(max(noisy/float64(t.Len()), lo), hi)
	out := t.Clone()
	for e := range out.Val {
		out.Val[e] -= mean
	}
	return out, mean, nil
}

// OPSensitivity is the seed's output-perturbation sensitivity
// Δ = 2·τ·L·η (Lemma 3 with τ passes, L = Clip, η = LR).
func OPSensitivity(cfg Config) float64 { return 2 * float64(cfg.Passes) * cfg.Clip * cfg.LR }

// PerturbOutput is OP's release step (seed Algorithm 3): every row of C is
// released through mech, an ℓ2 Laplace mechanism (density ∝ exp(−ε‖n‖/Δ))
// of dimension m.Rank.
func PerturbOutput(m *Model, mech *mechanism.L2Laplace, nz *noise.Source) error {
	d := m.Rank
	for k := range m.Dims[2] {
		if err := mech.Release(nz, m.C[k*d:k*d+d]); err != nil {
			return fmt.Errorf("completion: output perturbation of row %d of C: %w", k, err)
		}
	}
	return nil
}

// clipTo shortens g to ℓ2 norm at most c (g ← g / max(1, ‖g‖/c)) and
// reports whether it did.
func clipTo(g []float64, c float64) bool {
	var s float64
	for _, v := range g {
		s += v * v
	}
	if s <= c*c {
		return false
	}
	f := c / math.Sqrt(s)
	for i := range g {
		g[i] *= f
	}
	return true
}

// entry is one training value with its position, packed so that a
// block's entries are read sequentially after they are shuffled in place
// (shuffling indices into the tensor's coordinate slices instead costs a
// cache miss per entry on MovieLens-sized data).
type entry struct {
	i, j, k int32
	v       float64
}

// plan is the stratified visiting order: blocks[b] holds the entries of
// block b = 4·g1 + 2·g2 + g3, where g_m is the half of mode m.
type plan struct{ blocks [8][]entry }

// strata pairs blocks that share no index in any mode.
var strata = [4][2]int{{0, 7}, {1, 6}, {2, 5}, {3, 4}}

func makePlan(t *tensor.Tensor) *plan {
	var cut [3]int32
	for mode, idx := range [3][]int32{t.I, t.J, t.K} {
		counts := make([]int, t.Dims[mode])
		for _, i := range idx {
			counts[i]++
		}
		// first index where the cumulative count reaches half
		half, acc := (t.Len()+1)/2, 0
		cut[mode] = int32(t.Dims[mode])
		for i, c := range counts {
			acc += c
			if acc >= half {
				cut[mode] = int32(i + 1)
				break
			}
		}
	}
	p := &plan{}
	for e := range t.Len() {
		b := 0
		if t.I[e] >= cut[0] {
			b += 4
		}
		if t.J[e] >= cut[1] {
			b += 2
		}
		if t.K[e] >= cut[2] {
			b++
		}
		p.blocks[b] = append(p.blocks[b], entry{t.I[e], t.J[e], t.K[e], t.Val[e]})
	}
	return p
}

// worker holds one goroutine's scratch space.
type worker struct {
	cfg      Config
	m        *Model
	g        []float64 // this block's copy of the core (Tucker)
	ga, gb   []float64
	gc       []float64
	tq       []float64
	rnd, nz  *noise.Source
	gp       *mechanism.L2Laplace // GP's per-update release of C's gradient row
	clipRows bool
}

func newWorker(cfg Config, m *Model, gp *mechanism.L2Laplace) *worker {
	d := cfg.Rank
	w := &worker{cfg: cfg, m: m, ga: make([]float64, d), gb: make([]float64, d), gc: make([]float64, d),
		tq: make([]float64, d*d), gp: gp}
	if cfg.Kind == tensor.Tucker {
		w.g = make([]float64, d*d*d)
	}
	w.clipRows = cfg.Mechanism == GP || cfg.Mechanism == OP
	return w
}

// shuffle permutes block uniformly: Fisher–Yates with Lemire's bounded
// draws (multiply-shift, rejection for exact uniformity) on 32-bit halves
// of the stream's 64-bit words. It is hand-written instead of calling
// noise.Source.Shuffle because that one's swap closure and one 64-bit draw
// per element took a third of a rank-3 Tucker pass (CPU profile of
// Benchmark100Passes); blocks are far below 2^32 entries.
func shuffle(src *noise.Source, block []entry) {
	var word uint64
	half := false
	next := func() uint32 {
		if half {
			half = false
			return uint32(word >> 32)
		}
		word, half = src.Uint64(), true
		return uint32(word)
	}
	for i := len(block) - 1; i > 0; i-- {
		n := uint32(i + 1)
		m := uint64(next()) * uint64(n)
		if uint32(m) < n {
			for t := -n % n; uint32(m) < t; {
				m = uint64(next()) * uint64(n)
			}
		}
		j := m >> 32
		block[i], block[j] = block[j], block[i]
	}
}

// run processes one block in a random order.
func (w *worker) run(ctx context.Context, block []entry) error {
	shuffle(w.rnd, block)
	for lo := 0; lo < len(block); lo += 4096 {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := block[lo:min(lo+4096, len(block))]
		var err error
		switch {
		case w.cfg.Kind == tensor.CP:
			err = w.runCP(chunk)
		case w.cfg.Rank == 3:
			err = w.runTucker3(chunk)
		default:
			err = w.runTucker(chunk)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// updateC applies the gradient row g of c (the loss's gradient, to be
// subtracted): GP and OP clip it, GP releases it through the ℓ2 Laplace
// mechanism.
func (w *worker) updateC(c, g []float64) error {
	if w.clipRows {
		clipTo(g, w.cfg.Clip)
		if w.gp != nil {
			if err := w.gp.Release(w.nz, g); err != nil {
				if errors.Is(err, mechanism.ErrData) {
					return errDiverged(w.cfg)
				}
				return fmt.Errorf("completion: gradient perturbation: %w", err)
			}
		}
	}
	eta := w.cfg.LR
	for r := range c {
		c[r] -= eta * g[r]
	}
	return nil
}

func (w *worker) runCP(block []entry) error {
	m, d := w.m, w.cfg.Rank
	lam, eta := w.cfg.Lambda, w.cfg.LR
	gc := w.gc[:d]
	for _, x := range block {
		a, b, c := m.A[int(x.i)*d:][:d], m.B[int(x.j)*d:][:d], m.C[int(x.k)*d:][:d]
		var pred float64
		for r := range d {
			pred += a[r] * b[r] * c[r]
		}
		err := x.v - pred
		for r := range d {
			gc[r] = -err*a[r]*b[r] + lam*c[r]
			ga := -err*b[r]*c[r] + lam*a[r]
			gb := -err*a[r]*c[r] + lam*b[r]
			a[r] -= eta * ga
			b[r] -= eta * gb
		}
		if err := w.updateC(c, gc); err != nil {
			return err
		}
	}
	return nil
}

// runTucker is the Tucker step for any rank. One sweep over the core
// gives t_pq = Σ_t g_pqt c_t, ∂x̂/∂c and the prediction; a second applies
// the core's update. The partial derivatives use the old a, b, c and G:
//
//	∂x̂/∂a_p = Σ_q t_pq b_q,  ∂x̂/∂b_q = Σ_p a_p t_pq,
//	∂x̂/∂c_t = Σ_pq a_p b_q g_pqt,  ∂x̂/∂g_pqt = a_p b_q c_t.
func (w *worker) runTucker(block []entry) error {
	m, d := w.m, w.cfg.Rank
	G, tq := w.g[:d*d*d], w.tq[:d*d]
	ga, gb, gc := w.ga[:d], w.gb[:d], w.gc[:d]
	lo, eta := w.cfg.Lambda, w.cfg.LR
	decayG := 1 - eta*w.cfg.LambdaG
	for _, x := range block {
		a, b, c := m.A[int(x.i)*d:][:d], m.B[int(x.j)*d:][:d], m.C[int(x.k)*d:][:d]
		clear(gc)
		var pred float64
		for p := range d {
			for q := range d {
				ab := a[p] * b[q]
				row := G[(p*d+q)*d:][:d]
				var s float64
				for r, g := range row {
					s += g * c[r]
					gc[r] += ab * g
				}
				tq[p*d+q] = s
				pred += ab * s
			}
		}
		contractCore(d, tq, a, b, ga, gb)
		err := x.v - pred
		ee := eta * err
		for p := range d {
			for q := range d {
				f := ee * a[p] * b[q]
				row := G[(p*d+q)*d:][:d]
				for r := range row {
					row[r] = decayG*row[r] + f*c[r]
				}
			}
		}
		for r := range d {
			gc[r] = -err*gc[r] + lo*c[r]
			a[r] -= eta * (-err*ga[r] + lo*a[r])
			b[r] -= eta * (-err*gb[r] + lo*b[r])
		}
		if err := w.updateC(c, gc); err != nil {
			return err
		}
	}
	return nil
}

// runTucker3 is runTucker for rank 3 (the seed's setting) written out on
// fixed-size arrays, so that the compiler drops the bounds checks and keeps
// the 27 core values and the partial sums in registers and L1. Every sum is
// formed in the same order as in runTucker, so both give bit-identical
// models (tested).
func (w *worker) runTucker3(block []entry) error {
	m := w.m
	G := (*[27]float64)(w.g)
	gcs := w.gc[:3]
	lo, eta := w.cfg.Lambda, w.cfg.LR
	decayG := 1 - eta*w.cfg.LambdaG
	for _, x := range block {
		a := (*[3]float64)(m.A[int(x.i)*3:][:3])
		b := (*[3]float64)(m.B[int(x.j)*3:][:3])
		c := (*[3]float64)(m.C[int(x.k)*3:][:3])
		var tq [9]float64
		var gc [3]float64
		var pred float64
		for p := range 3 {
			for q := range 3 {
				ab := a[p] * b[q]
				o := (p*3 + q) * 3
				g0, g1, g2 := G[o], G[o+1], G[o+2]
				s := g0*c[0] + g1*c[1] + g2*c[2]
				gc[0] += ab * g0
				gc[1] += ab * g1
				gc[2] += ab * g2
				tq[p*3+q] = s
				pred += ab * s
			}
		}
		var ga, gb [3]float64
		for p := range 3 {
			ga[p] = tq[p*3]*b[0] + tq[p*3+1]*b[1] + tq[p*3+2]*b[2]
		}
		for q := range 3 {
			gb[q] = a[0]*tq[q] + a[1]*tq[3+q] + a[2]*tq[6+q]
		}
		err := x.v - pred
		ee := eta * err
		for p := range 3 {
			for q := range 3 {
				f := ee * a[p] * b[q]
				o := (p*3 + q) * 3
				G[o] = decayG*G[o] + f*c[0]
				G[o+1] = decayG*G[o+1] + f*c[1]
				G[o+2] = decayG*G[o+2] + f*c[2]
			}
		}
		for r := range 3 {
			gcs[r] = -err*gc[r] + lo*c[r]
			a[r] -= eta * (-err*ga[r] + lo*a[r])
			b[r] -= eta * (-err*gb[r] + lo*b[r])
		}
		if err := w.updateC(c[:], gcs); err != nil {
			return err
		}
	}
	return nil
}

// sgdSolver runs passes of the seed's per-entry SGD.
type sgdSolver struct {
	cfg      Config
	m        *Model
	p        *plan
	ws       [2]*worker
	rnd, nz  *noise.Source
	parallel bool
}

func newSGD(t *tensor.Tensor, cfg Config, cal *calibration, m *Model, rnd, nz *noise.Source) *sgdSolver {
	return &sgdSolver{cfg: cfg, m: m, p: makePlan(t), ws: [2]*worker{newWorker(cfg, m, cal.gp), newWorker(cfg, m, cal.gp)},
		rnd: rnd, nz: nz, parallel: cfg.Workers != 1}
}

// sweep is one pass over the training entries.
func (s *sgdSolver) sweep(ctx context.Context) error {
	m, ws, p := s.m, s.ws, s.p
	for _, st := range s.rnd.Perm(len(strata)) {
		for _, w := range ws {
			w.rnd = s.rnd.Split()
			if s.cfg.Mechanism == GP {
				w.nz = s.nz.Split()
			}
			if w.g != nil {
				copy(w.g, m.G)
			}
		}
		var errs [2]error
		if s.parallel {
			var wg sync.WaitGroup
			for h, w := range ws {
				wg.Go(func() { errs[h] = w.run(ctx, p.blocks[strata[st][h]]) })
			}
			wg.Wait()
		} else {
			for h, w := range ws {
				errs[h] = w.run(ctx, p.blocks[strata[st][h]])
			}
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		if m.G != nil { // G ← G + ΔG₀ + ΔG₁
			for x := range m.G {
				m.G[x] = ws[0].g[x] + ws[1].g[x] - m.G[x]
			}
		}
	}
	return nil
}

func trainSGD(ctx context.Context, t *tensor.Tensor, cfg Config, cal *calibration, m *Model, rnd, nz *noise.Source, info *Info, progress func(done, total int)) error {
	s := newSGD(t, cfg, cal, m, rnd, nz)
	for pass := range cfg.Passes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.sweep(ctx); err != nil {
			return err
		}
		if progress != nil {
			progress(pass+1, cfg.Passes)
		}
	}
	info.Updates = cfg.Passes * t.Len()
	info.Sweeps = cfg.Passes
	if cfg.Mechanism == GP {
		info.Sensitivity = 2 * cfg.Clip
		info.NoiseScale = cal.gp.Scale()
	}
	return nil
}
