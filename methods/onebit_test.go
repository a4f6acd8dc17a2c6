package methods

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// oneBitRatings draws 1–5 ratings from a rank-1 preference model on a
// d1 × d2 grid (fixed seed), about frac of the pairs rated; one pair in
// five goes to the test matrix.
func oneBitRatings(t *testing.T, d1, d2 int, frac float64) (train, test *ratings.Matrix) {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	u := make([]float64, d1)
	v := make([]float64, d2)
	for i := range u {
		u[i] = rng.NormFloat64()
	}
	for j := range v {
		v[j] = rng.NormFloat64()
	}
	btr, bte := ratings.NewBuilder(ratings.DupError), ratings.NewBuilder(ratings.DupError)
	line := int64(0)
	for i := range d1 {
		for j := range d2 {
			if rng.Float64() >= frac {
				continue
			}
			r := math.Round(math.Max(1, math.Min(5, 3+1.2*u[i]*v[j]+0.5*rng.NormFloat64())))
			b := btr
			if rng.IntN(5) == 0 {
				b = bte
			}
			line++
			if err := b.Add(fmt.Sprint(i), fmt.Sprint(j), r, line); err != nil {
				t.Fatal(err)
			}
		}
	}
	var err error
	if train, err = btr.Build(); err != nil {
		t.Fatal(err)
	}
	if test, err = bte.Build(); err != nil {
		t.Fatal(err)
	}
	return train, test
}

// TestOnebitMethods trains every onebit method through the registry on a
// small generated data set, saves and evaluates the model, and checks the
// guarantee status (with a fixed threshold, and with the training mean,
// which voids a private method's guarantee).
func TestOnebitMethods(t *testing.T) {
	train, test := oneBitRatings(t, 30, 40, 0.5)
	for _, c := range []struct {
		name   string
		args   []string
		status privacy.Status
		minAcc float64
	}{
		{"onebit-clear", []string{"--threshold", "3.5"}, privacy.None, 0.65},
		{"onebit-inp", []string{"--threshold", "3.5"}, privacy.Proven, 0.55},
		{"onebit-objp", []string{"--threshold", "3.5"}, privacy.AsClaimed, 0},
		{"onebit-grap", []string{"--threshold", "3.5", "--iterations", "3"}, privacy.Proven, 0},
		{"onebit-outp", []string{"--threshold", "3.5"}, privacy.Proven, 0},
		{"onebit-inp", nil, privacy.None, 0},
		{"onebit-clear", []string{"--threshold", "3.5", "--link", "probit", "--sigma", "0.5"}, privacy.None, 0.65},
	} {
		rep := trainSaveEval(t, c.name, c.args, train, test, Common{Epsilon: 8, Rand: noise.Seeded(2), Noise: noise.Seeded(3), Workers: 1}, c.status)
		if rep.Accuracy == nil {
			t.Fatalf("%s %v: no accuracy in %+v", c.name, c.args, rep)
		}
		t.Logf("%s %v: accuracy %.3f on %d test ratings", c.name, c.args, *rep.Accuracy, rep.N)
		if *rep.Accuracy < c.minAcc {
			t.Errorf("%s %v: accuracy %.3f < %.2f", c.name, c.args, *rep.Accuracy, c.minAcc)
		}
	}
}
