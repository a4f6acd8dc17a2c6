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

// Tensor completion (seed 004): users × items × day, CP or Tucker by SGD,
// with input (IP), gradient (GP) and output (OP) perturbation as the seed
// calibrates them, and a sound DP-SGD variant. The public artefact is the
// tensor model file (completion.File); the neighbouring relation of the
// proven guarantees is privacy.RelationRatingValue (one rating's value
// changes; which (user, item, day) positions are rated is public).
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
		{"", completion.NoMechanism, "non-private", nil,
			func() Config { return &CPConfig{cpDefaults()} },
			func() Config { return &TuckerConfig{tuckerDefaults()} }},
		{"-ip", completion.IP, "input perturbation (Laplace on each rating clamped to the declared --scale; ε-DP per rating value, proven)", []string{"scale"},
			func() Config { return &CPIPConfig{cpDefaults(), IPOptions{Clamp: true}} },
			func() Config { return &TuckerIPConfig{tuckerDefaults(), IPOptions{Clamp: true}} }},
		{"-gp", completion.GP, "gradient perturbation on C as the seed calibrates it (A, B released un-noised: no guarantee)", nil,
			func() Config { return &CPGPConfig{cpDefaults(), GPOptions{Clip: 1}} },
			func() Config { return &TuckerGPConfig{tuckerDefaults(), GPOptions{Clip: 1}} }},
		{"-op", completion.OP, "output perturbation on C as the seed calibrates it (A, B released un-noised: no guarantee)", nil,
			func() Config { return &CPOPConfig{cpDefaults(), OPOptions{Clip: 1}} },
			func() Config { return &TuckerOPConfig{tuckerDefaults(), OPOptions{Clip: 1}} }},
		{"-dpsgd", completion.DPSGD, "DP-SGD over all parameters, zCDP-accounted ((ε, δ) per rating value, proven)", nil,
			func() Config { return &CPDPSGDConfig{cpDefaults(), DPSGDOptions{Clip: 0.3}} },
			func() Config { return &TuckerDPSGDConfig{tuckerDefaults(), DPSGDOptions{Clip: 0.3}} }},
	}
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		for _, v := range variants {
			newCfg := v.cp
			if kind == tensor.Tucker {
				newCfg = v.tucker
			}
			Register(&Method{
				Name:    string(kind) + v.suffix,
				Summary: fmt.Sprintf("%s tensor completion (users × items × day) by SGD, %s", strings.ToUpper(string(kind)[:1])+string(kind)[1:], v.what),
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
	Rank   int     `json:"rank" flag:"rank" help:"rank d (CP components; Tucker core d × d × d)"`
	Passes int     `json:"passes" flag:"passes" help:"passes of SGD over the training entries"`
	LR     float64 `json:"lr" flag:"lr" help:"learning rate η"`
	Lambda float64 `json:"lambda" flag:"lambda" help:"regularisation λ of the factors (Tucker: λ_o)"`
	Init   float64 `json:"init" flag:"init" help:"standard deviation of the random initial factors"`
	// BiScale is the seed's MovieLens setting; its statistics are computed
	// from the private ratings without noise, so with it no method has a
	// guarantee (status none, the note says why).
	BiScale      bool `json:"biscale" flag:"biscale" help:"bi-scale each day slice before training (the seed's MovieLens setting; the per-day user and item means and scales are computed from the ratings without noise and stored in the model, so the model has no privacy guarantee)"`
	BiScaleIters int  `json:"biscale_iters" flag:"biscale-iters" help:"alternating rounds of the bi-scaling"`
	ItemDay      bool `json:"item_day" flag:"item-day" help:"item IDs carry a day tag (\"17@3\", as written by privrec data synth-tensor); merge them per item"`
}

// TuckerOptions are the Tucker methods' own settings.
type TuckerOptions struct {
	LambdaG float64 `json:"lambda_g" flag:"lambda-g" help:"regularisation λ_g of the core"`
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

// DPSGDOptions are DP-SGD's settings.
type DPSGDOptions struct {
	Clip      float64 `json:"clip" flag:"clip" help:"per-entry gradient clip (ℓ2 norm over all parameters)"`
	Batch     int     `json:"batch" flag:"batch" help:"entries per noisy step (0: all, one step per pass)"`
	CentreEps float64 `json:"centre_eps" flag:"centre-eps" help:"spend this part of ε on a private mean of the ratings (clamped to the declared --scale) and train on the centred values (0: no centring); the total stays ε"`
}

func cpDefaults() TensorOptions {
	d := completion.Defaults(tensor.CP)
	return TensorOptions{Rank: d.Rank, Passes: d.Passes, LR: d.LR, Lambda: d.Lambda, Init: d.InitScale, BiScaleIters: 10}
}

func tuckerDefaults() TuckerTensorOptions {
	d := completion.Defaults(tensor.Tucker)
	return TuckerTensorOptions{
		TensorOptions: TensorOptions{Rank: d.Rank, Passes: d.Passes, LR: d.LR, Lambda: d.Lambda, Init: d.InitScale, BiScaleIters: 10},
		TuckerOptions: TuckerOptions{LambdaG: d.LambdaG},
	}
}

// TuckerTensorOptions are the shared settings plus Tucker's core
// regularisation.
type TuckerTensorOptions struct {
	TensorOptions
	TuckerOptions
}

// CPConfig configures cp (non-private).
type CPConfig struct{ TensorOptions }

// TuckerConfig configures tucker (non-private).
type TuckerConfig struct{ TuckerTensorOptions }

// CPIPConfig configures cp-ip.
type CPIPConfig struct {
	TensorOptions
	IPOptions
}

// TuckerIPConfig configures tucker-ip.
type TuckerIPConfig struct {
	TuckerTensorOptions
	IPOptions
}

// CPGPConfig configures cp-gp.
type CPGPConfig struct {
	TensorOptions
	GPOptions
}

// TuckerGPConfig configures tucker-gp.
type TuckerGPConfig struct {
	TuckerTensorOptions
	GPOptions
}

// CPOPConfig configures cp-op.
type CPOPConfig struct {
	TensorOptions
	OPOptions
}

// TuckerOPConfig configures tucker-op.
type TuckerOPConfig struct {
	TuckerTensorOptions
	OPOptions
}

// CPDPSGDConfig configures cp-dpsgd.
type CPDPSGDConfig struct {
	TensorOptions
	DPSGDOptions
}

// TuckerDPSGDConfig configures tucker-dpsgd.
type TuckerDPSGDConfig struct {
	TuckerTensorOptions
	DPSGDOptions
}

func (c *CPConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.CP, opt: c.TensorOptions}
}
func (c *TuckerConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.Tucker, opt: c.TensorOptions, lambdaG: c.LambdaG}
}
func (c *CPIPConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.CP, mech: completion.IP, opt: c.TensorOptions, clamp: c.Clamp}
}
func (c *TuckerIPConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.Tucker, mech: completion.IP, opt: c.TensorOptions, lambdaG: c.LambdaG, clamp: c.Clamp}
}
func (c *CPGPConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.CP, mech: completion.GP, opt: c.TensorOptions, clip: c.Clip}
}
func (c *TuckerGPConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.Tucker, mech: completion.GP, opt: c.TensorOptions, lambdaG: c.LambdaG, clip: c.Clip}
}
func (c *CPOPConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.CP, mech: completion.OP, opt: c.TensorOptions, clip: c.Clip}
}
func (c *TuckerOPConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.Tucker, mech: completion.OP, opt: c.TensorOptions, lambdaG: c.LambdaG, clip: c.Clip}
}
func (c *CPDPSGDConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.CP, mech: completion.DPSGD, opt: c.TensorOptions, clip: c.Clip, batch: c.Batch, centreEps: c.CentreEps}
}
func (c *TuckerDPSGDConfig) spec() tensorSpec {
	return tensorSpec{kind: tensor.Tucker, mech: completion.DPSGD, opt: c.TensorOptions, lambdaG: c.LambdaG, clip: c.Clip, batch: c.Batch, centreEps: c.CentreEps}
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

// tensorSpec is one tensor method's settings, whatever its Config type.
type tensorSpec struct {
	kind      tensor.Kind
	mech      completion.Mechanism
	opt       TensorOptions
	lambdaG   float64
	clamp     bool
	clip      float64
	batch     int
	centreEps float64
}

func (s tensorSpec) name() string {
	if s.mech == completion.NoMechanism {
		return string(s.kind)
	}
	return string(s.kind) + "-" + string(s.mech)
}

func (s tensorSpec) validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	o := s.opt
	switch {
	case o.Rank < 1 || o.Rank > 64:
		return fmt.Errorf("--rank must be in 1..64, got %d", o.Rank)
	case o.Passes < 1:
		return fmt.Errorf("--passes must be ≥ 1, got %d", o.Passes)
	case !finite(o.LR) || o.LR <= 0:
		return fmt.Errorf("--lr must be finite and > 0, got %g", o.LR)
	case !finite(o.Lambda) || o.Lambda < 0:
		return fmt.Errorf("--lambda must be finite and ≥ 0, got %g", o.Lambda)
	case !finite(s.lambdaG) || s.lambdaG < 0:
		return fmt.Errorf("--lambda-g must be finite and ≥ 0, got %g", s.lambdaG)
	case !finite(o.Init) || o.Init <= 0:
		return fmt.Errorf("--init must be finite and > 0, got %g", o.Init)
	case o.BiScale && o.BiScaleIters < 1:
		return fmt.Errorf("--biscale-iters must be ≥ 1, got %d", o.BiScaleIters)
	}
	switch s.mech {
	case completion.GP, completion.OP, completion.DPSGD:
		if !finite(s.clip) || s.clip <= 0 {
			return fmt.Errorf("--clip must be finite and > 0, got %g", s.clip)
		}
	}
	if s.batch < 0 {
		return fmt.Errorf("--batch must be ≥ 0, got %d", s.batch)
	}
	if !finite(s.centreEps) || s.centreEps < 0 {
		return fmt.Errorf("--centre-eps must be finite and ≥ 0, got %g", s.centreEps)
	}
	return nil
}

