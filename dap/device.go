package dap

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/statistic"
)

// Prepare is a device's computation for one task, without the network:
// validate the task (its σ must give its stated ρ), rebuild the
// contribution from its public plan, compute her part from her own
// ratings (item IDs and values), quantize it to the task's lattice, shard
// it with Prio3SumVec and seal each input share to its aggregator's HPKE
// public key (leaderKey, helperKey: the keys' published bytes). The
// reference client (Client.Contribute) and the browser (webapp/wasm) both
// call it, so a browser's report is computed by the same code.
func Prepare(t Task, leaderKey, helperKey []byte, ids []string, vals []float64) (*Report, error) {
	if len(ids) != len(vals) {
		return nil, fmt.Errorf("%w: %d item IDs and %d ratings", ErrInvalid, len(ids), len(vals))
	}
	for k, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: rating of item %q is not finite", ErrInvalid, ids[k])
		}
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	lk, err := UnmarshalPublicKey(leaderKey)
	if err != nil {
		return nil, fmt.Errorf("the leader's key: %w", err)
	}
	hk, err := UnmarshalPublicKey(helperKey)
	if err != nil {
		return nil, fmt.Errorf("the helper's key: %w", err)
	}
	d, err := NewDevice(t)
	if err != nil {
		return nil, err
	}
	q, err := t.Quantize(d.Contribute(d.RowOf(ids, vals)))
	if err != nil {
		return nil, err
	}
	return t.Shard(q, lk, hk)
}

// ReleasedModel is the public model a device builds from a counts task's
// release (the noised, capped item counts of dp-popularity): the items of
// the task's catalogue scored by their noised counts, with the plan's
// positive threshold, as dp-popularity's Train builds it from the same
// sum. titles (optional) maps item IDs to titles. Her recommendations are
// then the model's fold-in (model.FoldInUser, RecommendFor), as the
// reference client's on a central release: the highest noised counts
// among the items she has not rated. Post-processing of the release:
// nothing about anyone's ratings enters but her own, on her device.
// Releases of other statistics are refused (their models need their
// method's post-processing: package methods).
func ReleasedModel(t Task, values []float64, titles map[string]string) (*model.Model, error) {
	d, err := NewDevice(t)
	if err != nil {
		return nil, err
	}
	if _, ok := d.Contribution.(*statistic.Counts); !ok {
		return nil, fmt.Errorf("%w: task %s releases %s; this device builds recommendations from item counts only", ErrInvalid, t.ID, d.Contribution.Kind())
	}
	if len(values) != t.Dimension {
		return nil, fmt.Errorf("%w: task %s: release has %d values, want %d", ErrInvalid, t.ID, len(values), t.Dimension)
	}
	for j, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: task %s: released value %d is not finite", ErrInvalid, t.ID, j)
		}
	}
	m := &model.Model{Method: "dp-popularity", Output: model.Scores, Items: d.Row.Catalogue, U: []float64{}, V: []float64{},
		ItemBias: values}
	m.Transform.Positive = d.Row.Positive
	if len(titles) > 0 {
		m.Titles = make([]string, len(m.Items))
		for j, id := range m.Items {
			m.Titles[j] = titles[id]
		}
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	return m, nil
}
