package audit_test

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/privacy/audit"
	"github.com/privrec/privrec/privacy/noise"
)

// Audit randomized response at ε = 1, then a copy with 10 % too little noise.
func ExampleRun() {
	for _, factor := range []float64{1, 0.9} {
		spec, err := audit.For("rr", 1, 0, audit.Options{NoiseFactor: factor})
		if err != nil {
			fmt.Println(err)
			return
		}
		r, err := audit.Run(context.Background(), spec, 200000, 0.95, noise.Seeded(1))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("noise ×%.1f: violation %v\n", factor, r.Violation)
	}
	// Output:
	// noise ×1.0: violation false
	// noise ×0.9: violation true
}
