package methods

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/privrec/privrec/metrics"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/tensor"
	"github.com/privrec/privrec/tensor/completion"
)

// Tensor completion (seed 004): users × items × day, CP or Tucker, with
// input (IP), gradient (GP) and output (OP) perturbation as the seed
// calibrates them, and a sound DP-SGD variant. The public artefact is the
// tensor model file (completion.File); the neighbouring relation of the
// proven guarantees is privacy.RelationRatingValue (one rating's value
// changes; which (user, item, day) positions are rated is public).
//
// The non-private methods and IP fit by ALS with a global mean and user,
// item and day biases, choosing λ and the number of sweeps on a
// validation split of the training entries (IP: of the noisy ones, so the
// choice is post-processing); GP and OP are defined on the seed's SGD and
// keep it; DP-SGD keeps its clipped-gradient Gaussian steps, with biases
// and a preconditioned step. The seed's settings stay reachable through
// the parameters (docs/tensor.md, "Reproducing the seed").
func init() {
	type variant struct {
		suffix string
		mech   completion.Mechanism
		what   string
		needs  []string
		cp     func() Config
		tucker func() Config
	}
	variants := []variant{
		{"", completion.NoMechanism, "non-private, by ALS with biases (λ chosen on a validation split)", nil,
			func() Config { return &CPConfig{tensorDefaults(), fitDefaults()} },
			func() Config { return &TuckerConfig{tensorDefaults(), fitDefaults(), alsCore()} }},
		{"-ip", completion.IP, "input perturbation (Laplace on each rating clamped to the declared --scale; ε-DP per rating value, proven), then ALS on the noisy ratings", []string{"scale"},
			func() Config { return &CPIPConfig{tensorDefaults(), fitDefaults(), IPOptions{Clamp: true}} },
			func() Config {
				return &TuckerIPConfig{tensorDefaults(), fitDefaults(), alsCore(), IPOptions{Clamp: true}}
			}},
		{"-gp", completion.GP, "the seed's SGD with gradient perturbation on C as the seed calibrates it (A, B released un-noised: no guarantee)", nil,
			func() Config { return &CPGPConfig{tensorDefaults(), sgdDefaults(tensor.CP), GPOptions{Clip: 1}} },
			func() Config {
				return &TuckerGPConfig{tensorDefaults(), sgdDefaults(tensor.Tucker), paperCore(), GPOptions{Clip: 1}}
			}},
		{"-op", completion.OP, "the seed's SGD with output perturbation on C as the seed calibrates it (A, B released un-noised: no guarantee)", nil,
			func() Config { return &CPOPConfig{tensorDefaults(), sgdDefaults(tensor.CP), OPOptions{Clip: 1}} },
			func() Config {
				return &TuckerOPConfig{tensorDefaults(), sgdDefaults(tensor.Tucker), paperCore(), OPOptions{Clip: 1}}
			}},
		{"-dpsgd", completion.DPSGD, "DP-SGD over all parameters and biases, zCDP-accounted ((ε, δ) per rating value, proven)", nil,
			func() Config { return &CPDPSGDConfig{tensorDefaults(), dpsgdDefaults()} },
			func() Config {
				return &TuckerDPSGDConfig{tensorDefaults(), dpsgdDefaults(), TuckerOptions{LambdaG: completion.DPSGDDefaults(tensor.Tucker).LambdaG}}
			}},
	}
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		for _, v := range variants {
			newCfg := v.cp
			if kind == tensor.Tucker {
				newCfg = v.tucker
			}
			Register(&Method{
				Name:    string(kind) + v.suffix,
				Summary: fmt.Sprintf("%s tensor completion (users × items × day), %s", strings.ToUpper(string(kind)[:1])+string(kind)[1:], v.what),
				Seed:    "004",
				Private: v.mech != completion.NoMechanism,
				Needs:   v.needs,
				New:     newCfg,
			})
		}
	}
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		RegisterEvaluator(string(kind), evaluateTensorFile)
	}
}

