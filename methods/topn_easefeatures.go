package methods

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/topn"
)

// dp-ease-features: dp-ease and dp-features composed. dp-ease's two
// releases with 1 − feature-share of ρ, dp-features' counts with the rest;
// a user's score of an item is dp-ease's plus feature-weight × the feature
// model's, scaled to the same total (fold-in ease-features), and the items
// outside dp-ease's Gram are ranked by the feature model instead of by
// count.
func init() {
	Register(&Method{
		Name:    "dp-ease-features",
		Summary: "private top-N: dp-ease plus dp-features' model of the catalogue's declared public item features (--item-features), the items outside the Gram ranked by the features",
		Private: true,
		Needs:   []string{"items"},
		New:     func() Config { return NewDPEASEFeaturesDefaults() },
	})
}

// NewDPEASEFeaturesDefaults is dp-ease-features' default configuration:
// dp-ease's with cover-scale 2.5, the feature prior 0.5, the feature
// model's 5 % of ρ and weight 0.5 (chosen on MovieLens-1M validation
// users: docs/topn.md).
func NewDPEASEFeaturesDefaults() *DPEASEFeaturesConfig {
	f := NewDPFeaturesDefaults()
	e := NewDPEASEDefaults()
	// The feature prior fills in the structure the noise hides, so the
	// Gram covers more items than dp-ease's own plan (cover-scale 2.5
	// against 1.5); the feature model's counts need little budget.
	e.CoverScale = 2.5
	return &DPEASEFeaturesConfig{DPEASEConfig: *e, FeatureShare: 0.05, FeatureWeight: 0.5, FeatureCap: f.Cap, FeatureRidge: f.Ridge, FeaturePrior: 0.5}
}

// DPEASEFeaturesConfig configures dp-ease-features: dp-ease's settings
// and the feature model's.
type DPEASEFeaturesConfig struct {
	DPEASEConfig
	FeatureShare  float64 `json:"feature_share" flag:"feature-share" help:"fraction of the zCDP budget ρ spent on the feature model's counts (dp-ease gets the rest)"`
	FeatureWeight float64 `json:"feature_weight" flag:"feature-weight" help:"weight of the feature model's scores, scaled to sum over the catalogue to the user's number of items (EASE's scale)"`
	FeatureCap    float64 `json:"feature_cap" flag:"feature-cap" help:"weight cap of the feature model's counts (see dp-features' --cap)"`
	FeatureRidge  float64 `json:"feature_ridge" flag:"feature-ridge" help:"ridge of the feature match (see dp-features' --ridge)"`
	FeaturePrior  float64 `json:"feature_prior" flag:"feature-prior" help:"the public features' prior on dp-ease's noised Gram: their cosines × this × the Gram's mean diagonal are added to it before EASE (Jeunen et al.'s side information; 0: none)"`
}

// Validate checks the settings.
func (c *DPEASEFeaturesConfig) Validate() error {
	if err := c.DPEASEConfig.Validate(); err != nil {
		return err
	}
	switch {
	case !(c.FeatureShare > 0 && c.FeatureShare < 1):
		return fmt.Errorf("--feature-share %g must be in (0, 1)", c.FeatureShare)
	case !(c.FeatureWeight >= 0) || math.IsInf(c.FeatureWeight, 0):
		return fmt.Errorf("--feature-weight %g must be finite and ≥ 0", c.FeatureWeight)
	case !(c.FeaturePrior >= 0) || math.IsInf(c.FeaturePrior, 0):
		return fmt.Errorf("--feature-prior %g must be finite and ≥ 0", c.FeaturePrior)
	}
	return c.features().Validate()
}

// features is the feature model's configuration.
func (c *DPEASEFeaturesConfig) features() *DPFeaturesConfig {
	return &DPFeaturesConfig{Interactions: c.Interactions, Cap: c.FeatureCap, Ridge: c.FeatureRidge}
}

