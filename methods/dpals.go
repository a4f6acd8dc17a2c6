package methods

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/release"
)

// dpals: user-level joint-DP alternating least squares (Chien, Jain,
// Krichene, Rendle, Song, Thakurta, Zhang, ICML 2021; adaptive weights and
// frequency-scaled regularisation from Krichene, Jain, Song, Sundararajan,
// Thakurta, Zhang, ICML 2023). A first Gaussian release gives the global
// mean, the item biases and item counts (the bias statistics of dp-bias);
// then T ALS steps each release the items' sufficient statistics with
// Gaussian noise (mf.DPALS); everything is composed in zCDP. The public
// model holds the item factors and biases; each user's row and bias are
// computed on her side from them and her own ratings (model.FoldRidge),
// during training as afterwards.
func init() {
	Register(&Method{
		Name:    "dpals",
		Summary: "private alternating least squares: noised item statistics, user rows on the user's side (user-level joint DP)",
		Private: true, PerUser: true, Needs: []string{"scale", "items"},
		New: func() Config { return NewDPALSConfig() },
	})
}

// Initialisations of the item factors.
const (
	InitPublic = "public"
	InitRandom = "random"
)

// Fallbacks for items below the count threshold.
const (
	FallbackItemBias = "item-bias"
	FallbackUserMean = "user-mean"
)

// DPALSConfig configures dpals. The defaults were chosen on a validation
// split of MovieLens-1M's training part (docs/mf.md).
type DPALSConfig struct {
	Rank        int     `json:"rank" flag:"rank" help:"number of latent factors (with --steps 0, at most the 4 public item features are used)"`
	Steps       int     `json:"steps" flag:"steps" help:"ALS steps T (each a user solve and a noised item solve; 0: no step, the whole budget to the bias statistics and the item factors from --init public)"`
	BiasShare   float64 `json:"bias_share" flag:"bias-share" help:"fraction of the zCDP budget ρ spent on the bias statistics (mean, item biases, item counts); the rest is split evenly over the steps"`
	UserLambda  float64 `json:"user_lambda" flag:"user-lambda" help:"ridge λ_u of each user's solve (and of fold-in)"`
	UserDamping float64 `json:"user_damping" flag:"user-damping" help:"shrinkage of each user's own bias toward zero, in pseudo-ratings"`
	ItemDamping float64 `json:"item_damping" flag:"item-damping" help:"shrinkage of the item biases (as dp-bias --item-damping; with bias refinement, also the ridge of the bias coordinate in units of the steps' noise σ)"`
	ItemLambda  float64 `json:"item_lambda" flag:"item-lambda" help:"noise ridge of each item solve, in units of the noise's spectral scale σ·√(2k)"`
	ItemLambda0 float64 `json:"item_lambda0" flag:"item-lambda0" help:"frequency-scaled ridge of each item solve: λ0·(count_j + 1)^ν, count_j the item's noisy weighted count"`
	RegExponent float64 `json:"reg_exponent" flag:"reg-exponent" help:"exponent ν of the frequency-scaled ridge (1: the weighted-λ of ALS)"`
	WeightExp   float64 `json:"weight_exponent" flag:"weight-exponent" help:"adaptive weights: user i weighs item j ∝ count_j^μ, Σ_j c_ij² = 1 (μ < 0 favours rare items, μ > 0 popular ones)"`
	MaxPerUser  int     `json:"max_per_user" flag:"max-per-user" help:"keep a uniform sample of at most this many of a user's ratings in the item statistics (0: all)"`
	UserClip    float64 `json:"user_clip" flag:"user-clip" help:"bound Γ on the norm of a user's row in the item statistics"`
	BiasScale   float64 `json:"bias_scale" flag:"bias-scale" help:"bias refinement: each user's row in the item statistics gets a constant coordinate bias-scale × user-clip, so every step also re-estimates the item biases (0: item biases from the bias statistics only)"`
	RHSWeight   float64 `json:"rhs_weight" flag:"rhs-weight" help:"weight ω of the right-hand sides against the Gram blocks in the released vector: s = ω·Γ'/clip, Γ' the norm bound of the rows in the statistics (larger: less noise on the right-hand sides, more on the Gram blocks)"`
	Clip        float64 `json:"clip" flag:"clip" help:"bound R on a centred rating (rating units) in the item statistics and, as dp-bias --clip, in the bias statistics"`
	MinCount    float64 `json:"min_count" flag:"min-count" help:"items whose noisy weighted count is below min-count × the bias statistics' σ get no factors (fallback)"`
	Fallback    string  `json:"fallback" flag:"fallback" help:"prediction for items without factors: item-bias (mean + item bias + user bias) or user-mean (mean + user bias)"`
	Init        string  `json:"init" flag:"init" help:"initial item factors: public (up to four columns of item features from the bias statistics — bias, log count, its square, their product — the rest random) or random"`
	PriorRidge  bool    `json:"prior_ridge" flag:"prior-ridge" help:"with --init public, item solves shrink toward the public initial factors instead of toward zero"`
	InitScale   float64 `json:"init_scale" flag:"init-scale" help:"scale of the initial item factors (random columns: standard deviation × 1/√rank)"`

	// sigmaScale multiplies the calibrated noise of the ALS steps while
	// the guarantee keeps claiming the requested ε (0: 1). It exists only
	// so that tests can check that the audit catches an under-noised
	// release; nothing outside the package can set it.
	sigmaScale float64
}