// TensorOptions are the settings every tensor-completion method shares.
type TensorOptions struct {
	Rank int     `json:"rank" flag:"rank" help:"rank d (CP components; Tucker core d × d × d)"`
	Init float64 `json:"init" flag:"init" help:"standard deviation of the random initial factors"`
	// BiScale is the seed's MovieLens setting; its statistics are computed
	// from the private ratings without noise, so with it no method has a
	// guarantee (status none, the note says why).
	BiScale      bool `json:"biscale" flag:"biscale" help:"bi-scale each day slice before training (the seed's MovieLens setting; the per-day user and item means and scales are computed from the ratings without noise and stored in the model, so the model has no privacy guarantee)"`
	BiScaleIters int  `json:"biscale_iters" flag:"biscale-iters" help:"alternating rounds of the bi-scaling"`
	ItemDay      bool `json:"item_day" flag:"item-day" help:"item IDs carry a day tag (\"17@3\", as written by privrec data synth-tensor); merge them per item"`
}

// FitOptions are the solver settings of the non-private methods and IP.
type FitOptions struct {
	Solver      string    `json:"solver" flag:"solver" help:"als (alternating ridge regression, the default) or sgd (the seed's per-entry SGD, without biases)"`
	Passes      int       `json:"passes" flag:"passes" help:"ALS sweeps or SGD passes (with --validation: the most that are run)"`
	LR          float64   `json:"lr" flag:"lr" help:"SGD learning rate η (--solver sgd)"`
	Lambda      []float64 `json:"lambda" flag:"lambda" help:"ridge λ of the factors (ALS: per row, in pseudo-observations; SGD: the seed's decay per visit); several values are candidates, chosen on the validation split, tried in the order given (default 100,30,10,3,1,0.3,0.1,0.03,0.01)"`
	Validation  float64   `json:"validation" flag:"validation" help:"fraction of the training ratings held out to choose λ and the number of sweeps (then refitted on all; 0: none, the first λ and --passes sweeps)"`
	Starts      int       `json:"starts" flag:"starts" help:"ALS initial models tried with --validation (the first starts as a matrix factorisation, the others from random day factors)"`
	Biases      bool      `json:"biases" flag:"biases" help:"add a global mean and user, item and day biases to the tensor model (ALS)"`
	BiasDamping float64   `json:"bias_damping" flag:"bias-damping" help:"ridge of the biases, in pseudo-observations"`
}

// SGDOptions are the settings of the seed's SGD, on which GP and OP are
// defined.
type SGDOptions struct {
	Passes int     `json:"passes" flag:"passes" help:"passes of SGD over the training entries"`
	LR     float64 `json:"lr" flag:"lr" help:"learning rate η"`
	Lambda float64 `json:"lambda" flag:"lambda" help:"regularisation λ of the factors (Tucker: λ_o), a decay per visit of a row"`
}

// TuckerOptions are the Tucker methods' own settings.
type TuckerOptions struct {
	LambdaG float64 `json:"lambda_g" flag:"lambda-g" help:"regularisation λ_g of the core (ALS: a ridge in pseudo-observations; SGD: a decay per update)"`
}

// IPOptions are input perturbation's settings.
type IPOptions struct {
	Clamp bool `json:"clamp" flag:"clamp" help:"clamp the noisy ratings back into the declared scale (post-processing)"`
}

// GPOptions are gradient perturbation's settings.
type GPOptions struct {
	Clip float64 `json:"clip" flag:"clip" help:"clipping constant m of C's gradient rows (Δ = 2m)"`
}

// OPOptions are output perturbation's settings.
type OPOptions struct {
	Clip float64 `json:"clip" flag:"clip" help:"Lipschitz constant L, enforced by clipping C's gradient rows (Δ = 2·passes·L·η)"`
}

// DPSGDOptions are DP-SGD's settings. The defaults were chosen on a
// random 10 % of MovieLens-100K's ua.base held out from the rest; the
// seed-era DP-SGD is --passes 100 --lr 0.005 --lambda 0.01 --clip 0.3
// --biases=false --precondition=false (Tucker --lambda 0.001 --lambda-g
// 0.0001).
type DPSGDOptions struct {
	Passes       int     `json:"passes" flag:"passes" help:"passes of noisy full-data steps (each pass costs an equal share of the budget)"`
	LR           float64 `json:"lr" flag:"lr" help:"step size η (with --precondition: the fraction of the preconditioned step taken)"`
	Lambda       float64 `json:"lambda" flag:"lambda" help:"ridge λ of the factors (with --precondition: in curvature units; without: a decay per visit)"`
	Clip         float64 `json:"clip" flag:"clip" help:"per-entry gradient clip, ℓ2 norm over all parameters (0: a quarter of the declared --scale's width, 1 without a declared scale)"`
	Batch        int     `json:"batch" flag:"batch" help:"entries per noisy step (0: all, one step per pass)"`
	CentreEps    float64 `json:"centre_eps" flag:"centre-eps" help:"spend this part of ε on a private mean of the ratings (clamped to the declared --scale): without --biases the values are centred on it, with them it starts μ (0: no private mean; μ starts mid-scale); the total stays ε"`
	Biases       bool    `json:"biases" flag:"biases" help:"add a global mean and user, item and day biases, trained by the same noisy steps"`
	BiasDamping  float64 `json:"bias_damping" flag:"bias-damping" help:"ridge of the biases (with --precondition), in pseudo-observations"`
	Precondition bool    `json:"precondition" flag:"precondition" help:"divide each parameter's noisy gradient sum by its Gauss–Newton curvature plus the ridge (computed from positions and released parameters only: post-processing)"`
}

