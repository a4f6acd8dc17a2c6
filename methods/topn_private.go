package methods

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/statistic/gram"
	"github.com/privrec/privrec/topn"
)

// The private top-N models. Each reads as plan → statistics (per-user
// contributions, summed, released once through a Gaussian mechanism) →
// post-processing → each user's own list, computed on her side from the
// public model and her own interactions. The relation is the joint-DP
// methods' (one user's ratings replaced by any others; the catalogue and
// the number of users public); the item set is the declared catalogue.
func init() {
	Register(&Method{
		Name:    "dp-popularity",
		Summary: "private top-N: items by noised user counts (each user's weight capped)",
		Private: true,
		Needs:   []string{"items"},
		Engine:  true,
		New:     func() Config { return &DPPopularityConfig{Cap: 50} },
	})
	Register(&Method{
		Name:    "dp-ease",
		Summary: "private top-N (recommended): EASE on a noised, normalised item–item Gram over the items with the largest noised counts",
		Private: true,
		Needs:   []string{"items"},
		Engine:  true,
		New:     func() Config { return NewDPEASEDefaults() },
	})
}

// topnPlan reads the private interactions onto the declared catalogue.
func topnPlan(name string, sel *Interactions, in release.Input) (*topn.Interactions, *model.Catalogue, error) {
	cat, err := in.NeedCatalogue(name)
	if err != nil {
		return nil, nil, err
	}
	data, _, _, err := sel.interactions(in)
	if err != nil {
		return nil, nil, err
	}
	return topn.FromMatrix(data), cat, nil
}

// releaseCappedCounts sums the users' capped count contributions
// (statistic.Counts) through eng and releases them with zCDP budget rho.
func releaseCappedCounts(ctx context.Context, eng statistic.Engine, items int, cap, rho float64, env Env) ([]float64, float64, privacy.Guarantee, error) {
	return releaseStatRho(ctx, eng, &statistic.Counts{Items: items, Cap: cap}, rho, env)
}

// topnGuarantee composes the parts into the method's guarantee.
func topnGuarantee(env Env, parts []privacy.Guarantee, note string) (privacy.Guarantee, error) {
	g, err := accountant.Compose(env.Delta, parts...)
	if err != nil {
		return g, fmt.Errorf("composing the releases: %w", err)
	}
	if g.Epsilon > env.Epsilon*(1+1e-9) {
		return g, fmt.Errorf("composed ε = %g exceeds the requested %g", g.Epsilon, env.Epsilon)
	}
	g.Notion, g.Relation, g.Note = privacy.Joint, privacy.RelationUserReplace, note
	return g, nil
}

// DPPopularityConfig configures dp-popularity.
type DPPopularityConfig struct {
	Interactions
	Cap float64 `json:"cap" flag:"cap" help:"a user with n interactions weighs each by min(1, √(cap/n)): users with at most cap count fully (ℓ2 sensitivity √(2·cap))"`
}

// Validate checks the settings.
func (c *DPPopularityConfig) Validate() error {
	if err := c.Interactions.Validate(); err != nil {
		return err
	}
	if !(c.Cap >= 1) || math.IsInf(c.Cap, 0) {
		return fmt.Errorf("--cap %g must be finite and ≥ 1", c.Cap)
	}
	return nil
}

// Train releases the capped counts once.
func (c *DPPopularityConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	eng, cat, err := topnEngine("dp-popularity", &c.Interactions, in, env)
	if err != nil {
		return nil, err
	}
	rho, err := accountant.RhoForApprox(env.Epsilon, env.Delta)
	if err != nil {
		return nil, err
	}
	counts, sigma, part, err := releaseCappedCounts(ctx, eng, cat.Len(), c.Cap, rho, env)
	if err != nil {
		return nil, err
	}
	g, err := topnGuarantee(env, []privacy.Guarantee{part}, fmt.Sprintf(
		"One Gaussian release (σ = %.4g) of the item counts: a user with n interactions on the declared catalogue adds min(1, √(%g/n)) to each of her items (ℓ2 sensitivity %.4g under replacement). Each user's list is the noised counts without her own items, on her side.",
		sigma, c.Cap, (&statistic.Counts{Cap: c.Cap}).Sensitivity().Value))
	if err != nil {
		return nil, err
	}
	m := topnModel("dp-popularity", cat.IDs(), catTitles(cat), c.threshold())
	m.ItemBias = counts
	m.Params = map[string]any{"cap": c.Cap}
	return &release.Release{Public: m, Guarantee: g, Report: release.Report{"sigma": sigma, "items": cat.Len()}}, nil
}