// solver is the completion configuration for a budget.
func (s tensorSpec) solver(env Env) completion.Config {
	cfg := completion.Config{Kind: s.kind, Rank: s.opt.Rank, Passes: s.opt.Passes, LR: s.opt.LR, Lambda: s.opt.Lambda,
		LambdaG: s.lambdaG, InitScale: s.opt.Init, Workers: 2, Mechanism: s.mech, Clip: s.clip,
		ClampNoisy: s.clamp, Batch: s.batch, CentreEps: s.centreEps}
	if s.mech != completion.NoMechanism {
		cfg.Epsilon, cfg.Delta = env.Epsilon, env.Delta
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
	data := in.Ratings
	if data == nil || data.Len() == 0 {
		return nil, fmt.Errorf("no training ratings")
	}
	if s.mech == completion.DPSGD && s.centreEps > 0 && !(s.centreEps < env.Epsilon) {
		return nil, fmt.Errorf("--centre-eps %g must be less than --epsilon %g (it is a part of the budget)", s.centreEps, env.Epsilon)
	}
	private := s.mech != completion.NoMechanism
	var lo, hi float64
	var notes []string
	switch {
	case in.Declared.Scale != nil:
		lo, hi = in.Declared.Scale.Min, in.Declared.Scale.Max
	case s.mech == completion.IP:
		if _, err := in.NeedScale(s.name() + " (IP's sensitivity is the width of the rating scale)"); err != nil {
			return nil, err
		}
	case s.mech == completion.DPSGD && s.centreEps > 0:
		if _, err := in.NeedScale(s.name() + " --centre-eps (the private mean's sensitivity is the width of the rating scale)"); err != nil {
			return nil, err
		}
	}
	var (
		t   *tensor.Tensor
		ax  tensor.DayAxis
		err error
	)
	if data.HasTime() {
		t, ax, err = tensor.FromRatings(data)
	} else {
		t, ax, err = tensor.FromUntimed(data)
	}
	if err != nil {
		return nil, fmt.Errorf("building the users × items × day tensor: %w", err)
	}
	items := data.Items.Names()
	if s.opt.ItemDay {
		if t, items, err = tensor.MergeItemDays(t, items); err != nil {
			return nil, err
		}
	}
	if in.Declared.Scale == nil && s.mech != completion.IP && s.mech != completion.DPSGD {
		// No guarantee covers these methods' models: the data's range
		// clamps their predictions, and the note says so.
		lo, hi = t.Range()
		if !(lo < hi) {
			hi = lo + 1
		}
		notes = append(notes, fmt.Sprintf("The prediction range [%g, %g] was read from the training ratings; declare --scale MIN:MAX to use a public one.", lo, hi))
	}
	cfg := s.solver(env)
	cfg.Lo, cfg.Hi = lo, hi
	var scaling *tensor.Scaling
	train := t
	if s.opt.BiScale {
		if train, scaling, err = tensor.BiScaleDays(t, s.opt.BiScaleIters); err != nil {
			return nil, err
		}
		if s.mech == completion.IP || cfg.CentreEps > 0 {
			// IP's range (and the centring's) in the scaled space: there
			// is no declared scale of the scaled values, so it is read
			// from them; the model has no guarantee anyway (below).
			cfg.Lo, cfg.Hi = train.Range()
			if !(cfg.Lo < cfg.Hi) {
				cfg.Hi = cfg.Lo + 1
			}
		}
	}
	m, info, err := completion.Train(ctx, train, cfg, env.Rand, env.Noise, env.Progress)
	if err != nil {
		return nil, err
	}
	g := info.Guarantee
	if s.opt.BiScale && private {
		inner := g
		why := "The per-day bi-scaling (--biscale: the mean of every day slice and the centre and scale of every user and item in it) is computed from the raw ratings and stored in the model without noise, and one rating changes the scaling of its whole slice row and column"
		if s.mech == completion.IP || cfg.CentreEps > 0 {
			why += fmt.Sprintf("; the range of the scaled values, [%.4g, %.4g], which calibrates the noise, is read from them", cfg.Lo, cfg.Hi)
		}
		g = privacy.Guarantee{Epsilon: math.Inf(1), Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.None, ClaimedEpsilon: env.Epsilon,
			Note: why + ". So the model has no DP guarantee. With the scaled tensor regarded as the data, the mechanism gives: " + inner.String()}
	}
	for _, n := range notes {
		g.Note = strings.TrimSpace(g.Note + " " + n)
	}
	if env.Noise != nil && env.Noise.Reproducible() {
		g.Reproducible = true // as methods.Train marks the release's; the file carries its own copy
	}
	params := map[string]any{"rank": cfg.Rank, "passes": cfg.Passes, "lr": cfg.LR, "lambda": cfg.Lambda, "init": cfg.InitScale,
		"biscale": s.opt.BiScale, "item_day": s.opt.ItemDay, "seed": env.Seed}
	if hi > lo {
		params["range"] = []float64{lo, hi}
	}
	if s.opt.BiScale {
		params["biscale_iters"] = s.opt.BiScaleIters
	}
	if private {
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
		params["clip"], params["batch"] = cfg.Clip, info.Batch
		if cfg.CentreEps > 0 {
			params["centre_eps"] = cfg.CentreEps
		}
	}
	f := &completion.File{Method: s.name(), Params: params, Guarantee: g,
		Users: data.Users.Names(), Items: items, Axis: ax, ItemDay: s.opt.ItemDay, Lo: lo, Hi: hi, Model: m, Scaling: scaling}
	// The report: hyper-parameters, public counts and noised values only
	// (no training error, no share of clipped gradients).
	rep := release.Report{"days": ax.Days, "updates": info.Updates}
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
	return &release.Release{Public: f, Guarantee: g, Report: rep}, nil
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