func alsCore() TuckerOptions {
	return TuckerOptions{LambdaG: completion.Defaults(tensor.Tucker).LambdaG}
}
func paperCore() TuckerOptions {
	return TuckerOptions{LambdaG: completion.Paper(tensor.Tucker).LambdaG}
}

func tensorDefaults() TensorOptions { return TensorOptions{Rank: 3, Init: 0.5, BiScaleIters: 10} }

func fitDefaults() FitOptions {
	d := completion.Defaults(tensor.CP)
	return FitOptions{Solver: string(d.Solver), Passes: d.Passes, LR: d.LR, Lambda: append([]float64(nil), d.LambdaGrid...),
		Validation: d.Validation, Starts: d.Starts, Biases: d.Biases, BiasDamping: d.BiasDamping}
}

func sgdDefaults(kind tensor.Kind) SGDOptions {
	d := completion.Paper(kind)
	return SGDOptions{Passes: d.Passes, LR: d.LR, Lambda: d.Lambda}
}

func dpsgdDefaults() DPSGDOptions {
	d := completion.DPSGDDefaults(tensor.CP)
	return DPSGDOptions{Passes: d.Passes, LR: d.LR, Lambda: d.Lambda, Biases: d.Biases, BiasDamping: d.BiasDamping, Precondition: d.Precondition}
}

// CPConfig configures cp (non-private).
type CPConfig struct {
	TensorOptions
	FitOptions
}

// TuckerConfig configures tucker (non-private).
type TuckerConfig struct {
	TensorOptions
	FitOptions
	TuckerOptions
}

// CPIPConfig configures cp-ip.
type CPIPConfig struct {
	TensorOptions
	FitOptions
	IPOptions
}

// TuckerIPConfig configures tucker-ip.
type TuckerIPConfig struct {
	TensorOptions
	FitOptions
	TuckerOptions
	IPOptions
}

// CPGPConfig configures cp-gp.
type CPGPConfig struct {
	TensorOptions
	SGDOptions
	GPOptions
}

// TuckerGPConfig configures tucker-gp.
type TuckerGPConfig struct {
	TensorOptions
	SGDOptions
	TuckerOptions
	GPOptions
}

// CPOPConfig configures cp-op.
type CPOPConfig struct {
	TensorOptions
	SGDOptions
	OPOptions
}

// TuckerOPConfig configures tucker-op.
type TuckerOPConfig struct {
	TensorOptions
	SGDOptions
	TuckerOptions
	OPOptions
}

// CPDPSGDConfig configures cp-dpsgd.
type CPDPSGDConfig struct {
	TensorOptions
	DPSGDOptions
}

// TuckerDPSGDConfig configures tucker-dpsgd.
type TuckerDPSGDConfig struct {
	TensorOptions
	DPSGDOptions
	TuckerOptions
}

func (o FitOptions) apply(c *completion.Config) {
	c.Solver, c.Passes, c.LR = completion.Solver(o.Solver), o.Passes, o.LR
	if len(o.Lambda) > 0 {
		c.Lambda = o.Lambda[0]
	}
	if len(o.Lambda) > 1 {
		c.LambdaGrid = append([]float64(nil), o.Lambda...)
	}
	c.Validation, c.Starts, c.Biases, c.BiasDamping = o.Validation, o.Starts, o.Biases, o.BiasDamping
}

