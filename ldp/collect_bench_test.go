package ldp_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// ml1mShaped builds a MovieLens-1M-shaped matrix (6040 × 3706, ~1 M
// ratings on 1…5) from a seeded stream: the benchmark needs the shape, not
// the real data.
func ml1mShaped(b *testing.B) *ratings.Matrix {
	const users, items, perUser = 6040, 3706, 166
	src := noise.Seeded(7)
	bl := ratings.NewBuilder(ratings.DupError)
	for u := range users {
		seen := map[int]bool{}
		for len(seen) < perUser {
			i := src.IntN(items)
			if seen[i] {
				continue
			}
			seen[i] = true
			if err := bl.Add(fmt.Sprint(u+1), fmt.Sprint(i+1), float64(1+src.IntN(5)), 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	m, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkCollectML1M times `privrec collect` on a MovieLens-1M-shaped
// matrix (22 M cells) at ε = 0.5, the densest output, with secure noise.
func BenchmarkCollectML1M(b *testing.B) {
	m := ml1mShaped(b)
	cat := m.Items.Names()
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		r, err := ldp.New(mech, 0.5, ldp.Scale{Min: 1, Max: 5, Levels: 5})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(string(mech), func(b *testing.B) {
			for b.Loop() {
				if _, err := ldp.CollectOver(context.Background(), io.Discard, m, r, nil, cat, noise.Secure(), 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
