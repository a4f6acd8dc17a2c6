package methods

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
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
		Private: true, PerUser: true, Needs: []string{"scale", "items"}, Engine: true,
		New: func() Config { return NewDPALSConfig() },
	})
}

// Initialisations of the item factors.
const (
	InitPublic = "public"
	InitRandom = "random"
)

// publicFeatures is the number of public item features dpals computes from
// the bias statistics (publicInit).
const publicFeatures = 5

// Fallbacks for items below the count threshold.
const (
	FallbackItemBias = "item-bias"
	FallbackUserMean = "user-mean"
)

// DPALSConfig configures dpals. The defaults were chosen on a validation
// split of MovieLens-1M's training part (docs/mf.md).
type DPALSConfig struct {
	Rank            int     `json:"rank" flag:"rank" help:"number of latent factors (with --steps 0 only the public features are used: 5 from the bias statistics and cov-rank from the covariance)"`
	Steps           int     `json:"steps" flag:"steps" help:"ALS steps T (each a user solve and a noised item solve; 0: no step, the whole budget to the bias statistics and the item factors from --init public; -1: planned, 1 in the large-population plan and 0 otherwise)"`
	BiasShare       float64 `json:"bias_share" flag:"bias-share" help:"fraction of the zCDP budget ρ spent on the bias statistics (mean, item biases, item counts); the rest is split evenly over the steps"`
	UserLambda      float64 `json:"user_lambda" flag:"user-lambda" help:"ridge λ_u of each user's solve (and of fold-in)"`
	UserDamping     float64 `json:"user_damping" flag:"user-damping" help:"shrinkage of each user's own bias toward zero, in pseudo-ratings"`
	ItemDamping     float64 `json:"item_damping" flag:"item-damping" help:"shrinkage of the item biases (as dp-bias --item-damping; with bias refinement, also the ridge of the bias coordinate in units of the steps' noise σ)"`
	ItemLambda      float64 `json:"item_lambda" flag:"item-lambda" help:"noise ridge of each item solve, in units of the noise's spectral scale σ·√(2k)"`
	ItemLambda0     float64 `json:"item_lambda0" flag:"item-lambda0" help:"frequency-scaled ridge of each item solve: λ0·(count_j + 1)^ν, count_j the item's noisy weighted count"`
	RegExponent     float64 `json:"reg_exponent" flag:"reg-exponent" help:"exponent ν of the frequency-scaled ridge (1: the weighted-λ of ALS)"`
	WeightExp       float64 `json:"weight_exponent" flag:"weight-exponent" help:"adaptive weights: user i weighs item j ∝ count_j^μ, Σ_j c_ij² = 1 (μ < 0 favours rare items, μ > 0 popular ones)"`
	MaxPerUser      int     `json:"max_per_user" flag:"max-per-user" help:"keep a uniform sample of at most this many of a user's ratings in the item statistics (0: all)"`
	UserClip        float64 `json:"user_clip" flag:"user-clip" help:"bound Γ on the norm of a user's row in the item statistics"`
	BiasScale       float64 `json:"bias_scale" flag:"bias-scale" help:"bias refinement: each user's row in the item statistics gets a constant coordinate bias-scale × user-clip, so every step also re-estimates the item biases (0: item biases from the bias statistics only)"`
	RHSWeight       float64 `json:"rhs_weight" flag:"rhs-weight" help:"weight ω of the right-hand sides against the Gram blocks in the released vector: s = ω·Γ'/clip, Γ' the norm bound of the rows in the statistics (larger: less noise on the right-hand sides, more on the Gram blocks)"`
	Clip            float64 `json:"clip" flag:"clip" help:"bound R on a centred rating (rating units) in the item statistics and, as dp-bias --clip, in the bias statistics"`
	MinCount        float64 `json:"min_count" flag:"min-count" help:"items whose noisy weighted count is below min-count × the bias statistics' σ get no factors (fallback)"`
	Fallback        string  `json:"fallback" flag:"fallback" help:"prediction for items without factors: item-bias (mean + item bias + user bias) or user-mean (mean + user bias)"`
	Init            string  `json:"init" flag:"init" help:"initial item factors: public (five columns of item features from the bias statistics — bias, log count, its square, their product, spread — then the covariance features, the rest random) or random"`
	PriorRidge      bool    `json:"prior_ridge" flag:"prior-ridge" help:"with --init public, item solves shrink toward the public initial factors instead of toward zero"`
	InitScale       float64 `json:"init_scale" flag:"init-scale" help:"scale of the initial item factors (random columns: standard deviation × 1/√rank)"`
	BiasPrior       bool    `json:"bias_prior" flag:"bias-prior" help:"shrink each item bias toward what items of its popularity get (a line in log count fitted to the noisy biases) instead of toward 0 (--bias-prior=false: toward 0)"`
	BiasWeightExp   float64 `json:"bias_weight_exponent" flag:"bias-weight-exponent" help:"adaptive weights in the bias statistics: user i weighs item j ∝ max(C_j, σ_C)^μ_b, C_j the item's noisy count from a first release (0: 1/√n_i, no count release; −0.5 minimises the item biases' noise weighted by how often items are asked for)"`
	CountShare      float64 `json:"count_share" flag:"count-share" help:"fraction of the zCDP budget ρ spent on the item counts that set the adaptive weights (with --bias-weight-exponent ≠ 0)"`
	CovRank         int     `json:"cov_rank" flag:"cov-rank" help:"public item features from a noised item covariance: the top cov-rank eigenvectors, after the five bias features (0: none)"`
	CovShare        float64 `json:"cov_share" flag:"cov-share" help:"fraction of the zCDP budget ρ spent on the item covariance (with --cov-rank > 0)"`
	CovItems        int     `json:"cov_items" flag:"cov-items" help:"the covariance covers at most this many items, those with the largest noisy counts (its release is dense: cov-items² values)"`
	CovUsersPerItem float64 `json:"cov_users_per_item" flag:"cov-users-per-item" help:"the covariance covers at most N/this items (N users): with fewer users per item its signal is under its noise; when fewer than 20 items remain no covariance is released and its share of the budget goes to the rest (0: no limit)"`
	AdaptiveFrom    float64 `json:"adaptive_from" flag:"adaptive-from" help:"use the adaptive weights only when N·√ρ ≥ this (N users, ρ the zCDP budget): below it the count release costs more than the weights gain (0: always)"`
	CovScale        float64 `json:"cov_scale" flag:"cov-scale" help:"scale of the covariance features against the bias features (the first gets cov-scale, the others by their share of the signal eigenvalue)"`
	CovNormalise    bool    `json:"cov_normalise" flag:"cov-normalise" help:"drop the released covariance's diagonal and divide each eigenvector entry by the item's noisy count before it becomes a feature (on sparse ratings the diagonal otherwise points the eigenvectors at the most rated items); on in the large-population plan"`
	PooledGram      bool    `json:"pooled_gram" flag:"pooled-gram" help:"each item solve blends its own noised Gram block with the pooled one (count_j × the noised blocks of all items summed over their counts) by the block's signal-to-noise ratio; on in the large-population plan"`
	ItemPosterior   bool    `json:"item_posterior" flag:"item-posterior" help:"with the pooled Gram, each item's factors are the posterior mean under a prior fitted to all items' released statistics (the release's noise enters the solve: rarely rated items keep their public features, the most rated get nearly the unregularised solve; --item-lambda is then unused)"`
	LargeFrom       float64 `json:"large_from" flag:"large-from" help:"the large-population plan when N·√ρ ≥ this and the catalogue is larger than the covariance covers (0: never): one ALS step with the pooled Gram after a normalised covariance over more items (docs/mf.md lists what it changes; settings you give are kept)"`
}