func (o SGDOptions) apply(c *completion.Config) {
	c.Solver, c.Passes, c.LR, c.Lambda = completion.SGD, o.Passes, o.LR, o.Lambda
}

func (o DPSGDOptions) apply(c *completion.Config) {
	c.Passes, c.LR, c.Lambda, c.Clip, c.Batch, c.CentreEps = o.Passes, o.LR, o.Lambda, o.Clip, o.Batch, o.CentreEps
	c.Biases, c.BiasDamping, c.Precondition = o.Biases, o.BiasDamping, o.Precondition
}

func newSpec(kind tensor.Kind, mech completion.Mechanism, t TensorOptions, apply func(*completion.Config)) tensorSpec {
	s := tensorSpec{kind: kind, mech: mech, opt: t, cfg: completion.Config{Kind: kind, Rank: t.Rank, InitScale: t.Init, Mechanism: mech}}
	apply(&s.cfg)
	return s
}

func (c *CPConfig) spec() tensorSpec {
	s := newSpec(tensor.CP, completion.NoMechanism, c.TensorOptions, c.FitOptions.apply)
	s.fit = &c.FitOptions
	return s
}
func (c *TuckerConfig) spec() tensorSpec {
	s := newSpec(tensor.Tucker, completion.NoMechanism, c.TensorOptions, c.FitOptions.apply)
	s.cfg.LambdaG, s.fit = c.LambdaG, &c.FitOptions
	return s
}
func (c *CPIPConfig) spec() tensorSpec {
	s := newSpec(tensor.CP, completion.IP, c.TensorOptions, c.FitOptions.apply)
	s.cfg.ClampNoisy, s.fit = c.Clamp, &c.FitOptions
	return s
}
func (c *TuckerIPConfig) spec() tensorSpec {
	s := newSpec(tensor.Tucker, completion.IP, c.TensorOptions, c.FitOptions.apply)
	s.cfg.LambdaG, s.cfg.ClampNoisy, s.fit = c.LambdaG, c.Clamp, &c.FitOptions
	return s
}
func (c *CPGPConfig) spec() tensorSpec {
	s := newSpec(tensor.CP, completion.GP, c.TensorOptions, c.SGDOptions.apply)
	s.cfg.Clip = c.GPOptions.Clip
	return s
}
func (c *TuckerGPConfig) spec() tensorSpec {
	s := newSpec(tensor.Tucker, completion.GP, c.TensorOptions, c.SGDOptions.apply)
	s.cfg.LambdaG, s.cfg.Clip = c.LambdaG, c.GPOptions.Clip
	return s
}
func (c *CPOPConfig) spec() tensorSpec {
	s := newSpec(tensor.CP, completion.OP, c.TensorOptions, c.SGDOptions.apply)
	s.cfg.Clip = c.OPOptions.Clip
	return s
}
func (c *TuckerOPConfig) spec() tensorSpec {
	s := newSpec(tensor.Tucker, completion.OP, c.TensorOptions, c.SGDOptions.apply)
	s.cfg.LambdaG, s.cfg.Clip = c.LambdaG, c.OPOptions.Clip
	return s
}
func (c *CPDPSGDConfig) spec() tensorSpec {
	s := newSpec(tensor.CP, completion.DPSGD, c.TensorOptions, c.DPSGDOptions.apply)
	s.autoClip = c.Clip == 0
	return s
}
func (c *TuckerDPSGDConfig) spec() tensorSpec {
	s := newSpec(tensor.Tucker, completion.DPSGD, c.TensorOptions, c.DPSGDOptions.apply)
	s.cfg.LambdaG, s.autoClip = c.LambdaG, c.Clip == 0
	return s
}

// Validate checks the settings.
func (c *CPConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *TuckerConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *CPIPConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *TuckerIPConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *CPGPConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *TuckerGPConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *CPOPConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *TuckerOPConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *CPDPSGDConfig) Validate() error { return c.spec().validate() }

// Validate checks the settings.
func (c *TuckerDPSGDConfig) Validate() error { return c.spec().validate() }

