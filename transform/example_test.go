package transform_test

import (
	"fmt"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/transform"
)

// small builds 4 users × 3 items.
func small() *ratings.Matrix {
	b := ratings.NewBuilder(ratings.DupError)
	for _, r := range []struct {
		u, i string
		v    float64
	}{
		{"ann", "film1", 5}, {"ann", "film2", 3}, {"ann", "film3", 4},
		{"bob", "film1", 2}, {"bob", "film2", 1},
		{"cat", "film1", 4}, {"cat", "film3", 5},
		{"dan", "film1", 3}, {"dan", "film2", 2}, {"dan", "film3", 1},
	} {
		if err := b.Add(r.u, r.i, r.v, 0); err != nil {
			panic(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		panic(err)
	}
	return m
}

func ExampleHoldOut() {
	train, test := transform.HoldOut(small(), 0.2, 7)
	fmt.Println(train.Len(), test.Len(), train.NumUsers() == test.NumUsers())
	// Output: 8 2 true
}

func ExampleHoldOutPerUser() {
	// One rating per user with more than one rating goes to test.
	train, test := transform.HoldOutPerUser(small(), 1, 7)
	fmt.Println(train.Len(), test.Len())
	// Output: 6 4
}

func ExampleCapPerUser() {
	capped := transform.CapPerUser(small(), 2, 7)
	fmt.Println(capped.Len())
	// Output: 8
}

func ExampleTopItems() {
	top := transform.TopItems(small(), 2)
	fmt.Println(top.Items.Names(), top.Len())
	// Output: [film1 film2] 7
}

func ExampleBinarise() {
	m := small()
	b := transform.Binarise(m, m.Mean())
	v, _ := b.Get(0, 0) // ann, film1: 5 > 3
	fmt.Println(m.Mean(), v)
	// Output: 3 1
}

func ExampleCentreUsers() {
	c, means := transform.CentreUsers(small())
	v, _ := c.Get(0, 0) // ann's 5 minus her mean 4
	fmt.Println(means, v)
	back := transform.Uncentre(c, means)
	w, _ := back.Get(0, 0)
	fmt.Println(w)
	// Output:
	// [4 1.5 4.5 2] 1
	// 5
}

func ExampleMinMax() {
	s, scale := transform.MinMax(small(), -1, 1)
	v, _ := s.Get(0, 0)
	fmt.Println(v, scale.Invert(float64(v)))
	// Output: 1 5
}

func ExampleBiScale() {
	x, b := transform.BiScale(small(), 0)
	v, _ := x.Get(0, 0)
	fmt.Printf("converged %v, deviation < 1e-6: %v, round trip %.4f\n", b.Converged, b.MaxDeviation < 1e-6, b.Invert(0, 0, float64(v)))
	// Output: converged true, deviation < 1e-6: true, round trip 5.0000
}
