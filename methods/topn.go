package methods

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/topn"
	"github.com/privrec/privrec/transform"
)

// The non-private top-N models: popularity, EASE and iALS (package topn).
// They rank items for a user from her own interactions; their models hold
// the item side only, and a user — in training or not — gets her list from
// the public model and her own ratings (privrec recommend --ratings).
func init() {
	Register(&Method{
		Name:    "popularity",
		Summary: "top-N: items by how many users interacted with them (non-private)",
		New:     func() Config { return &PopularityConfig{} },
	})
	Register(&Method{
		Name:    "ease",
		Summary: "top-N: EASE, Steck's closed-form item–item model (non-private)",
		New:     func() Config { return &EASEConfig{LambdaDiag: EASELambdaDiag, MaxItems: 2500} },
	})
	Register(&Method{
		Name:    "ials",
		Summary: "top-N: implicit ALS with Rendle et al.'s regularisation, conjugate-gradient solves (non-private)",
		New: func() Config {
			return &IALSConfig{Rank: 128, Alpha0: 0.2, LambdaNorm: IALSLambdaNorm, Nu: 1, EpochWork: IALSEpochWork, CGSteps: 3, InitScale: 0.1,
				WarmShare: IALSWarmShare, WarmEpochs: IALSWarmEpochs}
		},
	})
}

// Interactions is the part of a top-N Config that says which ratings are
// interactions.
type Interactions struct {
	Positive []float64 `json:"positive" flag:"positive" help:"ratings ≥ T are the interactions (the others are dropped; a user's own list still leaves out every item she rated); unset: every listed rating is an interaction"`
}

// Validate checks the threshold is one finite number, if given.
func (c *Interactions) Validate() error {
	if len(c.Positive) > 1 {
		return fmt.Errorf("--positive takes one threshold, got %d", len(c.Positive))
	}
	if len(c.Positive) == 1 && (math.IsNaN(c.Positive[0]) || math.IsInf(c.Positive[0], 0)) {
		return fmt.Errorf("--positive %g must be a finite rating", c.Positive[0])
	}
	return nil
}

// threshold is the declared threshold, or nil.
func (c *Interactions) threshold() *float64 {
	if len(c.Positive) == 0 {
		return nil
	}
	t := c.Positive[0]
	return &t
}

// checkScale refuses a threshold above the declared scale's maximum (no
// rating could count).
func (c *Interactions) checkScale(in release.Input) error {
	if t := c.threshold(); t != nil {
		if s := in.Declared.Scale; s != nil && *t > s.Max {
			return fmt.Errorf("--positive %g is above the declared scale %g:%g: no rating would be an interaction", *t, s.Min, s.Max)
		}
	}
	return nil
}

// interactions returns the interactions of in: its ratings ≥ the
// threshold, on the declared catalogue when there is one (its items in
// order, titles included; ratings of other items dropped), else on the
// data's own items (non-private models only). A threshold above the
// declared scale's maximum is an error (no rating could count).
func (c *Interactions) interactions(in release.Input) (data *ratings.Matrix, ids, titles []string, err error) {
	if err := c.checkScale(in); err != nil {
		return nil, nil, nil, err
	}
	data = in.Ratings
	if t := c.threshold(); t != nil {
		data = transform.Positives(data, *t)
	}
	cat := in.Declared.Catalogue
	if cat == nil {
		return data, slices.Clone(data.Items.Names()), nil, nil
	}
	if data, err = release.OnCatalogue(data, cat); err != nil {
		return nil, nil, nil, err
	}
	return data, cat.IDs(), catTitles(cat), nil
}

// topnModel is the public shell of a top-N model over items (with titles,
// or nil), ranking by score.
func topnModel(name string, items, titles []string, positive *float64) *model.Model {
	m := &model.Model{Method: name, Output: model.Scores, Items: items, Titles: titles, U: []float64{}, V: []float64{}}
	m.Transform.Positive = positive
	return m
}

// nonPrivate is the guarantee of a non-private model.
func nonPrivate(what string) privacy.Guarantee {
	return privacy.NoPrivacy(privacy.UnitUser, what+" is not private: the public model is an exact function of the training interactions.")
}

// PopularityConfig configures popularity (no settings besides the
// interactions).
type PopularityConfig struct {
	Interactions
}

// Train counts each item's users.
func (c *PopularityConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	data, ids, titles, err := c.interactions(in)
	if err != nil {
		return nil, err
	}
	x := topn.FromMatrix(data)
	m := topnModel("popularity", ids, titles, c.threshold())
	m.ItemBias = x.Counts()
	return &release.Release{Public: m, Guarantee: nonPrivate("popularity"),
		Report: release.Report{"items": x.NumItems}}, nil
}

