package methods

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
)

// dp-bias: the private baseline every user-level method must beat. One
// Gaussian release of per-item statistics (see releaseBiasStats) gives
// the global mean and damped item biases; each user's own bias is
// computed on her side from them and her own ratings (joint DP).
func init() {
	Register(&Method{
		Name:    "dp-bias",
		Summary: "private baseline: noised per-item sums and counts, user biases on the user's side (user-level joint DP)",
		Private: true, PerUser: true, Needs: []string{"scale", "items"}, Engine: true,
		New: func() Config { return NewDPBiasConfig() },
	})
}

// DPBiasConfig configures dp-bias. The defaults were chosen on a
// validation split of MovieLens-1M's training part (docs/mf.md).
type DPBiasConfig struct {
	ItemDamping float64 `json:"item_damping" flag:"item-damping" help:"shrinkage of item biases toward zero: b = R·S·C/(C² + (d·σ)²) for a noisy weighted sum S and count C with noise σ"`
	UserDamping float64 `json:"user_damping" flag:"user-damping" help:"shrinkage of each user's own bias toward zero, in pseudo-ratings"`
	Clip        float64 `json:"clip" flag:"clip" help:"a rating enters the item sums as its difference from the user's own mean, clipped to ±clip (rating units; 0: half the scale's width)"`
}

// NewDPBiasConfig returns the defaults.
func NewDPBiasConfig() *DPBiasConfig {
	return &DPBiasConfig{ItemDamping: 2.5, UserDamping: 5, Clip: 1.5}
}

// Validate checks the settings.
func (c *DPBiasConfig) Validate() error {
	for _, d := range []struct {
		name string
		v    float64
	}{{"item-damping", c.ItemDamping}, {"user-damping", c.UserDamping}, {"clip", c.Clip}} {
		if !(d.v >= 0) || math.IsInf(d.v, 0) {
			return fmt.Errorf("--%s must be finite and ≥ 0, got %g", d.name, d.v)
		}
	}
	return nil
}

// biasStats are the noised statistics of releaseBiasStats and what is
// derived from them (all public).
type biasStats struct {
	// Sums and Counts are the noised S_j and C_j.
	Sums, Counts []float64
	// Spread is the noised P_j when the spread block was released.
	Spread []float64
	// Mean is the global mean, Sigma the noise standard deviation, Clip
	// the residual clip R.
	Mean, Sigma, Clip float64
}

// releaseCounts releases the weighted item counts C_j = Σ_u 1/√n_u over
// the users who rated j (statistic.Counts with unit-norm weights) summed
// through eng, through mech (instrumented).
func releaseCounts(ctx context.Context, eng statistic.Engine, items int, mech *mechanism.Gaussian, env Env) ([]float64, error) {
	return releaseStat(ctx, eng, &statistic.Counts{Items: items}, mech, env)
}

// releaseBiasStats sums the bias statistics st (statistic.Bias) through
// eng, releases them through mech (instrumented) and derives the global
// mean: S_j, C_j, the global-mean pair and, with st.Spread, P_j.
func releaseBiasStats(ctx context.Context, eng statistic.Engine, st *statistic.Bias, mech *mechanism.Gaussian, env Env) (*biasStats, error) {
	v, sigma, err := releaseStatSigma(ctx, eng, st, mech, env)
	if err != nil {
		return nil, err
	}
	n, mid, half := st.Items, st.Mid, st.Half
	s := &biasStats{Sums: v[:n], Counts: v[n : 2*n], Sigma: sigma, Clip: st.Clip, Mean: mid}
	if st.Spread {
		s.Spread = v[2*n+2 : 3*n+2]
	}
	if v[2*n+1] > 0 {
		s.Mean = mid + half*math.Max(-1, math.Min(1, v[2*n]/v[2*n+1]))
	}
	return s, nil
}

// biasPlan is the bias statistics over n items for the declared scale,
// residual clip clip (≤ 0 or above the scale's width: half the width),
// optional public item weights and the spread block.
func biasPlan(n int, scale release.Scale, clip float64, itemWeight []float64, spread bool) *statistic.Bias {
	if clip <= 0 || clip > scale.Width() {
		clip = scale.Width() / 2
	}
	return &statistic.Bias{Items: n, Mid: (scale.Min + scale.Max) / 2, Half: scale.Width() / 2, Clip: clip, ItemWeight: itemWeight, Spread: spread}
}