func catTitles(c *model.Catalogue) []string {
	if !c.HasTitles() {
		return nil
	}
	return c.Titles()
}

// NewDPEASEDefaults returns dp-ease's defaults (chosen on MovieLens-1M
// validation users; docs/topn.md).
func NewDPEASEDefaults() *DPEASEConfig {
	return &DPEASEConfig{Cap: 20, CountShare: 0.15, GramNorm: 1, CoverScale: 1.5, MaxItems: 2000, LambdaDiag: 1, LambdaDiagMax: EASELambdaDiag, LambdaRank: 64, LambdaScale: 0.1, Denoise: 1, MaxRank: 256}
}

// DPEASEConfig configures dp-ease.
type DPEASEConfig struct {
	Interactions
	Cap        float64 `json:"cap" flag:"cap" help:"weight cap of the item counts that choose the covered items (see dp-popularity)"`
	CountShare float64 `json:"count_share" flag:"count-share" help:"fraction of the zCDP budget ρ spent on the item counts"`
	GramNorm   float64 `json:"gram_norm" flag:"gram-norm" help:"each user's part of the Gram (the upper triangle of x xᵀ over her covered items) is scaled to ℓ2 norm ≤ this (ℓ2 sensitivity √2·gram-norm)"`
	CoverScale float64 `json:"cover_scale" flag:"cover-scale" help:"the Gram covers m = cover-scale·(N·√ρ_Gram)^(2/3) items (N users, ρ_Gram its zCDP budget), those with the largest noised counts: the more users and budget, the more items rise above the noise"`
	MaxItems   int     `json:"max_items" flag:"max-items" help:"at most this many covered items (the release has m²/2 values, the model m² weights)"`
	LambdaDiag float64 `json:"lambda_diag" flag:"lambda-diag" help:"EASE's λ = a × the noised Gram's mean diagonal + lambda-scale × the noise's spectral edge, a = r/lambda-rank within [lambda-diag, lambda-diag-max] (r the kept eigenpairs): the first term grows with the population as the Gram does (as ease's λ), the second covers the noise; lambda-diag is a for a small kept model, whose rank cut already regularises"`
	// LambdaDiagMax is a for a kept model of many directions (at least
	// lambda-rank × lambda-diag-max eigenpairs): ease's own.
	LambdaDiagMax float64 `json:"lambda_diag_max" flag:"lambda-diag-max" help:"a for a kept model of many eigenpairs (close to EASE on the covered items, so it takes ease's own ridge, 3 × the mean diagonal); equal to lambda-diag: a fixed coefficient"`
	LambdaRank    float64 `json:"lambda_rank" flag:"lambda-rank" help:"kept eigenpairs per unit of a (a = r/lambda-rank within [lambda-diag, lambda-diag-max]): the more directions the model fits, the more ridge each needs"`
	LambdaScale   float64 `json:"lambda_scale" flag:"lambda-scale" help:"the noise's part of EASE's λ, in units of the noise's spectral edge 2σ√m (m covered items)"`
	// Denoise keeps the eigenpairs of the noised Gram above Denoise times
	// the noise's spectral edge, shrunk by the edge (0: no denoising).
	Denoise float64 `json:"denoise" flag:"denoise" help:"keep the noised Gram's eigenvalues above denoise × the noise's spectral edge 2σ√m, shrunk by the edge, before EASE"`
	MaxRank int     `json:"max_rank" flag:"max-rank" help:"keep at most this many eigenpairs (the model is items × rank; large populations clear the noise floor with hundreds)"`
	// WeightExp tilts each user's norm toward less popular items: covered
	// item j gets the public weight g_j = max(c̃_j, 1)^weight-exp (c̃ the
	// noised counts), in the line of Krichene et al.'s adaptive weights.
	WeightExp float64 `json:"weight_exp" flag:"weight-exp" help:"item weights g_j = (noised count)^weight-exp inside each user's part of the Gram, undone after the release (0: none; −0.5 favours less popular items)"`
	// featurePrior is the weight, in units of the noised Gram's mean
	// diagonal, of the declared public features' prior added to the
	// noised Gram (topn.AddFeaturePrior; 0: none). dp-ease-features sets it.
	featurePrior float64
}

