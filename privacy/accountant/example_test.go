package accountant_test

import (
	"fmt"

	"github.com/privrec/privrec/privacy/accountant"
)

// Calibrate Gaussian noise for 10 releases that together are (1, 1e-5)-DP,
// and convert the total zCDP back.
func ExampleGaussianSigmaForTarget() {
	sigma, err := accountant.GaussianSigmaForTarget(1, 1e-5, 10, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	rho, _ := accountant.GaussianRho(1, sigma)
	eps, _ := accountant.ZCDPToApprox(10*rho, 1e-5)
	fmt.Printf("σ = %.3f, ε = %.3f\n", sigma, eps)
	// Output: σ = 12.792, ε = 1.000
}

func ExampleZCDPToApprox() {
	simple, _ := accountant.ZCDPToApproxSimple(0.5, 1e-5)
	tight, _ := accountant.ZCDPToApprox(0.5, 1e-5)
	fmt.Printf("simple %.4f, tight %.4f\n", simple, tight)
	// Output: simple 5.2985, tight 4.7284
}

func ExampleBudget() {
	b, _ := accountant.NewBudget(1, 0)
	fmt.Println(b.Spend(0.7, 0))
	fmt.Println(b.Spend(0.7, 0) != nil)
	// Output:
	// <nil>
	// true
}
