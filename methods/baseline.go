package methods

import (
	"context"
	"flag"
	"fmt"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
)

// The baselines every comparison needs: the global mean, and the global
// mean plus damped user and item biases. They add no noise.
func init() {
	Register(&Method{
		Name:    "global-mean",
		Summary: "predict the training mean for everything",
		Flags: func(fs *flag.FlagSet) Trainer {
			return TrainerFunc(func(ctx context.Context, data *ratings.Matrix, c Common) (*Result, error) {
				return trainBaseline(data, "global-mean", -1)
			})
		},
	})
	Register(&Method{
		Name:    "bias",
		Summary: "global mean plus damped user and item biases",
		Flags: func(fs *flag.FlagSet) Trainer {
			damping := fs.Float64("damping", 10, "shrinkage of biases toward zero, in pseudo-ratings")
			return TrainerFunc(func(ctx context.Context, data *ratings.Matrix, c Common) (*Result, error) {
				if *damping < 0 {
					return nil, fmt.Errorf("--damping must be non-negative, got %g", *damping)
				}
				return trainBaseline(data, "bias", *damping)
			})
		},
	})
}

// trainBaseline fits the mean (damping < 0) or mean + biases: item biases
// b_i = Σ(r − μ)/(n_i + damping), then user biases on the residual.
func trainBaseline(data *ratings.Matrix, name string, damping float64) (*Result, error) {
	if data.Len() == 0 {
		return nil, fmt.Errorf("no training ratings")
	}
	m := model.New(name, data)
	mu := data.Mean()
	m.Offset = mu
	m.U, m.V = []float64{}, []float64{}
	if damping >= 0 {
		m.ItemBias = make([]float64, data.NumItems())
		for i := range int32(data.NumItems()) {
			_, vals := data.ItemCol(i)
			var s float64
			for _, v := range vals {
				s += float64(v) - mu
			}
			m.ItemBias[i] = s / (float64(len(vals)) + damping)
		}
		m.UserBias = make([]float64, data.NumUsers())
		for u := range int32(data.NumUsers()) {
			items, vals := data.UserRow(u)
			var s float64
			for k, it := range items {
				s += float64(vals[k]) - mu - m.ItemBias[it]
			}
			m.UserBias[u] = s / (float64(len(items)) + damping)
		}
		m.Params = map[string]any{"damping": damping}
	}
	g := privacy.NoPrivacy(privacy.UnitEntry, "A non-private baseline: the model is computed from the raw ratings without noise.")
	return &Result{Model: m, Guarantee: g}, nil
}