// NewDPALSConfig returns the defaults.
func NewDPALSConfig() *DPALSConfig {
	return &DPALSConfig{Rank: 4, Steps: 0, BiasShare: 0.9, UserLambda: 30, UserDamping: 5, ItemDamping: 2.5,
		ItemLambda: 10, ItemLambda0: 0.3, RegExponent: 1, WeightExp: 0, UserClip: 0.3, RHSWeight: 1, Clip: 1, BiasScale: 0,
		MinCount: 0, Fallback: FallbackItemBias, Init: InitPublic, PriorRidge: true, InitScale: 1}
}

// Validate implements Config.
func (c *DPALSConfig) Validate() error {
	if c.Rank < 1 || c.Rank > 256 {
		return fmt.Errorf("--rank must be in [1, 256], got %d", c.Rank)
	}
	if c.Steps < 0 || c.Steps > 1000 {
		return fmt.Errorf("--steps must be in [0, 1000], got %d", c.Steps)
	}
	if c.Init != InitPublic && c.Init != InitRandom {
		return fmt.Errorf("--init must be %s or %s, got %q", InitPublic, InitRandom, c.Init)
	}
	if c.Steps == 0 && c.Init != InitPublic {
		return fmt.Errorf("--steps 0 needs --init %s (random factors would be noise)", InitPublic)
	}
	if !(c.BiasShare > 0 && c.BiasShare < 1) {
		return fmt.Errorf("--bias-share must be in (0, 1), got %g", c.BiasShare)
	}
	if c.MaxPerUser < 0 {
		return fmt.Errorf("--max-per-user must be ≥ 0, got %d", c.MaxPerUser)
	}
	if c.Fallback != FallbackItemBias && c.Fallback != FallbackUserMean {
		return fmt.Errorf("--fallback must be %s or %s, got %q", FallbackItemBias, FallbackUserMean, c.Fallback)
	}
	if math.IsNaN(c.WeightExp) || math.Abs(c.WeightExp) > 4 {
		return fmt.Errorf("--weight-exponent must be in [-4, 4], got %g", c.WeightExp)
	}
	for _, x := range []struct {
		name string
		v    float64
		pos  bool
	}{{"user-lambda", c.UserLambda, true}, {"user-damping", c.UserDamping, false}, {"item-damping", c.ItemDamping, false},
		{"item-lambda", c.ItemLambda, false}, {"item-lambda0", c.ItemLambda0, false}, {"user-clip", c.UserClip, true}, {"rhs-weight", c.RHSWeight, true},
		{"clip", c.Clip, true}, {"bias-scale", c.BiasScale, false}, {"min-count", c.MinCount, false}, {"init-scale", c.InitScale, false}} {
		if math.IsNaN(x.v) || math.IsInf(x.v, 0) || x.v < 0 || (x.pos && x.v == 0) {
			return fmt.Errorf("--%s must be finite and %s, got %g", x.name, map[bool]string{true: "> 0", false: "≥ 0"}[x.pos], x.v)
		}
	}
	if math.IsNaN(c.RegExponent) || math.IsInf(c.RegExponent, 0) || math.Abs(c.RegExponent) > 4 {
		return fmt.Errorf("--reg-exponent must be in [-4, 4], got %g", c.RegExponent)
	}
	if c.ItemLambda == 0 && c.ItemLambda0 == 0 {
		return fmt.Errorf("--item-lambda and --item-lambda0 cannot both be 0")
	}
	return nil
}

