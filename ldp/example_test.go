package ldp_test

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// ExampleCollectOver randomizes a tiny ratings matrix as the clients would and
// reads the collect file back with the package's own reader.
func ExampleCollectOver() {
	b := ratings.NewBuilder(ratings.DupError)
	for _, r := range []struct {
		u, i string
		v    float64
	}{{"ann", "film1", 5}, {"ann", "film2", 3}, {"bob", "film2", 1}, {"bob", "film3", 4}} {
		if err := b.Add(r.u, r.i, r.v, 0); err != nil {
			panic(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		panic(err)
	}
	// Declared before any rating is read: the scale 1…5 (levels 1 apart)
	// and the catalogue every report covers.
	sc, err := ldp.DeclaredScale(1, 5, 0, ldp.RR)
	if err != nil {
		panic(err)
	}
	catalogue := []string{"film1", "film2", "film3", "film4"}
	r, err := ldp.New(ldp.RR, 2, sc)
	if err != nil {
		panic(err)
	}
	var file bytes.Buffer
	// noise.Secure() for a real collection; seeded only in examples/tests.
	st, err := ldp.CollectOver(context.Background(), &file, m, r, nil, catalogue, noise.Seeded(1), 1)
	if err != nil {
		panic(err)
	}
	h, reports, err := ldp.ReadCollected(&file)
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Mechanism, h.Epsilon, h.Users, "users ×", h.Items, "items")
	fmt.Println(st.Cells, "cells randomized,", reports.Len() == int(st.Reported), "reports read back")
	// Output:
	// rr 2 2 users × 4 items
	// 8 cells randomized, true reports read back
}

func ExampleAppendReport() {
	fmt.Println(string(ldp.AppendReport(nil, -2.11881349)), string(ldp.AppendReport(nil, 0.5)))
	// Output: -2.118813 0.5
}

// ExampleMeanReporter has each client send her noised mean rating beside
// her randomized vector, and composes the guarantees.
func ExampleMeanReporter() {
	sc, err := ldp.DeclaredScale(1, 5, 0, ldp.RR)
	if err != nil {
		panic(err)
	}
	r, err := ldp.New(ldp.RR, 0.5, sc)
	if err != nil {
		panic(err)
	}
	mean, err := ldp.NewMeanReporter(1, sc)
	if err != nil {
		panic(err)
	}
	her := []float64{5, ldp.Missing, 3, ldp.Missing} // her vector over 4 catalogue items
	m, _ := mean.Mean(her)
	v, err := mean.Report(noise.Seeded(1), her) // noise.Secure() on a real device
	if err != nil {
		panic(err)
	}
	per, user, err := ldp.Guarantees(r, len(her), mean.Epsilon())
	if err != nil {
		panic(err)
	}
	fmt.Printf("her mean %g, reported with noise of variance %.0f (finite: %t)\n", m, mean.Variance(), !math.IsInf(v, 0))
	fmt.Printf("per rating ε = %.4g, per user ε = %.4g\n", per.Epsilon, user.Epsilon)
	// Output:
	// her mean 4, reported with noise of variance 32 (finite: true)
	// per rating ε = 1.5, per user ε = 3
}
