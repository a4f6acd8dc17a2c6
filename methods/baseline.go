package methods

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/release"
)

// The baselines every comparison needs: the global mean, and the global
// mean plus damped user and item biases. They add no noise; their status
// is none, and the whole model (users included) is in the public file.
func init() {
	Register(&Method{
		Name:    "global-mean",
		Summary: "predict the training mean for everything",
		New:     func() Config { return &BiasConfig{Damping: -1} },
	})
	Register(&Method{
		Name:    "bias",
		Summary: "global mean plus damped user and item biases",
		New:     func() Config { return &BiasConfig{Damping: 10} },
	})
}

// BiasConfig configures the non-private baselines. Damping < 0 fits the
// global mean only (global-mean).
type BiasConfig struct {
	Damping float64 `json:"damping" flag:"damping" help:"shrinkage of biases toward zero, in pseudo-ratings (negative: global mean only)"`
}

// Validate checks the damping is a number.
func (c *BiasConfig) Validate() error {
	if math.IsNaN(c.Damping) || math.IsInf(c.Damping, 0) {
		return fmt.Errorf("--damping must be finite, got %g", c.Damping)
	}
	return nil
}

// Train fits the mean (Damping < 0) or mean + biases: item biases
// b_i = Σ(r − μ)/(n_i + damping), then user biases on the residual.
func (c *BiasConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	data := in.Ratings
	name := "bias"
	if c.Damping < 0 {
		name = "global-mean"
	}
	m := model.New(name, data)
	if s := in.Declared.Scale; s != nil {
		m.Transform.Clamp = s
	}
	mu := data.Mean()
	m.Offset = mu
	m.U, m.V = []float64{}, []float64{}
	if c.Damping >= 0 {
		m.ItemBias = make([]float64, data.NumItems())
		for i := range int32(data.NumItems()) {
			_, vals := data.ItemCol(i)
			var s float64
			for _, v := range vals {
				s += float64(v) - mu
			}
			m.ItemBias[i] = s / (float64(len(vals)) + c.Damping)
		}
		m.UserBias = make([]float64, data.NumUsers())
		for u := range int32(data.NumUsers()) {
			items, vals := data.UserRow(u)
			var s float64
			for k, it := range items {
				s += float64(vals[k]) - mu - m.ItemBias[it]
			}
			m.UserBias[u] = s / (float64(len(items)) + c.Damping)
		}
		m.Params = map[string]any{"damping": c.Damping}
	}
	g := privacy.NoPrivacy(privacy.UnitEntry, "A non-private baseline: the model is computed from the raw ratings without noise.")
	return &release.Release{Public: m, Guarantee: g, Report: release.Report{}}, nil
}
