package recovery

import (
	"context"
	"fmt"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/synth"
)

// ml100kShaped returns reports of a MovieLens-100K-shaped synthetic matrix
// (943 × 1682, 90 570 ratings on 1…5, rank 5; seeds 002/003's generating
// process) randomized by mech at ε: the benchmark needs the shape and the
// report density, not the real data.
func ml100kShaped(b *testing.B, mech ldp.Mechanism, eps float64) *Problem {
	b.Helper()
	cfg := synth.LowRankConfig{Users: 943, Items: 1682, Rank: 5, ObsFrac: 90570.0 / (943 * 1682), Noise: 0.2, Levels: 5}
	sc := ldp.Scale{Min: 1, Max: 5, Levels: 5}
	d, err := synth.LowRank(cfg, 100)
	if err != nil {
		b.Fatal(err)
	}
	r, err := ldp.New(mech, eps, sc)
	if err != nil {
		b.Fatal(err)
	}
	z := randomizeAll(b, d, r, noise.Seeded(101))
	p, err := NewProblem(z, ldp.Header{Mechanism: mech, Epsilon: eps, Scale: sc, Users: cfg.Users, Items: cfg.Items})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkRecoverML100K times the recovery on MovieLens-100K-shaped
// reports (target: ≤ 30 s per cell on 2 cores). ε = 0.5 is the densest
// report set (RR reports ≈ 1.2 M of the 1.59 M cells).
func BenchmarkRecoverML100K(b *testing.B) {
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		for _, eps := range []float64{0.5, 4} {
			p := ml100kShaped(b, mech, eps)
			for _, debias := range []bool{false, true} {
				name := fmt.Sprintf("%s/eps=%g/plain", mech, eps)
				if debias {
					name = fmt.Sprintf("%s/eps=%g/debiased", mech, eps)
				}
				b.Run(name, func(b *testing.B) {
					var res *Result
					for b.Loop() {
						var err error
						res, err = Recover(context.Background(), p, Options{Debias: debias, Rand: noise.Seeded(1)})
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(p.Z)), "reports")
					b.ReportMetric(float64(res.Iterations), "iters")
					b.ReportMetric(float64(res.Rank), "rank")
				})
			}
		}
	}
}
