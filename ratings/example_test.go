package ratings_test

import (
	"fmt"

	"github.com/privrec/privrec/ratings"
)

func ExampleBuilder() {
	b := ratings.NewBuilder(ratings.DupError)
	b.Add("alice", "dune", 5, 1)
	b.Add("bob", "dune", 3, 2)
	b.Add("alice", "emma", 4, 3)
	m, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	items, vals := m.UserRow(0) // alice's row: no allocation
	for k, i := range items {
		fmt.Println(m.Items.Name(i), vals[k])
	}
	users, _ := m.ItemCol(0) // who rated dune
	fmt.Println(len(users), m)
	// Output:
	// dune 5
	// emma 4
	// 2 2 users × 2 items, 3 ratings
}

func ExampleMatrix_Stats() {
	b := ratings.NewBuilder(ratings.DupError)
	b.Add("u1", "i1", 1, 1)
	b.Add("u1", "i2", 5, 2)
	b.Add("u2", "i1", 5, 3)
	m, _ := b.Build()
	s := m.Stats()
	fmt.Println(s.Users, s.Items, s.Ratings, s.Density, s.Histogram)
	// Output: 2 2 3 0.75 [{1 1 1} {5 5 2}]
}
