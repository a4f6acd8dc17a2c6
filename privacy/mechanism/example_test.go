package mechanism_test

import (
	"fmt"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// Release a count with ε = 1 under entry-level privacy.
func ExampleLaplace() {
	sens := mechanism.Sensitivity{Value: 1, Norm: mechanism.L1, Relation: mechanism.ReplaceOne, Unit: privacy.UnitEntry}
	m, err := mechanism.NewLaplace(1, sens, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = m.ReleaseScalar(noise.Secure(), 42)
	fmt.Println(err, m.Guarantee().Epsilon)
	// Output: <nil> 1
}

// A Gaussian mechanism calibrated analytically for one coordinate.
func ExampleGaussian() {
	sens := mechanism.Sensitivity{Value: 1, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
	m, _ := mechanism.NewGaussian(1, 1e-5, sens, 1, mechanism.CalibrateAnalytic)
	fmt.Printf("σ = %.4f, %s\n", m.Sigma(), m.Guarantee().Status)
	// Output: σ = 3.7306, proven
}

// Seed 000's Theorem 1 accepts flip probabilities that are not ε-DP; the
// mechanism reports the exact ε beside the paper's claim.
func ExampleNewRandomizedResponseClaimed() {
	m, _ := mechanism.NewRandomizedResponseClaimed(0.01, 0.5, 1)
	g := m.Guarantee()
	fmt.Printf("ε = %.3f, claimed %g\n", g.Epsilon, g.ClaimedEpsilon)
	// Output: ε = 3.912, claimed 1
}

// A client randomizes one star rating (1..5, 0 = missing) before sending it.
func ExampleKaryRR() {
	m, _ := mechanism.NewKaryRR(1, 5)
	out, err := m.Randomize(noise.Secure(), 4)
	fmt.Println(err, out >= 0 && out <= 5)
	g, _ := m.UserGuarantee(100)
	fmt.Printf("per rating ε = %.3g, per user over 100 items ε = %.4g\n", m.Guarantee().Epsilon, g.Epsilon)
	// Output:
	// <nil> true
	// per rating ε = 1, per user over 100 items ε = 100
}
