package recovery

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/synth"
)

// TestLambdaRules compares the debiased estimator's λ rules on data with
// known Θ (seeds 002/003's generating process). Everything is seeded, so
// the outcome is deterministic (no false failures); the assertion is the
// claim docs/ldp.md makes: for randomized response the noise-norm rule
// (the default) beats the constant predictor and the discrepancy principle
// (which does not beat the constant); for Laplace it is within 2 % of the
// constant at ε = 4 with half the cells observed (on four collections,
// noise seeds 22–25: 0.1202 rank 0, 0.1178, 0.1181, 0.1193 rank 1, constant
// 0.1191) and beats it at ε = 8. The discrepancy principle is slightly
// better for Laplace here (logged, not asserted); refitting is logged only
// (mixed).
func TestLambdaRules(t *testing.T) {
	testtier.Long(t) // four 600 × 400 recoveries; TestRecoverSynthetic covers the code in the quick tier
	for _, tc := range []struct {
		mech ldp.Mechanism
		eps  float64
		obs  float64
	}{
		{ldp.Laplace, 4, 0.5}, {ldp.Laplace, 8, 0.2}, {ldp.RR, 4, 0.5}, {ldp.RR, 8, 0.2},
	} {
		t.Run(fmt.Sprintf("%s/eps=%g/obs=%g", tc.mech, tc.eps, tc.obs), func(t *testing.T) {
			if raceEnabled && tc.mech == ldp.Laplace {
				t.Skip("slow under the race detector; the RR cases cover the same code")
			}
			cfg := synth.LowRankConfig{Users: 600, Items: 400, Rank: 3, ObsFrac: tc.obs, Noise: 0.1}
			// ρ0: the RMS deviation of X from Θ, known for this process
			// (uniform on ±0.1 normalised; plus rounding to levels for RR).
			sc := ldp.Scale{Min: -1, Max: 1}
			rho0 := cfg.Noise / math.Sqrt(3)
			if tc.mech == ldp.RR {
				cfg.Levels = 5
				sc = ldp.Scale{Min: 1, Max: 5, Levels: 5}
				rho0 = math.Sqrt(math.Pow(2*cfg.Noise, 2)/3 + 1.0/12)
			}
			d, err := synth.LowRank(cfg, 21)
			if err != nil {
				t.Fatal(err)
			}
			r, err := ldp.New(tc.mech, tc.eps, sc)
			if err != nil {
				t.Fatal(err)
			}
			z := randomizeAll(t, d, r, noise.Seeded(22))
			p, err := NewProblem(z, ldp.Header{Mechanism: tc.mech, Epsilon: tc.eps, Scale: sc, Users: cfg.Users, Items: cfg.Items})
			if err != nil {
				t.Fatal(err)
			}
			rmse := map[string]float64{}
			ranks := map[string]int{}
			for _, v := range []struct {
				name string
				o    Options
			}{
				{"discrepancy", Options{Debias: true, LambdaRule: Discrepancy}},
				{"noise-norm", Options{Debias: true}},
				{"noise-norm+refit", Options{Debias: true, Refit: true}},
			} {
				v.o.Rand, v.o.Rho0 = noise.Seeded(1), rho0
				res, err := Recover(context.Background(), p, v.o)
				if err != nil {
					t.Fatal(err)
				}
				rmse[v.name], ranks[v.name] = rmseTruth(d, res.At), res.Rank
			}
			var mean float64
			m, n := d.Truth.Dims()
			for i := range m {
				for j := range n {
					mean += d.Truth.At(i, j)
				}
			}
			mean /= float64(m * n)
			constant := rmseTruth(d, func(int, int) float64 { return mean })
			bound, what := constant, "below"
			if tc.mech == ldp.Laplace && tc.eps < 8 {
				bound, what = 1.02*constant, "within 2 % of"
			}
			if !(rmse["noise-norm"] < bound) {
				t.Errorf("noise-norm RMSE %.4f not %s the constant predictor %.4f", rmse["noise-norm"], what, constant)
			}
			if tc.mech == ldp.RR && !(rmse["noise-norm"] < rmse["discrepancy"]) {
				t.Errorf("RR: noise-norm RMSE %.4f not below discrepancy %.4f", rmse["noise-norm"], rmse["discrepancy"])
			}
			t.Logf("RMSE vs Θ: constant %.4f, discrepancy %.4f (rank %d), noise-norm %.4f (rank %d), noise-norm+refit %.4f (rank %d)",
				constant, rmse["discrepancy"], ranks["discrepancy"], rmse["noise-norm"], ranks["noise-norm"], rmse["noise-norm+refit"], ranks["noise-norm+refit"])
		})
	}
}