// itemBiases are the shrunk item biases b_j = R·S_j·C_j/(C_j² + (d·σ)²)
// (C_j below zero read as zero), within ±width: the posterior mean of b_j
// under S_j ≈ C_j·b_j/R + N(0, σ²) and a Gaussian prior of standard
// deviation R/d, with C_j taken as exact.
func (s *biasStats) itemBiases(damping, width float64) []float64 {
	return s.itemBiasesToward(damping, width, nil)
}

// itemBiasesToward is itemBiases with the prior centred at prior_j instead
// of 0: b_j = (R·S_j·C_j + (d·σ)²·p_j)/(C_j² + (d·σ)²) (nil: p = 0).
func (s *biasStats) itemBiasesToward(damping, width float64, prior []float64) []float64 {
	b := make([]float64, len(s.Sums))
	d2 := (damping * s.Sigma) * (damping * s.Sigma)
	for j, sum := range s.Sums {
		c := math.Max(s.Counts[j], 0)
		if c*c+d2 == 0 {
			continue
		}
		p := 0.0
		if prior != nil {
			p = prior[j]
		}
		b[j] = math.Max(-width, math.Min(width, (s.Clip*sum*c+d2*p)/(c*c+d2)))
	}
	return b
}

// spreads are the items' spread ratios P_j/C_j (see releaseBiasStats),
// shrunk like the item biases toward their overall ratio ΣP/ΣC:
// (P_j·C_j + (d·σ)²·p̄)/(C_j² + (d·σ)²), within [0, 1]. Nil without the
// spread block.
func (s *biasStats) spreads(damping float64) []float64 {
	if s.Spread == nil {
		return nil
	}
	d2 := (damping * s.Sigma) * (damping * s.Sigma)
	var sp, sc float64
	for j, c := range s.Counts {
		if c > 0 {
			sp += s.Spread[j]
			sc += c
		}
	}
	mean := 1.0
	if sc > 0 {
		mean = math.Max(0, math.Min(1, sp/sc))
	}
	out := make([]float64, len(s.Spread))
	for j, p := range s.Spread {
		c := math.Max(s.Counts[j], 0)
		out[j] = math.Max(0, math.Min(1, (p*c+d2*mean)/(c*c+d2)))
	}
	return out
}

// popularityPrior fits the item biases' prior mean as a line in
// x_j = log(1 + popularity_j) (a quadratic extrapolated badly to the noisy
// small counts at small ε), by least squares on the raw estimates
// R·S_j/C_j weighted by their reliability C_j²/(C_j² + (d·σ)²): rarely
// rated items are shrunk toward what items of their popularity get,
// rather than toward 0. Post-processing of public values only; nil when
// too few items carry signal.
func (s *biasStats) popularityPrior(damping float64, popularity []float64) []float64 {
	d2 := (damping * s.Sigma) * (damping * s.Sigma)
	n := len(s.Sums)
	x := make([]float64, n)
	for j := range n {
		x[j] = math.Log1p(math.Max(popularity[j], 0))
	}
	var a mat.SymDense
	a.ReuseAsSym(2)
	rhs := mat.NewVecDense(2, nil)
	used := 0
	for j := range n {
		c := math.Max(s.Counts[j], 0)
		if c <= 0 {
			continue
		}
		w := c * c / (c*c + d2)
		f := [2]float64{1, x[j]}
		y := s.Clip * s.Sums[j] / c
		for p := range 2 {
			for q := p; q < 2; q++ {
				a.SetSym(p, q, a.At(p, q)+w*f[p]*f[q])
			}
			rhs.SetVec(p, rhs.AtVec(p)+w*f[p]*y)
		}
		used++
	}
	if used < 10 {
		return nil
	}
	for p := range 2 {
		a.SetSym(p, p, a.At(p, p)*(1+1e-9)+1e-12)
	}
	var coef mat.VecDense
	var ch mat.Cholesky
	if !ch.Factorize(&a) || ch.SolveVecTo(&coef, rhs) != nil {
		return nil
	}
	prior := make([]float64, n)
	for j := range n {
		prior[j] = coef.AtVec(0) + coef.AtVec(1)*x[j]
	}
	return prior
}

