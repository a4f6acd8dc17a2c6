package methods_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// Training dpals through the Go API: the declared scale and catalogue go
// in with the private ratings; out come the public model, each user's own
// state and the guarantee of the whole release. (Seeded noise makes the
// example repeatable; a real release uses noise.Secure.)
func ExampleDPALSConfig() {
	r := rand.New(rand.NewPCG(1, 1))
	b := ratings.NewBuilder(ratings.DupError)
	ids := make([]string, 20)
	for j := range ids {
		ids[j] = fmt.Sprintf("movie-%d", j)
	}
	line := int64(0)
	for u := range 300 {
		taste := r.NormFloat64()
		for j, id := range ids {
			if r.Float64() < 0.4 {
				line++
				v := min(5, max(1, 3.5+0.1*float64(j%5)+0.5*taste+0.3*r.NormFloat64()))
				if err := b.Add(fmt.Sprintf("user-%d", u), id, v, line); err != nil {
					panic(err)
				}
			}
		}
	}
	data, err := b.Build()
	if err != nil {
		panic(err)
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		panic(err)
	}
	scale := release.Scale{Min: 1, Max: 5}
	in := release.Input{Ratings: data, Declared: release.Declared{Scale: &scale, Catalogue: cat}}
	env := methods.Env{Epsilon: 4, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(2)}

	rel, err := methods.Train(context.Background(), "dpals", methods.NewDPALSConfig(), in, env)
	if err != nil {
		panic(err)
	}
	g := rel.Guarantee
	fmt.Printf("%s DP, unit %s, ε ≤ 4: %v\n", g.Notion, g.Unit, g.Epsilon <= 4)
	fmt.Println("relation:", g.Relation)
	fmt.Println("public items:", len(rel.Model().Items), "users' own states:", len(rel.PerUser.States))
	// Output:
	// joint DP, unit user, ε ≤ 4: true
	// relation: one user's ratings are replaced by any others (within the per-user bounds); the number of users and the item catalogue are public, which items a user rated is not
	// public items: 20 users' own states: 300
}