// Validate checks the settings.
func (c *DPEASEConfig) Validate() error {
	if err := c.Interactions.Validate(); err != nil {
		return err
	}
	switch {
	case !(c.Cap >= 1) || math.IsInf(c.Cap, 0):
		return fmt.Errorf("--cap %g must be finite and ≥ 1", c.Cap)
	case !(c.CountShare > 0 && c.CountShare < 1):
		return fmt.Errorf("--count-share %g must be in (0, 1)", c.CountShare)
	case !(c.GramNorm > 0) || math.IsInf(c.GramNorm, 0):
		return fmt.Errorf("--gram-norm %g must be finite and > 0", c.GramNorm)
	case !(c.CoverScale > 0) || math.IsInf(c.CoverScale, 0):
		return fmt.Errorf("--cover-scale %g must be finite and > 0", c.CoverScale)
	case c.MaxItems < 2 || c.MaxItems > 5000:
		return fmt.Errorf("--max-items %d must be in [2, 5000]", c.MaxItems)
	case c.MaxRank < 1:
		return fmt.Errorf("--max-rank %d must be ≥ 1", c.MaxRank)
	case !(c.LambdaScale > 0) || math.IsInf(c.LambdaScale, 0):
		return fmt.Errorf("--lambda-scale %g must be finite and > 0", c.LambdaScale)
	case !(c.LambdaDiag >= 0) || math.IsInf(c.LambdaDiag, 0):
		return fmt.Errorf("--lambda-diag %g must be finite and ≥ 0", c.LambdaDiag)
	case !(c.LambdaDiagMax >= c.LambdaDiag) || math.IsInf(c.LambdaDiagMax, 0):
		return fmt.Errorf("--lambda-diag-max %g must be finite and ≥ --lambda-diag %g", c.LambdaDiagMax, c.LambdaDiag)
	case !(c.LambdaRank > 0) || math.IsInf(c.LambdaRank, 0):
		return fmt.Errorf("--lambda-rank %g must be finite and > 0", c.LambdaRank)
	}
	return nil
}

// covered is the number of items the Gram covers, planned from public
// facts: N users, the catalogue's n items and the Gram's budget. The
// Gram's signal eigenvalues grow like N/m per covered item while the
// noise's spectral edge grows like √m/√ρ, so m ∝ (N√ρ)^(2/3) keeps their
// ratio; the scale was chosen on MovieLens-1M validation users (1.5: the
// best of 1–3, i.e. of 60–1 000 items, at ε = 1 and ε = 8).
func (c *DPEASEConfig) covered(users, items int, rho float64) int {
	m := int(math.Round(c.CoverScale * math.Pow(float64(users)*math.Sqrt(rho), 2.0/3)))
	return max(2, min(m, c.MaxItems, items))
}

// ridge is dp-ease's λ and the released values it is made of.
type ridge struct {
	Diag   float64 // d̄, the noised Gram's mean diagonal
	Edge   float64 // the noise's spectral edge 2σ√m
	Kept   int     // r, the kept eigenpairs
	Coef   float64 // a, the coefficient of d̄
	Lambda float64 // a·d̄ + lambda-scale·edge
}

// ridge is dp-ease's λ from released values only: the noised Gram's mean
// diagonal diag, the noise's spectral edge and the number of eigenpairs
// kept above it. The signal's scale grows with the population (every
// user adds to the diagonal), the noise's does not, so λ is a·d̄ plus a
// noise term (issue 39: a ridge in units of the noise alone let
// Recall@20 fall from ε = 1 to ε = 8 at 480 000 users). The kept
// eigenpairs are the model's free directions: a dozen of them are a
// regularisation of their own, which a ridge only biases further, while
// hundreds make the model close to EASE on the covered items, which needs
// EASE's ridge. So a grows with them, r/lambda-rank, from lambda-diag to
// lambda-diag-max (ease's 3). docs/topn.md derives and measures it.
func (c *DPEASEConfig) ridge(diag, edge float64, kept int) ridge {
	r := ridge{Diag: math.Max(diag, 0), Edge: edge, Kept: kept}
	r.Coef = min(max(float64(kept)/c.LambdaRank, c.LambdaDiag), c.LambdaDiagMax)
	r.Lambda = r.Coef*r.Diag + c.LambdaScale*edge
	return r
}

// meanDiag is the mean diagonal entry of g.
func meanDiag(g *mat.SymDense) float64 {
	m := g.SymmetricDim()
	var s float64
	for i := range m {
		s += g.At(i, i)
	}
	return s / float64(m)
}

