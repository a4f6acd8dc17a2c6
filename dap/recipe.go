package dap

import (
	"fmt"
	"math"
	"regexp"
)

// Release is a task's published result: the noised sum and what protects
// it. It holds no count of contributors (that exact count is known to the
// aggregators only).
type Release struct {
	Task   Task      `json:"task"`
	Values []float64 `json:"values"`
	// NoiseSD is the standard deviation of the noise on each value (both
	// aggregators' noise, real units).
	NoiseSD   float64 `json:"noise_sd"`
	Guarantee string  `json:"guarantee"`
}

// Recipe is what a device needs, besides the releases, to build a
// method's public model on her side (package dap/devicemodel): the method
// and its settings, the privacy parameters it was trained for, the public
// facts its plan reads (the number of devices, the rating scale), the
// lattice the engine turned its statistics into tasks with, the seed of
// its public post-processing randomness, and its tasks in the order the
// method released them. The leader publishes it (GET /dap/v1/models);
// all of it is public, and the model it builds is post-processing of the
// releases.
type Recipe struct {
	// Name names the published model (as a task ID).
	Name   string         `json:"name"`
	Method string         `json:"method"`
	Params map[string]any `json:"params,omitempty"`
	// Epsilon and Delta are the method's (ε, δ); Seed its post-processing
	// randomness (methods.Env.Rand), public.
	Epsilon float64 `json:"epsilon"`
	Delta   float64 `json:"delta"`
	Seed    uint64  `json:"seed"`
	// Devices is the number of devices the tasks were planned for
	// (public: the relation replaces a user).
	Devices int        `json:"devices"`
	Scale   [2]float64 `json:"scale"`
	Lattice Lattice    `json:"lattice"`
	Tasks   []string   `json:"tasks"`
}

var recipeNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Validate checks the recipe's shape (the tasks and releases are checked
// when the model is built).
func (r *Recipe) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: model recipe %q: %s", ErrInvalid, r.Name, fmt.Sprintf(format, a...))
	}
	switch {
	case !recipeNameRE.MatchString(r.Name):
		return bad("name must be 1–64 of [A-Za-z0-9_.-]")
	case r.Method == "":
		return bad("no method")
	case !(r.Epsilon > 0) || math.IsInf(r.Epsilon, 0) || !(r.Delta >= 0 && r.Delta < 1):
		return bad("ε %v, δ %v: want ε > 0 finite and δ in [0, 1)", r.Epsilon, r.Delta)
	case r.Devices < 1:
		return bad("devices %d: want at least 1", r.Devices)
	case !(r.Scale[0] < r.Scale[1]) || math.IsInf(r.Scale[0], 0) || math.IsInf(r.Scale[1], 0):
		return bad("scale %v: want min < max, finite", r.Scale)
	case len(r.Tasks) == 0 || len(r.Tasks) > 64:
		return bad("%d tasks: want 1–64", len(r.Tasks))
	}
	for _, id := range r.Tasks {
		if !taskIDRE.MatchString(id) {
			return bad("task ID %q", id)
		}
	}
	return nil
}
