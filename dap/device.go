package dap

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/statistic"
)

// Prepare is a device's computation for one task, without the network:
// check the task (Derive: its range, norm_sq, sensitivity and σ derived
// from its public plan; a split-noise task is refused, see
// Consent.Prepare), rebuild the contribution from its plan, compute her
// part from her own ratings (item IDs and values), quantize it to the
// task's lattice, shard it with Prio3SumVec and seal each input share to
// its aggregator's HPKE public key (leaderKey, helperKey: the keys'
// published bytes). The reference client (Client.Contribute) and the
// browser (webapp/wasm) both call it, so a browser's report is computed
// by the same code.
func Prepare(t Task, leaderKey, helperKey []byte, ids []string, vals []float64) (*Report, error) {
	r, _, err := Consent{}.Prepare(t, leaderKey, helperKey, ids, vals)
	return r, err
}

// Prepare is the package's Prepare under the user's consent c; it also
// returns what the device derived (d.ChargeRho is what her ledger must be
// charged: Ledger.Charge).
func (c Consent) Prepare(t Task, leaderKey, helperKey []byte, ids []string, vals []float64) (*Report, Derived, error) {
	if len(ids) != len(vals) {
		return nil, Derived{}, fmt.Errorf("%w: %d item IDs and %d ratings", ErrInvalid, len(ids), len(vals))
	}
	for k, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, Derived{}, fmt.Errorf("%w: rating of item %q is not finite", ErrInvalid, ids[k])
		}
	}
	d, err := c.Check(t)
	if err != nil {
		return nil, Derived{}, err
	}
	lk, err := UnmarshalPublicKey(leaderKey)
	if err != nil {
		return nil, Derived{}, fmt.Errorf("the leader's key: %w", err)
	}
	hk, err := UnmarshalPublicKey(helperKey)
	if err != nil {
		return nil, Derived{}, fmt.Errorf("the helper's key: %w", err)
	}
	q, err := t.Quantize(d.device.Contribute(d.device.RowOf(ids, vals)))
	if err != nil {
		return nil, Derived{}, err
	}
	r, err := t.Shard(q, lk, hk)
	return r, d, err
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