// Train: dp-ease with its share of ρ, then the feature model's counts
// with the rest, composed; the two models side by side.
func (c *DPEASEFeaturesConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	rho, err := accountant.RhoForApprox(env.Epsilon, env.Delta)
	if err != nil {
		return nil, err
	}
	rhoF := math.Nextafter(c.FeatureShare*rho, 0)
	// dp-ease takes an ε: the one of its share of ρ, a hair below so that
	// the composition stays within the request.
	epsE, err := accountant.ZCDPToApprox((rho-rhoF)*(1-1e-9), env.Delta)
	if err != nil {
		return nil, err
	}
	envE := env
	envE.Epsilon = epsE
	e := c.DPEASEConfig
	e.featurePrior = c.FeaturePrior
	easeRel, err := e.Train(ctx, in, envE)
	if err != nil {
		return nil, err
	}
	eng, cat, err := topnEngine("dp-ease-features", &c.Interactions, in, env)
	if err != nil {
		return nil, err
	}
	f, err := c.features().release(ctx, eng, cat, in.Declared.ItemFeatures, rhoF, env)
	if err != nil {
		return nil, err
	}
	g, err := topnGuarantee(env, []privacy.Guarantee{easeRel.Guarantee, f.part}, fmt.Sprintf(
		"zCDP composition of dp-ease (ρ = %.4g) and the feature model's counts (ρ = %.4g). dp-ease: %s Feature model: %s Each user's list is computed on her side.",
		easeRel.Guarantee.Rho, f.part.Rho, easeRel.Guarantee.Note, f.note()))
	if err != nil {
		return nil, err
	}
	m, err := easeWithFeatures(easeRel.Model(), cat, f, c.FeatureWeight)
	if err != nil {
		return nil, err
	}
	m.Params["feature_share"], m.Params["feature_cap"], m.Params["feature_ridge"] = c.FeatureShare, c.FeatureCap, c.FeatureRidge
	rep := release.Report{"sigma_features": f.sigma}
	for k, v := range easeRel.Report {
		rep[k] = v
	}
	return &release.Release{Public: m, Guarantee: g, Report: f.report(rep)}, nil
}

// easeWithFeatures lays dp-ease's model e and the feature model f side by
// side for fold-in ease-features: item j's row is e's V_j (zero outside
// the Gram), f's weights and f_j; the items outside the Gram lose e's
// bias (they rank by the feature model), those with a noised feature
// count ≤ 0 rank last.
func easeWithFeatures(e *model.Model, cat *model.Catalogue, f *featureRelease, weight float64) (*model.Model, error) {
	if e == nil {
		return nil, fmt.Errorf("dp-ease-features: dp-ease released no model")
	}
	r, d := e.Rank, f.feats.Len()
	rank := r + 2*d
	out := *e
	out.Method, out.FoldIn, out.Rank = "dp-ease-features", topn.FoldEASEFeatures, rank
	out.V, out.ItemBias = make([]float64, e.NumItems()*rank), make([]float64, e.NumItems())
	out.Params = map[string]any{"ease_rank": r, "feature_weight": weight, "features": d}
	for k, v := range e.Params {
		out.Params["ease_"+k] = v
	}
	index := make(map[string]int, cat.Len())
	for j, id := range cat.IDs() {
		index[id] = j
	}
	for q, id := range e.Items {
		j, ok := index[id]
		if !ok {
			return nil, fmt.Errorf("dp-ease-features: dp-ease's item %q is not in the catalogue", id)
		}
		row := out.V[q*rank : (q+1)*rank]
		copy(row[:r], e.V[q*r:(q+1)*r])
		copy(row[r:], f.v[j*2*d:(j+1)*2*d])
		out.ItemBias[q] = f.bias[j]
	}
	return &out, nil
}

// AuditDesign implements AuditDesigner: dp-ease's design (counts with cap
// 4, the Gram over every item) and the feature counts with cap 4.
func (c *DPEASEFeaturesConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Cap, one.CoverScale, one.FeatureCap = auditCap, auditCoverAll, auditCap
	return &AuditDesign{Config: &one}, nil
}