// releaseGram is the Gram release of dp-ease (and of dp-ials' initial
// factors): the users' parts of the item–item Gram over the covered
// columns (gram.Gram: public column weights colW, nil for none, each part
// scaled to ℓ2 norm ≤ norm), summed through eng and released once, upper
// triangle, with zCDP budget rho. It returns the noised Gram, σ and the
// guarantee.
func releaseGram(ctx context.Context, eng statistic.Engine, cols topn.Columns, colW []float64, norm, rho float64, env Env) (*mat.SymDense, float64, privacy.Guarantee, error) {
	st, err := gram.NewGram(cols, colW, norm)
	if err != nil {
		return nil, 0, privacy.Guarantee{}, err
	}
	c, err := env.Fault.gram(st)
	if err != nil {
		return nil, 0, privacy.Guarantee{}, err
	}
	v, sigma, part, err := releaseStatRho(ctx, eng, c, rho, env.keyed(func() []string { return gramKeys(cols, st.Covered) }))
	if err != nil {
		return nil, 0, privacy.Guarantee{}, err
	}
	return statistic.UnpackUpper(st.Covered, v), sigma, part, nil
}

// weightNote describes the column weights in the guarantee's note.
func weightNote(exp float64) string {
	if exp == 0 {
		return ""
	}
	return fmt.Sprintf(", each item weighted by its noised count to the power %g, undone after the release", exp)
}

// Train: counts → covered items → Gram → EASE.
func (c *DPEASEConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	eng, cat, err := topnEngine("dp-ease", &c.Interactions, in, env)
	if err != nil {
		return nil, err
	}
	nItems := cat.Len()
	rho, err := accountant.RhoForApprox(env.Epsilon, env.Delta)
	if err != nil {
		return nil, err
	}
	rhoCount := math.Nextafter(c.CountShare*rho, 0)
	rhoGram := math.Nextafter(rho-rhoCount, 0)
	counts, sigmaCount, countPart, err := releaseCappedCounts(ctx, eng, nItems, c.Cap, rhoCount, env)
	if err != nil {
		return nil, err
	}
	order := byCount(counts)
	// The number of users is public (the relation replaces a user); an
	// external engine knows it once it has summed the counts.
	planned := c.covered(eng.Users(), nItems, rhoGram)
	// An engine whose contributors have a budget (the two aggregators:
	// each device shards and proves her part of the Gram, m(m+1)/2
	// coordinates) caps the covered items at what a device affords.
	mCover, err := affordable(eng, planned, 2, func(k int) (statistic.Contribution, error) {
		cols, err := topn.NewColumns(nItems, order[:k])
		if err != nil {
			return nil, err
		}
		return gram.NewGram(cols, nil, c.GramNorm)
	})
	if err != nil {
		return nil, err
	}
	covered := order[:mCover]
	cols, err := topn.NewColumns(nItems, covered)
	if err != nil {
		return nil, err
	}
	var colW []float64 // the public column weights (nil: none)
	if c.WeightExp != 0 {
		colW = make([]float64, len(covered))
		for q, j := range covered {
			colW[q] = math.Pow(math.Max(counts[j], 1), c.WeightExp)
		}
	}
	m := len(covered)
	noised, sigmaGram, gramPart, err := releaseGram(ctx, eng, cols, colW, c.GramNorm, rhoGram, env)
	if err != nil {
		return nil, err
	}
	// Post-processing of the two releases (and the public features) only.
	if err := c.addFeaturePrior(noised, in.Declared.ItemFeatures, covered); err != nil {
		return nil, err
	}
	fit, err := c.fit(noised, sigmaGram, colW, env)
	if err != nil {
		return nil, err
	}
	g, err := topnGuarantee(env, []privacy.Guarantee{countPart, gramPart}, fmt.Sprintf(
		"zCDP composition of two Gaussian releases. Item counts (σ = %.4g, ℓ2 sensitivity %.4g): a user with n interactions on the declared catalogue adds min(1, √(%g/n)) to each of her items. Item–item Gram (σ = %.4g, ℓ2 sensitivity %.4g) over the %d items with the largest noised counts: the upper triangle of each user's x xᵀ (x her indicator over those items%s), scaled to ℓ2 norm ≤ %g. %s; each user's list is computed on her side from the public weights and her own items.",
		sigmaCount, (&statistic.Counts{Cap: c.Cap}).Sensitivity().Value, c.Cap, sigmaGram, gram.GramSensitivity(c.GramNorm).Value, m, weightNote(c.WeightExp), c.GramNorm, c.fitNote(fit)))
	if err != nil {
		return nil, err
	}
	r := fit.ridge
	out := coveredModel("dp-ease", cat.IDs(), catTitles(cat), order, m, fit.items, topn.FoldEASELowRank, counts, c.threshold())
	out.Params = map[string]any{"cap": c.Cap, "count_share": c.CountShare, "gram_norm": c.GramNorm, "cover_scale": c.CoverScale, "covered_items": m, "lambda": r.Lambda,
		"lambda_diag": c.LambdaDiag, "lambda_diag_max": c.LambdaDiagMax, "lambda_rank": c.LambdaRank, "lambda_coef": r.Coef, "lambda_scale": c.LambdaScale, "kept_eigenvalues": fit.kept}
	if c.featurePrior != 0 {
		out.Params["feature_prior"] = c.featurePrior
	}
	return &release.Release{Public: out, Guarantee: g,
		Report: release.Report{"sigma_counts": sigmaCount, "sigma_gram": sigmaGram, "covered_items": m, "covered_items_planned": planned, "lambda": r.Lambda,
			"lambda_coef": r.Coef, "mean_diagonal": r.Diag, "noise_edge": r.Edge, "kept_eigenvalues": fit.kept}}, nil
}

