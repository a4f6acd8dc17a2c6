package jointdp

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/privacy/audit"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// docs/PRIVACY.md, test tier 6: whole pipelines on tiny data. Each audit runs the
// complete solver (clipping, Gram accumulation, lattice Gaussian release,
// eigenvectors, the local steps) on two neighbouring data sets — user 3's
// ratings replaced — and looks at what user 0 receives: her own predicted
// rating of item 0, which joint DP says must be (ε, δ)-DP in user 3's
// ratings. The audit's Clopper–Pearson bound is simultaneous over its
// events at confidence 1 − 10⁻⁶, so a correct pipeline fails with
// probability ≤ 10⁻⁶. Gaussian mechanisms are audited loosely by events
// (δ dominates their tails), so the test also runs an under-noised
// pipeline (built for a large ε, claimed ε = 1) and requires the audit to
// catch it: the tier has power against a missing or tiny noise.

// tinyProblem is 4 users × 3 items; side 1 replaces user 3's ratings.
func tinyProblem(t testing.TB, side int) *Problem {
	t.Helper()
	rows := [][]float32{{1, 0.5, -0.5}, {0.8, 0.4, -0.6}, {-1, -0.5, 0.4}, {1, 1, 1}}
	if side == 1 {
		rows[3] = []float32{1.5, -1.5, 0}
	}
	ptr := []int64{0}
	var cols []int32
	var vals []float32
	for _, r := range rows {
		for j, v := range r {
			cols = append(cols, int32(j))
			vals = append(vals, v)
		}
		ptr = append(ptr, int64(len(cols)))
	}
	m, err := ratings.FromCSR(nil, nil, 3, ptr, cols, vals, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProblem(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPipelineAudit(t *testing.T) {
	testtier.Long(t) // whole-pipeline audit (tier 6)
	problems := [2]*Problem{tinyProblem(t, 0), tinyProblem(t, 1)}
	const delta = 1e-5
	pipelines := []struct {
		name string
		// badEps is the ε an under-noised run is built for (claimed: 1):
		// large enough that the two sides' outputs separate.
		badEps float64
		// plan builds the mechanisms for ε (the accounting layer); run
		// is the solver with them.
		plan func(eps float64) (*GramPlan, error)
		run  func(src *noise.Source, p *Problem, plan *GramPlan) (float64, error)
	}{
		{"dpsvd", 200,
			func(eps float64) (*GramPlan, error) { return PlanDPSVD(CalZCDP, eps, delta, 2, 3) },
			func(src *noise.Source, p *Problem, plan *GramPlan) (float64, error) {
				r, err := PrivateSVD(context.Background(), p, DPSVDOptions{Rank: 1, Plan: plan, Noise: src, Workers: 1})
				if err != nil {
					return 0, err
				}
				return r.At(0, 0), nil
			}},
		{"dpfw", 1e5,
			func(eps float64) (*GramPlan, error) { return PlanDPFW(CalZCDP, eps, delta, 3, 2, 3) },
			func(src *noise.Source, p *Problem, plan *GramPlan) (float64, error) {
				r, err := PrivateFrankWolfe(context.Background(), p, DPFWOptions{K: 4, Plan: plan,
					Step: StepClassic, NoBias: true, Noise: src, Rand: noise.Seeded(5), Workers: 1})
				if err != nil {
					return 0, err
				}
				return r.At(0, 0), nil
			}},
	}
	for _, pl := range pipelines {
		for _, tc := range []struct {
			name      string
			eps       float64 // the ε the pipeline is built for
			violation bool
		}{{"calibrated", 1, false}, {"under-noised", pl.badEps, true}} {
			t.Run(pl.name+"/"+tc.name, func(t *testing.T) {
				plan, err := pl.plan(tc.eps)
				if err != nil {
					t.Fatal(err)
				}
				sample := func(src *noise.Source, side int) float64 {
					y, err := pl.run(src, problems[side], plan)
					if err != nil {
						return math.NaN()
					}
					return y
				}
				spec := audit.Spec{Mechanism: pl.name, ClaimedEpsilon: 1, Delta: delta, Sample: sample, Events: audit.PilotEvents(sample, 2000, noise.Seeded(999))}
				res, err := audit.Run(context.Background(), spec, 20000, 1-1e-6, noise.Seeded(77))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s built for ε = %g, claimed 1: lower bound %.3f on %s", pl.name, tc.eps, res.EpsilonLowerBound, res.Event)
				if res.Violation != tc.violation {
					t.Errorf("violation = %v, want %v (lower bound %.3f)", res.Violation, tc.violation, res.EpsilonLowerBound)
				}
			})
		}
	}
}
