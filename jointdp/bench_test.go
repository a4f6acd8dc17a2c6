package jointdp

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/synth"
)

// The speed targets (run with go test -bench . -benchtime 3x):
// one DPFW iteration on the 500 000 × 400 synthetic set (40 M ratings)
// ≤ 2 s on 2 cores, T = 40 ≤ 2 min, peak memory ≤ 3 GB; one FW iteration
// on MovieLens-1M-sized data ≤ 0.2 s.

var (
	bigOnce sync.Once
	bigP    *Problem
	bigErr  error
)

func bigProblem(b *testing.B) *Problem {
	bigOnce.Do(func() {
		d, err := synth.RankOne(context.Background(), synth.RankOneDefaults(), 1)
		if err != nil {
			bigErr = err
			return
		}
		bigP, bigErr = NewProblem(d.Observed)
	})
	if bigErr != nil {
		b.Fatal(bigErr)
	}
	return bigP
}

// ml1mLike is a MovieLens-1M-sized problem (6 040 × 3 706, about 1 M
// ratings, skewed item popularity) with a rank-one truth; no real data.
func ml1mLike() *Problem {
	const m, n = 6040, 3706
	rnd := noise.Seeded(42)
	u := make([]float64, m)
	v := make([]float64, n)
	for i := range u {
		u[i] = 2*rnd.Float64() - 1
	}
	for j := range v {
		v[j] = 2*rnd.Float64() - 1
	}
	ptr := make([]int64, m+1)
	var cols []int32
	var vals []float32
	seen := make([]bool, n)
	for i := range m {
		cnt := 20 + int(300*rnd.Float64()*rnd.Float64()) // mean ≈ 95 → ~ 0.57 M; doubled below
		cnt *= 2
		var row []int32
		for len(row) < cnt {
			// Popularity skew: item index ~ n·U².
			x := rnd.Float64()
			j := int32(float64(n) * x * x)
			if !seen[j] {
				seen[j] = true
				row = append(row, j)
			}
		}
		for _, j := range row {
			seen[j] = false
		}
		sortInt32(row)
		for _, j := range row {
			cols = append(cols, j)
			vals = append(vals, float32(u[i]*v[j]))
		}
		ptr[i+1] = int64(len(cols))
	}
	return &Problem{M: m, N: n, Ptr: ptr, Cols: cols, Vals: vals}
}

func sortInt32(a []int32) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j-1] > a[j]; j-- {
			a[j-1], a[j] = a[j], a[j-1]
		}
	}
}

func BenchmarkFWIterationML1M(b *testing.B) {
	p := ml1mLike()
	b.Logf("%d × %d, %d ratings", p.M, p.N, p.Len())
	// T iterations per op, reported per iteration.
	const T = 10
	b.ResetTimer()
	var prods int
	for range b.N {
		r, err := FrankWolfe(context.Background(), p, FWOptions{K: 1e4, T: T, Workers: 2})
		if err != nil {
			b.Fatal(err)
		}
		prods += r.Products
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N*T), "s/iter")
	b.ReportMetric(float64(prods)/float64(b.N*T), "products/iter")
}

func BenchmarkDPFW500k(b *testing.B) {
	for _, T := range []int{1, 40} {
		b.Run(map[int]string{1: "T=1", 40: "T=40"}[T], func(b *testing.B) {
			p := bigProblem(b)
			runtime.GC()
			b.ResetTimer()
			for range b.N {
				_, err := PrivateFrankWolfe(context.Background(), p, DPFWOptions{K: 1e5, Plan: dpfwPlan(b, CalZCDP, 1, T, 5, p.N),
					Noise: noise.Seeded(1), Workers: 2})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N*T), "s/iter")
		})
	}
}

// BenchmarkGramPass is one user's local Gram contribution (ξ = 80 of
// n = 400 items), the inner loop of every DPFW and DPSVD iteration.
func BenchmarkGramPass(b *testing.B) {
	p, _ := rankOne(20000, 400, 80, 3)
	g := gramPart{n: p.N, upper: make([]float64, p.N*p.N)}
	y := make([]float64, p.Len())
	var buf []float64
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		i := it % p.M
		a, c := p.Ptr[i], p.Ptr[i+1]
		l := local{items: p.Cols[a:c], vals: p.Vals[a:c], scale: 1, y: y[a:c]}
		buf = l.addGram(&g, buf)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(80*81/2), "ns/multiply-add")
}