// Train implements Config.
func (c *DPALSConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	scale, err := in.NeedScale("dpals")
	if err != nil {
		return nil, err
	}
	cat, err := in.NeedCatalogue("dpals")
	if err != nil {
		return nil, err
	}
	data, err := release.OnCatalogue(release.ClampToScale(in.Ratings, scale), cat)
	if err != nil {
		return nil, err
	}
	n, k := data.NumItems(), c.Rank
	clip := math.Min(c.Clip, scale.Width())
	// Rows in the item statistics: clipped to Γ, plus the constant γ_b
	// coordinate with bias refinement.
	biasScale := c.BiasScale * c.UserClip
	d := k
	if biasScale > 0 {
		d = k + 1
	}
	rowBound := math.Sqrt(c.UserClip*c.UserClip + biasScale*biasScale)
	rhsScale := c.RHSWeight * rowBound / clip
	stepSensValue := mf.DPALSSensitivity(rowBound, clip, rhsScale)

	rho, rhoBias, rhoStep, err := c.budget(env.Epsilon, env.Delta)
	if err != nil {
		return nil, err
	}
	biasSens := biasSensitivity()
	biasMech, err := biasMechanism(rhoBias, env.Delta, n)
	if err != nil {
		return nil, err
	}
	st, err := releaseBiasStats(ctx, data, scale, clip, biasMech, env.Noise)
	if err != nil {
		return nil, err
	}
	itemBias := st.itemBiases(c.ItemDamping, scale.Width())
	// Public post-processing of the first release: which items get
	// factors, their counts and ridges.
	active := make([]bool, n)
	counts := make([]float64, n)
	nActive := 0
	for j := range n {
		counts[j] = math.Max(st.Counts[j], 0)
		if st.Counts[j] >= c.MinCount*st.Sigma {
			active[j] = true
			nActive++
		}
	}
	if c.Fallback == FallbackUserMean {
		for j := range n {
			if !active[j] {
				itemBias[j] = 0
			}
		}
	}
	parts := []privacy.Guarantee{biasMech.Guarantee()}
	var V []float64
	var sigmaStep float64
	itemLambda := make([]float64, n)
	biasLambda := make([]float64, n)
	init := publicInit(itemBias, counts, active, k, c.InitScale, env.Rand.Rand())
	if c.Init == InitRandom {
		init = nil
	}
	switch {
	case nActive == 0:
		V = make([]float64, n*k)
	case c.Steps == 0:
		// Only the public features: random further columns would be
		// noise for the users to fit.
		V = init
		for j := range n {
			for col := min(k, 4); col < k; col++ {
				V[j*k+col] = 0
			}
		}
	default:
		// The ALS steps.
		var mechs []*mechanism.Gaussian
		sigmaStep, mechs, err = c.stepMechanisms(rhoStep, env.Delta, stepSensValue, mf.DPALSDim(nActive, d))
		if err != nil {
			return nil, err
		}
		steps := make([]mf.Releaser, len(mechs))
		for t, m := range mechs {
			steps[t] = m
			parts = append(parts, m.Guarantee())
		}
		// Ridge of item j: λ0·(count_j + 1)^ν (frequency-scaled; ν = 1 is
		// ALS's weighted-λ, the weighted count being the item's total
		// weight Σ_i c_ij up to scale) plus λ·σ·√(2k), the spectral scale
		// of the noise left in a Gram block after the PSD projection
		noiseRidge := c.ItemLambda * sigmaStep * math.Sqrt(2*float64(d))
		for j := range n {
			if active[j] {
				itemLambda[j] = math.Max(c.ItemLambda0*math.Pow(counts[j]+1, c.RegExponent)+noiseRidge, 1e-9)
				biasLambda[j] = math.Max(c.ItemDamping*sigmaStep, 1e-9)
			}
		}
		start := time.Now()
		V, itemBias, err = mf.DPALS(ctx, mf.FromMatrix(data), mf.DPALSOptions{
			Rank: k, Steps: steps, Noise: env.Noise,
			Mean: st.Mean, ItemBias: itemBias, Counts: counts, Active: active,
			UserLambda: c.UserLambda, UserDamping: c.UserDamping, ItemLambda: itemLambda, BiasLambda: biasLambda,
			UserClip: c.UserClip, ResidualClip: clip, RHSScale: rhsScale,
			BiasScale:  biasScale,
			MaxPerUser: c.MaxPerUser, WeightExponent: c.WeightExp, Init: init, PriorRidge: c.PriorRidge, InitScale: c.InitScale,
			Rand: env.Rand.Rand(), Workers: env.Workers,
			Progress: func(it mf.Iteration) {
				if env.Log != nil {
					env.Log.Debug("dpals", "step", it.Done, "of", it.Total, "change", it.Change,
						"eta_seconds", time.Since(start).Seconds()/float64(it.Done)*float64(it.Total-it.Done))
				}
				if env.Progress != nil {
					env.Progress(it.Done, it.Total)
				}
			},
		})
		if err != nil {
			return nil, err
		}
	}
	g, err := accountant.Compose(env.Delta, parts...)
	if err != nil {
		return nil, fmt.Errorf("composing the releases: %w", err)
	}
	if c.sigmaScale > 0 && c.sigmaScale != 1 {
		// Test-only: claim the requested budget whatever the noise was.
		g.Epsilon, g.Rho = env.Epsilon, rho
	}
	if g.Epsilon > env.Epsilon*(1+1e-9) {
		return nil, fmt.Errorf("composed ε = %g exceeds the requested %g", g.Epsilon, env.Epsilon)
	}
	g.Notion, g.Relation = privacy.Joint, privacy.RelationUserReplace
	g.Note = fmt.Sprintf("zCDP composition of %d Gaussian release(s). Bias statistics (σ = %.4g, ℓ2 sensitivity %.4g): per-item weighted sums of ratings centred at each user's mean and clipped to ±%g, per-item weighted counts, a global-mean pair.", len(parts), st.Sigma, biasSens.Value, clip)
	if steps := len(parts) - 1; steps > 0 {
		g.Note += fmt.Sprintf(" Each of %d ALS steps (σ = %.4g, ℓ2 sensitivity %.4g over %d items with factors): per item the Gram block Σ c·ũũᵀ and Σ c·y·ũ of the users' rows clipped to ‖ũ‖ ≤ %g", steps, sigmaStep, stepSensValue, nActive, c.UserClip)
		if biasScale > 0 {
			g.Note += fmt.Sprintf(" (with a constant coordinate %g that re-estimates the item biases)", biasScale)
		}
		g.Note += fmt.Sprintf(", ratings centred and clipped to ±%g, weights Σ_j c_ij² ≤ 1 per user.", clip)
	} else {
		g.Note += " No ALS step ran; the item factors are public post-processing of that release (item bias, log count, its square, their product)."
	}
	g.Note += " Each user's row and bias are computed on her side from the public model and her own ratings."

	m := model.NewPublic("dpals", cat)
	m.Rank, m.V = k, V
	m.Offset, m.ItemBias = st.Mean, itemBias
	m.Transform.Clamp = &scale
	m.Transform.UserCentred, m.UserDamping = true, c.UserDamping
	m.FoldIn, m.FoldLambda = model.FoldRidge, c.UserLambda
	m.Params = map[string]any{"rank": k, "steps": c.Steps, "bias_share": c.BiasShare, "user_lambda": c.UserLambda,
		"user_damping": c.UserDamping, "item_damping": c.ItemDamping, "item_lambda": c.ItemLambda, "item_lambda0": c.ItemLambda0,
		"reg_exponent": c.RegExponent, "weight_exponent": c.WeightExp, "max_per_user": c.MaxPerUser, "user_clip": c.UserClip,
		"clip": clip, "min_count": c.MinCount, "fallback": c.Fallback, "bias_scale": c.BiasScale, "rhs_weight": c.RHSWeight,
		"init": c.Init, "prior_ridge": c.PriorRidge}
	states, err := foldInAll(ctx, m, in.Ratings, "dpals")
	if err != nil {
		return nil, err
	}
	return &release.Release{Public: m, PerUser: states, Guarantee: g, Report: release.Report{
		"sigma_bias": st.Sigma, "sigma_step": sigmaStep, "steps": c.Steps, "items_with_factors": nActive,
		"items": n, "global_mean": st.Mean, "rank": k}}, nil
}

