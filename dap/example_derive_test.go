package dap_test

import (
	"errors"
	"fmt"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/statistic"
)

// ExampleDerive: a device (or the helper) derives a counts task's
// privacy parameters from its public plan and refuses a task whose
// leader understated its sensitivity.
func ExampleDerive() {
	plan, err := dap.NewPlan(statistic.RowPlan{Catalogue: []string{"a", "b", "c", "d"}}, &statistic.Counts{Items: 4, Cap: 50})
	if err != nil {
		panic(err)
	}
	task := dap.Task{ID: "pop", Statistic: "counts", Plan: plan, Dimension: 4, Step: 1.0 / 256, Bits: 9, NormSq: 3276800,
		Relation: dap.RelationReplace, Rho: 0.001, MinReports: 1}
	for _, sens := range []float64{1e-6, 2560} {
		task.Sensitivity = sens
		t, err := dap.NewTask(task) // the leader's σ for the sensitivity it states
		if err != nil {
			panic(err)
		}
		d, err := dap.Derive(t)
		var short *dap.Shortfall
		if errors.As(err, &short) {
			fmt.Printf("refused: %s %s stated, %s derived\n", short.Field, short.Stated, short.Derived)
			continue
		}
		fmt.Printf("accepted: sensitivity %g, σ %d (%d stated), charge ρ %g\n", d.Sensitivity, d.Sigma, t.Sigma, d.ChargeRho)
	}
	// Output:
	// refused: sensitivity 1e-06 stated, 2560 derived
	// accepted: sensitivity 2560, σ 57244 (57244 stated), charge ρ 0.001
}
