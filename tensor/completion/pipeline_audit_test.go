package completion

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/privacy/audit"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/tensor"
)

// PRIVACY.md tier 6: the whole training pipeline on a tiny tensor. Two
// neighbouring tensors differ in the value of one entry (the unit of IP's
// and DP-SGD's entry-level guarantees); each sample trains a fresh model
// (fixed initialisation, fresh privacy noise) and releases one prediction.
// The audit's bound holds simultaneously over its events at confidence
// 1 − 10⁻⁶ (a correct pipeline fails with probability ≤ 10⁻⁶); an
// under-noised pipeline (built for a large ε, claimed ε = 1) must be caught.

func tinyTensor(side int) *tensor.Tensor {
	t := tensor.New([3]int{3, 3, 2}, 12)
	v := 0.2
	for i := range int32(3) {
		for j := range int32(3) {
			if (i+j)%2 == 0 {
				t.Add(i, j, (i+j)%2, v)
				v += 0.07
			}
		}
	}
	if side == 1 {
		t.Val[0] = 1 // entry (0, 0, 0): 0.2 → 1 (range [0, 1])
	}
	return t
}

func TestPipelineAudit(t *testing.T) {
	testtier.Long(t) // whole-pipeline audit (tier 6)
	tensors := [2]*tensor.Tensor{tinyTensor(0), tinyTensor(1)}
	for _, tc := range []struct {
		name      string
		mech      Mechanism
		delta     float64
		eps       float64 // the ε the pipeline is built for; claimed: 1
		violation bool
		n         int
	}{
		{"ip/calibrated", IP, 0, 1, false, 20000},
		{"ip/under-noised", IP, 0, 200, true, 20000},
		{"dpsgd/calibrated", DPSGD, 1e-5, 1, false, 10000},
		{"dpsgd/under-noised", DPSGD, 1e-5, 1e4, true, 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Paper(tensor.CP)
			cfg.Rank, cfg.Passes, cfg.LR, cfg.Workers = 2, 5, 0.1, 1
			cfg.Mechanism, cfg.Epsilon, cfg.Delta = tc.mech, tc.eps, tc.delta
			sample := func(src *noise.Source, side int) float64 {
				m, _, err := Train(context.Background(), tensors[side], cfg, noise.Seeded(4), src, nil)
				if err != nil {
					return math.NaN()
				}
				return m.Predict(0, 0, 0)
			}
			spec := audit.Spec{Mechanism: tc.name, ClaimedEpsilon: 1, Delta: tc.delta, Sample: sample, Events: audit.PilotEvents(sample, 2000, noise.Seeded(999))}
			res, err := audit.Run(context.Background(), spec, tc.n, 1-1e-6, noise.Seeded(77))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("built for ε = %g, claimed 1: lower bound %.3f on %s", tc.eps, res.EpsilonLowerBound, res.Event)
			if res.Violation != tc.violation {
				t.Errorf("violation = %v, want %v (lower bound %.3f)", res.Violation, tc.violation, res.EpsilonLowerBound)
			}
		})
	}
}