// Train implements Config.
func (c *CPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *TuckerConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *CPIPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *TuckerIPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *CPGPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *TuckerGPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *CPOPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *TuckerOPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *CPDPSGDConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// Train implements Config.
func (c *TuckerDPSGDConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.spec().train(ctx, in, env)
}

// tensorSpec is one tensor method's settings, whatever its Config type:
// the shared options and the solver configuration they map to (without
// the budget and the value range, which train adds).
type tensorSpec struct {
	kind tensor.Kind
	mech completion.Mechanism
	opt  TensorOptions
	cfg  completion.Config
	// fit is set for the methods with FitOptions (non-private, IP).
	fit *FitOptions
	// autoClip: DP-SGD's clip follows the declared scale.
	autoClip bool
}

func (s tensorSpec) name() string {
	if s.mech == completion.NoMechanism {
		return string(s.kind)
	}
	return string(s.kind) + "-" + string(s.mech)
}

func (s tensorSpec) validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	o, c := s.opt, s.cfg
	switch {
	case o.Rank < 1 || o.Rank > 64:
		return fmt.Errorf("--rank must be in 1..64, got %d", o.Rank)
	case c.Passes < 1:
		return fmt.Errorf("--passes must be ≥ 1, got %d", c.Passes)
	case !finite(c.LR) || c.LR <= 0:
		return fmt.Errorf("--lr must be finite and > 0, got %g", c.LR)
	case !finite(c.Lambda) || c.Lambda < 0:
		return fmt.Errorf("--lambda must be finite and ≥ 0, got %g", c.Lambda)
	case !finite(c.LambdaG) || c.LambdaG < 0:
		return fmt.Errorf("--lambda-g must be finite and ≥ 0, got %g", c.LambdaG)
	case !finite(o.Init) || o.Init <= 0:
		return fmt.Errorf("--init must be finite and > 0, got %g", o.Init)
	case o.BiScale && o.BiScaleIters < 1:
		return fmt.Errorf("--biscale-iters must be ≥ 1, got %d", o.BiScaleIters)
	case !finite(c.BiasDamping) || c.BiasDamping < 0:
		return fmt.Errorf("--bias-damping must be finite and ≥ 0, got %g", c.BiasDamping)
	}
	if f := s.fit; f != nil {
		switch {
		case f.Solver != string(completion.ALS) && f.Solver != string(completion.SGD):
			return fmt.Errorf("--solver must be als or sgd, got %q", f.Solver)
		case len(f.Lambda) == 0:
			return fmt.Errorf("--lambda needs at least one value")
		case !(f.Validation >= 0 && f.Validation <= 0.5):
			return fmt.Errorf("--validation must be in [0, 0.5], got %g", f.Validation)
		case len(f.Lambda) > 1 && f.Validation == 0:
			return fmt.Errorf("several --lambda values (%d) are candidates for the validation split: set --validation > 0 or give one value", len(f.Lambda))
		case f.Starts < 1:
			return fmt.Errorf("--starts must be ≥ 1, got %d", f.Starts)
		case f.Biases && f.Solver == string(completion.SGD):
			return fmt.Errorf("--biases needs --solver als (the seed's SGD has no biases); add --biases=false")
		}
		for _, l := range f.Lambda {
			if !finite(l) || l < 0 {
				return fmt.Errorf("--lambda values must be finite and ≥ 0, got %g", l)
			}
		}
	}
	switch s.mech {
	case completion.GP, completion.OP:
		if !finite(c.Clip) || c.Clip <= 0 {
			return fmt.Errorf("--clip must be finite and > 0, got %g", c.Clip)
		}
	case completion.DPSGD:
		if !finite(c.Clip) || c.Clip < 0 {
			return fmt.Errorf("--clip must be finite and ≥ 0 (0: from the declared scale), got %g", c.Clip)
		}
	}
	if c.Batch < 0 {
		return fmt.Errorf("--batch must be ≥ 0, got %d", c.Batch)
	}
	if !finite(c.CentreEps) || c.CentreEps < 0 {
		return fmt.Errorf("--centre-eps must be finite and ≥ 0, got %g", c.CentreEps)
	}
	return nil
}

// solver is the completion configuration for a budget.
func (s tensorSpec) solver(env Env) completion.Config {
	cfg := s.cfg
	cfg.Workers = 2
	if s.mech != completion.NoMechanism {
		cfg.Epsilon, cfg.Delta = env.Epsilon, env.Delta
		cfg.Instrument = env.instrument()
	}
	if env.Workers == 1 {
		cfg.Workers = 1
	}
	return cfg
}

