package fleet

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/statistic"
)

// Arith is the two aggregators' arithmetic without the cryptography, for
// experiments only: the same task (Engine.TaskFor), the devices' same
// contributions and quantization (dap.Device, Task.Quantize), the exact
// integer sum that Prio3 reconstructs, each aggregator's noise drawn by
// Task.AddNoise from its own source and decoded by Task.Combine. Prio3's
// field arithmetic is exact, so a release made here has the distribution
// of one made through two servers (TestEngineSumMatchesInProcess checks
// the servers against the in-process sum). It runs a whole population in
// seconds where the real protocol takes an hour on a loaded machine.
type Arith struct {
	Engine
	// LeaderNoise and HelperNoise are the two aggregators' sources.
	LeaderNoise, HelperNoise *noise.Source
}

// SumNoised implements methods.NoisingEngine.
func (a *Arith) SumNoised(ctx context.Context, c statistic.Contribution, mech *mechanism.Gaussian) ([]float64, float64, error) {
	t, err := a.TaskFor(fmt.Sprintf("%s-%d-%s", a.Prefix, len(a.Tasks)+1, c.Kind()), c, mech)
	if err != nil {
		return nil, 0, err
	}
	dev, err := dap.NewDevice(t)
	if err != nil {
		return nil, 0, err
	}
	sum := make([]int64, t.Dimension)
	for u := range a.Devices {
		if u%1024 == 0 && ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		q, err := t.Quantize(dev.Contribute(dev.RowOf(a.Ratings(u))))
		if err != nil {
			return nil, 0, err
		}
		for j, v := range q {
			sum[j] += v - t.Min // the encoded values the VDAF sums
		}
	}
	leader, helper := t.NewVec(), t.NewVec()
	for j, v := range sum {
		if err := leader[j].SetUint64(uint64(v)); err != nil {
			return nil, 0, err
		}
	}
	t.AddNoise(leader, a.LeaderNoise)
	t.AddNoise(helper, a.HelperNoise)
	_, vals, err := t.Combine(leader, helper, a.Devices)
	if err != nil {
		return nil, 0, err
	}
	a.Tasks = append(a.Tasks, t)
	return vals, t.ReleaseSD(), nil
}