// EASELambdaDiag is ease's default λ in units of the Gram's mean diagonal: λ = 600 was best on MovieLens-1M validation
// users over 2 500 items (mean diagonal 181, ratio 3.3), λ = 3 000 of
// {600, 3 000, 10 000} on a 50 000-user Netflix-shaped population (mean
// diagonal 1 078, ratio 2.8).
const EASELambdaDiag = 3

// EASEConfig configures ease.
type EASEConfig struct {
	Interactions
	Lambda     float64 `json:"lambda" flag:"lambda" help:"EASE's ridge λ on the item–item weights; 0: lambda-diag × the Gram's mean diagonal"`
	LambdaDiag float64 `json:"lambda_diag" flag:"lambda-diag" help:"with --lambda 0, λ is this many times the Gram's mean diagonal (the covered items' mean number of users), so it grows with the population as the Gram does"`
	MaxItems   int     `json:"max_items" flag:"max-items" help:"the item–item model covers this many most-interacted items (its solve costs O(m³)); the others follow, by popularity"`
}

// Validate checks the settings.
func (c *EASEConfig) Validate() error {
	if err := c.Interactions.Validate(); err != nil {
		return err
	}
	if !(c.Lambda >= 0) || math.IsInf(c.Lambda, 0) {
		return fmt.Errorf("--lambda %g must be finite and ≥ 0", c.Lambda)
	}
	if !(c.LambdaDiag >= 0) || math.IsInf(c.LambdaDiag, 0) || (c.Lambda == 0 && c.LambdaDiag == 0) {
		return fmt.Errorf("--lambda-diag %g must be finite and ≥ 0, and > 0 when --lambda is 0", c.LambdaDiag)
	}
	if c.MaxItems < 1 || c.MaxItems > 20000 {
		return fmt.Errorf("--max-items %d must be in [1, 20000] (the dense item–item matrix has max-items² entries)", c.MaxItems)
	}
	return nil
}

// Train solves EASE over the most-interacted items.
func (c *EASEConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	data, ids, titles, err := c.interactions(in)
	if err != nil {
		return nil, err
	}
	x := topn.FromMatrix(data)
	counts := x.Counts()
	order := byCount(counts)
	covered := order[:min(c.MaxItems, len(order))]
	for len(covered) > 0 && counts[covered[len(covered)-1]] == 0 {
		covered = covered[:len(covered)-1]
	}
	cols, err := topn.NewColumns(x.NumItems, covered)
	if err != nil {
		return nil, err
	}
	g, err := topn.Gram(ctx, x, cols, func(int) float64 { return 1 }, env.Workers)
	if err != nil {
		return nil, err
	}
	lambda := c.Lambda
	if lambda == 0 {
		lambda = c.LambdaDiag * meanDiag(g)
	}
	bt, err := topn.EASE(g, lambda)
	if err != nil {
		return nil, err
	}
	m := coveredModel("ease", ids, titles, order, len(covered), bt, topn.FoldIndicator, counts, c.threshold())
	m.Params = map[string]any{"lambda": lambda, "lambda_diag": c.LambdaDiag, "covered_items": len(covered)}
	return &release.Release{Public: m, Guarantee: nonPrivate("ease"),
		Report: release.Report{"items": x.NumItems, "covered_items": len(covered), "lambda": lambda}}, nil
}

// byCount orders items by decreasing count (ties by index).
func byCount(counts []float64) []int {
	order := make([]int, len(counts))
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case counts[a] > counts[b]:
			return -1
		case counts[a] < counts[b]:
			return 1
		}
		return 0
	})
	return order
}

// coveredModel builds a model whose items are reordered by order, the
// first m of them ("covered") scored through rows (m × r: row q is
// covered item q's item vector) under the fold-in rule fold, and the rest
// ranked after every covered item by pop. With rows nil, nothing is
// covered and every item ranks by pop.
func coveredModel(name string, ids, titles []string, order []int, m int, rows *mat.Dense, fold model.FoldIn, pop []float64, positive *float64) *model.Model {
	n := len(order)
	items := make([]string, n)
	var tt []string
	if titles != nil {
		tt = make([]string, n)
	}
	out := topnModel(name, items, tt, positive)
	r := 0
	if rows != nil {
		_, r = rows.Dims()
	}
	out.Rank, out.FoldIn = r, fold
	out.V = make([]float64, n*r)
	out.ItemBias = make([]float64, n)
	for q, j := range order {
		items[q] = ids[j]
		if tt != nil {
			tt[q] = titles[j]
		}
		switch {
		case rows == nil:
			out.ItemBias[q] = pop[j]
		case q < m:
			copy(out.V[q*r:q*r+r], rows.RawRowView(q))
		default:
			out.ItemBias[q] = topn.Uncovered + pop[j]*1e-9
		}
	}
	return out
}