// train builds the users × items × day tensor, fixes the value range,
// optionally bi-scales, fits, and wraps the model file as the release.
//
// The value range. IP's sensitivity and the centring of DP-SGD are
// computed from the declared scale (--scale; refused without it): reading
// the data's minimum and maximum would put a fact of the private values
// outside the guarantee. The declared scale is also the clamp of
// predictions. Without a declared scale, DP-SGD clamps nothing, and the
// methods without a guarantee (cp, tucker, GP, OP) read the range from the
// data, which their note says.
func (s tensorSpec) train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	ti, err := s.prepare(in, env)
	if err != nil {
		return nil, err
	}
	cfg, train, scaling, err := s.configure(ti, env)
	if err != nil {
		return nil, err
	}
	m, info, err := completion.Train(ctx, train, cfg, env.Rand, env.Noise, env.Progress)
	if err != nil {
		return nil, err
	}
	g := s.guarantee(info.Guarantee, cfg, ti.notes, env)
	f := &completion.File{Method: s.name(), Params: s.params(cfg, info, ti, env), Guarantee: g,
		Users: in.Ratings.Users.Names(), Items: ti.items, Axis: ti.ax, ItemDay: s.opt.ItemDay, Lo: ti.lo, Hi: ti.hi, Model: m, Scaling: scaling}
	return &release.Release{Public: f, Guarantee: g, Report: s.report(cfg, info, ti.ax)}, nil
}

// tensorInput is a tensor method's training tensor with its day axis and
// item names, the value range [lo, hi] that clamps predictions and the
// notes the guarantee carries about them.
type tensorInput struct {
	t      *tensor.Tensor
	ax     tensor.DayAxis
	items  []string
	lo, hi float64
	notes  []string
}

// prepare checks the input, builds the users × items × day tensor and
// fixes the value range: the declared scale, or, for the methods without
// a guarantee and no declared scale, the data's (with a note).
func (s tensorSpec) prepare(in release.Input, env Env) (*tensorInput, error) {
	data := in.Ratings
	if data == nil || data.Len() == 0 {
		return nil, fmt.Errorf("no training ratings")
	}
	if s.mech == completion.DPSGD && s.cfg.CentreEps > 0 && !(s.cfg.CentreEps < env.Epsilon) {
		return nil, fmt.Errorf("--centre-eps %g must be less than --epsilon %g (it is a part of the budget)", s.cfg.CentreEps, env.Epsilon)
	}
	ti := &tensorInput{}
	switch {
	case in.Declared.Scale != nil:
		ti.lo, ti.hi = in.Declared.Scale.Min, in.Declared.Scale.Max
	case s.mech == completion.IP:
		if _, err := in.NeedScale(s.name() + " (IP's sensitivity is the width of the rating scale)"); err != nil {
			return nil, err
		}
	case s.mech == completion.DPSGD && s.cfg.CentreEps > 0:
		if _, err := in.NeedScale(s.name() + " --centre-eps (the private mean's sensitivity is the width of the rating scale)"); err != nil {
			return nil, err
		}
	}
	var err error
	if data.HasTime() {
		ti.t, ti.ax, err = tensor.FromRatings(data)
	} else {
		ti.t, ti.ax, err = tensor.FromUntimed(data)
	}
	if err != nil {
		return nil, fmt.Errorf("building the users × items × day tensor: %w", err)
	}
	ti.items = data.Items.Names()
	if s.opt.ItemDay {
		if ti.t, ti.items, err = tensor.MergeItemDays(ti.t, ti.items); err != nil {
			return nil, err
		}
	}
	if in.Declared.Scale == nil && s.mech != completion.IP && s.mech != completion.DPSGD {
		// No guarantee covers these methods' models: the data's range
		// clamps their predictions, and the note says so.
		ti.lo, ti.hi = ti.t.Range()
		if !(ti.lo < ti.hi) {
			ti.hi = ti.lo + 1
		}
		ti.notes = append(ti.notes, fmt.Sprintf("The prediction range [%g, %g] was read from the training ratings; declare --scale MIN:MAX to use a public one.", ti.lo, ti.hi))
	}
	return ti, nil
}