// addFeaturePrior adds the public features' prior, featurePrior × the
// noised Gram's mean diagonal × their cosines, to the noised Gram (none
// when featurePrior is 0 or no features are declared).
func (c *DPEASEConfig) addFeaturePrior(noised *mat.SymDense, f *model.ItemFeatures, covered []int) error {
	if c.featurePrior == 0 || f == nil {
		return nil // no prior, or no features declared: nothing to add
	}
	return topn.AddFeaturePrior(noised, f, covered, c.featurePrior*math.Max(meanDiag(noised), 0))
}

// easeFit is dp-ease's post-processing: the model's item vectors, the
// number of kept eigenpairs and the ridge.
type easeFit struct {
	items *mat.Dense // nil: no eigenpair above the floor
	kept  int
	ridge ridge
}

// fit post-processes the noised Gram (σ per entry, public column weights
// colW or nil): its eigenpairs above the noise's spectral edge 2σ√m
// (at most max-rank), shrunk by the edge, then EASE on them with the
// ridge of the released values.
func (c *DPEASEConfig) fit(noised *mat.SymDense, sigma float64, colW []float64, env Env) (easeFit, error) {
	edge := 2 * sigma * math.Sqrt(float64(noised.SymmetricDim()))
	w, err := topn.DenoiseRank(noised, c.Denoise*edge, edge, c.MaxRank, env.Rand.Rand())
	if err != nil {
		return easeFit{}, err
	}
	var f easeFit
	if w != nil {
		_, f.kept = w.Dims()
	}
	f.ridge = c.ridge(meanDiag(noised), edge, f.kept)
	if w == nil {
		return f, nil
	}
	unweight(w, colW)
	f.items, err = topn.LowRankEASE(w, f.ridge.Lambda)
	return f, err
}

// unweight undoes the public column weights g (nil: none) on the
// eigenvectors w: the weighted Gram is D G D, D = diag(g).
func unweight(w *mat.Dense, g []float64) {
	if g == nil {
		return
	}
	r, k := w.Dims()
	for p := range r {
		row := w.RawRowView(p)
		for t := range k {
			row[t] /= g[p]
		}
	}
}

// fitNote states the post-processing in the guarantee's note.
func (c *DPEASEConfig) fitNote(f easeFit) string {
	r := f.ridge
	prior := ""
	if c.featurePrior != 0 {
		prior = fmt.Sprintf("The declared public item features' cosines × %g × the noised Gram's mean diagonal are added to the noised Gram. ", c.featurePrior)
	}
	return prior + fmt.Sprintf("Its eigenpairs above %g × the noise's spectral edge (%d kept), EASE on them (λ = %.4g = a × the noised Gram's mean diagonal %.4g + %g × the edge %.4g; a = %.3g = the kept eigenpairs over %g, within [%g, %g]) and the ranking are post-processing",
		c.Denoise, f.kept, r.Lambda, r.Diag, c.LambdaScale, r.Edge, r.Coef, c.LambdaRank, c.LambdaDiag, c.LambdaDiagMax)
}
