package jointdp_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/jointdp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// tiny builds a 4-user, 3-item problem from triples.
func tiny() *jointdp.Problem {
	b := ratings.NewBuilder(ratings.DupError)
	for _, r := range []struct {
		u, i string
		v    float64
	}{{"a", "x", 1}, {"a", "y", -1}, {"b", "x", 1}, {"b", "z", 1}, {"c", "y", -1}, {"c", "z", -1}, {"d", "x", 1}, {"d", "y", -1}} {
		if err := b.Add(r.u, r.i, r.v, 0); err != nil {
			panic(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		panic(err)
	}
	p, err := jointdp.NewProblem(m)
	if err != nil {
		panic(err)
	}
	return p
}

func ExampleFrankWolfe() {
	p := tiny()
	r, err := jointdp.FrankWolfe(context.Background(), p, jointdp.FWOptions{K: 4, T: 20})
	if err != nil {
		panic(err)
	}
	fmt.Printf("rank %d, training objective %.3f → %.3f\n", r.Rank, r.Objective[0], r.Objective[len(r.Objective)-1])
	// Output: rank 20, training objective 0.153 → 0.023
}

func ExamplePrivateFrankWolfe() {
	p := tiny()
	// Seeded noise is for examples and experiments only; releases use
	// noise.Secure().
	r, err := jointdp.PrivateFrankWolfe(context.Background(), p, jointdp.DPFWOptions{
		K: 4, T: 5, L: 2, Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("σ per release %.1f, guarantee ε = %.3g, δ = %g, %s/%s/%s\n", r.Sigmas[0], r.Guarantee.Epsilon, r.Guarantee.Delta,
		r.Guarantee.Unit, r.Guarantee.Notion, r.Guarantee.Status)
	// User 0 recomputes her own row from the public broadcasts.
	items, vals := p.Row(0)
	row, err := jointdp.LocalRow(&r.Public, items, vals)
	if err != nil {
		panic(err)
	}
	fmt.Println("same row:", row[4] == r.U[0*r.Rank+4])
	// Output:
	// σ per release 229.2, guarantee ε = 1, δ = 1e-06, user/joint/proven
	// same row: true
}

func ExamplePrivateSVD() {
	p := tiny()
	r, err := jointdp.PrivateSVD(context.Background(), p, jointdp.DPSVDOptions{Rank: 1, L: 2, Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("rank %d, one release with σ = %.1f, ε = %.3g\n", r.Rank, r.Sigma, r.Guarantee.Epsilon)
	// Output: rank 1, one release with σ = 25.6, ε = 1
}

func ExampleMcSherryMironov() {
	// Ratings on a public 1..5 scale (here ±1 around 3).
	b := ratings.NewBuilder(ratings.DupError)
	for u := range 40 {
		for i := range 6 {
			if (u+i)%3 != 0 {
				v := 3.0
				if (u%2 == 0) == (i%2 == 0) {
					v = 4
				} else {
					v = 2
				}
				if err := b.Add(fmt.Sprint("u", u), fmt.Sprint("i", i), v, 0); err != nil {
					panic(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		panic(err)
	}
	p, err := jointdp.NewProblem(m)
	if err != nil {
		panic(err)
	}
	r, err := jointdp.McSherryMironov(context.Background(), p, jointdp.MMOptions{Rank: 1, Min: 1, Max: 5, Epsilon: 2, Delta: 1e-6, Noise: noise.Seeded(1)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d item averages, rank %d, ε = %.3g (%s)\n", len(r.ItemAvg), r.Rank, r.Guarantee.Epsilon, r.Guarantee.Status)
	// Output: 6 item averages, rank 1, ε = 2 (proven)
}
