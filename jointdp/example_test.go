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
	// The accounting layer builds one Gaussian mechanism per iteration
	// (T = 5, clip L = 2, n = 3 items) from the budget; the solver adds
	// noise only through them.
	plan, err := jointdp.PlanDPFW(jointdp.CalZCDP, 1, 1e-6, 5, 2, p.N)
	if err != nil {
		panic(err)
	}
	r, err := jointdp.PrivateFrankWolfe(context.Background(), p, jointdp.DPFWOptions{K: 4, Plan: plan, Noise: noise.Seeded(1)})
	if err != nil {
		panic(err)
	}
	g := plan.Guarantee
	// The first release (every iterate 0) has a quarter of the later
	// releases' sensitivity, and so a quarter of their σ for the same ρ_t.
	fmt.Printf("σ first release %.1f, later %.1f, guarantee ε = %.3g, δ = %g, %s/%s/%s\n", r.Sigmas[0], r.Sigmas[1], g.Epsilon, g.Delta, g.Unit, g.Notion, g.Status)
	// User 0 recomputes her own row from the public broadcasts.
	items, vals := p.Row(0)
	row, err := jointdp.LocalRow(&r.Public, items, vals)
	if err != nil {
		panic(err)
	}
	fmt.Println("same row:", row[4] == r.U[0*r.Rank+4])
	// Output:
	// σ first release 57.3, later 229.2, guarantee ε = 1, δ = 1e-06, user/joint/proven
	// same row: true
}

func ExamplePrivateSVD() {
	p := tiny()
	plan, err := jointdp.PlanDPSVD(jointdp.CalZCDP, 1, 1e-6, 2, p.N)
	if err != nil {
		panic(err)
	}
	r, err := jointdp.PrivateSVD(context.Background(), p, jointdp.DPSVDOptions{Rank: 1, Plan: plan, Noise: noise.Seeded(1)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("rank %d, one release with σ = %.1f, ε = %.3g\n", r.Rank, r.Sigma, plan.Guarantee.Epsilon)
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
	plan, err := jointdp.PlanMM(2, 1e-6, [3]float64{}, 1, 5, 1, p.N)
	if err != nil {
		panic(err)
	}
	r, err := jointdp.McSherryMironov(context.Background(), p, jointdp.MMOptions{Rank: 1, Plan: plan, Noise: noise.Seeded(1)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d item averages, rank %d, ε = %.3g (%s)\n", len(r.ItemAvg), r.Rank, plan.Guarantee.Epsilon, plan.Guarantee.Status)
	// Output: 6 item averages, rank 1, ε = 2 (proven)
}
