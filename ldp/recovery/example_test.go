package recovery_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/ldp/recovery"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// ExampleRecover runs the debiased recovery on true ratings wrapped as a
// clean problem (no mechanism) — the non-private reference; on reports,
// NewProblem(reports, header) takes its place.
func ExampleRecover() {
	b := ratings.NewBuilder(ratings.DupError)
	for u := range 20 {
		for i := range 10 {
			if (u+i)%3 != 0 {
				v := float64(1 + u%2*2 + i%3)
				if err := b.Add(fmt.Sprint(u), fmt.Sprint(i), v, 0); err != nil {
					panic(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		panic(err)
	}
	p, err := recovery.NewCleanProblem(m, ldp.Scale{Min: 1, Max: 5, Levels: 5})
	if err != nil {
		panic(err)
	}
	res, err := recovery.Recover(context.Background(), p, recovery.Options{Debias: true, Rand: noise.Seeded(1)})
	if err != nil {
		panic(err)
	}
	// Cell (user "1", item "2") was not rated; its true value is 5.
	u, _ := m.Users.Lookup("1")
	i, _ := m.Items.Lookup("2")
	fmt.Printf("rule %s; prediction for user 1, item 2: %.1f\n", res.Rule, res.At(int(u), int(i)))
	// Output: rule noise-norm; prediction for user 1, item 2: 4.2
}