// Train implements Config.
func (c *DPBiasConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	scale, err := in.NeedScale("dp-bias")
	if err != nil {
		return nil, err
	}
	cat, err := in.NeedCatalogue("dp-bias")
	if err != nil {
		return nil, err
	}
	eng, _, err := ratingEngine(in, env, scale, cat)
	if err != nil {
		return nil, err
	}
	n := cat.Len()
	plan := biasPlan(n, scale, c.Clip, nil, false)
	rho, err := accountant.RhoForApprox(env.Epsilon, env.Delta)
	if err != nil {
		return nil, err
	}
	mech, err := statistic.Mechanism(plan.Spec(), rho, env.Delta)
	if err != nil {
		return nil, err
	}
	st, err := releaseBiasStats(ctx, eng, plan, mech.Instrumented(env.instrument()), env)
	if err != nil {
		return nil, err
	}
	// Post-processing of the one release only.
	m := model.NewPublic("dp-bias", cat)
	m.Offset = st.Mean
	m.Rank, m.V = 0, []float64{}
	m.ItemBias = st.itemBiases(c.ItemDamping, scale.Width())
	m.Transform.Clamp = &scale
	m.Transform.UserCentred, m.UserDamping = true, c.UserDamping
	m.FoldIn = model.FoldRidge
	m.Params = map[string]any{"item_damping": c.ItemDamping, "user_damping": c.UserDamping, "clip": st.Clip}
	var states *model.UserStates
	if env.Engine == nil {
		// An external engine keeps the users' rows on its side.
		if states, err = foldInAll(ctx, m, in.Ratings, "dp-bias"); err != nil {
			return nil, err
		}
	}
	g := mech.Guarantee()
	g.Notion, g.Relation = privacy.Joint, privacy.RelationUserReplace
	g.Note = fmt.Sprintf("One Gaussian release (σ = %.4g) of per-item weighted sums and counts and a global-mean pair; each user's ratings are clipped to the declared scale [%g, %g], enter the sums as differences from her own mean clipped to ±%g, and are weighted 1/√n_u (ℓ2 sensitivity %.4g under replacement). Item biases and the global mean are post-processing; each user's bias is computed on her side from them and her own ratings.",
		mech.Sigma(), scale.Min, scale.Max, st.Clip, statistic.BiasSensitivity().Value)
	return &release.Release{Public: m, PerUser: states, Guarantee: g,
		Report: release.Report{"sigma": mech.Sigma(), "global_mean": st.Mean, "items": n}}, nil
}

// foldInAll computes every user's own state from the public model and her
// own ratings (what her device does), in the order of data's users.
func foldInAll(ctx context.Context, m *model.Model, data *ratings.Matrix, method string) (*model.UserStates, error) {
	n := data.NumUsers()
	states := &model.UserStates{Method: method, Rank: m.Rank, States: make([]model.UserState, n)}
	// Users are independent: chunks of them on every core, each state
	// written at its user's index, so the order is the data's.
	// Each of the data's items resolved to the model's index once.
	at := make([]int32, data.NumItems())
	for j := range at {
		i, ok := m.ItemIndex(data.Items.Name(int32(j)))
		if !ok {
			i = -1
		}
		at[j] = i
	}
	var next atomic.Int64
	const chunk = 1024
	g, ctx := errgroup.WithContext(ctx)
	for range runtime.GOMAXPROCS(0) {
		g.Go(func() error {
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return nil
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				var ui []int32
				for u := int32(lo); u < int32(min(n, lo+chunk)); u++ {
					ids, fv := data.UserRatings(u)
					cols, _ := data.UserRow(u)
					ui = ui[:0]
					for _, j := range cols {
						ui = append(ui, at[j])
					}
					st, err := m.FoldInIndexed(data.Users.Name(u), ids, ui, fv)
					if err != nil {
						return fmt.Errorf("user %q: %w", data.Users.Name(u), err)
					}
					states.States[u] = *st
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return states, nil
}