// configure is the solver's configuration for the budget and the value
// range, and the tensor it trains on: bi-scaled when asked (with the
// scaling, and the range then read from the scaled values).
func (s tensorSpec) configure(ti *tensorInput, env Env) (completion.Config, *tensor.Tensor, *tensor.Scaling, error) {
	cfg := s.solver(env)
	cfg.Lo, cfg.Hi = ti.lo, ti.hi
	var scaling *tensor.Scaling
	train := ti.t
	if s.opt.BiScale {
		var err error
		if train, scaling, err = tensor.BiScaleDays(ti.t, s.opt.BiScaleIters); err != nil {
			return cfg, nil, nil, err
		}
		// The value range in the scaled space (IP's sensitivity, the
		// centring's, DP-SGD's start of μ and automatic clip, the clamp
		// of the validation predictions): there is no declared scale of
		// the scaled values, so it is read from them; a private method
		// has no guarantee anyway (guarantee).
		cfg.Lo, cfg.Hi = train.Range()
		if !(cfg.Lo < cfg.Hi) {
			cfg.Hi = cfg.Lo + 1
		}
	}
	if s.autoClip {
		cfg.Clip = 1
		if cfg.Hi > cfg.Lo {
			cfg.Clip = (cfg.Hi - cfg.Lo) / 4
		}
	}
	return cfg, train, scaling, nil
}

// guarantee is the model file's guarantee: the solver's, none when a
// private method bi-scaled (the scaling is computed from the raw ratings
// without noise), with the notes appended.
func (s tensorSpec) guarantee(g privacy.Guarantee, cfg completion.Config, notes []string, env Env) privacy.Guarantee {
	if s.opt.BiScale && s.mech != completion.NoMechanism {
		inner := g
		why := "The per-day bi-scaling (--biscale: the mean of every day slice and the centre and scale of every user and item in it) is computed from the raw ratings and stored in the model without noise, and one rating changes the scaling of its whole slice row and column"
		if s.mech == completion.IP || cfg.CentreEps > 0 || s.autoClip {
			why += fmt.Sprintf("; the range of the scaled values, [%.4g, %.4g], which calibrates the noise, is read from them", cfg.Lo, cfg.Hi)
		}
		g = privacy.Guarantee{Epsilon: math.Inf(1), Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.None, ClaimedEpsilon: env.Epsilon,
			Note: why + ". So the model has no DP guarantee. With the scaled tensor regarded as the data, the mechanism gives: " + inner.String()}
	}
	for _, n := range notes {
		g.Note = strings.TrimSpace(g.Note + " " + n)
	}
	if env.Noise != nil && env.Noise.Reproducible() && s.mech != completion.NoMechanism {
		g.Reproducible = true // as methods.Train marks the release's; the file carries its own copy
	}
	return g
}

// params are the model file's hyper-parameters.
func (s tensorSpec) params(cfg completion.Config, info *completion.Info, ti *tensorInput, env Env) map[string]any {
	params := map[string]any{"rank": cfg.Rank, "passes": cfg.Passes, "lambda": info.Lambda, "init": cfg.InitScale,
		"biscale": s.opt.BiScale, "item_day": s.opt.ItemDay, "seed": env.Seed, "biases": cfg.Biases}
	if s.mech == completion.DPSGD || cfg.Solver == completion.SGD {
		params["lr"] = cfg.LR
	}
	if cfg.Biases {
		params["bias_damping"] = cfg.BiasDamping
	}
	if f := s.fit; f != nil {
		params["solver"], params["validation"], params["sweeps"] = f.Solver, f.Validation, info.Sweeps
		if len(f.Lambda) > 1 {
			params["lambda_candidates"] = f.Lambda
		}
		if f.Solver == string(completion.ALS) && f.Validation > 0 {
			params["starts"] = f.Starts
		}
	}
	if ti.hi > ti.lo {
		params["range"] = []float64{ti.lo, ti.hi}
	}
	if s.opt.BiScale {
		params["biscale_iters"] = s.opt.BiScaleIters
	}
	if s.mech != completion.NoMechanism {
		params["epsilon"], params["delta"] = env.Epsilon, env.Delta
	}
	if s.kind == tensor.Tucker {
		params["lambda_g"] = cfg.LambdaG
	}
	switch s.mech {
	case completion.IP:
		params["clamp"] = cfg.ClampNoisy
	case completion.GP, completion.OP:
		params["clip"] = cfg.Clip
	case completion.DPSGD:
		params["clip"], params["batch"], params["precondition"] = cfg.Clip, info.Batch, cfg.Precondition
		if cfg.CentreEps > 0 {
			params["centre_eps"] = cfg.CentreEps
		}
	}
	return params
}

