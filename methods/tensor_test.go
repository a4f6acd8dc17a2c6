package methods

import (
	"fmt"
	"math"
	"testing"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/tensor"
)

// synthRatings writes a synthetic tensor as timestamped ratings with
// day-tagged items, as privrec data synth-tensor does.
func synthRatings(t *testing.T, x *tensor.Tensor) *ratings.Matrix {
	t.Helper()
	b := ratings.NewBuilder(ratings.DupError)
	for e := range x.Len() {
		if err := b.AddTimed(fmt.Sprint(x.I[e]+1), fmt.Sprintf("%d@%d", x.J[e]+1, x.K[e]), x.Val[e], int64(x.K[e])*tensor.SecondsPerDay, true, int64(e+1)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTensorMethods(t *testing.T) {
	s, err := tensor.Synthesize(tensor.PaperSynth(tensor.CP), noise.Seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	train, test := synthRatings(t, s.Train), synthRatings(t, s.Test)
	for _, c := range []struct {
		name   string
		args   []string
		status privacy.Status
	}{
		{"cp", nil, privacy.None},
		{"cp-ip", []string{"--range", "0:1"}, privacy.Proven},
		{"cp-gp", nil, privacy.None},
		{"tucker-op", nil, privacy.None},
		{"tucker-dpsgd", []string{"--passes", "10"}, privacy.Proven},
		{"cp-dpsgd", []string{"--passes", "10", "--range", "0:1", "--centre-eps", "0.5"}, privacy.Proven},
		{"cp-ip", []string{"--range", "0:1", "--biscale"}, privacy.None},
	} {
		rep := trainSaveEval(t, c.name, append([]string{"--item-day"}, c.args...), train, test,
			Common{Epsilon: 5, Delta: 1e-5, Rand: noise.Seeded(2), Noise: noise.Seeded(3), Workers: 2}, c.status)
		if rep.N != test.Len() || rep.RMSE == nil || math.IsNaN(*rep.RMSE) || *rep.RMSE > 1 {
			t.Errorf("%s: report %+v", c.name, rep)
		}
	}
}
