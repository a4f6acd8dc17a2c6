package methods_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// lowRankRatings draws a users × items matrix μ + b_u + b_i + u·v (rank
// r, values clamped to the scale 1..5) plus N(0, noise²), observed at a
// fraction obs of the entries, and splits the observed entries 90/10 into
// train and test (test re-expressed in train's IDs). User IDs are "u<n>",
// item IDs "i<n>"; the catalogue lists every item.
func lowRankRatings(t testing.TB, users, items, r int, obs, noiseSD float64, seed uint64) (train, test *ratings.Matrix, cat *model.Catalogue) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 11))
	u := make([]float64, users*r)
	v := make([]float64, items*r)
	for i := range u {
		u[i] = rnd.NormFloat64() * 0.7 / math.Sqrt(float64(r))
	}
	for i := range v {
		v[i] = rnd.NormFloat64()
	}
	bu, bi := make([]float64, users), make([]float64, items)
	for i := range bu {
		bu[i] = 0.3 * rnd.NormFloat64()
	}
	for i := range bi {
		bi[i] = 0.4 * rnd.NormFloat64()
	}
	btr, bte := ratings.NewBuilder(ratings.DupError), ratings.NewBuilder(ratings.DupError)
	ids := make([]string, items)
	for j := range ids {
		ids[j] = fmt.Sprintf("i%d", j)
	}
	line := int64(0)
	for a := range users {
		for j := range items {
			if rnd.Float64() >= obs {
				continue
			}
			x := 3.5 + bu[a] + bi[j]
			for c := range r {
				x += u[a*r+c] * v[j*r+c]
			}
			x = min(5, max(1, x+noiseSD*rnd.NormFloat64()))
			b := btr
			if rnd.Float64() < 0.1 {
				b = bte
			}
			line++
			if err := b.Add(fmt.Sprintf("u%d", a), ids[j], x, line); err != nil {
				t.Fatal(err)
			}
		}
	}
	var err error
	if train, err = btr.Build(); err != nil {
		t.Fatal(err)
	}
	te, err := bte.Build()
	if err != nil {
		t.Fatal(err)
	}
	test, _ = train.Align(te)
	if cat, err = model.NewCatalogue(ids, nil); err != nil {
		t.Fatal(err)
	}
	return train, test, cat
}

// trainRMSE trains method (JSON params) on in and returns its model's test
// RMSE: the reference a private method is compared with.
func trainRMSE(t testing.TB, method string, params map[string]any, in release.Input, env methods.Env, test *ratings.Matrix) float64 {
	t.Helper()
	cfg, err := methods.Configure(method, params)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := methods.Train(context.Background(), method, cfg, in, env)
	if err != nil {
		t.Fatal(err)
	}
	return rmseOf(t, rel.Model(), test)
}

// rmseOf scores a model (with its users) on test ratings in the same IDs.
func rmseOf(t testing.TB, m *model.Model, test *ratings.Matrix) float64 {
	t.Helper()
	var s float64
	n := 0
	test.All(func(e ratings.Entry) bool {
		u, ok1 := m.UserIndex(test.Users.Name(e.User))
		i, ok2 := m.ItemIndex(test.Items.Name(e.Item))
		if !ok1 || !ok2 {
			t.Fatalf("test entry of an unknown user or item")
		}
		d := m.Predict(u, i) - float64(e.Value)
		s += d * d
		n++
		return true
	})
	return math.Sqrt(s / float64(n))
}

// als fits a rank-3 matrix with both solvers; the model is well formed,
// non-private, and survives the file format. Fixed seeds: deterministic
// (both solvers are repeatable for a seed); the RMSE bounds have a wide
// margin over the measured values (sgd 0.247, als 0.233; noise 0.2,
// predicting the mean 0.84).
func TestALSMethod(t *testing.T) {
	train, test, _ := lowRankRatings(t, 300, 120, 3, 0.4, 0.2, 1)
	for _, tc := range []struct {
		params map[string]any
		max    float64
	}{
		{map[string]any{"solver": "sgd", "rank": 8, "iterations": 40}, 0.32},
		{map[string]any{"solver": "als", "rank": 8, "lambda": 0.02}, 0.3},
	} {
		t.Run(tc.params["solver"].(string), func(t *testing.T) {
			cfg, err := methods.Configure("als", tc.params)
			if err != nil {
				t.Fatal(err)
			}
			sc := release.Scale{Min: 1, Max: 5}
			rel, err := methods.Train(context.Background(), "als", cfg, release.Input{Ratings: train, Declared: release.Declared{Scale: &sc}},
				methods.Env{Noise: noise.Seeded(1), Rand: noise.Seeded(2), Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			if rel.Guarantee.Status != privacy.None || rel.PerUser != nil {
				t.Errorf("als must be a non-private release with its users in the model: %+v", rel.Guarantee)
			}
			m := rel.Model()
			got := rmseOf(t, m, test)
			t.Logf("%v: test RMSE %.4f", tc.params, got)
			if got > tc.max {
				t.Errorf("test RMSE %.4f > %.2f", got, tc.max)
			}
			var buf bytes.Buffer
			if err := m.Write(&buf); err != nil {
				t.Fatal(err)
			}
			back, err := model.Read(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(rmseOf(t, back, test) - got); d > 1e-12 {
				t.Errorf("model changed in the file: RMSE differs by %g", d)
			}
		})
	}
}

func TestALSConfigRejects(t *testing.T) {
	for _, p := range []map[string]any{
		{"solver": "newton"}, {"rank": 0}, {"lambda": -1}, {"learn_rate": 0}, {"iterations": -2}, {"bias_lambda": "inf"},
	} {
		if _, err := methods.Configure("als", p); err == nil {
			t.Errorf("als accepted %v", p)
		}
	}
}