// The plan of ials (docs/topn.md, "ials at scale"). λ is set by
// topn.IALSLambda so that the ridges threshold the interaction matrix's
// singular values at IALSLambdaNorm·‖X‖_F: on MovieLens-1M (4 834
// training users, α₀ = 0.2) that is λ = 0.0099, the validation-best 0.01
// of the grid; on the 42 582- and 469 255-user Netflix-shaped populations
// λ = 0.0054 (α₀ = 0.2) and 0.0011 (α₀ = 1), where λ = 0.001 (α₀ = 1) was
// the best measured. The epochs are as many as fit IALSEpochWork
// multiply–adds (×10⁹) of row solves, within [2, 16]: 16 up to ≈ 150 000
// Netflix-shaped users (≈ 130 CPU-seconds an epoch at 480 000). Where the
// budget falls short of 16 full epochs, the plan first spends
// IALSWarmEpochs epochs on a sample of IALSWarmShare of the users (their
// work counted in the budget) and the rest on full epochs: 8 sample
// epochs and 4 full ones at 480 000 users.
const (
	IALSLambdaNorm = 0.014
	IALSEpochWork  = 900
	IALSWarmShare  = 0.125
	IALSWarmEpochs = 8
)

// ialsMinEpochs and ialsMaxEpochs bound the planned epochs.
const ialsMinEpochs, ialsMaxEpochs = 2, 16

// IALSConfig configures ials.
type IALSConfig struct {
	Interactions
	Rank       int     `json:"rank" flag:"rank" help:"number of latent factors"`
	Alpha0     float64 `json:"alpha0" flag:"alpha0" help:"weight α₀ of the unobserved user–item pairs"`
	Lambda     float64 `json:"lambda" flag:"lambda" help:"ridge λ, scaled per row by (its interactions + α₀·other side)^ν; 0: planned from --lambda-norm"`
	LambdaNorm float64 `json:"lambda_norm" flag:"lambda-norm" help:"with --lambda 0, λ is set so that the two ridges threshold the interaction matrix's singular values at this fraction of its Frobenius norm (√interactions): the same share of the spectrum at any population size"`
	Nu         float64 `json:"nu" flag:"nu" help:"frequency exponent ν of the regularisation (Rendle et al.: 1)"`
	Epochs     int     `json:"epochs" flag:"epochs" help:"alternating epochs (users then items); 0: as many as fit --epoch-work, within [2, 16]"`
	EpochWork  float64 `json:"epoch_work" flag:"epoch-work" help:"with --epochs 0, the budget of the row solves in 10⁹ multiply–adds (an epoch costs about (cg-steps + 2)·rank·((users + items)·rank + 4·interactions)): the epochs fall as the population grows"`
	CGSteps    int     `json:"cg_steps" flag:"cg-steps" help:"conjugate-gradient steps per row and half-epoch, warm-started"`
	InitScale  float64 `json:"init_scale" flag:"init-scale" help:"standard deviation of the initial item factors, times 1/√rank"`
	WarmShare  float64 `json:"warm_share" flag:"warm-share" help:"with --epochs 0, when --epoch-work affords fewer than 16 full epochs, the first --warm-epochs epochs fit only this share of the users (a seeded sample; their work counted in the budget); 0: never"`
	WarmEpochs int     `json:"warm_epochs" flag:"warm-epochs" help:"the warm-start epochs on the --warm-share sample, when the plan uses one"`
}

// Validate checks the settings.
func (c *IALSConfig) Validate() error {
	if err := c.Interactions.Validate(); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"lambda", c.Lambda}, {"lambda-norm", c.LambdaNorm}, {"epoch-work", c.EpochWork}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("--%s %g must be finite and ≥ 0", f.name, f.v)
		}
	}
	if c.Lambda == 0 && c.LambdaNorm == 0 {
		return fmt.Errorf("--lambda-norm must be > 0 when --lambda is 0 (λ is planned from it)")
	}
	if c.Epochs < 0 || (c.Epochs == 0 && c.EpochWork == 0) {
		return fmt.Errorf("--epochs %d must be ≥ 1, or 0 with --epoch-work > 0 (planned)", c.Epochs)
	}
	if !(c.WarmShare >= 0 && c.WarmShare < 1) || c.WarmEpochs < 0 {
		return fmt.Errorf("--warm-share %g must be in [0, 1) and --warm-epochs %d ≥ 0", c.WarmShare, c.WarmEpochs)
	}
	o := c.options(nil, ialsPlan{lambda: 1, epochs: 1})
	return o.Check()
}

