package mf_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// The noised item covariance of CovFeatures, released through a Gaussian
// mechanism calibrated for its sensitivity and dimension, finds the taste
// direction planted in 5 000 users' ratings of 30 items.
func ExampleCovFeatures() {
	const users, items = 5000, 30
	r := rand.New(rand.NewPCG(4, 4))
	// A direction with mean 0: each user's own mean is taken out of her
	// ratings before they enter the covariance.
	dir := make([]float64, items)
	for j := range dir {
		dir[j] = r.NormFloat64()
	}
	var mean float64
	for _, x := range dir {
		mean += x / items
	}
	for j := range dir {
		dir[j] -= mean
	}
	b := ratings.NewBuilder(ratings.DupError)
	line := int64(0)
	for u := range users {
		taste := r.NormFloat64()
		for j := range items {
			if r.Float64() < 0.5 {
				line++
				v := 3 + 0.4*taste*dir[j] + 0.3*r.NormFloat64()
				if err := b.Add(fmt.Sprint(u), fmt.Sprint(j), v, line); err != nil {
					panic(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		panic(err)
	}
	p := mf.FromMatrix(m)
	cover := make([]int, items)
	for j := range cover {
		idx, _ := m.Items.Lookup(fmt.Sprint(j))
		cover[j] = int(idx)
	}
	const clip = 2.0
	sens := mechanism.Sensitivity{Value: mf.CovSensitivity(clip), Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
	mech, err := mechanism.NewGaussian(4, 1e-6, sens, mf.CovDim(items), mechanism.CalibrateZCDP)
	if err != nil {
		panic(err)
	}
	vals, vecs, err := mf.CovFeatures(context.Background(), p, mf.CovOptions{Items: cover, Rank: 1, Mean: 3,
		ItemBias: make([]float64, items), Clip: clip, Release: mech, Noise: noise.Seeded(1), Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		panic(err)
	}
	var dot, n1, n2 float64
	for q := range cover { // row q of vecs is item "q"
		dot += vecs.At(q, 0) * dir[q]
		n1 += vecs.At(q, 0) * vecs.At(q, 0)
		n2 += dir[q] * dir[q]
	}
	fmt.Printf("ε = 4: top eigenvalue above the noise edge: %v; |cos| with the planted direction > 0.95: %v\n",
		vals[0] > math.Sqrt2*mech.Sigma()*math.Sqrt(items), math.Abs(dot)/math.Sqrt(n1*n2) > 0.95)
	// Output:
	// ε = 4: top eigenvalue above the noise edge: true; |cos| with the planted direction > 0.95: true
}