// publicInit is the public initial item factors, features of each item
// computed from the bias statistics alone: column 0 the item bias, column
// 1 the log weighted count, column 2 its square, column 3 their product
// (each standardised to mean 0 and standard deviation scale over the
// active items); further columns random with standard deviation
// scale/√k. Inactive items get zero rows. A user's row fitted to these
// (fold-in) is her own taste for well-rated, popular, niche … items.
func publicInit(itemBias, counts []float64, active []bool, k int, scale float64, r *rand.Rand) []float64 {
	n := len(itemBias)
	V := make([]float64, n*k)
	standardise := func(x []float64) []float64 {
		var m, s2 float64
		na := 0
		for j := range n {
			if active[j] {
				m += x[j]
				na++
			}
		}
		if na == 0 {
			return x
		}
		m /= float64(na)
		for j := range n {
			if active[j] {
				s2 += (x[j] - m) * (x[j] - m)
			}
		}
		sd := math.Sqrt(s2 / float64(na))
		if sd == 0 {
			sd = 1
		}
		out := make([]float64, n)
		for j := range n {
			out[j] = (x[j] - m) / sd
		}
		return out
	}
	logc := make([]float64, n)
	for j := range n {
		logc[j] = math.Log1p(math.Max(counts[j], 0))
	}
	b, l := standardise(itemBias), standardise(logc)
	sq, prod := make([]float64, n), make([]float64, n)
	for j := range n {
		sq[j], prod[j] = l[j]*l[j], b[j]*l[j]
	}
	cols := [][]float64{b, l, standardise(sq), standardise(prod)}
	for j := range n {
		if !active[j] {
			continue
		}
		for c := range k {
			if c < len(cols) {
				V[j*k+c] = scale * cols[c][j]
			} else {
				V[j*k+c] = scale / math.Sqrt(float64(k)) * r.NormFloat64()
			}
		}
	}
	return V
}

