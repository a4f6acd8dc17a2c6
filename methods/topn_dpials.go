package methods

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
	sgram "github.com/privrec/privrec/statistic/gram"
	"github.com/privrec/privrec/topn"
)

func init() {
	Register(&Method{
		Name:    "dp-ials",
		Summary: "private top-N: implicit ALS, each user solving her own row, the items solved from noised per-item statistics (Chien et al. 2021; Krichene et al. 2023)",
		Private: true,
		Needs:   []string{"items"},
		Engine:  true,
		New:     func() Config { return DefaultDPIALS() },
	})
}

// DefaultDPIALS is dp-ials' configuration with its defaults (chosen on
// MovieLens-1M and Jester-1 validation users, docs/topn.md).
func DefaultDPIALS() *DPIALSConfig {
	return &DPIALSConfig{
		Rank: 256, Steps: 0, Cap: 50, CountShare: 0.1, InitShare: 0.6,
		GramNorm: 1, CoverScale: 2, MaxInitItems: 2000, InitDenoise: 1,
		Alpha0: 0.2, Lambda: 0.003, Nu: 1,
		RidgeItems: 1, RowClip: 1, WeightExp: -0.25, GramScale: 1, RHSScale: 1, GlobalScale: 0.3,
		ItemAlpha: 0.02, ItemLambda: 1, StepCover: 2, PriorRidge: true,
	}
}

// DPIALSConfig configures dp-ials.
type DPIALSConfig struct {
	Interactions
	Rank  int `json:"rank" flag:"rank" help:"at most this many latent factors k: the plan keeps the initial Gram's eigenpairs above the noise's edge, at most max(64, covered items/8) (64 with steps: each item's released Gram block in a step has k(k+1)/2 values) and at most rank"`
	Steps int `json:"steps" flag:"steps" help:"noised ALS steps T after the initialisation (0, the default: the initial factors are the model — no step paid on any population measured; −1: planned from the number of users and the budget)"`

	Cap          float64 `json:"cap" flag:"cap" help:"weight cap of the item counts (see dp-popularity): they choose the covered items, weigh each user's items and break ties"`
	CountShare   float64 `json:"count_share" flag:"count-share" help:"fraction of the zCDP budget ρ spent on the item counts"`
	InitShare    float64 `json:"init_share" flag:"init-share" help:"fraction of ρ spent on the item–item Gram whose top eigenvectors initialise the item factors (dp-ease's release) when there are steps; without steps it gets all but the counts' share"`
	GramNorm     float64 `json:"gram_norm" flag:"gram-norm" help:"each user's part of the initial Gram is scaled to ℓ2 norm ≤ this (see dp-ease)"`
	CoverScale   float64 `json:"cover_scale" flag:"cover-scale" help:"the initial Gram covers cover-scale·(N·√ρ_init)^(2/3) items (see dp-ease)"`
	MaxInitItems int     `json:"max_init_items" flag:"max-init-items" help:"at most this many items in the initial Gram"`
	InitDenoise  float64 `json:"init_denoise" flag:"init-denoise" help:"the initial factors are the initial Gram's eigenvectors with eigenvalue above init-denoise × the noise's spectral edge 2σ√m, scaled by √(λ − edge)"`

	Alpha0 float64 `json:"alpha0" flag:"alpha0" help:"user side: weight α₀ of the unobserved items in each user's own solve (and fold-in)"`
	Lambda float64 `json:"lambda" flag:"lambda" help:"user side: ridge λ, scaled by (her items + α₀·catalogue)^ν"`
	Nu     float64 `json:"nu" flag:"nu" help:"user side: frequency exponent ν of the ridge"`
	// RidgeItems sets the item factors' scale against the users' ridge.
	RidgeItems float64 `json:"ridge_items" flag:"ridge-items" help:"the item factors are scaled so that a typical user's ridge λ(n̄ + α₀·catalogue)^ν (n̄: the users' mean number of items, from the noised counts) weighs as much as ridge-items of her items (their squared factor norms averaged as users hold them), × r/64 (at least ½) when only r < 64 directions clear the noise"`

	RowClip     float64 `json:"row_clip" flag:"row-clip" help:"users' rows are clipped to norm Γ = row-clip / (median norm of the covered items' factors) before they enter the statistics"`
	WeightExp   float64 `json:"weight_exponent" flag:"weight-exponent" help:"a user weighs her covered item j ∝ max(count_j, 1)^μ, normalised to Σ_j c_j² = 1 (μ < 0 favours rare items, Krichene et al.)"`
	GramScale   float64 `json:"gram_scale" flag:"gram-scale" help:"weight r of the per-item Gram blocks in the released vector (0: not released; each item's system is then the global Gram and the ridge)"`
	RHSScale    float64 `json:"rhs_scale" flag:"rhs-scale" help:"weight s of the per-item right-hand sides in the released vector"`
	GlobalScale float64 `json:"global_scale" flag:"global-scale" help:"weight g of the global Gram Σ_u w̃w̃ᵀ in the released vector"`
	ItemAlpha   float64 `json:"item_alpha" flag:"item-alpha" help:"item side: weight of the global Gram in each item's system"`
	ItemLambda  float64 `json:"item_lambda" flag:"item-lambda" help:"item side: ridge in units of the step noise's spectral edge 2σ√k"`
	PopWeight   float64 `json:"pop_weight" flag:"pop-weight" help:"every item's score gains pop-weight × its noised count / the largest (a popularity prior; 0: counts only break ties)"`
	PriorRidge  bool    `json:"prior_ridge" flag:"prior-ridge" help:"item side: the ridge pulls each item toward its previous factors (false: toward 0, the papers' ridge), and items without statistics keep theirs"`
	StepCover   float64 `json:"step_cover" flag:"step-cover" help:"items whose noised count is ≥ step-cover × σ√k·√n̄ (σ the step's noise, n̄ the users' mean number of items from the noised counts) get factors; the others rank after them by count"`
}

