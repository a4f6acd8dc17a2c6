package dap

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/privrec/privrec/statistic"
)

// Plan is a task's public plan when its vector is one of privrec's
// statistics: the per-rating row plan (catalogue, clamp, positives) and
// the contribution's kind and plan (statistic.Encode). A device needs
// nothing else to compute her part.
type Plan struct {
	Row          statistic.RowPlan `json:"row"`
	Kind         string            `json:"kind"`
	Contribution json.RawMessage   `json:"contribution"`
}

// NewPlan encodes c and its row plan.
func NewPlan(row statistic.RowPlan, c statistic.Contribution) (json.RawMessage, error) {
	kind, plan, err := statistic.Encode(c)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(Plan{Row: row, Kind: kind, Contribution: plan})
	if err != nil {
		return nil, fmt.Errorf("dap: encoding the plan: %w", err)
	}
	return b, nil
}

// Device is what a device rebuilds from a task's plan: the contribution
// (statistic.Decode, the code of the in-process release) and its row plan.
type Device struct {
	Task         Task
	Contribution statistic.Contribution
	Row          statistic.RowPlan
	index        map[string]int32
}

// NewDevice decodes t's plan; a plan whose dimension disagrees with the
// task is refused.
func NewDevice(t Task) (*Device, error) {
	var p Plan
	if err := json.Unmarshal(t.Plan, &p); err != nil {
		return nil, fmt.Errorf("%w: task %s plan: %v", ErrInvalid, t.ID, err)
	}
	c, err := statistic.Decode(p.Kind, p.Contribution)
	if err != nil {
		return nil, fmt.Errorf("%w: task %s: %v", ErrInvalid, t.ID, err)
	}
	if c.Spec().Dim != t.Dimension {
		return nil, fmt.Errorf("%w: task %s: plan has %d coordinates, task %d", ErrInvalid, t.ID, c.Spec().Dim, t.Dimension)
	}
	d := &Device{Task: t, Contribution: c, Row: p.Row, index: make(map[string]int32, len(p.Row.Catalogue))}
	for i, id := range p.Row.Catalogue {
		d.index[id] = int32(i)
	}
	return d, nil
}

// RowOf is a user's row under the plan, from her own ratings (item IDs
// off the catalogue dropped, the plan's clamp and positives applied).
func (d *Device) RowOf(ids []string, vals []float64) statistic.Row {
	type iv struct {
		i int32
		v float32
	}
	kept := make([]iv, 0, len(ids))
	for k, id := range ids {
		j, ok := d.index[id]
		if !ok {
			continue
		}
		if v, keep := d.Row.Value(float32(vals[k])); keep {
			kept = append(kept, iv{j, v})
		}
	}
	slices.SortFunc(kept, func(a, b iv) int { return int(a.i - b.i) })
	r := statistic.Row{Items: make([]int32, len(kept))}
	if d.Row.Positive == nil {
		r.Vals = make([]float32, len(kept))
	}
	for k, x := range kept {
		r.Items[k] = x.i
		if r.Vals != nil {
			r.Vals[k] = x.v
		}
	}
	return r
}

// Contribute is the user's part as a vector of the task's dimension.
func (d *Device) Contribute(r statistic.Row) []float64 {
	x := make([]float64, d.Task.Dimension)
	d.Contribution.Contribute(r, func(i int, v float64) { x[i] += v })
	return x
}
