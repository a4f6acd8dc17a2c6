package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
)

// ExplicitConfig is a Netflix-like population with rating values, the
// population on which privrec's behaviour at large N is tuned and
// benchmarked (public data this large is not available to the tests).
// Who rates what is the ImplicitConfig's model: item popularity a power
// law, users' activity log-normally spread, a genre taste share. The value
// of user u's rating of item i is
//
//	round(clamp(Mean + b_u + b_i + ⟨p_u, q_i⟩ + e, Low, High))
//
// with b_u ~ N(0, UserBias²), b_i ~ N(0, ItemBias²), p_u and q_i with
// independent N(0, Affinity/√Factors)-variance entries (so ⟨p_u, q_i⟩ has standard
// deviation Affinity) and e ~ N(0, Noise²). Each rating is held out for
// testing with probability Holdout.
type ExplicitConfig struct {
	ImplicitConfig
	// Factors is the rank of the taste ⟨p_u, q_i⟩.
	Factors int
	// Mean, UserBias and ItemBias: the global mean and the standard
	// deviations of the user and item biases.
	Mean, UserBias, ItemBias float64
	// Affinity is the standard deviation of ⟨p_u, q_i⟩; Noise that of e.
	Affinity, Noise float64
	// Low and High bound the integer rating scale.
	Low, High int
	// Holdout is each rating's probability of going to the test split.
	Holdout float64
}

// ExplicitDefaults is the Netflix Prize's shape — 480 189 users × 17 770
// items, 100 480 507 ratings on 1..5 — with rank-8 taste, user and item
// biases of standard deviation 0.4 and 0.35 around 3.6, affinity 0.8,
// noise 0.65 and 1 % held out.
func ExplicitDefaults() ExplicitConfig {
	return ExplicitConfig{
		ImplicitConfig: ImplicitConfig{Users: 480_189, Items: 17_770, Interactions: 100_480_507, Rank: 16, PopExponent: 0.9, ActivitySpread: 1, Taste: 0.5},
		Factors:        8, Mean: 3.6, UserBias: 0.4, ItemBias: 0.35, Affinity: 0.8, Noise: 0.65, Low: 1, High: 5, Holdout: 0.01,
	}
}

// Check validates the configuration.
func (c ExplicitConfig) Check() error {
	if err := c.ImplicitConfig.Check(); err != nil {
		return err
	}
	switch {
	case c.Factors < 1 || c.Factors > 1024:
		return fmt.Errorf("synth: explicit taste rank %d must be in [1, 1024]", c.Factors)
	case c.Low >= c.High:
		return fmt.Errorf("synth: rating scale %d..%d is empty", c.Low, c.High)
	case !(c.Holdout >= 0 && c.Holdout < 1):
		return fmt.Errorf("synth: held-out share %g must be in [0, 1)", c.Holdout)
	}
	for _, v := range []struct {
		name string
		x    float64
	}{{"mean", c.Mean}, {"user bias", c.UserBias}, {"item bias", c.ItemBias}, {"affinity", c.Affinity}, {"noise", c.Noise}} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) || (v.name != "mean" && v.x < 0) {
			return fmt.Errorf("synth: explicit %s %g must be finite (and ≥ 0 for a standard deviation)", v.name, v.x)
		}
	}
	return nil
}

// Explicit generates the population of cfg for seed and hands each user's
// ratings to emit, user by user in order: her items (increasing,
// distinct), their values and which of them are held out. As Implicit, it
// streams (memory stays bounded by a few chunks of users plus the item
// factors) and the result is a deterministic function of cfg and seed
// whatever the number of cores. The slices are reused after emit returns.
func Explicit(ctx context.Context, cfg ExplicitConfig, seed uint64, emit func(user int, items []int32, vals []float32, heldOut []bool) error) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	k := cfg.Factors
	fsd := math.Sqrt(cfg.Affinity / math.Sqrt(float64(k)))
	r := newRand(seed, 1<<62+2)
	q := make([]float64, cfg.Items*k)
	for i := range q {
		q[i] = fsd * r.NormFloat64()
	}
	itemBias := make([]float64, cfg.Items)
	for i := range itemBias {
		itemBias[i] = cfg.ItemBias * r.NormFloat64()
	}
	p := make([]float64, k)
	var vals []float32
	var held []bool
	lo, hi := float64(cfg.Low), float64(cfg.High)
	return Implicit(ctx, cfg.ImplicitConfig, seed, func(u int, items []int32) error {
		// One stream per user (distinct from Implicit's per-chunk
		// streams), so her values do not depend on anyone else's.
		ur := rand.New(rand.NewPCG(seed^0x65787031, uint64(u)))
		for f := range p {
			p[f] = fsd * ur.NormFloat64()
		}
		base := cfg.Mean + cfg.UserBias*ur.NormFloat64()
		vals, held = vals[:0], held[:0]
		for _, j := range items {
			x := base + itemBias[j] + cfg.Noise*ur.NormFloat64()
			for f, qf := range q[int(j)*k : int(j)*k+k] {
				x += p[f] * qf
			}
			vals = append(vals, float32(math.Round(min(hi, max(lo, x)))))
			held = append(held, ur.Float64() < cfg.Holdout)
		}
		return emit(u, items, vals, held)
	})
}
