package synth

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/ratings"
)

// LowRankConfig is the rating-generating process of seeds 002/003 (§3,
// Figure 1): a dense low-rank matrix Θ of true ratings, observed on a
// sparse random subset as X with bounded noise. The papers state the
// model but run no experiments, so the sizes below are our defaults, not
// the papers'.
type LowRankConfig struct {
	Users, Items int     // m × n (default 1000 × 500)
	Rank         int     // r = rank(Θ) ≪ min(m, n) (default 5)
	ObsFrac      float64 // fraction of entries observed, uniformly (default 0.1)
	Noise        float64 // ρ0: |X_ij − Θ_ij| ≤ ρ0 on the [−1, 1] scale (default 0.1)
	// Levels d ≥ 2 puts the ratings on the discrete scale 1..d (the input
	// of randomized response over {missing, 1, …, d}); 0 keeps them
	// continuous in [−1, 1] (the input of the modified Laplace mechanism).
	Levels int
}

// LowRankDefaults returns m = 1000, n = 500, r = 5, 10 % observed,
// ρ0 = 0.1, continuous ratings in [−1, 1].
func LowRankDefaults() LowRankConfig {
	return LowRankConfig{Users: 1000, Items: 500, Rank: 5, ObsFrac: 0.1, Noise: 0.1}
}

// LowRankData is a generated local-DP problem.
type LowRankData struct {
	// Observed is X on Ω_X: values in [−1, 1], or integers 1..Levels.
	Observed *ratings.Matrix
	// Truth is Θ on the same scale as Observed ([−1, 1], or [1, Levels]).
	Truth  *Factors
	Config LowRankConfig
}

// LowRank generates the process of seeds 002/003: A (m × r) and B (n × r)
// with i.i.d. N(0, 1) entries, Θ = A Bᵀ scaled so that ‖Θ‖∞ = 1 (the
// papers normalise ratings to [−1, 1]); a uniformly random Ω_X of exactly
// round(ObsFrac·m·n) entries; X_ij = clamp(Θ_ij + U[−ρ0, ρ0], −1, 1).
// Since Θ_ij ∈ [−1, 1], clamping only moves X towards Θ, so the papers'
// hypothesis ‖P_ΩX(Θ − X)‖_F ≤ ρ0·√s (s = |Ω_X|) holds by construction.
//
// With Levels = d ≥ 2 both are mapped by y ↦ 1 + (d−1)(y+1)/2 onto [1, d]
// and X is rounded to the nearest integer, so then |X − Θ| ≤ (d−1)ρ0/2 + ½.
// Deterministic for seed.
func LowRank(cfg LowRankConfig, seed uint64) (*LowRankData, error) {
	if err := checkShape("low-rank", cfg.Users, cfg.Items, cfg.Rank); err != nil {
		return nil, err
	}
	if cfg.Noise < 0 || math.IsNaN(cfg.Noise) || math.IsInf(cfg.Noise, 0) {
		return nil, fmt.Errorf("synth: noise ρ0 = %v must be ≥ 0 and finite", cfg.Noise)
	}
	if cfg.Levels == 1 || cfg.Levels < 0 {
		return nil, fmt.Errorf("synth: levels %d: want 0 (continuous) or d ≥ 2", cfg.Levels)
	}
	s, err := checkFrac("observation fraction", cfg.ObsFrac, cfg.Users, cfg.Items)
	if err != nil {
		return nil, err
	}
	r := newRand(seed, 0x6c6470) // "ldp"
	a := normalFactor(r, cfg.Users, cfg.Rank)
	b := normalFactor(r, cfg.Items, cfg.Rank)
	truth := &Factors{U: a, V: b}
	if err := truth.scaleMaxAbs(1, "Θ"); err != nil {
		return nil, err
	}
	d := float64(cfg.Levels)
	obs, err := observe(r, cfg.Users, cfg.Items, s, func(i, j int) float32 {
		x := truth.At(i, j) + cfg.Noise*(2*r.Float64()-1)
		x = max(-1, min(1, x))
		if cfg.Levels >= 2 {
			return float32(math.Round(1 + (d-1)*(x+1)/2))
		}
		return float32(x)
	})
	if err != nil {
		return nil, err
	}
	if cfg.Levels >= 2 {
		// Θ_d = 1 + (d−1)(Θ+1)/2 = (d+1)/2 + ((d−1)/2)·A Bᵀ: scale A and add
		// a constant column pair so the truth stays in factored form.
		truth = affineFactors(truth, (d-1)/2, (d+1)/2)
	}
	return &LowRankData{Observed: obs, Truth: truth, Config: cfg}, nil
}

// affineFactors returns the factors of c·F + b·11ᵀ (one extra rank).
func affineFactors(f *Factors, c, b float64) *Factors {
	nu, k := f.U.Dims()
	ni, _ := f.V.Dims()
	u := make([]float64, 0, nu*(k+1))
	for i := range nu {
		for t := range k {
			u = append(u, c*f.U.At(i, t))
		}
		u = append(u, b)
	}
	v := make([]float64, 0, ni*(k+1))
	for j := range ni {
		for t := range k {
			v = append(v, f.V.At(j, t))
		}
		v = append(v, 1)
	}
	return &Factors{U: mat.NewDense(nu, k+1, u), V: mat.NewDense(ni, k+1, v)}
}
