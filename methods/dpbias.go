package methods

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/release"
)

// dp-bias: the private baseline every user-level method must beat. Each
// user's ratings (clipped to the declared scale, centred at its midpoint c)
// enter per-item sums and counts with weight 1/√n_u, so her whole
// contribution has ℓ2 norm ≤ 1 in the counts and ≤ 1 in the sums divided
// by the half-width h of the scale; one Gaussian release of the 2·|items|
// vector is (ε, δ)-DP for one user's ratings replaced (ℓ2 sensitivity
// 2√2). The global mean and the damped item biases are post-processing of
// that release; each user's own bias is computed from the public item
// biases and her own ratings, on her side (joint DP).
func init() {
	Register(&Method{
		Name:    "dp-bias",
		Summary: "private baseline: noised per-item sums and counts, user biases on the user's side (user-level joint DP)",
		Private: true, PerUser: true, Needs: []string{"scale", "items"},
		New: func() Config { return &DPBiasConfig{ItemDamping: 2, UserDamping: 5} },
	})
}

// DPBiasConfig configures dp-bias.
type DPBiasConfig struct {
	ItemDamping float64 `json:"item_damping" flag:"item-damping" help:"shrinkage of item biases toward zero, in units of the noise σ on the (weighted) counts"`
	UserDamping float64 `json:"user_damping" flag:"user-damping" help:"shrinkage of each user's own bias toward zero, in pseudo-ratings"`
}

// Validate checks the damping values.
func (c *DPBiasConfig) Validate() error {
	for _, d := range []struct {
		name string
		v    float64
	}{{"item-damping", c.ItemDamping}, {"user-damping", c.UserDamping}} {
		if !(d.v >= 0) || math.IsInf(d.v, 0) {
			return fmt.Errorf("--%s must be finite and ≥ 0, got %g", d.name, d.v)
		}
	}
	return nil
}

// dpBiasSensitivity is the ℓ2 sensitivity of the joint sums/counts vector
// for one user's ratings replaced: each user's part has norm ≤ √2.
var dpBiasSensitivity = mechanism.Sensitivity{Value: 2 * math.Sqrt2, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}

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
	data, err := release.OnCatalogue(release.ClampToScale(in.Ratings, scale), cat)
	if err != nil {
		return nil, err
	}
	n := data.NumItems()
	mid, half := (scale.Min+scale.Max)/2, scale.Width()/2
	mech, err := mechanism.NewGaussian(env.Epsilon, env.Delta, dpBiasSensitivity, 2*n, mechanism.CalibrateZCDP)
	if err != nil {
		return nil, fmt.Errorf("calibrating the noise: %w", err)
	}
	// v = [Σ_u w_u (r − c)/h per item ; Σ_u w_u per item], w_u = 1/√n_u.
	v := make([]float64, 2*n)
	for u := range int32(data.NumUsers()) {
		if u%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		items, vals := data.UserRow(u)
		if len(items) == 0 {
			continue
		}
		w := 1 / math.Sqrt(float64(len(items)))
		for k, j := range items {
			v[j] += w * (float64(vals[k]) - mid) / half
			v[n+int(j)] += w
		}
	}
	if err := mech.Release(env.Noise, v); err != nil {
		return nil, fmt.Errorf("releasing item statistics: %w", err)
	}
	// Post-processing of the one release only.
	var sumAll, cntAll float64
	for j := range n {
		sumAll += v[j] * half
		cntAll += v[n+j]
	}
	mu := mid
	if cntAll > 1 {
		mu = mid + math.Max(-half, math.Min(half, sumAll/cntAll))
	}
	m := model.NewPublic("dp-bias", cat)
	m.Offset = mu
	m.Rank, m.V = 0, []float64{}
	m.ItemBias = make([]float64, n)
	for j := range n {
		s, cnt := v[j]*half-(mu-mid)*v[n+j], math.Max(v[n+j], 0)
		b := s / (cnt + c.ItemDamping*mech.Sigma() + 1e-9)
		m.ItemBias[j] = math.Max(-scale.Width(), math.Min(scale.Width(), b))
	}
	m.Transform.Clamp = &scale
	m.Transform.UserCentred, m.UserDamping = true, c.UserDamping
	m.FoldIn = model.FoldRidge
	m.Params = map[string]any{"item_damping": c.ItemDamping, "user_damping": c.UserDamping}
	// Each user's own bias, as her device computes it.
	states := &model.UserStates{Method: "dp-bias"}
	for u := range int32(in.Ratings.NumUsers()) {
		items, vals := in.Ratings.UserRow(u)
		ids := make([]string, len(items))
		fv := make([]float64, len(items))
		for k, it := range items {
			ids[k], fv[k] = in.Ratings.Items.Name(it), float64(vals[k])
		}
		st, err := m.FoldInUser(in.Ratings.Users.Name(u), ids, fv)
		if err != nil {
			return nil, err
		}
		states.States = append(states.States, *st)
	}
	g := mech.Guarantee()
	g.Notion, g.Relation = privacy.Joint, privacy.RelationUserReplace
	g.Note = fmt.Sprintf("One Gaussian release (σ = %.4g) of per-item weighted sums and counts; each user's ratings are clipped to the declared scale [%g, %g] and weighted 1/√n_u so her contribution has ℓ2 norm ≤ √2. Item biases and the global mean are post-processing; each user's bias is computed on her side from them and her own ratings.", mech.Sigma(), scale.Min, scale.Max)
	return &release.Release{Public: m, PerUser: states, Guarantee: g,
		Report: release.Report{"sigma": mech.Sigma(), "global_mean": mu, "items": n}}, nil
}
