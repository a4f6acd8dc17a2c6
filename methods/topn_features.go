package methods

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/topn"
)

// dp-features: private top-N from the noised item counts and PUBLIC item
// features (a catalogue's genres and years). The only private statistic
// is the counts; the features are declared public, so the model that
// matches a user's feature profile against each item's is post-processing
// (cf. Krichene, Mayoraz, Rendle, Song, Thakurta and Zhang, "Private
// Learning with Public Features", AISTATS 2024).
func init() {
	Register(&Method{
		Name:    "dp-features",
		Summary: "private top-N from noised item counts and the catalogue's declared public item features (--item-features): popularity matched to each user's feature profile",
		Private: true,
		Needs:   []string{"items"},
		Engine:  true,
		New:     func() Config { return NewDPFeaturesDefaults() },
	})
}

// FeatureModel is a configuration whose method reads the declared public
// item features (release.Declared.ItemFeatures); the CLI refuses
// --item-features for any other.
type FeatureModel interface {
	// UsesItemFeatures marks the configuration.
	UsesItemFeatures()
}

// UsesItemFeatures implements FeatureModel.
func (*DPFeaturesConfig) UsesItemFeatures() {}

// UsesItemFeatures implements FeatureModel.
func (*DPEASEFeaturesConfig) UsesItemFeatures() {}

// NewDPFeaturesDefaults is dp-features' default configuration (chosen on
// MovieLens-1M validation users: docs/topn.md).
func NewDPFeaturesDefaults() *DPFeaturesConfig {
	return &DPFeaturesConfig{Cap: 1, Ridge: 0.1}
}

// DPFeaturesConfig configures dp-features.
type DPFeaturesConfig struct {
	Interactions
	Cap   float64 `json:"cap" flag:"cap" help:"a user with n interactions weighs each by min(1, √(cap/n)) in the counts (ℓ2 sensitivity √(2·cap)); 1: every user has the same total weight"`
	Ridge float64 `json:"ridge" flag:"ridge" help:"ridge of the feature match, relative to the mean diagonal of the count-weighted feature moment"`
}

// Validate checks the settings.
func (c *DPFeaturesConfig) Validate() error {
	if err := c.Interactions.Validate(); err != nil {
		return err
	}
	switch {
	case !(c.Cap >= 1) || math.IsInf(c.Cap, 0):
		return fmt.Errorf("--cap %g must be finite and ≥ 1", c.Cap)
	case !(c.Ridge > 0) || math.IsInf(c.Ridge, 0):
		return fmt.Errorf("--ridge %g must be finite and > 0", c.Ridge)
	}
	return nil
}

// Train: plan (the public features) → the counts, released once with the
// whole budget → the feature match (post-processing) → each user's
// profile, on her side (fold-in feature-profile).
func (c *DPFeaturesConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	eng, cat, err := topnEngine("dp-features", &c.Interactions, in, env)
	if err != nil {
		return nil, err
	}
	rho, err := accountant.RhoForApprox(env.Epsilon, env.Delta)
	if err != nil {
		return nil, err
	}
	f, err := c.release(ctx, eng, cat, in.Declared.ItemFeatures, rho, env)
	if err != nil {
		return nil, err
	}
	g, err := topnGuarantee(env, []privacy.Guarantee{f.part}, f.note()+" Each user's profile is computed on her side.")
	if err != nil {
		return nil, err
	}
	m := topnModel("dp-features", cat.IDs(), catTitles(cat), c.threshold())
	m.Rank, m.V, m.ItemBias, m.FoldIn = 2*f.feats.Len(), f.v, f.bias, topn.FoldFeatureProfile
	m.Params = map[string]any{"cap": c.Cap, "ridge": c.Ridge, "features": f.feats.Len()}
	return &release.Release{Public: m, Guarantee: g, Report: f.report(release.Report{"sigma": f.sigma, "items": cat.Len()})}, nil
}

// featureRelease is the feature model's release and post-processing.
type featureRelease struct {
	cap     float64
	feats   *model.ItemFeatures
	sigma   float64
	part    privacy.Guarantee
	v, bias []float64 // topn.FeaturePopularity's, in catalogue order
}

// release takes the declared public features (plan; nil: the intercept
// alone), releases the capped counts with budget rho and matches them to
// the features.
func (c *DPFeaturesConfig) release(ctx context.Context, eng statistic.Engine, cat *model.Catalogue, feats *model.ItemFeatures, rho float64, env Env) (*featureRelease, error) {
	if feats == nil {
		feats = model.NoFeatures(cat.Len())
	}
	if len(feats.Of) != cat.Len() {
		return nil, fmt.Errorf("the declared item features cover %d items, the catalogue %d", len(feats.Of), cat.Len())
	}
	counts, sigma, part, err := releaseCappedCounts(ctx, eng, cat.Len(), c.Cap, rho, env)
	if err != nil {
		return nil, err
	}
	v, bias, err := topn.FeaturePopularity(counts, feats, c.Ridge)
	if err != nil {
		return nil, err
	}
	return &featureRelease{cap: c.Cap, feats: feats, sigma: sigma, part: part, v: v, bias: bias}, nil
}

// note states the release for the guarantee.
func (f *featureRelease) note() string {
	return fmt.Sprintf("One Gaussian release (σ = %.4g) of the item counts: a user with n interactions on the declared catalogue adds min(1, √(%g/n)) to each of her items (ℓ2 sensitivity %.4g under replacement). The %d item features are declared public; the feature match is post-processing.",
		f.sigma, f.cap, (&statistic.Counts{Cap: f.cap}).Sensitivity().Value, f.feats.Len())
}

// report adds the features to r.
func (f *featureRelease) report(r release.Report) release.Report {
	r["features"], r["public_features"], r["feature_lines_skipped"] = f.feats.Len(), featureSummary(f.feats), f.feats.Skipped
	return r
}

// featureSummary names the public features a report declares (the first
// 40 and how many more).
func featureSummary(f *model.ItemFeatures) string {
	const show = 40
	names := f.Names
	if len(names) <= show {
		return "declared public: " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("declared public: %s, … (%d more)", strings.Join(names[:show], ", "), len(names)-show)
}

// AuditDesign implements AuditDesigner: the counts released with cap 4
// (as dp-popularity's); the audit declares no features (the release does
// not depend on them).
func (c *DPFeaturesConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Cap = auditCap
	return &AuditDesign{Config: &one}, nil
}