// budget splits the zCDP budget ρ of (ε, δ): a share for the bias
// statistics, the rest evenly over the steps (each rounded down; all of
// it to the bias statistics when there is no step).
func (c *DPALSConfig) budget(eps, delta float64) (rho, rhoBias, rhoStep float64, err error) {
	if rho, err = accountant.RhoForApprox(eps, delta); err != nil {
		return 0, 0, 0, err
	}
	if c.Steps == 0 {
		return rho, rho, 0, nil
	}
	rhoBias = math.Nextafter(c.BiasShare*rho, 0)
	rhoStep = math.Nextafter((rho-rhoBias)/float64(c.Steps), 0)
	return rho, rhoBias, rhoStep, nil
}

// biasMechanism is the Gaussian mechanism of the bias statistics over n
// items with zCDP budget rho.
func biasMechanism(rho, delta float64, n int) (*mechanism.Gaussian, error) {
	sens := biasSensitivity()
	sigma, err := mechanism.GaussianSigma(rho, sens.Value, biasDim(n))
	if err != nil {
		return nil, fmt.Errorf("calibrating the bias statistics: %w", err)
	}
	return mechanism.NewGaussianSigma(sigma, delta, sens, biasDim(n))
}

// stepMechanisms are the Gaussian mechanisms of the ALS steps, each with
// zCDP budget rho for a released vector of dim coordinates and ℓ2
// sensitivity sens; sigma is the calibrated noise (the noise added is
// sigma·sigmaScale when the test hook is set).
func (c *DPALSConfig) stepMechanisms(rho, delta, sens float64, dim int) (sigma float64, mechs []*mechanism.Gaussian, err error) {
	s := mechanism.Sensitivity{Value: sens, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
	if sigma, err = mechanism.GaussianSigma(rho, sens, dim); err != nil {
		return 0, nil, fmt.Errorf("calibrating the ALS steps: %w", err)
	}
	noiseSigma := sigma
	if c.sigmaScale > 0 {
		noiseSigma *= c.sigmaScale
	}
	for range c.Steps {
		m, err := mechanism.NewGaussianSigma(noiseSigma, delta, s, dim)
		if err != nil {
			return 0, nil, err
		}
		mechs = append(mechs, m)
	}
	return sigma, mechs, nil
}