// Validate checks the settings.
func (c *DPIALSConfig) Validate() error {
	if err := c.Interactions.Validate(); err != nil {
		return err
	}
	pos := func(name string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("--%s %g must be finite and > 0", name, v)
		}
		return nil
	}
	nonneg := func(name string, v float64) error {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("--%s %g must be finite and ≥ 0", name, v)
		}
		return nil
	}
	switch {
	case c.Rank < 1 || c.Rank > 256:
		return fmt.Errorf("--rank %d must be in [1, 256]", c.Rank)
	case c.Steps < -1 || c.Steps > 20:
		return fmt.Errorf("--steps %d must be in [−1, 20] (−1: planned)", c.Steps)
	case !(c.Cap >= 1) || math.IsInf(c.Cap, 0):
		return fmt.Errorf("--cap %g must be finite and ≥ 1", c.Cap)
	case !(c.CountShare > 0 && c.CountShare < 1):
		return fmt.Errorf("--count-share %g must be in (0, 1)", c.CountShare)
	case !(c.InitShare > 0 && c.InitShare < 1) || c.CountShare+c.InitShare >= 1:
		return fmt.Errorf("--init-share %g must be in (0, 1) and leave budget for the steps (count-share + init-share < 1)", c.InitShare)
	case c.MaxInitItems < 2 || c.MaxInitItems > 5000:
		return fmt.Errorf("--max-init-items %d must be in [2, 5000]", c.MaxInitItems)
	case !(c.Nu >= 0 && c.Nu <= 2):
		return fmt.Errorf("--nu %g must be in [0, 2]", c.Nu)
	case !(c.WeightExp >= -2 && c.WeightExp <= 2):
		return fmt.Errorf("--weight-exponent %g must be in [−2, 2]", c.WeightExp)
	}
	for _, p := range []struct {
		n string
		v float64
	}{{"gram-norm", c.GramNorm}, {"cover-scale", c.CoverScale}, {"lambda", c.Lambda}, {"ridge-items", c.RidgeItems}, {"row-clip", c.RowClip},
		{"rhs-scale", c.RHSScale}, {"global-scale", c.GlobalScale}, {"item-lambda", c.ItemLambda}} {
		if err := pos(p.n, p.v); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		n string
		v float64
	}{{"init-denoise", c.InitDenoise}, {"pop-weight", c.PopWeight}, {"alpha0", c.Alpha0}, {"gram-scale", c.GramScale}, {"item-alpha", c.ItemAlpha}, {"step-cover", c.StepCover}} {
		if err := nonneg(p.n, p.v); err != nil {
			return err
		}
	}
	return nil
}