// NewDPALSConfig returns the defaults.
func NewDPALSConfig() *DPALSConfig {
	return &DPALSConfig{BiasWeightExp: -0.5, CountShare: 0.1, AdaptiveFrom: 2500, BiasPrior: true,
		Rank: publicFeatures + 32, CovRank: 32, CovShare: 0.5, CovItems: 2000, CovUsersPerItem: 500, CovScale: 1, Steps: -1, BiasShare: 0.9, UserLambda: 30, UserDamping: 5, ItemDamping: 2.5,
		ItemLambda: 10, ItemLambda0: 0.3, RegExponent: 1, WeightExp: 0, UserClip: 0.3, RHSWeight: 1, Clip: 1, BiasScale: 0,
		MinCount: 0, Fallback: FallbackItemBias, Init: InitPublic, PriorRidge: true, InitScale: 1, LargeFrom: 12000}
}

// Validate implements Config.
func (c *DPALSConfig) Validate() error {
	if c.Rank < 1 || c.Rank > 256 {
		return fmt.Errorf("--rank must be in [1, 256], got %d", c.Rank)
	}
	if c.Steps < -1 || c.Steps > 1000 {
		return fmt.Errorf("--steps must be -1 (planned) or in [0, 1000], got %d", c.Steps)
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
	if math.IsNaN(c.BiasWeightExp) || math.Abs(c.BiasWeightExp) > 2 {
		return fmt.Errorf("--bias-weight-exponent must be in [-2, 2], got %g", c.BiasWeightExp)
	}
	if c.BiasWeightExp != 0 && !(c.CountShare > 0 && c.CountShare < 1) {
		return fmt.Errorf("--count-share must be in (0, 1), got %g", c.CountShare)
	}
	if c.CovRank > 0 && c.BiasWeightExp != 0 && c.CovShare+c.CountShare >= 1 {
		return fmt.Errorf("--cov-share + --count-share must be < 1, got %g", c.CovShare+c.CountShare)
	}
	if c.CovRank < 0 || c.CovRank > 64 {
		return fmt.Errorf("--cov-rank must be in [0, 64], got %d", c.CovRank)
	}
	if c.CovRank > 0 && !(c.CovShare > 0 && c.CovShare < 1) {
		return fmt.Errorf("--cov-share must be in (0, 1), got %g", c.CovShare)
	}
	if c.CovRank > 0 && (c.CovItems < c.CovRank || c.CovItems > 8000) {
		return fmt.Errorf("--cov-items must be in [cov-rank, 8000] (its release holds cov-items² values), got %d", c.CovItems)
	}
	if math.IsNaN(c.CovUsersPerItem) || math.IsInf(c.CovUsersPerItem, 0) || c.CovUsersPerItem < 0 {
		return fmt.Errorf("--cov-users-per-item must be finite and ≥ 0, got %g", c.CovUsersPerItem)
	}
	if math.IsNaN(c.AdaptiveFrom) || math.IsInf(c.AdaptiveFrom, 0) || c.AdaptiveFrom < 0 {
		return fmt.Errorf("--adaptive-from must be finite and ≥ 0, got %g", c.AdaptiveFrom)
	}
	if math.IsNaN(c.LargeFrom) || math.IsInf(c.LargeFrom, 0) || c.LargeFrom < 0 {
		return fmt.Errorf("--large-from must be finite and ≥ 0, got %g", c.LargeFrom)
	}
	if c.PooledGram && c.MaxPerUser != 0 {
		return fmt.Errorf("--pooled-gram needs --max-per-user 0 (the pool weighs items by their released counts, which count every rating)")
	}
	if c.ItemPosterior && !c.PooledGram && c.LargeFrom == 0 {
		return fmt.Errorf("--item-posterior needs --pooled-gram (its prior is fitted in the pooled Gram's directions)")
	}
	if math.IsNaN(c.CovScale) || math.IsInf(c.CovScale, 0) || c.CovScale < 0 {
		return fmt.Errorf("--cov-scale must be finite and ≥ 0, got %g", c.CovScale)
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

// Train implements Config: plan → the item counts (adaptive weights) →
// the bias statistics → the public initial factors (and the covariance
// features) → the ALS steps → the guarantee → the public model and each
// user's own part.
func (c *DPALSConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	t, err := c.newTrainer(in, env)
	if err != nil {
		return nil, err
	}
	if err := t.releaseCounts(ctx); err != nil {
		return nil, err
	}
	if err := t.releaseBias(ctx); err != nil {
		return nil, err
	}
	init, err := t.initialFactors(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.factors(ctx, init); err != nil {
		return nil, err
	}
	g, err := t.guarantee()
	if err != nil {
		return nil, err
	}
	m := t.model()
	var states *model.UserStates
	if env.Engine == nil {
		// An external engine keeps the users' rows on its side.
		if states, err = foldInAll(ctx, m, in.Ratings, "dpals"); err != nil {
			return nil, err
		}
	}
	return &release.Release{Public: m, PerUser: states, Guarantee: g, Report: release.Report{
		"sigma_bias": t.st.Sigma, "sigma_step": t.sigmaStep, "steps": t.c.Steps, "items_with_factors": t.nActive,
		"items": t.n, "global_mean": t.st.Mean, "rank": t.k, "sigma_cov": t.sigmaCov, "cov_items": len(t.covItems)}}, nil
}

// dpalsTrainer is one dpals training as it goes: the plan (the config
// planned for the population, the rank k and the steps' statistic
// dimension d, the clip, the bias coordinate's scale, the steps' RHS scale
// and sensitivity, the budget's split), the releases' guarantees in
// order, and what the releases made public.
type dpalsTrainer struct {
	c     *DPALSConfig
	env   Env
	eng   statistic.Engine
	data  *ratings.Matrix // nil with an external engine
	scale release.Scale
	cat   *model.Catalogue

	n, k, d                             int
	clip, biasScale, rhsScale, stepSens float64
	split                               budgetSplit
	parts                               []privacy.Guarantee

	// The item counts (adaptive weights; nil without them) and their σ.
	popularity, itemWeight []float64
	sigmaCount             float64
	// The bias statistics and their public post-processing: the item
	// biases, which items get factors, the counts and the counts the
	// features and ridges use.
	st                              *biasStats
	itemBias, counts, featureCounts []float64
	active                          []bool
	nActive                         int
	// The covariance features' items and σ, the steps' σ and the item
	// factors.
	covItems  []int
	sigmaCov  float64
	sigmaStep float64
	v         []float64
}

// newTrainer plans a training on in: the declared scale and catalogue,
// the engine, the config planned for the population and the dimensions
// and bounds of the statistics.
func (c *DPALSConfig) newTrainer(in release.Input, env Env) (*dpalsTrainer, error) {
	scale, err := in.NeedScale("dpals")
	if err != nil {
		return nil, err
	}
	cat, err := in.NeedCatalogue("dpals")
	if err != nil {
		return nil, err
	}
	eng, data, err := ratingEngine(in, env, scale, cat)
	if err != nil {
		return nil, err
	}
	n := cat.Len()
	// The number of users is public (the relation replaces a user); an
	// external engine counts them in a first pass.
	if c, err = c.plan(eng.Users(), n, env.Epsilon, env.Delta); err != nil {
		return nil, err
	}
	if data == nil && c.Steps > 0 {
		if _, noising := eng.(NoisingEngine); noising {
			return nil, fmt.Errorf("--steps %d: an engine that adds its own noise releases the counts and bias statistics only; use --steps 0", c.Steps)
		}
		if c.MaxPerUser > 0 {
			return nil, fmt.Errorf("--max-per-user %d: the per-user sample is drawn in process; with an external engine use --max-per-user 0", c.MaxPerUser)
		}
	}
	t := &dpalsTrainer{c: c, env: env, eng: eng, data: data, scale: scale, cat: cat, n: n, k: c.Rank}
	if c.Steps == 0 {
		// Only the public features are used: the five bias features and
		// the covariance features.
		t.k = min(t.k, publicFeatures+c.CovRank)
	}
	t.clip = math.Min(c.Clip, scale.Width())
	// Rows in the item statistics: clipped to Γ, plus the constant γ_b
	// coordinate with bias refinement.
	t.biasScale = c.BiasScale * c.UserClip
	t.d = t.k
	if t.biasScale > 0 {
		t.d = t.k + 1
	}
	rowBound := math.Sqrt(c.UserClip*c.UserClip + t.biasScale*t.biasScale)
	t.rhsScale = c.RHSWeight * rowBound / t.clip
	t.stepSens = mf.DPALSSensitivity(rowBound, t.clip, t.rhsScale)
	if _, t.split, err = c.budget(env.Epsilon, env.Delta); err != nil {
		return nil, err
	}
	return t, nil
}

// releaseCounts releases the item counts that set the adaptive weights,
// when they are used.
func (t *dpalsTrainer) releaseCounts(ctx context.Context) error {
	if t.c.BiasWeightExp == 0 {
		return nil
	}
	env := t.env
	countMech, err := instrumentedGaussianForRho("the item counts", t.split.count, env.Delta, (&statistic.Counts{}).Sensitivity(), t.n, env.instrument())
	if err != nil {
		return err
	}
	if t.popularity, err = releaseCounts(ctx, t.eng, t.n, countMech, env); err != nil {
		return err
	}
	t.parts = append(t.parts, countMech.Guarantee())
	t.sigmaCount = countMech.Sigma()
	t.itemWeight = make([]float64, t.n)
	for j, cnt := range t.popularity {
		t.itemWeight[j] = math.Pow(math.Max(cnt, t.sigmaCount), t.c.BiasWeightExp)
	}
	return nil
}

// releaseBias releases the bias statistics and post-processes them in
// public: the item biases, which items get factors, their counts.
func (t *dpalsTrainer) releaseBias(ctx context.Context) error {
	c, n := t.c, t.n
	biasMech, err := biasMechanism(t.split.bias, t.env.Delta, n, true, t.env.instrument())
	if err != nil {
		return err
	}
	st, err := releaseBiasStats(ctx, t.eng, biasPlan(n, t.scale, t.clip, t.itemWeight, true), biasMech, t.env)
	if err != nil {
		return err
	}
	t.st = st
	if t.popularity == nil {
		// Without the count release, popularity is the bias release's count.
		t.popularity = st.Counts
	}
	var prior []float64
	if c.BiasPrior {
		prior = st.popularityPrior(c.ItemDamping, t.popularity)
	}
	t.itemBias = st.itemBiasesToward(c.ItemDamping, t.scale.Width(), prior)
	// Public post-processing of the first release: which items get
	// factors, their counts and ridges.
	t.active = make([]bool, n)
	t.counts = make([]float64, n)
	for j := range n {
		t.counts[j] = math.Max(st.Counts[j], 0)
		if st.Counts[j] >= c.MinCount*st.Sigma {
			t.active[j] = true
			t.nActive++
		}
	}
	if c.Fallback == FallbackUserMean {
		for j := range n {
			if !t.active[j] {
				t.itemBias[j] = 0
			}
		}
	}
	t.parts = append(t.parts, biasMech.Guarantee())
	t.featureCounts = make([]float64, n)
	for j, cnt := range t.popularity {
		t.featureCounts[j] = math.Max(cnt, 0)
	}
	return nil
}

// initialFactors is the public initialisation of the item factors (the
// bias features and, released here, the covariance features); nil with
// --init random.
func (t *dpalsTrainer) initialFactors(ctx context.Context) ([]float64, error) {
	c := t.c
	spread := t.st.spreads(c.ItemDamping)
	init := publicInit(t.itemBias, t.featureCounts, spread, t.active, t.k, c.InitScale, t.env.Rand.Rand())
	if c.CovRank > 0 && t.nActive > 0 {
		var covMech *mechanism.Gaussian
		var err error
		t.covItems, t.sigmaCov, covMech, err = c.covFeatures(ctx, t.data, t.eng, t.st.Mean, t.itemBias, t.featureCounts, t.active, init, t.k, t.clip, t.split.cov, t.env)
		if err != nil {
			return nil, err
		}
		if covMech != nil {
			t.parts = append(t.parts, covMech.Guarantee())
		}
	}
	if c.Init == InitRandom {
		return nil, nil
	}
	return init, nil
}

// factors sets the item factors: zero without an active item, the public
// features alone without steps, else the ALS steps from init.
func (t *dpalsTrainer) factors(ctx context.Context, init []float64) error {
	k := t.k
	switch {
	case t.nActive == 0:
		t.v = make([]float64, t.n*k)
	case t.c.Steps == 0:
		// Only the public features: random further columns would be
		// noise for the users to fit.
		t.v = init
		for j := range t.n {
			for col := min(k, publicFeatures+t.c.CovRank); col < k; col++ {
				t.v[j*k+col] = 0
			}
		}
	default:
		return t.alsSteps(ctx, init)
	}
	return nil
}

// alsSteps runs the ALS steps (mf.DPALS), each releasing the items'
// statistics with Gaussian noise, from init.
func (t *dpalsTrainer) alsSteps(ctx context.Context, init []float64) error {
	c, env := t.c, t.env
	sigmaStep, mechs, err := c.stepMechanisms(t.split.step, env.Delta, t.stepSens, mf.DPALSDim(t.nActive, t.d), env.instrument())
	if err != nil {
		return err
	}
	t.sigmaStep = sigmaStep
	steps := make([]mf.Releaser, len(mechs))
	for i, m := range mechs {
		steps[i] = m
		t.parts = append(t.parts, m.Guarantee())
	}
	itemLambda, biasLambda := t.ridges()
	start := time.Now()
	// In process the steps sum over the matrix; an external engine
	// sums each step's statistic (mf.ALSStepStatistic) where it runs.
	var p *mf.Problem
	var stepEngine statistic.Engine
	if t.data != nil {
		p = mf.FromMatrix(t.data)
	} else {
		stepEngine = t.eng
	}
	t.v, t.itemBias, err = mf.DPALS(ctx, p, mf.DPALSOptions{
		Rank: t.k, Steps: steps, Noise: env.Noise,
		Mean: t.st.Mean, ItemBias: t.itemBias, Counts: t.featureCounts, Active: t.active,
		UserLambda: c.UserLambda, UserDamping: c.UserDamping, ItemLambda: itemLambda, BiasLambda: biasLambda,
		UserClip: c.UserClip, ResidualClip: t.clip, RHSScale: t.rhsScale,
		BiasScale: t.biasScale, PoolWeights: t.poolWeights(), PoolNoise: sigmaStep, PoolPosterior: c.ItemPosterior && c.PooledGram,
		Posterior: func(s, p, alpha []float64) {
			if env.Log != nil {
				env.Log.Info("dpals item prior", "pool_eigenvalues", s, "factor_variance", p, "rating_noise", alpha)
			}
		},
		MaxPerUser: c.MaxPerUser, WeightExponent: c.WeightExp, Init: init, PriorRidge: c.PriorRidge, InitScale: c.InitScale,
		Rand: env.Rand.Rand(), Workers: env.Workers, Engine: stepEngine,
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
	return err
}

// ridges are the active items' ridges of the steps: λ0·(count_j + 1)^ν
// (frequency-scaled; ν = 1 is ALS's weighted-λ, the weighted count being
// the item's total weight Σ_i c_ij up to scale) plus λ·σ·√(2k), the
// spectral scale of the noise left in a Gram block after the PSD
// projection; and the item biases' ridges.
func (t *dpalsTrainer) ridges() (itemLambda, biasLambda []float64) {
	c := t.c
	itemLambda, biasLambda = make([]float64, t.n), make([]float64, t.n)
	noiseRidge := c.ItemLambda * t.sigmaStep * math.Sqrt(2*float64(t.d))
	for j := range t.n {
		if t.active[j] {
			itemLambda[j] = math.Max(c.ItemLambda0*math.Pow(t.counts[j]+1, c.RegExponent)+noiseRidge, 1e-9)
			biasLambda[j] = math.Max(c.ItemDamping*t.sigmaStep, 1e-9)
		}
	}
	return itemLambda, biasLambda
}

// poolWeights is, with a pooled Gram, item j's weight in the statistics,
// Σ_i c_ij², up to a constant: its released weighted count, times w_j²
// with adaptive weights (mf.DPALSOptions.PoolWeights); nil without.
func (t *dpalsTrainer) poolWeights() []float64 {
	c := t.c
	if !c.PooledGram {
		return nil
	}
	if c.WeightExp == 0 {
		return t.featureCounts
	}
	w := mf.AdaptiveWeights(t.featureCounts, c.WeightExp)
	pw := make([]float64, t.n)
	for j := range t.n {
		pw[j] = t.featureCounts[j] * w[j] * w[j]
	}
	return pw
}

// guarantee composes the releases and states what each released.
func (t *dpalsTrainer) guarantee() (privacy.Guarantee, error) {
	c, env := t.c, t.env
	g, err := accountant.Compose(env.Delta, t.parts...)
	if err != nil {
		return g, fmt.Errorf("composing the releases: %w", err)
	}
	if g.Epsilon > env.Epsilon*(1+1e-9) {
		return g, fmt.Errorf("composed ε = %g exceeds the requested %g", g.Epsilon, env.Epsilon)
	}
	g.Notion, g.Relation = privacy.Joint, privacy.RelationUserReplace
	g.Note = fmt.Sprintf("zCDP composition of %d Gaussian release(s).", len(t.parts))
	weights := "1/√n over her n ratings"
	if t.sigmaCount > 0 {
		g.Note += fmt.Sprintf(" Item counts (σ = %.4g, ℓ2 sensitivity %.4g): Σ 1/√n over the users who rated each item, n a user's ratings.", t.sigmaCount, (&statistic.Counts{}).Sensitivity().Value)
		weights = fmt.Sprintf("∝ (noisy count)^%g, normalised so that the squares sum to 1", c.BiasWeightExp)
	}
	g.Note += fmt.Sprintf(" Bias statistics (σ = %.4g, ℓ2 sensitivity %.4g): per-item weighted sums of ratings centred at each user's mean and clipped to ±%g, per-item weighted counts and spreads, a global-mean pair; a user's weights %s.", t.st.Sigma, statistic.BiasSensitivity().Value, t.clip, weights)
	if t.sigmaCov > 0 {
		g.Note += fmt.Sprintf(" Item covariance (σ = %.4g, ℓ2 sensitivity %.4g): Σ over users of x xᵀ, x her ratings centred as above and clipped to ±%g, weighted 1/√m over her m ratings of the %d covered items (those with the largest noisy counts); its top eigenvectors are public item features.", t.sigmaCov, mf.CovSensitivity(t.clip), t.clip, len(t.covItems))
	}
	if steps := c.Steps; steps > 0 && t.sigmaStep > 0 {
		g.Note += fmt.Sprintf(" Each of %d ALS steps (σ = %.4g, ℓ2 sensitivity %.4g over %d items with factors): per item the Gram block Σ c·ũũᵀ and Σ c·y·ũ of the users' rows clipped to ‖ũ‖ ≤ %g", steps, t.sigmaStep, t.stepSens, t.nActive, c.UserClip)
		if t.biasScale > 0 {
			g.Note += fmt.Sprintf(" (with a constant coordinate %g that re-estimates the item biases)", t.biasScale)
		}
		g.Note += fmt.Sprintf(", ratings centred and clipped to ±%g, weights Σ_j c_ij² ≤ 1 per user.", t.clip)
	} else {
		g.Note += " No ALS step ran; the item factors are public post-processing of the releases (item bias, log count, its square, their product, spread; the covariance's eigenvectors)."
	}
	g.Note += " Each user's row and bias are computed on her side from the public model and her own ratings."
	return g, nil
}

// model is the public model: the item factors and biases, the global
// mean, and how a user computes her own row.
func (t *dpalsTrainer) model() *model.Model {
	c := t.c
	m := model.NewPublic("dpals", t.cat)
	m.Rank, m.V = t.k, t.v
	m.Offset, m.ItemBias = t.st.Mean, t.itemBias
	scale := t.scale
	m.Transform.Clamp = &scale
	m.Transform.UserCentred, m.UserDamping = true, c.UserDamping
	m.FoldIn, m.FoldLambda = model.FoldRidge, c.UserLambda
	m.Params = map[string]any{"rank": t.k, "steps": c.Steps, "bias_share": c.BiasShare, "user_lambda": c.UserLambda,
		"user_damping": c.UserDamping, "item_damping": c.ItemDamping, "item_lambda": c.ItemLambda, "item_lambda0": c.ItemLambda0,
		"reg_exponent": c.RegExponent, "weight_exponent": c.WeightExp, "max_per_user": c.MaxPerUser, "user_clip": c.UserClip,
		"clip": t.clip, "min_count": c.MinCount, "fallback": c.Fallback, "bias_scale": c.BiasScale, "rhs_weight": c.RHSWeight,
		"init": c.Init, "prior_ridge": c.PriorRidge, "cov_rank": c.CovRank, "cov_share": c.CovShare, "cov_items": c.CovItems, "cov_scale": c.CovScale,
		"bias_prior": c.BiasPrior, "bias_weight_exponent": c.BiasWeightExp, "count_share": c.CountShare,
		"cov_normalise": c.CovNormalise, "pooled_gram": c.PooledGram, "item_posterior": c.ItemPosterior, "large_from": c.LargeFrom}
	return m
}

// publicInit is the public initial item factors, features of each item
// computed from the releases alone: column 0 the item bias, column 1 the
// log count, column 2 its square, column 3 their product, column 4 the
// spread ratio (each standardised to mean 0 and standard deviation scale
// over the active items); further columns random with standard deviation
// scale/√k (covFeatures overwrites the next ones). Inactive items get zero
// rows. A user's row fitted to these (fold-in) is her own taste for
// well-rated, popular, niche, polarising … items.
func publicInit(itemBias, counts, spread []float64, active []bool, k int, scale float64, r *rand.Rand) []float64 {
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
	cols := [][]float64{b, l, standardise(sq), standardise(prod), standardise(spread)}
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

// minCovItems is the fewest items a covariance release covers (unless the
// catalogue is smaller).
const minCovItems = 20

// plan resolves the automatic parts of the configuration from public
// facts — the number of users N (the same in neighbouring datasets, as the
// relation replaces a user), the catalogue size and the budget — before
// anything is released: how many items the covariance covers (none: no
// covariance release, its share unspent and given to the rest) and
// whether the adaptive weights are used. It returns a copy.
func (c *DPALSConfig) plan(users, items int, eps, delta float64) (*DPALSConfig, error) {
	e := *c
	rho, err := accountant.RhoForApprox(eps, delta)
	if err != nil {
		return nil, err
	}
	if e.LargeFrom > 0 && float64(users)*math.Sqrt(rho) >= e.LargeFrom {
		e.largePlan(users, items)
	}
	if e.CovRank > 0 {
		m := min(e.CovItems, items)
		if e.CovUsersPerItem > 0 {
			m = min(m, int(float64(users)/e.CovUsersPerItem))
		}
		if m < min(minCovItems, items) {
			e.CovRank = 0
		} else {
			e.CovItems = m
		}
	}
	if e.Steps == -1 {
		e.Steps = 0
	}
	if e.Steps == 0 && e.Init != InitPublic {
		return nil, fmt.Errorf("--steps 0 (as planned for %d users at ε = %g) needs --init %s (random factors would be noise)", users, eps, InitPublic)
	}
	if e.BiasWeightExp != 0 && e.AdaptiveFrom > 0 {
		if float64(users)*math.Sqrt(rho) < e.AdaptiveFrom {
			e.BiasWeightExp = 0
		}
	}
	return &e, nil
}

// largePlan is the plan for a large population (N·√ρ ≥ LargeFrom) whose
// catalogue is larger than the covariance covers: the covariance finds
// the taste directions over the most rated items (normalised, over up to
// N/100 of them), each user fits her row to them, and one ALS step with
// the pooled Gram gives every item its factors. Only settings still at
// their defaults change (a setting the caller gave is kept). Measured on
// the Netflix-sized synthetic population (docs/mf.md); at MovieLens and
// Jester sizes it never applies (N·√ρ too small, or the covariance covers
// the whole catalogue).
func (c *DPALSConfig) largePlan(users, items int) {
	d := NewDPALSConfig()
	covItems := largeCovItems
	if c.CovItems != d.CovItems {
		covItems = c.CovItems
	}
	usersPerItem := float64(largeCovUsersPerItem)
	if c.CovUsersPerItem != d.CovUsersPerItem {
		usersPerItem = c.CovUsersPerItem
	}
	m := min(covItems, items)
	if usersPerItem > 0 {
		m = min(m, int(float64(users)/usersPerItem))
	}
	if m >= items {
		// The covariance covers every item: no step is needed to reach
		// the rest (Jester's 100 jokes), so the usual plan stands.
		return
	}
	set := func(field *float64, def, v float64) {
		if *field == def {
			*field = v
		}
	}
	c.CovItems, c.CovUsersPerItem = covItems, usersPerItem
	if c.Steps == -1 {
		c.Steps = 1
	}
	if c.CovRank == d.CovRank {
		c.CovRank = largeCovRank
	}
	if c.Rank == d.Rank {
		c.Rank = publicFeatures + c.CovRank
	}
	if !c.PooledGram && c.MaxPerUser == 0 {
		c.PooledGram = true
	}
	// The item posterior replaces the item ridge: a caller who set the
	// ridge keeps it.
	c.ItemPosterior = c.PooledGram && c.ItemLambda == d.ItemLambda && c.ItemLambda0 == d.ItemLambda0
	c.CovNormalise = true
	set(&c.BiasShare, d.BiasShare, largeBiasShare)
	set(&c.CovShare, d.CovShare, largeCovShare)
	set(&c.ItemLambda, d.ItemLambda, largeItemLambda)
	set(&c.ItemLambda0, d.ItemLambda0, 0)
	set(&c.UserLambda, d.UserLambda, largeUserLambda)
}

// The large-population plan's settings (largePlan).
const (
	largeCovItems        = 5000
	largeCovUsersPerItem = 100.0
	largeCovRank         = 8
	largeBiasShare       = 0.2
	largeCovShare        = 0.45
	largeItemLambda      = 4
	largeUserLambda      = 12
)

// budget splits the zCDP budget ρ of (ε, δ): shares of ρ for the item
// covariance and for the item counts of the adaptive weights when they are
// used; of the rest a share for the bias statistics and the remainder
// evenly over the steps (each rounded down; all of it to the bias
// statistics when there is no step).
func (c *DPALSConfig) budget(eps, delta float64) (rho float64, b budgetSplit, err error) {
	if rho, err = accountant.RhoForApprox(eps, delta); err != nil {
		return 0, b, err
	}
	rest := rho
	if c.CovRank > 0 {
		b.cov = math.Nextafter(c.CovShare*rho, 0)
		rest = math.Nextafter(rest-b.cov, 0)
	}
	if c.BiasWeightExp != 0 {
		b.count = math.Nextafter(c.CountShare*rho, 0)
		rest = math.Nextafter(rest-b.count, 0)
	}
	if c.Steps == 0 {
		b.bias = rest
		return rho, b, nil
	}
	b.bias = math.Nextafter(c.BiasShare*rest, 0)
	b.step = math.Nextafter((rest-b.bias)/float64(c.Steps), 0)
	return rho, b, nil
}

// budgetSplit is the zCDP budget of each release of dpals (0: not made).
type budgetSplit struct {
	count, bias, cov, step float64
}

// covFeatures releases the noised item covariance over the (at most
// CovItems) active items with the largest noisy counts, with zCDP budget
// rho, and writes its top eigenvectors into columns publicFeatures … publicFeatures+CovRank−1 of
// init (items × k; columns past k are dropped). Feature e is the
// eigenvector scaled to unit standard deviation over the covered items,
// times CovScale·√((λ_e − τ)/(λ_1 − τ)), τ = √2·σ·√m the spectral edge of
// the noise: the first gets CovScale, weaker ones less, and eigenvalues
// inside the noise none. Everything but the release is post-processing of
// public values.
func (c *DPALSConfig) covFeatures(ctx context.Context, data *ratings.Matrix, eng statistic.Engine, mean float64, itemBias, counts []float64, active []bool, init []float64, k int, clip, rho float64, env Env) (items []int, sigma float64, mech *mechanism.Gaussian, err error) {
	for j, a := range active {
		if a && counts[j] > 0 {
			items = append(items, j)
		}
	}
	sort.SliceStable(items, func(a, b int) bool { return counts[items[a]] > counts[items[b]] })
	// An engine whose contributors have a budget (the two aggregators: a
	// device's part is the dense upper triangle over the covered items)
	// caps them at what a device affords; the budget is public.
	mCov, err := affordable(eng, min(len(items), c.CovItems), 2, func(m int) (statistic.Contribution, error) {
		return &mf.CovStatistic{Items: items[:m], Clip: clip}, nil
	})
	if err != nil {
		return nil, 0, nil, err
	}
	items = items[:mCov]
	m := len(items)
	r := min(c.CovRank, m, max(k-publicFeatures, 0))
	if r == 0 {
		return nil, 0, nil, nil
	}
	spec := statistic.Covariance(m, clip)
	if mech, err = instrumentedGaussianForRho(spec.Name, rho, env.Delta, spec.Sensitivity, spec.Dim, env.instrument()); err != nil {
		return nil, 0, nil, err
	}
	sigma = mech.Sigma()
	opt := mf.CovOptions{Items: items, Rank: r,
		Mean: mean, ItemBias: itemBias, UserDamping: c.UserDamping, Clip: clip, DropDiagonal: c.CovNormalise,
		Release: mech, Noise: env.Noise, Rand: env.Rand.Rand(), Workers: env.Workers}
	var vals []float64
	var vecs *mat.Dense
	if ne, ok := eng.(NoisingEngine); ok && data == nil {
		// The aggregators sum and noise the upper triangle themselves
		// (each coordinate with noise sd, at least mech's guarantee).
		// In-process the off-diagonal entries carry σ/√2 (the Frobenius
		// layout), here sd: σ = √2·sd gives the spectral edge below.
		st := &mf.CovStatistic{Items: items, Mean: mean, ItemBias: itemBias, UserDamping: c.UserDamping, Clip: clip}
		if err := st.Validate(); err != nil {
			return nil, 0, nil, err
		}
		v, sd, err := ne.SumNoised(ctx, st, mech)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("the item covariance: %w", err)
		}
		sigma = math.Sqrt2 * sd
		C := statistic.UnpackUpper(m, v)
		if c.CovNormalise {
			mf.DropDiagonal(C)
		}
		vals, vecs = mf.TopEigen(C, r, opt.Rand)
	} else {
		var p *mf.Problem
		if data != nil {
			p = mf.FromMatrix(data)
		} else {
			opt.Engine = eng
		}
		if vals, vecs, err = mf.CovFeatures(ctx, p, opt); err != nil {
			return nil, 0, nil, err
		}
	}
	for j := range len(init) / k {
		clear(init[j*k+publicFeatures : j*k+publicFeatures+r])
	}
	tau := math.Sqrt2 * sigma * math.Sqrt(float64(m))
	top := vals[0] - tau
	x := make([]float64, m)
	for e := range r {
		w := 0.0
		if top > 0 && vals[e] > tau {
			w = c.CovScale * math.Sqrt((vals[e]-tau)/top)
		}
		// Entry q of an eigenvector of the covariance is about item q's
		// factor times how often its ratings meet the others', i.e. its
		// count: normalised, the count is divided out. Either way the
		// feature is scaled to unit root mean square over the covered
		// items.
		var ss float64
		for q, j := range items {
			x[q] = vecs.At(q, e)
			if c.CovNormalise {
				x[q] /= math.Max(counts[j], 1)
			}
			ss += x[q] * x[q]
		}
		switch {
		case !c.CovNormalise:
			w *= math.Sqrt(float64(m)) // a unit vector: ss = 1
		case ss > 0:
			w /= math.Sqrt(ss / float64(m))
		}
		for q, j := range items {
			init[j*k+publicFeatures+e] = w * x[q]
		}
	}
	return items, sigma, mech, nil
}

// biasMechanism is the Gaussian mechanism of the bias statistics over n
// items with zCDP budget rho, instrumented with inst (Env.instrument).
func biasMechanism(rho, delta float64, n int, spread bool, inst *mechanism.Instrument) (*mechanism.Gaussian, error) {
	spec := (&statistic.Bias{Items: n, Spread: spread}).Spec()
	return instrumentedGaussianForRho(spec.Name, rho, delta, spec.Sensitivity, spec.Dim, inst)
}

// gaussianForRho is the Gaussian mechanism with zCDP budget rho for a
// release of dim coordinates and sensitivity sens (statistic.Mechanism);
// what names the release in errors.
func gaussianForRho(what string, rho, delta float64, sens mechanism.Sensitivity, dim int) (*mechanism.Gaussian, error) {
	return statistic.Mechanism(statistic.Spec{Name: what, Dim: dim, Sensitivity: sens}, rho, delta)
}

// instrumentedGaussianForRho is gaussianForRho instrumented with inst
// (Env.instrument: an audit's noise factor and tap; nil otherwise).
func instrumentedGaussianForRho(what string, rho, delta float64, sens mechanism.Sensitivity, dim int, inst *mechanism.Instrument) (*mechanism.Gaussian, error) {
	m, err := gaussianForRho(what, rho, delta, sens, dim)
	if err != nil {
		return nil, err
	}
	return m.Instrumented(inst), nil
}

// stepMechanisms are the Gaussian mechanisms of the ALS steps, each with
// zCDP budget rho for a released vector of dim coordinates and ℓ2
// sensitivity sens, instrumented with inst (Env.instrument); sigma is the
// calibrated noise (the noise added is sigma times inst's noise factor).
func (c *DPALSConfig) stepMechanisms(rho, delta, sens float64, dim int, inst *mechanism.Instrument) (sigma float64, mechs []*mechanism.Gaussian, err error) {
	s := mechanism.Sensitivity{Value: sens, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
	if sigma, err = mechanism.GaussianSigma(rho, sens, dim); err != nil {
		return 0, nil, fmt.Errorf("calibrating the ALS steps: %w", err)
	}
	for range c.Steps {
		m, err := mechanism.NewGaussianSigma(sigma, delta, s, dim)
		if err != nil {
			return 0, nil, err
		}
		mechs = append(mechs, m.Instrumented(inst))
	}
	return sigma, mechs, nil
}
