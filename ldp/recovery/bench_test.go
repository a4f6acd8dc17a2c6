package recovery

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// ml100kShaped returns reports of a MovieLens-100K-shaped synthetic
// matrix randomized by mech at ε: 943 users × 1682 items, ≈ 100 000
// ratings on 1…5 with MovieLens-like structure — log-normal user activity
// (at least 20 ratings each), Zipf-like item popularity, and ratings
// round(3.5 + b_u + b_i + rank-5 interaction + noise) with bias sds 0.4
// and 0.5, interaction sd ≈ 0.5 and noise sd 0.6. (seeds 002/003's uniform
// generator, synth.LowRank, puts the signal below the mechanisms' noise at
// this sparsity, so the solver would only ever return rank 0.) The
// benchmark needs the shape, the report density and a detectable
// structure, not the real data.
func ml100kShaped(b *testing.B, mech ldp.Mechanism, eps float64) *Problem {
	b.Helper()
	const users, items, rank = 943, 1682, 5
	src := noise.Seeded(100)
	bu, bi := make([]float64, users), make([]float64, items)
	U, V := make([]float64, users*rank), make([]float64, items*rank)
	for u := range users {
		bu[u] = 0.4 * src.NormFloat64()
	}
	for i := range items {
		bi[i] = 0.5 * src.NormFloat64()
	}
	for k := range U {
		U[k] = math.Sqrt(0.5/math.Sqrt(rank)) * src.NormFloat64()
	}
	for k := range V {
		V[k] = math.Sqrt(0.5/math.Sqrt(rank)) * src.NormFloat64()
	}
	// Item popularity ∝ 1/(rank+10): sampled by inverse CDF.
	cdf := make([]float64, items)
	var tot float64
	for i := range items {
		tot += 1 / float64(i+10)
		cdf[i] = tot
	}
	sc := ldp.Scale{Min: 1, Max: 5, Levels: 5}
	r, err := ldp.New(mech, eps, sc)
	if err != nil {
		b.Fatal(err)
	}
	in, out := make([]float64, items), make([]float64, items)
	ptr := []int64{0}
	var col []int32
	var val []float32
	for u := range users {
		n := min(items/2, max(20, int(math.Exp(4.1+0.9*src.NormFloat64()))))
		for j := range in {
			in[j] = ldp.Missing
		}
		for got := 0; got < n; {
			x := src.Float64() * tot
			i, _ := slices.BinarySearch(cdf, x)
			i = min(i, items-1)
			if !ldp.IsMissing(in[i]) {
				continue
			}
			v := 3.5 + bu[u] + bi[i] + 0.6*src.NormFloat64()
			for c := range rank {
				v += U[u*rank+c] * V[i*rank+c]
			}
			in[i] = math.Min(5, math.Max(1, math.Round(v)))
			got++
		}
		if err := r.Randomize(src, in, out); err != nil {
			b.Fatal(err)
		}
		for j, v := range out {
			if !ldp.IsMissing(v) {
				col = append(col, int32(j))
				val = append(val, float32(v))
			}
		}
		ptr = append(ptr, int64(len(col)))
	}
	z, err := ratings.FromCSR(ratings.Sequential(users), ratings.Sequential(items), items, ptr, col, val, nil)
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewProblem(z, ldp.Header{Mechanism: mech, Epsilon: eps, Scale: sc, Users: users, Items: items})
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
			for _, v := range []struct {
				name string
				o    Options
			}{
				{"plain", Options{}},
				{"debiased", Options{Debias: true}},
				{"debiased-discrepancy", Options{Debias: true, LambdaRule: Discrepancy}},
			} {
				b.Run(fmt.Sprintf("%s/eps=%g/%s", mech, eps, v.name), func(b *testing.B) {
					var res *Result
					for b.Loop() {
						var err error
						o := v.o
						o.Rand = noise.Seeded(1)
						res, err = Recover(context.Background(), p, o)
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