// report is the release's report: hyper-parameters, public counts and
// noised values only (no training error, no share of clipped gradients).
func (s tensorSpec) report(cfg completion.Config, info *completion.Info, ax tensor.DayAxis) release.Report {
	rep := release.Report{"days": ax.Days, "updates": info.Updates}
	if s.fit != nil { // chosen on the (IP: noisy) training ratings' validation split
		rep["lambda"], rep["sweeps"] = info.Lambda, info.Sweeps
	}
	if info.NoiseScale > 0 {
		rep["noise_scale"] = info.NoiseScale
		rep["sensitivity"] = info.Sensitivity
	}
	if info.Sigma > 0 {
		rep["sigma"], rep["rho"] = info.Sigma, info.Rho
	}
	if cfg.CentreEps > 0 {
		rep["offset"] = info.Offset
	}
	return rep
}

// evaluateTensorFile scores a cp/tucker model on held-out timestamped
// ratings: each rating's day is its timestamp on the training day axis
// (clamped to the axis's ends); ratings of unknown users or items are
// counted in Dropped. RMSE and MAE are on the raw rating scale.
func evaluateTensorFile(ctx context.Context, path string, test *ratings.Matrix, opt EvalOptions) (*Report, error) {
	f, err := completion.Load(path)
	if err != nil {
		return nil, err
	}
	return EvaluateTensor(ctx, f, test)
}

// EvaluateTensor scores a loaded tensor model on held-out ratings. A model
// of one day (trained on ratings without timestamps) scores any ratings on
// that day; otherwise the test ratings need timestamps.
func EvaluateTensor(ctx context.Context, f *completion.File, test *ratings.Matrix) (*Report, error) {
	if !test.HasTime() && f.Axis.Days != 1 {
		return nil, fmt.Errorf("the test ratings have no timestamps; a tensor model of %d days needs the day of each rating", f.Axis.Days)
	}
	rep := &Report{Method: f.Method, Guarantee: f.Guarantee.String()}
	uIdx := make(map[string]int, len(f.Users))
	for x, n := range f.Users {
		uIdx[n] = x
	}
	iIdx := make(map[string]int, len(f.Items))
	for x, n := range f.Items {
		iIdx[n] = x
	}
	var pred, truth []float64
	for u := range int32(test.NumUsers()) {
		if u&1023 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		mu, ok := uIdx[test.Users.Name(u)]
		items, vals := test.UserRow(u)
		var times []int64
		if test.HasTime() {
			times = test.UserTimes(u)
		}
		for n, it := range items {
			name := test.Items.Name(it)
			if f.ItemDay {
				name = tensor.BaseItem(name)
			}
			mi, ok2 := iIdx[name]
			if !ok || !ok2 {
				rep.Dropped++
				continue
			}
			day := 0
			if times != nil {
				day, _ = f.Axis.Clamp(times[n])
			}
			pred = append(pred, f.Predict(mu, mi, day))
			truth = append(truth, float64(vals[n]))
		}
	}
	rep.N = len(pred)
	if rep.N == 0 {
		return nil, fmt.Errorf("no held-out rating is of a user and item the model knows (%d dropped)", rep.Dropped)
	}
	r, err := metrics.RMSE(pred, truth)
	if err != nil {
		return nil, err
	}
	a, err := metrics.MAE(pred, truth)
	if err != nil {
		return nil, err
	}
	rep.RMSE, rep.MAE = ptr(r), ptr(a)
	return rep, nil
}

// opAuditPasses is the number of SGD passes the audit trains cp-op and
// tucker-op with.
const opAuditPasses = 1

// AuditDesign implements AuditDesigner: output perturbation's one release
// (C's rows plus ℓ2 Laplace noise) comes after the whole SGD, so every run
// of the release check is a full training; the audit trains one pass (the
// same code; its noise is calibrated to its own Δ = 2·passes·L·η). The
// method claims nothing about the data (status none), so only that noise
// is audited, which the number of passes does not change; at ε = 8 its
// planned 10⁵ runs per side take seconds instead of hours.
func (c *CPOPConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Passes = opAuditPasses
	return &AuditDesign{Config: &one}, nil
}

// AuditDesign implements AuditDesigner: as cp-op's, one SGD pass.
func (c *TuckerOPConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Passes = opAuditPasses
	return &AuditDesign{Config: &one}, nil
}
