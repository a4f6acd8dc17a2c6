package methods

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// topnBenchInput is an implicit-feedback problem of MovieLens-1M's
// training shape in the top-N protocol (4 840 users, 3 706 items, about
// 460 000 positives, item popularity ∝ 1/(1+j)^0.8 and activity spread
// like the real data's), for timing the top-N methods; accuracy is
// measured on the real data by `privrec reproduce topn-ml1m`.
func topnBenchInput(b *testing.B) release.Input {
	b.Helper()
	const users, items, per = 4840, 3706, 95
	r := rand.New(rand.NewPCG(1, 1))
	ids := make([]string, items)
	for j := range ids {
		ids[j] = fmt.Sprint(j + 1) // ratings.Sequential's names
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		b.Fatal(err)
	}
	rowPtr := make([]int64, users+1)
	var cols []int32
	var vals []float32
	seen := make([]bool, items)
	for u := range users {
		n := 5 + int(float64(per-5)*2*r.Float64()*r.Float64()*2)
		var row []int32
		for len(row) < min(n, items/2) {
			j := int32(float64(items) * (r.Float64() * r.Float64()))
			if !seen[j] {
				seen[j] = true
				row = append(row, j)
			}
		}
		for _, j := range row {
			seen[j] = false
		}
		slices.Sort(row)
		for _, j := range row {
			cols = append(cols, j)
			vals = append(vals, 5)
		}
		rowPtr[u+1] = int64(len(cols))
	}
	m, err := ratings.FromCSR(ratings.Sequential(users), ratings.Sequential(items), items, rowPtr, cols, vals, nil)
	if err != nil {
		b.Fatal(err)
	}
	scale := release.Scale{Min: 1, Max: 5}
	return release.Input{Ratings: m, Declared: release.Declared{Scale: &scale, Catalogue: cat}}
}

// BenchmarkTopNTrain times training each top-N method with its defaults
// on every core (`go test -bench TopNTrain -count 3 ./methods`; report the
// median).
func BenchmarkTopNTrain(b *testing.B) {
	in := topnBenchInput(b)
	for _, name := range []string{"popularity", "ease", "ials", "dp-popularity", "dp-ease"} {
		b.Run(name, func(b *testing.B) {
			cfg, err := Configure(name, nil)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := Train(context.Background(), name, cfg, in, Env{Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1), Seed: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
