package fleet

import (
	"context"
	"fmt"
	"net/http"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/statistic"
)

// Engine is a statistic.Engine (and methods.NoisingEngine) whose sums go
// through the two aggregators: each statistic a method releases becomes
// one task, every device computes her part with the statistic's own code
// (statistic.Contribution, rebuilt from the task's public plan) from her
// own ratings only, and the aggregators return the noised sum. It never
// returns a sum without noise (Sum is an error).
type Engine struct {
	Fleet *Fleet
	// Plan is the method's per-rating plan (catalogue, clamp, positives).
	Plan statistic.RowPlan
	// Devices is the number of devices; Ratings(u) is device u's own raw
	// ratings (item IDs and values), which never leave her device.
	Devices int
	Ratings func(u int) (items []string, values []float64)
	// The lattice settings, public (dap.Lattice documents each; Lattice
	// returns them as one value).
	StepBits, GramStepBits int
	Noise                  dap.NoiseMode
	MaxReportDimension     int
	MaxReportElements      int
	// Prefix makes task IDs unique across runs.
	Prefix string
	// Stats has one entry per task run, Tasks the tasks.
	Stats []Stats
	Tasks []dap.Task
}

// ErrTooLarge is returned for a statistic too large for a device.
var ErrTooLarge = dap.ErrTooLarge

// Users implements statistic.Engine.
func (e *Engine) Users() int { return e.Devices }

// Sum implements statistic.Engine: refused, the aggregators release only
// noised sums (SumNoised).
func (e *Engine) Sum(ctx context.Context, c statistic.Contribution) ([]float64, error) {
	return nil, fmt.Errorf("dap engine: %s: the aggregators release only noised sums", c.Spec().Name)
}

// Lattice is the engine's public lattice settings (what a device that
// rebuilds the tasks from a recipe needs, dap.Lattice).
func (e *Engine) Lattice() dap.Lattice {
	return dap.Lattice{StepBits: e.StepBits, GramStepBits: e.GramStepBits, Noise: e.Noise,
		MaxReportDimension: e.MaxReportDimension, MaxReportElements: e.MaxReportElements}
}

// Affords implements methods.BudgetedEngine (dap.Lattice.Affords).
func (e *Engine) Affords(c statistic.Contribution) bool { return e.Lattice().Affords(c) }

// TaskFor is the task releasing c with at least mech's guarantee
// (dap.Lattice.TaskFor).
func (e *Engine) TaskFor(id string, c statistic.Contribution, mech *mechanism.Gaussian) (dap.Task, error) {
	t, err := e.Lattice().TaskFor(id, e.Plan, c, mech)
	if err != nil {
		return dap.Task{}, fmt.Errorf("dap engine: %w", err)
	}
	return t, nil
}

// SumNoised implements methods.NoisingEngine: one task for c.
func (e *Engine) SumNoised(ctx context.Context, c statistic.Contribution, mech *mechanism.Gaussian) ([]float64, float64, error) {
	t, err := e.TaskFor(fmt.Sprintf("%s-%d-%s", e.Prefix, len(e.Tasks)+1, c.Kind()), c, mech)
	if err != nil {
		return nil, 0, err
	}
	// Every device rebuilds the contribution from the task's public plan;
	// the simulated devices share one decoded copy (it is read-only).
	dev, err := dap.NewDevice(t)
	if err != nil {
		return nil, 0, err
	}
	rel, st, err := e.Fleet.Run(ctx, t, e.Devices, func(u int) []float64 {
		return dev.Contribute(dev.RowOf(e.Ratings(u)))
	})
	if err != nil {
		return nil, 0, fmt.Errorf("dap engine: %s: %w", c.Spec().Name, err)
	}
	e.Tasks = append(e.Tasks, rel.Task)
	e.Stats = append(e.Stats, st)
	return rel.Values, rel.NoiseSD, nil
}

// Recipe is what a device needs to rebuild the model trained through
// this engine from its tasks' releases (dap.Recipe; the method, its
// parameters, ε, δ, the seed and the scale are the caller's).
func (e *Engine) Recipe(name, method string, params map[string]any, eps, delta float64, seed uint64, scale [2]float64) dap.Recipe {
	ids := make([]string, len(e.Tasks))
	for i, t := range e.Tasks {
		ids[i] = t.ID
	}
	return dap.Recipe{Name: name, Method: method, Params: params, Epsilon: eps, Delta: delta, Seed: seed,
		Devices: e.Devices, Scale: scale, Lattice: e.Lattice(), Tasks: ids}
}

// PublishModel publishes rec at the leader (PUT admin/models/{name});
// the fleet must have enrolled.
func (f *Fleet) PublishModel(ctx context.Context, rec dap.Recipe) error {
	if f.cli == nil {
		return fmt.Errorf("publishing model %s: the fleet has not enrolled", rec.Name)
	}
	var out dap.Recipe
	if err := f.cli.Do(ctx, http.MethodPut, f.Leader, "/dap/v1/admin/models/"+rec.Name, f.AdminToken, rec, &out); err != nil {
		return fmt.Errorf("publishing model %s: %w", rec.Name, err)
	}
	return nil
}