// ialsPlan is the λ and epochs one run trains with: the settings given,
// or planned from the training data's size.
type ialsPlan struct {
	users, items, interactions int
	lambda, threshold          float64
	warmShare                  float64 // the users' share in the warm start; 0 when there is none
	epochs, warmEpochs         int
}

// plan fills in λ (topn.IALSLambda at --lambda-norm) and the epochs (as
// many as fit --epoch-work) where they are left at 0, for training data
// of the given size.
func (c *IALSConfig) plan(users, items, interactions int) ialsPlan {
	p := ialsPlan{users: users, items: items, interactions: interactions, lambda: c.Lambda, epochs: c.Epochs}
	if p.lambda == 0 {
		p.lambda = topn.IALSLambda(p.users, p.items, p.interactions, c.Alpha0, c.LambdaNorm)
	}
	p.threshold = topn.IALSThreshold(p.users, p.items, p.interactions, c.Alpha0, p.lambda)
	if p.epochs == 0 {
		p.epochs, p.warmEpochs = c.planEpochs(users, items, interactions)
	}
	if p.warmEpochs > 0 {
		p.warmShare = c.WarmShare
	}
	return p
}

// planEpochs is as many full epochs as fit --epoch-work; where that is
// fewer than the most, the warm-start epochs on the --warm-share sample
// come first and the full epochs get the budget they leave.
func (c *IALSConfig) planEpochs(users, items, interactions int) (epochs, warm int) {
	budget := c.EpochWork * 1e9
	epochs = topn.IALSEpochs(users, items, interactions, c.Rank, c.CGSteps, budget, ialsMinEpochs, ialsMaxEpochs)
	if epochs == ialsMaxEpochs || c.WarmShare == 0 || c.WarmEpochs == 0 {
		return epochs, 0
	}
	budget -= topn.IALSWarmWork(users, items, interactions, c.Rank, c.CGSteps, c.WarmShare, c.WarmEpochs)
	return topn.IALSEpochs(users, items, interactions, c.Rank, c.CGSteps, budget, ialsMinEpochs, ialsMaxEpochs), c.WarmEpochs
}

func (c *IALSConfig) options(env *Env, p ialsPlan) topn.IALSOptions {
	o := topn.IALSOptions{Rank: c.Rank, Alpha0: c.Alpha0, Lambda: p.lambda, Nu: c.Nu, Epochs: p.epochs, CGSteps: c.CGSteps, InitScale: c.InitScale}
	if p.warmEpochs > 0 {
		o.WarmShare, o.WarmEpochs = p.warmShare, p.warmEpochs
	}
	if env != nil {
		o.Rand, o.Workers, o.Progress = env.Rand.Rand(), env.Workers, env.Progress
	}
	return o
}

// Train fits iALS and keeps the item factors.
func (c *IALSConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	data, ids, titles, err := c.interactions(in)
	if err != nil {
		return nil, err
	}
	x := topn.FromMatrix(data)
	p := c.plan(x.NumUsers, x.NumItems, x.Len())
	_, h, err := topn.IALS(ctx, x, c.options(&env, p))
	if err != nil {
		return nil, err
	}
	m := topnModel("ials", ids, titles, c.threshold())
	m.Rank, m.V = c.Rank, h
	m.Params = map[string]any{"rank": c.Rank, "alpha0": c.Alpha0, "lambda": p.lambda, "lambda_norm": c.LambdaNorm, "nu": c.Nu, "epochs": p.epochs, "cg_steps": c.CGSteps,
		"warm_epochs": p.warmEpochs, "warm_share": p.warmShare}
	topn.SetImplicitFoldIn(m, c.Alpha0, p.lambda, c.Nu)
	return &release.Release{Public: m, Guarantee: nonPrivate("ials"),
		Report: release.Report{"items": x.NumItems, "users": x.NumUsers, "interactions": x.Len(), "rank": c.Rank, "alpha0": c.Alpha0,
			"lambda": p.lambda, "threshold": p.threshold, "epochs": p.epochs, "warm_epochs": p.warmEpochs, "warm_share": p.warmShare}}, nil
}
