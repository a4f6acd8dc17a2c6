package methods

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/tensor"
	"github.com/privrec/privrec/tensor/completion"
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

func synthTensorData(t *testing.T) (train, test *ratings.Matrix) {
	t.Helper()
	s, err := tensor.Synthesize(tensor.PaperSynth(tensor.CP), noise.Seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	return synthRatings(t, s.Train), synthRatings(t, s.Test)
}

// trainTensor configures a tensor method from JSON-named parameters and
// trains it through methods.Train with seeded randomness.
func trainTensor(t *testing.T, name string, params map[string]any, in release.Input, eps float64) (*release.Release, error) {
	t.Helper()
	cfg, err := Configure(name, params)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Epsilon: eps, Delta: 1e-5, Seed: 2, Rand: noise.Seeded(2), Noise: noise.Seeded(3), Workers: 2}
	return Train(context.Background(), name, cfg, in, env)
}

func unitScale() *release.Scale { return &release.Scale{Min: 0, Max: 1} }

// Every tensor method end to end: train on the synthetic tensor, write the
// public file, evaluate it from the file as privrec eval does.
func TestTensorMethods(t *testing.T) {
	train, test := synthTensorData(t)
	for _, c := range []struct {
		name   string
		params map[string]any
		status privacy.Status
	}{
		{"cp", nil, privacy.None},
		{"cp-ip", nil, privacy.Proven},
		{"cp-gp", nil, privacy.None},
		{"tucker-op", nil, privacy.None},
		{"tucker-dpsgd", map[string]any{"passes": 10}, privacy.Proven},
		{"cp-dpsgd", map[string]any{"passes": 10, "centre_eps": 0.5}, privacy.Proven},
		{"cp-ip", map[string]any{"biscale": true}, privacy.None},
	} {
		params := map[string]any{"item_day": true}
		for k, v := range c.params {
			params[k] = v
		}
		rel, err := trainTensor(t, c.name, params, release.Input{Ratings: train, Declared: release.Declared{Scale: unitScale()}}, 5)
		if err != nil {
			t.Fatalf("%s %v: %v", c.name, c.params, err)
		}
		g := rel.Guarantee
		if g.Status != c.status {
			t.Errorf("%s %v: status %s, want %s", c.name, c.params, g.Status, c.status)
		}
		if g.Private() && g.Relation != privacy.RelationRatingValue {
			t.Errorf("%s: relation %q, want the rating-value relation", c.name, g.Relation)
		}
		// Seeded noise marks a release reproducible; plain cp draws none
		// and carries no such mark.
		if drawsNoise := c.name != "cp"; g.Reproducible != drawsNoise {
			t.Errorf("%s: reproducible %v, want %v (seeded noise drawn: %v)", c.name, g.Reproducible, drawsNoise, drawsNoise)
		}
		f, ok := rel.Public.(*completion.File)
		if !ok || f.Kind() != c.name[:strings.IndexAny(c.name+"-", "-")] {
			t.Fatalf("%s: public artefact %T", c.name, rel.Public)
		}
		if f.Lo != 0 || f.Hi != 1 {
			t.Errorf("%s: prediction range [%g, %g], want the declared [0, 1]", c.name, f.Lo, f.Hi)
		}
		path := filepath.Join(t.TempDir(), "m")
		if err := model.WriteFileAtomic(path, rel.Public.Write); err != nil {
			t.Fatal(err)
		}
		rep, err := EvaluateFile(context.Background(), path, test, EvalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.N != test.Len() || rep.RMSE == nil || math.IsNaN(*rep.RMSE) || *rep.RMSE > 1 {
			t.Errorf("%s: report %+v", c.name, rep)
		}
		back, err := completion.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if back.Guarantee.Status != g.Status || back.Guarantee.Reproducible != g.Reproducible {
			t.Errorf("%s: file guarantee %+v, release %+v", c.name, back.Guarantee, g)
		}
	}
}

// Defect: IP (and DP-SGD's private centring) took the sensitivity Hi − Lo
// from the data when no range was given. Now they refuse, naming --scale;
// DP-SGD without centring needs no scale and then clamps nothing (no data
// range in the file).
func TestTensorPrivateNeedsDeclaredScale(t *testing.T) {
	train, _ := synthTensorData(t)
	in := release.Input{Ratings: train}
	for _, c := range []struct {
		name   string
		params map[string]any
	}{
		{"cp-ip", nil},
		{"tucker-ip", nil},
		{"cp-ip", map[string]any{"biscale": true}},
		{"cp-dpsgd", map[string]any{"centre_eps": 0.5}},
		{"tucker-dpsgd", map[string]any{"centre_eps": 0.5}},
	} {
		params := map[string]any{"item_day": true, "passes": 2}
		for k, v := range c.params {
			params[k] = v
		}
		_, err := trainTensor(t, c.name, params, in, 1)
		if err == nil || !strings.Contains(err.Error(), "--scale") {
			t.Errorf("%s %v without a declared scale: err = %v, want a refusal naming --scale", c.name, c.params, err)
		}
	}
	rel, err := trainTensor(t, "cp-dpsgd", map[string]any{"item_day": true, "passes": 2}, in, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f := rel.Public.(*completion.File); f.Hi > f.Lo || rel.Guarantee.Status != privacy.Proven {
		t.Errorf("cp-dpsgd without a scale: range [%g, %g], status %s; want no clamp, proven", f.Lo, f.Hi, rel.Guarantee.Status)
	}
	// Methods without a guarantee may read the range from the data, and say so.
	rel, err = trainTensor(t, "cp", map[string]any{"item_day": true, "passes": 2}, in, 1)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := train.Range()
	if f := rel.Public.(*completion.File); f.Lo != lo || f.Hi != hi || !strings.Contains(rel.Guarantee.Note, "--scale") {
		t.Errorf("cp without a scale: range [%g, %g] (data [%g, %g]), note %q", f.Lo, f.Hi, lo, hi, rel.Guarantee.Note)
	}
}

// Defect: the file carried an exact fingerprint of the private ratings.
// Now its header has no such field and the bytes do not contain it; the
// container is model format version 2.
func TestTensorFileHasNoFingerprint(t *testing.T) {
	train, _ := synthTensorData(t)
	for _, name := range []string{"cp-ip", "tucker-dpsgd"} {
		rel, err := trainTensor(t, name, map[string]any{"item_day": true, "passes": 2}, release.Input{Ratings: train, Declared: release.Declared{Scale: unitScale()}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := rel.Public.Write(&buf); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(buf.Bytes(), []byte(train.Fingerprint())) {
			t.Errorf("%s: the file contains the data's fingerprint", name)
		}
		kind, meta, _, err := model.ReadContainer(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		var header map[string]any
		if err := json.Unmarshal(meta, &header); err != nil {
			t.Fatal(err)
		}
		if _, has := header["fingerprint"]; has || kind != rel.Public.Kind() {
			t.Errorf("%s: header %v (kind %q)", name, header, kind)
		}
		raw := buf.Bytes()
		var h struct {
			Version int `json:"version"`
		}
		n := int(raw[len(model.Magic)]) | int(raw[len(model.Magic)+1])<<8 | int(raw[len(model.Magic)+2])<<16 | int(raw[len(model.Magic)+3])<<24
		if err := json.Unmarshal(raw[len(model.Magic)+4:len(model.Magic)+4+n], &h); err != nil || h.Version != model.Version {
			t.Errorf("%s: container version %d (%v), want %d", name, h.Version, err, model.Version)
		}
	}
}

// Defect: DP-SGD's report printed the training RMSE and the share of
// clipped gradients, un-noised facts of the private ratings. Every tensor
// method's report now holds only hyper-parameters, public counts and
// noised values.
func TestTensorReportIsPublic(t *testing.T) {
	train, _ := synthTensorData(t)
	// lambda and sweeps: the ALS solver's choice on the validation split
	// of the (IP: noisy) training ratings.
	allowed := map[string]bool{"days": true, "updates": true, "noise_scale": true, "sensitivity": true, "sigma": true, "rho": true, "offset": true,
		"lambda": true, "sweeps": true}
	for _, c := range []struct {
		name   string
		params map[string]any
	}{
		{"cp", nil}, {"tucker-ip", nil}, {"cp-gp", nil}, {"cp-op", nil},
		{"cp-dpsgd", nil}, {"tucker-dpsgd", map[string]any{"centre_eps": 0.2, "batch": 500}},
	} {
		params := map[string]any{"item_day": true, "passes": 3}
		for k, v := range c.params {
			params[k] = v
		}
		rel, err := trainTensor(t, c.name, params, release.Input{Ratings: train, Declared: release.Declared{Scale: unitScale()}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		for k := range rel.Report {
			if !allowed[k] {
				t.Errorf("%s: report field %q", c.name, k)
			}
		}
		for _, k := range []string{"train_rmse", "clipped_fraction"} {
			if _, has := rel.Report[k]; has {
				t.Errorf("%s: report has %s", c.name, k)
			}
		}
	}
}

// Bi-scaling stores un-noised statistics of the ratings: every private
// method then reports status none, with the reason and the inner
// guarantee in the note, and keeps the seed's claim.
func TestTensorBiScaleIsNone(t *testing.T) {
	train, _ := synthTensorData(t)
	for _, name := range []string{"cp-ip", "tucker-dpsgd", "cp-gp"} {
		rel, err := trainTensor(t, name, map[string]any{"item_day": true, "passes": 2, "biscale": true}, release.Input{Ratings: train, Declared: release.Declared{Scale: unitScale()}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		g := rel.Guarantee
		if g.Status != privacy.None || g.Private() || g.ClaimedEpsilon != 1 || !strings.Contains(g.Note, "bi-scaling") {
			t.Errorf("%s --biscale: guarantee %+v", name, g)
		}
		if rel.Public.(*completion.File).Scaling == nil {
			t.Errorf("%s --biscale: no scaling in the model", name)
		}
	}
}

// Ratings without timestamps are one day; the model scores ratings with or
// without timestamps on that day.
func TestTensorUntimed(t *testing.T) {
	b := ratings.NewBuilder(ratings.DupError)
	line := int64(0)
	for u := range 30 {
		for j := range 20 {
			if (u*7+j*3)%5 < 3 {
				line++
				if err := b.Add(fmt.Sprint("u", u), fmt.Sprint("i", j), float64(1+(u+2*j)%5), line); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	data, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	scale := release.Scale{Min: 1, Max: 5}
	rel, err := trainTensor(t, "tucker-ip", map[string]any{"passes": 5}, release.Input{Ratings: data, Declared: release.Declared{Scale: &scale}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := rel.Public.(*completion.File)
	if f.Axis.Days != 1 || rel.Report["days"] != 1 {
		t.Fatalf("axis %+v, report %v", f.Axis, rel.Report)
	}
	rep, err := EvaluateTensor(context.Background(), f, data)
	if err != nil || rep.N != data.Len() {
		t.Fatalf("evaluating a one-day model on untimed ratings: %+v, %v", rep, err)
	}
	f.Axis.Days = 2 // a many-day model needs timestamps
	if _, err := EvaluateTensor(context.Background(), f, data); err == nil {
		t.Error("a two-day model scored untimed ratings")
	}
}

// The whole-artefact audit of every tensor method with a proven guarantee,
// on methods.Audit's tiny data (12 users × 8 items, untimed: one day; one
// rating's value changed 1 ↔ 5). The field comparison is deterministic
// given the seed (a leak is found with certainty); the ε lower bound is
// Clopper–Pearson at 95 % simultaneous confidence, so a correct method
// shows a violation with probability ≤ 5 % per case; the seeds are fixed,
// so the test is repeatable.
func TestTensorAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-artefact audit skipped with -short")
	}
	for _, c := range []struct {
		name   string
		params map[string]any
		delta  float64
	}{
		{"cp-ip", nil, 0},
		{"tucker-ip", nil, 0},
		{"cp-dpsgd", nil, 1e-5},
		{"tucker-dpsgd", nil, 1e-5},
		{"cp-dpsgd", map[string]any{"centre_eps": 0.1}, 1e-5},
	} {
		t.Run(fmt.Sprint(c.name, c.params), func(t *testing.T) {
			params := map[string]any{"passes": 20, "rank": 2}
			for k, v := range c.params {
				params[k] = v
			}
			cfg, err := Configure(c.name, params)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Audit(context.Background(), c.name, cfg, AuditOptions{ReleaseRuns: raceReleaseRuns, Epsilon: 1, Delta: c.delta, Runs: 6, Samples: 150, Seed: 17})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Relation != privacy.RelationRatingValue || rep.Violation || len(rep.Differences) > 0 || len(rep.Canaries) > 0 || rep.Noised == 0 {
				t.Errorf("audit: %+v", rep)
			}
			t.Logf("%s: %d fields, %d noised, lower bound %.3f on %s (%.1f s)", c.name, rep.Fields, rep.Noised, rep.EpsilonLowerBound, rep.Statistic, rep.Seconds)
		})
	}
}

// leakyTensor is cp-ip with a planted leak in its public file: the exact
// fingerprint of the private ratings, as the seed-era file carried.
type leakyTensor struct{ CPIPConfig }

func (c *leakyTensor) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	r, err := c.CPIPConfig.Train(ctx, in, env)
	if err != nil {
		return nil, err
	}
	r.Public.(*completion.File).Params["fingerprint"] = in.Ratings.Fingerprint()
	return r, nil
}

// The audit reads the tensor file's header: the planted fingerprint is a
// field fixed under the noise that differs between the neighbours, found
// with certainty (deterministic given the seed).
func TestTensorAuditCatchesFingerprint(t *testing.T) {
	cfg, err := Configure("cp-ip", map[string]any{"passes": 5, "rank": 2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Audit(context.Background(), "cp-ip", &leakyTensor{*cfg.(*CPIPConfig)}, AuditOptions{ReleaseRuns: raceReleaseRuns, Epsilon: 1, Runs: 3, Samples: -1, Seed: 17})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Violation || len(rep.Differences) != 1 || !strings.Contains(rep.Differences[0], "params.fingerprint") {
		t.Errorf("planted fingerprint: %+v", rep)
	}
}

// The seed's settings stay reachable through the method parameters: with
// them cp, tucker and their IP and DP-SGD variants train exactly the model
// completion.Train trains with completion.Paper (the seed-era solver and
// defaults), so the reproductions of seed 004 keep measuring the seed's
// algorithm. Deterministic (seeded randomness).
func TestTensorPaperSettings(t *testing.T) {
	s, err := tensor.Synthesize(tensor.PaperSynth(tensor.CP), noise.Seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	train := synthRatings(t, s.Train)
	for _, c := range []struct {
		name   string
		kind   tensor.Kind
		mech   completion.Mechanism
		params map[string]any
	}{
		{"cp", tensor.CP, completion.NoMechanism, map[string]any{"solver": "sgd", "biases": false, "validation": 0, "lambda": 0.01, "lr": 0.005}},
		{"tucker-ip", tensor.Tucker, completion.IP, map[string]any{"solver": "sgd", "biases": false, "validation": 0, "lambda": "0.001", "lambda_g": 0.0001, "lr": 0.005}},
		{"cp-dpsgd", tensor.CP, completion.DPSGD, map[string]any{"biases": false, "precondition": false, "lambda": 0.01, "lr": 0.005, "clip": 0.3}},
		{"tucker-gp", tensor.Tucker, completion.GP, nil},
	} {
		params := map[string]any{"item_day": true, "passes": 4}
		for k, v := range c.params {
			params[k] = v
		}
		rel, err := trainTensor(t, c.name, params, release.Input{Ratings: train, Declared: release.Declared{Scale: unitScale()}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := rel.Public.(*completion.File).Model
		x, _, err := tensor.FromRatings(train)
		if err != nil {
			t.Fatal(err)
		}
		x, _, err = tensor.MergeItemDays(x, train.Items.Names())
		if err != nil {
			t.Fatal(err)
		}
		cfg := completion.Paper(c.kind)
		cfg.Passes, cfg.Mechanism, cfg.Epsilon, cfg.Delta, cfg.Lo, cfg.Hi, cfg.ClampNoisy = 4, c.mech, 1, 1e-5, 0, 1, true
		if c.mech == completion.DPSGD {
			cfg.Clip = 0.3
		}
		want, _, err := completion.Train(context.Background(), x, cfg, noise.Seeded(2), noise.Seeded(3), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.A, want.A) || !slices.Equal(got.B, want.B) || !slices.Equal(got.C, want.C) || !slices.Equal(got.G, want.G) || got.BA != nil {
			t.Errorf("%s with the seed's settings: model differs from completion.Paper's", c.name)
		}
	}
}

// Invalid settings are refused with the flag named.
func TestTensorConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"cp", map[string]any{"solver": "newton"}, "--solver"},
		{"cp", map[string]any{"solver": "sgd"}, "--biases"},
		{"cp", map[string]any{"validation": 0}, "--validation"},
		{"tucker-ip", map[string]any{"validation": 0.9}, "--validation"},
		{"cp", map[string]any{"lambda": "1,-1"}, "--lambda"},
		{"cp", map[string]any{"starts": 0}, "--starts"},
		{"tucker", map[string]any{"bias_damping": -1}, "--bias-damping"},
		{"cp-dpsgd", map[string]any{"clip": -1}, "--clip"},
		{"cp-gp", map[string]any{"clip": 0}, "--clip"},
		{"tucker-dpsgd", map[string]any{"passes": 0}, "--passes"},
	} {
		_, err := Configure(c.name, c.params)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: err = %v, want one naming %s", c.name, c.params, err, c.want)
		}
	}
}

// The --lambda help states the default candidates (a list flag prints no
// default of its own).
func TestTensorLambdaHelp(t *testing.T) {
	f, _ := reflect.TypeOf(FitOptions{}).FieldByName("Lambda")
	var parts []string
	for _, l := range completion.Defaults(tensor.CP).LambdaGrid {
		parts = append(parts, fmt.Sprint(l))
	}
	if want := "(default " + strings.Join(parts, ",") + ")"; !strings.Contains(f.Tag.Get("help"), want) {
		t.Errorf("--lambda help %q lacks %q", f.Tag.Get("help"), want)
	}
}
