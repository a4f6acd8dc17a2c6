package methods

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/topn"
)

// EngineFactory builds the engine that sums a method's statistics for
// the per-rating plan the method declares (Env.Engine).
type EngineFactory func(plan statistic.RowPlan) (statistic.Engine, error)

// interactionRows is the in-process engine over binary interactions: the
// users' rows of x, summed in user order (statistic.Sum), the Gram and the
// dp-ials steps on workers (their SumMatrix).
type interactionRows struct {
	x       *topn.Interactions
	workers int
}

func (e interactionRows) Users() int { return e.x.NumUsers }

// matrixSummer is a statistic with an in-process kernel over the
// interactions (gram.Gram, topn.StepStatistic), returning the same sums as
// statistic.Sum of its contributions.
type matrixSummer interface {
	SumMatrix(ctx context.Context, x *topn.Interactions, workers int) ([]float64, error)
}

func (e interactionRows) Sum(ctx context.Context, c statistic.Contribution) ([]float64, error) {
	if g, ok := c.(matrixSummer); ok {
		return g.SumMatrix(ctx, e.x, e.workers)
	}
	return statistic.Sum(ctx, e.x.NumUsers, func(u int) statistic.Row { return statistic.Row{Items: e.x.Row(u)} }, c)
}

// ratingRows is the in-process engine over ratings already on the
// catalogue.
type ratingRows struct{ data *ratings.Matrix }

func (e ratingRows) Users() int { return e.data.NumUsers() }

func (e ratingRows) Sum(ctx context.Context, c statistic.Contribution) ([]float64, error) {
	return statistic.Sum(ctx, e.data.NumUsers(), func(u int) statistic.Row {
		items, vals := e.data.UserRow(int32(u))
		return statistic.Row{Items: items, Vals: vals}
	}, c)
}

// topnEngine is the engine of a private top-N method: env.Engine's for
// the interactions' plan when set, else the in-process sums over in's
// interactions on the declared catalogue.
func topnEngine(name string, sel *Interactions, in release.Input, env Env) (statistic.Engine, *model.Catalogue, error) {
	if env.Engine == nil {
		x, cat, err := topnPlan(name, sel, in)
		if err != nil {
			return nil, nil, err
		}
		return interactionRows{x: x, workers: env.Workers}, cat, nil
	}
	cat, err := in.NeedCatalogue(name)
	if err != nil {
		return nil, nil, err
	}
	if err := sel.checkScale(in); err != nil {
		return nil, nil, err
	}
	eng, err := env.Engine(statistic.RowPlan{Catalogue: cat.IDs(), Positive: sel.threshold()})
	return eng, cat, err
}

// ratingEngine is the engine of a method on ratings clamped to the
// declared scale, on the declared catalogue; data is the in-process
// matrix (nil with env.Engine).
func ratingEngine(in release.Input, env Env, scale release.Scale, cat *model.Catalogue) (eng statistic.Engine, data *ratings.Matrix, err error) {
	if env.Engine != nil {
		eng, err := env.Engine(statistic.RowPlan{Catalogue: cat.IDs(), Clamp: &[2]float64{scale.Min, scale.Max}})
		return eng, nil, err
	}
	data, err = release.OnCatalogue(release.ClampToScale(in.Ratings, scale), cat)
	if err != nil {
		return nil, nil, err
	}
	return ratingRows{data}, data, nil
}

// NoisingEngine is an engine that adds the privacy noise itself (the two
// aggregators of package dap, each adding its own discrete Gaussian
// noise): SumNoised returns c's sum already noised, with at least mech's
// guarantee, and the standard deviation of the noise it carries (which
// may exceed mech's σ: the post-processing shrinks by it); releaseStat
// adds nothing more.
type NoisingEngine interface {
	statistic.Engine
	SumNoised(ctx context.Context, c statistic.Contribution, mech *mechanism.Gaussian) ([]float64, float64, error)
}

// releaseStat sums c through eng and releases it once through mech
// (already instrumented), returning the noised sum.
func releaseStat(ctx context.Context, eng statistic.Engine, c statistic.Contribution, mech *mechanism.Gaussian, env Env) ([]float64, error) {
	v, _, err := releaseStatSigma(ctx, eng, c, mech, env)
	return v, err
}

// releaseStatSigma is releaseStat that also returns the standard
// deviation of the noise the sum carries: mech's σ, or a NoisingEngine's.
func releaseStatSigma(ctx context.Context, eng statistic.Engine, c statistic.Contribution, mech *mechanism.Gaussian, env Env) ([]float64, float64, error) {
	if ne, ok := eng.(NoisingEngine); ok {
		return ne.SumNoised(ctx, c, mech)
	}
	v, err := eng.Sum(ctx, c)
	if err != nil {
		return nil, 0, fmt.Errorf("summing %s: %w", c.Spec().Name, err)
	}
	if err := statistic.Release(c.Spec(), mech, nil, env.Noise, v); err != nil {
		return nil, 0, err
	}
	return v, mech.Sigma(), nil
}

// releaseStatRho is releaseStat with the mechanism calibrated to zCDP
// budget rho (instrumented with env's instrument); it returns the noised
// sum, σ and the guarantee.
func releaseStatRho(ctx context.Context, eng statistic.Engine, c statistic.Contribution, rho float64, env Env) ([]float64, float64, privacy.Guarantee, error) {
	mech, err := statistic.Mechanism(c.Spec(), rho, env.Delta)
	if err != nil {
		return nil, 0, privacy.Guarantee{}, err
	}
	v, sigma, err := releaseStatSigma(ctx, eng, c, mech.Instrumented(env.instrument()), env)
	if err != nil {
		return nil, 0, privacy.Guarantee{}, err
	}
	return v, sigma, mech.Guarantee(), nil
}

// BudgetedEngine is an engine whose contributors can afford only so large
// a contribution: through the two aggregators each device shards her part
// and proves it in range, at a cost linear in its dimension. Affords
// reports whether c is within that budget. A method whose plan has a size
// (dp-ease's covered items) shrinks it until its statistic is affordable;
// the budget is a public fact of the engine, so the choice stays
// post-processing of the earlier releases.
type BudgetedEngine interface {
	statistic.Engine
	Affords(c statistic.Contribution) bool
}

// affordable is the largest m' ≤ m (and ≥ lo) for which eng affords
// build(m'), by bisection (a statistic's size grows with m'); m itself
// when eng has no budget. It returns lo when even build(lo) is not
// affordable: the task then fails with the engine's own error.
func affordable(eng statistic.Engine, m, lo int, build func(m int) (statistic.Contribution, error)) (int, error) {
	be, ok := eng.(BudgetedEngine)
	if !ok || m <= lo {
		return m, nil
	}
	fits := func(k int) (bool, error) {
		c, err := build(k)
		if err != nil {
			return false, err
		}
		return be.Affords(c), nil
	}
	if ok, err := fits(m); err != nil || ok {
		return m, err
	}
	good, bad := lo, m // build(good) is assumed affordable, build(bad) is not
	for bad-good > 1 {
		mid := (good + bad) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, nil
}
