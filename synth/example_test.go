package synth_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/synth"
)

func ExampleOneBit() {
	d, err := synth.OneBit(synth.OneBitDefaults(), 1) // seed 000: 100 × 100, rank 1, 15 % observed, probit
	if err != nil {
		panic(err)
	}
	lo, hi := d.Observed.Range()
	fmt.Println(d.Observed, lo, hi)
	fmt.Printf("‖M‖∞ = %.3f, rank %d\n", d.Truth.MaxAbs(), d.Truth.Rank())
	// Output:
	// 100 users × 100 items, 1500 ratings -1 1
	// ‖M‖∞ = 1.000, rank 1
}

func ExampleRankOne() {
	c := synth.RankOneDefaults() // seed 001: 500 000 × 400, 80 per user
	c.Users = 1000               // smaller for the example
	d, err := synth.RankOne(context.Background(), c, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Observed, d.Observed.UserCount(0))
	fmt.Printf("‖Y*‖∞ = %.3f\n", d.Truth.MaxAbs())
	// Output:
	// 1000 users × 400 items, 80000 ratings 80
	// ‖Y*‖∞ = 1.000
}

func ExampleLowRank() {
	c := synth.LowRankDefaults()
	c.Levels = 5 // ratings 1..5 for randomized response
	d, err := synth.LowRank(c, 1)
	if err != nil {
		panic(err)
	}
	lo, hi := d.Observed.Range()
	fmt.Println(d.Observed, lo, hi)
	// Output: 1000 users × 500 items, 50000 ratings 1 5
}
