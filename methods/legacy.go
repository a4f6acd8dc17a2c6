package methods

import (
	"context"
	"fmt"
	"strings"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// ConfigureStrings is Configure with parameter values written as on the
// command line ("0.5", "true", "probit").
//
// Deprecated: a bridge for the experiment runner while methods move to
// typed Configs.
func ConfigureStrings(name string, params map[string]string) (Config, error) {
	p := make(map[string]any, len(params))
	for k, v := range params {
		p[strings.ReplaceAll(k, "-", "_")] = v
	}
	return Configure(name, p)
}

// AsTrainer adapts a typed Config to the flag-era Trainer interface.
//
// Deprecated: a bridge while methods move to typed Configs.
func AsTrainer(name string, cfg Config) Trainer {
	return TrainerFunc(func(ctx context.Context, data *ratings.Matrix, c Common) (*Result, error) {
		rel, err := Train(ctx, name, cfg, release.Input{Ratings: data, Source: c.DataPath},
			Env{Epsilon: c.Epsilon, Delta: c.Delta, Noise: c.Noise, Rand: c.Rand, Seed: c.Seed, Workers: c.Workers, Log: c.Log, Progress: c.Progress})
		if err != nil {
			return nil, err
		}
		m := rel.Model()
		if m == nil {
			return nil, fmt.Errorf("%s: not a matrix model", name)
		}
		return &Result{Model: m, Guarantee: rel.Guarantee, Info: rel.Report}, nil
	})
}