// planSteps is the number of noised steps when --steps is −1 (the
// default is none: on Jester-1 a step lowered Recall@20 even without
// noise, docs/topn.md), from public facts: the number of users N and the
// budget ρ. A step pays only when
// the items' statistics rise above its noise, which takes N·√ρ large: on
// MovieLens-1M (about 5 000 training users, N·√ρ ≤ 9 000 up to ε = 16)
// every step tried cost more than it gave (validation users,
// docs/topn.md), so none is planned there; on a synthetic
// population of 200 000 users at ε = 1 (N·√ρ ≈ 31 000) one step was about
// neutral. Hence no step below N·√ρ = 5·10⁴, one up to 5·10⁵, two above.
func planSteps(users int, rho float64) int {
	switch v := float64(users) * math.Sqrt(rho); {
	case v < 5e4:
		return 0
	case v < 5e5:
		return 1
	}
	return 2
}

func (c *DPIALSConfig) scales() topn.StepScales {
	return topn.StepScales{Gram: c.GramScale, RHS: c.RHSScale, Global: c.GlobalScale}
}

// stepSensitivity is the ℓ2 sensitivity of one step's release
// (topn.StepScales.Sensitivity has the proof).
func (c *DPIALSConfig) stepSensitivity() mechanism.Sensitivity {
	return mechanism.Sensitivity{Value: c.scales().Sensitivity(), Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
}

// Train: plan → counts → initial Gram and its eigenvectors → T × (users'
// own solves → noised item statistics → item solves) → the public model,
// from which each user's list is computed on her side.
func (c *DPIALSConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	eng, cat, err := topnEngine("dp-ials", &c.Interactions, in, env)
	if err != nil {
		return nil, err
	}
	t, err := c.newTrainer(eng, cat.Len(), env)
	if err != nil {
		return nil, err
	}
	if err := t.releaseCounts(ctx); err != nil {
		return nil, err
	}
	if err := t.initialFactors(ctx); err != nil {
		return nil, err
	}
	if err := t.runSteps(ctx); err != nil {
		return nil, err
	}
	g, err := t.guarantee()
	if err != nil {
		return nil, err
	}
	return &release.Release{Public: t.model(cat), Guarantee: g, Report: release.Report{
		"sigma_counts": t.sigmaCount, "sigma_init": t.sigmaInit, "sigma_steps": slices.Clone(t.sigmas),
		"init_items": t.mInit, "rank_cap": t.rankCap, "init_rank": t.initRank, "rank": t.k, "covered_items": t.withFactors(), "step_items": len(t.covered), "steps": t.steps}}, nil
}

// dpialsTrainer is one dp-ials training as it goes: the plan (rank k,
// catalogue n, the budget ρ and its split, the number of steps), the
// releases' guarantees in order, and what the releases made public (the
// noised counts, the item factors h and what the steps covered).
type dpialsTrainer struct {
	c   *DPIALSConfig
	env Env
	eng statistic.Engine

	k, n                            int
	rho, rhoCount, rhoInit, rhoStep float64
	steps                           int
	parts                           []privacy.Guarantee

	counts     []float64
	sigmaCount float64
	order      []int   // the items by noised count
	nbar       float64 // the users' mean number of items, from the noised counts

	mInit, initRank int
	rankCap         int // planRank: the most factors the initial Gram may give
	sigmaInit       float64
	h               []float64 // item factors, n × k
	userRidge       float64   // a typical user's ridge (typicalRidge)
	ridgeItems      float64   // how many of her items it weighs (DPIALSConfig.ridgeItems)

	sens    mechanism.Sensitivity
	covered []int // the items the steps' statistics cover
	sigmas  []float64
}

// newTrainer plans the budget: ρ from (ε, δ) and the counts' share.
func (c *DPIALSConfig) newTrainer(eng statistic.Engine, n int, env Env) (*dpialsTrainer, error) {
	rho, err := accountant.RhoForApprox(env.Epsilon, env.Delta)
	if err != nil {
		return nil, err
	}
	if err := c.scales().Check(); err != nil {
		return nil, err
	}
	return &dpialsTrainer{c: c, env: env, eng: eng, k: c.Rank, n: n, rho: rho,
		rhoCount: math.Nextafter(c.CountShare*rho, 0), sens: c.stepSensitivity()}, nil
}

// releaseCounts releases the item counts (the first statistic) and plans
// the rest of the budget from them and the public number of users: the
// steps, the initial Gram's and each step's share.
func (t *dpialsTrainer) releaseCounts(ctx context.Context) error {
	counts, sigma, part, err := releaseCappedCounts(ctx, t.eng, t.n, t.c.Cap, t.rhoCount, t.env)
	if err != nil {
		return err
	}
	t.parts = append(t.parts, part)
	t.counts, t.sigmaCount, t.order = counts, sigma, byCount(counts)
	// The number of users is public (the relation replaces a user); an
	// external engine knows it once it has summed the counts.
	users := t.eng.Users()
	// The users' mean number of items n̄, read from the noised counts.
	var total float64
	for _, v := range counts {
		total += max(v, 0)
	}
	t.nbar = max(1, total/float64(max(1, users)))
	t.steps = t.c.Steps
	if t.steps < 0 {
		t.steps = planSteps(users, t.rho)
	}
	t.rhoInit = math.Nextafter(t.rho-t.rhoCount, 0)
	if t.steps > 0 {
		t.rhoInit = math.Nextafter(t.c.InitShare*t.rho, 0)
		t.rhoStep = math.Nextafter((t.rho-t.rhoCount-t.rhoInit)/float64(t.steps), 0)
	}
	return nil
}

// initialFactors releases dp-ease's noised Gram over the items with the
// largest noised counts (the second statistic) and takes its top
// eigenvectors as the initial item factors (post-processing), scaled
// against a typical user's ridge.
func (t *dpialsTrainer) initialFactors(ctx context.Context) error {
	c := t.c
	users := t.eng.Users()
	mInit := (&DPEASEConfig{CoverScale: c.CoverScale, MaxItems: c.MaxInitItems}).covered(users, t.n, t.rhoInit)
	// Through the two aggregators a device can afford only so large a
	// Gram: the covered items shrink to what she affords, as dp-ease's.
	mInit, err := affordable(t.eng, mInit, 2, func(m int) (statistic.Contribution, error) {
		cols, err := topn.NewColumns(t.n, t.order[:m])
		if err != nil {
			return nil, err
		}
		return sgram.NewGram(cols, nil, c.GramNorm)
	})
	if err != nil {
		return err
	}
	initCols, err := topn.NewColumns(t.n, t.order[:mInit])
	if err != nil {
		return err
	}
	gram, sigmaInit, part, err := releaseGram(ctx, t.eng, initCols, nil, c.GramNorm, t.rhoInit, t.env)
	if err != nil {
		return err
	}
	t.parts = append(t.parts, part)
	t.mInit, t.sigmaInit = mInit, sigmaInit
	t.rankCap = c.planRank(mInit, t.steps)
	t.k = t.rankCap
	if err := t.eigenFactors(gram); err != nil {
		return err
	}
	t.userRidge = c.typicalRidge(t.nbar, t.n)
	t.ridgeItems = c.ridgeItems(t.initRank)
	scaleToRidge(t.h, t.k, t.userRidge/t.ridgeItems, t.counts)
	return nil
}

// eigenFactors sets h to the released Gram's eigenvectors that clear
// init-denoise × the noise's spectral edge, or, when none does and there
// are steps, to random factors on the same items (public randomness, as
// Chien et al.'s steps start); initRank is then −1.
func (t *dpialsTrainer) eigenFactors(gram *mat.SymDense) error {
	k, items := t.k, t.order[:t.mInit]
	edge := 2 * t.sigmaInit * math.Sqrt(float64(t.mInit))
	src := t.env.Rand
	if src == nil {
		src = noise.Seeded(t.env.Seed)
	}
	spec, err := topn.DenoiseRank(gram, t.c.InitDenoise*edge, edge, k, src.Rand())
	if err != nil {
		return err
	}
	t.h = make([]float64, t.n*k)
	if spec != nil {
		_, r := spec.Dims() // largest eigenvalue first
		t.initRank = min(r, k)
		for q, j := range items {
			for e := range t.initRank {
				t.h[j*k+e] = spec.At(q, e)
			}
		}
	}
	if t.steps == 0 && t.initRank > 0 && t.initRank < k {
		t.h, t.k = keepColumns(t.h, k, t.initRank), t.initRank
	}
	if t.initRank == 0 && t.steps > 0 {
		r := src.Rand()
		for _, j := range items {
			for e := range k {
				t.h[j*k+e] = r.NormFloat64()
			}
		}
		t.initRank = -1
	}
	return nil
}

// runSteps runs the planned ALS steps over the items the steps cover; a
// step that cannot learn anything ends them (unspent steps cost nothing:
// the guarantee composes what ran).
func (t *dpialsTrainer) runSteps(ctx context.Context) error {
	sigmaStep := math.Inf(1)
	if t.steps > 0 {
		var err error
		if sigmaStep, err = mechanism.GaussianSigma(t.rhoStep, t.sens.Value, 1); err != nil {
			return fmt.Errorf("calibrating the dp-ials steps: %w", err)
		}
	}
	t.covered = t.stepItems(sigmaStep)
	cols, err := topn.NewColumns(t.n, t.covered)
	if err != nil {
		return err
	}
	f := make([]float64, t.n)
	for _, j := range t.covered {
		f[j] = math.Pow(math.Max(t.counts[j], 1), t.c.WeightExp)
	}
	stepsRun := 0
	for s := range t.steps {
		if len(t.covered) == 0 || t.initRank == 0 {
			break // nothing to learn from: the counts alone rank
		}
		med := medianNorm(t.h, t.k)
		if !(med > 0) {
			break
		}
		if err := t.step(ctx, s+1, t.c.RowClip/med, cols, f); err != nil {
			return err
		}
		stepsRun++
	}
	t.steps = min(t.steps, stepsRun)
	return nil
}

// stepItems are the items whose noised count clears the steps' noise: an
// item's right-hand side sums about count_j/√n̄ clipped rows (n̄ the users'
// mean number of items, read from the noised counts) against noise of
// norm σ√k, so items below step-cover × σ√k·√n̄ users are left without
// factors.
func (t *dpialsTrainer) stepItems(sigmaStep float64) []int {
	coverMin := t.c.StepCover * sigmaStep * math.Sqrt(float64(t.k)*t.nbar)
	var covered []int
	for _, j := range t.order {
		if t.counts[j] >= coverMin {
			covered = append(covered, j)
		}
	}
	return covered
}

// step is ALS step number s: each user solves her own row against the
// public h, scales it by 1/Γ (gamma) and clips it; the engine sums the
// parts and releases them once (a statistic), and the items are solved
// from the release (post-processing).
func (t *dpialsTrainer) step(ctx context.Context, s int, gamma float64, cols topn.Columns, f []float64) error {
	c, k := t.c, t.k
	st, err := topn.NewStepStatistic(s, k, t.h, c.Alpha0, c.Lambda, c.Nu, gamma, cols, f, c.scales())
	if err != nil {
		return err
	}
	stats, sigma, part, err := releaseStatRho(ctx, t.eng, st, t.rhoStep, t.env)
	if err != nil {
		return err
	}
	t.parts = append(t.parts, part)
	t.sigmas = append(t.sigmas, sigma)
	unit := c.GramScale
	if unit == 0 {
		unit = c.RHSScale
	}
	ridge := c.ItemLambda * 2 * sigma * math.Sqrt(float64(k)) / unit
	next := make([]float64, t.n*k)
	var prior []float64
	if c.PriorRidge {
		prior = t.h
		copy(next, t.h)
	}
	if err := topn.SolveItems(ctx, stats, topn.ItemSolve{Layout: st.Layout(), Scales: c.scales(), Alpha: c.ItemAlpha,
		Ridge: func(int) float64 { return ridge }, Gamma: gamma, Prior: prior, Workers: t.env.Workers}, cols, next); err != nil {
		return err
	}
	// The item factors' overall scale is arbitrary (the users' rows
	// absorb it) but the users' ridge is not: keep it where the initial
	// factors have it.
	scaleToRidge(next, k, t.userRidge/t.ridgeItems, t.counts)
	t.h = next
	if t.env.Progress != nil {
		t.env.Progress(s, t.steps)
	}
	if t.env.Log != nil {
		t.env.Log.Debug("dp-ials", "step", s, "of", t.steps, "sigma", sigma, "covered", len(t.covered), "gamma", gamma)
	}
	return nil
}

// active reports the items with factors (a non-zero row of h).
func (t *dpialsTrainer) active() []bool {
	active := make([]bool, t.n)
	for j := range t.n {
		active[j] = slices.ContainsFunc(t.h[j*t.k:j*t.k+t.k], func(v float64) bool { return v != 0 })
	}
	return active
}

// withFactors is the number of items with factors.
func (t *dpialsTrainer) withFactors() int {
	return countTrue(t.active())
}

// guarantee composes the releases, with a note that says what each was.
func (t *dpialsTrainer) guarantee() (privacy.Guarantee, error) {
	c := t.c
	gramText := fmt.Sprintf("r·Σ c_j T(w̃w̃ᵀ) (r = %g), ", c.GramScale)
	if c.GramScale == 0 {
		gramText = "(no per-item Gram: r = 0) "
	}
	stepText := "No ALS step (none asked for, or too few users for the budget when planned): the initial factors are the public model."
	if t.steps > 0 {
		stepText = fmt.Sprintf("%d ALS step(s): each user solves her own row against the public item factors (never released), scales it by 1/Γ and clips it to norm 1, weighs her items with factors by c_j ∝ count_j^%g normalised to Σ c_j² ≤ 1, and the per-item sums %sand s·Σ c_j w̃ (s = %g) over %d items and g·Σ T(w̃w̃ᵀ) (g = %g) are released once per step (σ = %s, ℓ2 sensitivity %.4g); the items are solved from the released sums (post-processing).",
			t.steps, c.WeightExp, gramText, c.RHSScale, len(t.covered), c.GlobalScale, fmtSigmas(t.sigmas), t.sens.Value)
	}
	return topnGuarantee(t.env, t.parts, fmt.Sprintf(
		"zCDP composition of %d Gaussian releases. Item counts (σ = %.4g, ℓ2 sensitivity %.4g). Item–item Gram over the %d items with the largest noised counts (σ = %.4g, ℓ2 sensitivity %.4g), whose top eigenvectors initialise the item factors. %s Each user's list is computed on her side from the public item factors and her own items (the iALS user step).",
		len(t.parts), t.sigmaCount, (&statistic.Counts{Cap: c.Cap}).Sensitivity().Value, t.mInit, t.sigmaInit, sgram.GramSensitivity(c.GramNorm).Value, stepText))
}

// model is the public model: the item factors, the counts as a tie-break
// (or a popularity prior) and the items without factors after every item
// with factors; each user's own part is her fold-in on her side.
func (t *dpialsTrainer) model(cat *model.Catalogue) *model.Model {
	c, k := t.c, t.k
	active := t.active()
	bias := make([]float64, t.n)
	top := 0.0
	for _, v := range t.counts {
		top = max(top, v)
	}
	for j := range t.n {
		bias[j] = t.counts[j] * 1e-9
		if c.PopWeight > 0 && top > 0 {
			bias[j] = c.PopWeight * max(t.counts[j], 0) / top
		}
		if !active[j] {
			bias[j] += topn.Uncovered
		}
	}
	m := topnModel("dp-ials", cat.IDs(), catTitles(cat), c.threshold())
	m.Rank, m.V, m.ItemBias = k, t.h, bias
	topn.SetImplicitFoldIn(m, c.Alpha0, c.Lambda, c.Nu)
	m.Params["rank"], m.Params["steps"], m.Params["init_items"], m.Params["init_rank"] = k, t.steps, t.mInit, t.initRank // −1: random
	// covered_items: the items with factors (what a list can rank by a
	// user's taste); step_items: those the steps' statistics cover.
	m.Params["covered_items"], m.Params["step_items"], m.Params["weight_exponent"] = t.withFactors(), len(t.covered), c.WeightExp
	m.Params["ridge_items"] = t.ridgeItems
	return m
}

// rankFloor and rankPerItems bound the factors an initial Gram over m
// items may give (planRank): max(rankFloor, m/rankPerItems).
const rankFloor, rankPerItems = 64, 8

// planRank is the most factors k the initial Gram over m items may give,
// from public facts (m is planned from N·√ρ): max(64, m/8), at most
// --rank. Which of them are kept is the noise's call (the eigenpairs
// above its spectral edge, eigenFactors), so k follows the population and
// ε where the cap does not bind: 480 189 Netflix-shaped users keep a
// rank-64 cap at every ε (Recall@20 flat at 0.149–0.150 from ε = 0.5 to
// 16) and 50 000 users keep 208 eigenpairs at ε = 8, where rank 64 gives
// validation Recall@20 0.155, 128 0.160 and 256 0.161. The m/8 bound keeps
// a small catalogue from being fitted item by item: Jester-1's 100 jokes
// keep all 100 eigenpairs at ε = 8 with rank 256 and lose 0.005 of test
// Recall@20 against rank 64. With noised steps the cap stays 64: each
// step releases k(k+1)/2 values per item, and the steps were measured at
// rank ≤ 64 only.
func (c *DPIALSConfig) planRank(m, steps int) int {
	if steps != 0 {
		return min(c.Rank, rankFloor)
	}
	return min(c.Rank, max(rankFloor, m/rankPerItems))
}

// keepColumns is the rows × k matrix h with only its first r columns.
func keepColumns(h []float64, k, r int) []float64 {
	out := make([]float64, 0, len(h)/k*r)
	for j := 0; (j+1)*k <= len(h); j++ {
		out = append(out, h[j*k:j*k+r]...)
	}
	return out
}

// typicalRidge is the ridge of a user with the mean number of items n̄ in
// her own solve (and fold-in), λ(n̄ + α₀·n)^ν for a catalogue of n items.
func (c *DPIALSConfig) typicalRidge(nbar float64, n int) float64 {
	return c.Lambda * math.Pow(nbar+c.Alpha0*float64(n), c.Nu)
}

// ridgeRankFull is the number of kept directions from which the users'
// ridge weighs the full ridge-items; below it the ridge weighs
// ridge-items × r/ridgeRankFull, at least half of it.
const ridgeRankFull = 64

// ridgeItems is how many of a typical user's items her ridge weighs for
// r kept directions (r < 0: random factors, the full ridge): a few
// directions, cut by the noise, regularise by themselves, while a model
// that keeps its whole rank needs the ridge — as dp-ease's λ grows with
// its kept eigenpairs. Measured (test Recall@20, noise seed 100): at
// ε = 8 MovieLens-1M keeps 31 directions and gives 0.295 with a ridge of
// half an item, 0.292 with a whole one, where Jester-1 (64 kept) gives
// 0.694 with half and 0.704 with a whole item, and the 50 000-user
// Netflix-shaped population (64 kept) 0.136 and 0.152.
func (c *DPIALSConfig) ridgeItems(r int) float64 {
	if r < 0 {
		return c.RidgeItems
	}
	return c.RidgeItems * min(1, max(0.5, float64(r)/ridgeRankFull))
}

// scaleToRidge rescales the item factors h (rows × k) so that the mean
// squared norm of the items with factors, weighted by the noised counts
// (each item as often as users hold it; weight ≥ 1), is ms: a typical
// user's ridge then weighs as much as ms⁻¹·R of her own items. Nothing
// changes when no item has factors. Post-processing of released values.
//
// The users' rows absorb the factors' overall scale, but not their
// ridge R: a user's solve (α₀HᵀH + Σ_{j∈I_u} h_j h_jᵀ + R·I)⁻¹ Σ_{j∈I_u} h_j
// with H = c·W scores the items as W(α₀WᵀW + W_uᵀW_u + (R/c²)·I)⁻¹W_uᵀ1:
// only R/c², the ridge against the factors' own scale, matters, and it is
// best read against what her own items bring, tr(W_uᵀW_u) ≈ |I_u| × the
// count-weighted mean squared norm. Scaling the factors to median norm 1
// (the rule before) left R/c² to the catalogue's size (through α₀·n in R)
// and to how many tail items the Gram covered: the ridge was worth 0.04
// average items on Jester-1 (100 items), where rank-32 rows then fitted
// each user's own items and scored the others by noise (Recall@20 0.34,
// below popularity's 0.63), and it fell as ε let the Gram cover more tail
// items on the 50 000-user Netflix-shaped population (Recall@20 0.129 at
// ε = 1, 0.127 at ε = 8).
func scaleToRidge(h []float64, k int, ms float64, counts []float64) {
	var sum, weight float64
	for j := 0; (j+1)*k <= len(h); j++ {
		var t float64
		for _, v := range h[j*k : j*k+k] {
			t += v * v
		}
		if t > 0 {
			w := max(counts[j], 1)
			sum += w * t
			weight += w
		}
	}
	if !(sum > 0) || !(ms > 0) {
		return
	}
	f := math.Sqrt(ms * weight / sum)
	for i := range h {
		h[i] *= f
	}
}

// medianNorm is the median norm of the non-zero rows of h (rows × k), 0
// when there is none.
func medianNorm(h []float64, k int) float64 {
	var norms []float64
	for r := 0; r+k <= len(h); r += k {
		var s float64
		for _, v := range h[r : r+k] {
			s += v * v
		}
		if s > 0 {
			norms = append(norms, math.Sqrt(s))
		}
	}
	if len(norms) == 0 {
		return 0
	}
	slices.Sort(norms)
	return norms[len(norms)/2]
}

func fmtSigmas(s []float64) string {
	if len(s) == 0 {
		return "none"
	}
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.4g", v)
	}
	return out
}
