package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// trainCalls counts fake trainings; cancelAfter, when > 0, cancels
// cancelFn once that many trainings have started (an interrupted sweep).
var (
	trainCalls  atomic.Int64
	cancelAfter atomic.Int64
	cancelFn    atomic.Value // context.CancelFunc
)

// seenInputs records, per run seed, the Input and Env a fake method got.
var seenInputs sync.Map // uint64 → release.Input

// noisyMeanConfig is a fake private method: the training mean plus
// Laplace noise of scale 1/ε plus a shift, so error falls with ε. Its
// guarantee is made up for the test.
type noisyMeanConfig struct {
	Shift float64 `json:"shift" flag:"shift" help:"added to the prediction"`
}

func (c *noisyMeanConfig) Validate() error {
	if math.IsNaN(c.Shift) {
		return fmt.Errorf("--shift must be a number")
	}
	return nil
}

func (c *noisyMeanConfig) Train(ctx context.Context, in release.Input, env methods.Env) (*release.Release, error) {
	n := trainCalls.Add(1)
	if k := cancelAfter.Load(); k > 0 && n >= k {
		if f, ok := cancelFn.Load().(context.CancelFunc); ok {
			f()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	seenInputs.Store(env.Seed, in)
	m := model.New("test-noisy-mean", in.Ratings)
	m.U, m.V = []float64{}, []float64{}
	m.Offset = in.Ratings.Mean() + noise.Laplace(env.Noise, 1/env.Epsilon) + c.Shift
	g := privacy.Guarantee{Epsilon: env.Epsilon, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven,
		Relation: privacy.RelationRatingValue, Note: "fake, note, with commas"}
	return &release.Release{Public: m, Guarantee: g, Report: release.Report{}}, nil
}

// constArtefact is a public artefact of a kind other than a low-rank
// model: it predicts one constant, and is evaluated through its file.
type constArtefact struct{ Value float64 }

func (a *constArtefact) Kind() string { return "test-const" }
func (a *constArtefact) Write(w io.Writer) error {
	return model.WriteContainer(w, "test-const", a, nil)
}

type constConfig struct{}

func (*constConfig) Validate() error { return nil }
func (*constConfig) Train(ctx context.Context, in release.Input, env methods.Env) (*release.Release, error) {
	return &release.Release{Public: &constArtefact{Value: in.Ratings.Mean()},
		Guarantee: privacy.NoPrivacy(privacy.UnitEntry, "test only"), Report: release.Report{}}, nil
}

// paramsConfig exercises every field type Configure supports.
type paramsShared struct {
	Rate float64 `json:"rate" flag:"rate" help:"a shared option"`
}

type paramsConfig struct {
	paramsShared
	Iters  int       `json:"max_iter" flag:"max-iter" help:"an int"`
	Seed   uint64    `json:"seed_offset" flag:"seed-offset" help:"a uint64"`
	On     bool      `json:"debias" flag:"debias" help:"a bool"`
	Link   string    `json:"link" flag:"link" help:"a string"`
	Alpha  float64   `json:"alpha" flag:"alpha" help:"a float, inf allowed"`
	Levels []float64 `json:"levels" flag:"levels" help:"a list"`
}

func (c *paramsConfig) Validate() error {
	if c.Iters < 0 {
		return fmt.Errorf("--max-iter must be ≥ 0, got %d", c.Iters)
	}
	return nil
}

func (c *paramsConfig) Train(context.Context, release.Input, methods.Env) (*release.Release, error) {
	return nil, fmt.Errorf("not trainable")
}

func init() {
	methods.Register(&methods.Method{Name: "test-noisy-mean", Summary: "test only", Private: true,
		New: func() methods.Config { return &noisyMeanConfig{} }})
	methods.Register(&methods.Method{Name: "test-const", Summary: "test only",
		New: func() methods.Config { return &constConfig{} }})
	methods.RegisterEvaluator("test-const", func(ctx context.Context, path string, test *ratings.Matrix, opt methods.EvalOptions) (*methods.Report, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		_, meta, _, err := model.ReadContainer(f)
		if err != nil {
			return nil, err
		}
		var a constArtefact
		if err := json.Unmarshal(meta, &a); err != nil {
			return nil, err
		}
		var ss float64
		test.All(func(e ratings.Entry) bool {
			ss += (float64(e.Value) - a.Value) * (float64(e.Value) - a.Value)
			return true
		})
		r := math.Sqrt(ss / float64(test.Len()))
		return &methods.Report{N: test.Len(), RMSE: &r, Method: "test-const"}, nil
	})
	methods.Register(&methods.Method{Name: "test-params", Summary: "test only",
		New: func() methods.Config { return &paramsConfig{Iters: 10, Alpha: 1} }})
	RegisterGenerator("test-synth", func(ctx context.Context, d DataSpec, seed uint64, dir string) (*Split, error) {
		users := int(d.param("users", 12))
		s := noise.Seeded(seed)
		train, test := ratings.NewBuilder(ratings.DupError), ratings.NewBuilder(ratings.DupError)
		for u := range users {
			for i := range 6 {
				v := 3 + s.NormFloat64()
				b := train
				if i == u%6 {
					b = test
				}
				if err := b.Add(fmt.Sprint(u), fmt.Sprint(i), v, 0); err != nil {
					return nil, err
				}
			}
		}
		// Item 6 is rated only in the test set: the catalogue must hold it.
		if err := test.Add("0", "6", 3, 0); err != nil {
			return nil, err
		}
		tr, err := train.Build()
		if err != nil {
			return nil, err
		}
		te, err := test.Build()
		if err != nil {
			return nil, err
		}
		return &Split{Train: tr, Test: te}, nil
	})
}

func testConfig() *Config {
	return &Config{
		Name:     "unit",
		Datasets: []DataSpec{{Name: "toy", Source: "test-synth", Scale: []float64{0, 6}}},
		Methods: []MethodSpec{
			{Method: "test-noisy-mean", Label: "noisy"},
			{Method: "test-noisy-mean", Label: "shifted", Params: map[string]any{"shift": 0.5}},
			{Method: "global-mean"},
		},
		Epsilons: []float64{0.5, 1, 2, 4},
		Runs:     3,
		Metric:   "rmse",
		Claims:   []string{"error falls with ε"},
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"ok", func(c *Config) {}, ""},
		{"bad name", func(c *Config) { c.Name = "a b" }, "config name"},
		{"no datasets", func(c *Config) { c.Datasets = nil }, "no datasets"},
		{"bad metric", func(c *Config) { c.Metric = "auc" }, "metric"},
		{"bad eps", func(c *Config) { c.Epsilons = []float64{1, -1} }, "positive"},
		{"dup label", func(c *Config) { c.Methods[1].Label = "noisy" }, "twice"},
		{"file without split", func(c *Config) { c.Datasets[0] = DataSpec{Name: "f", Source: "file", Path: "x"} }, "holdout"},
		{"bad sweep", func(c *Config) { c.Sweep = &Sweep{Name: "x", Target: "model", Values: []float64{1}} }, "target"},
		{"old sweep target", func(c *Config) { c.Sweep = &Sweep{Name: "shift", Target: "flag", Values: []float64{1}} }, `now "param"`},
		{"kebab sweep name", func(c *Config) { c.Sweep = &Sweep{Name: "max-iter", Target: "param", Values: []float64{1}} }, `"max_iter"`},
		{"bad delta", func(c *Config) { c.Delta = 2 }, "delta"},
		{"kebab param", func(c *Config) { c.Methods[1].Params = map[string]any{"max-iter": 3} }, `"max_iter"`},
		{"bad param value", func(c *Config) { c.Methods[1].Params = map[string]any{"shift": map[string]any{}} }, "want a number"},
		{"bad dataset param", func(c *Config) { c.Datasets[0].MethodParams = map[string]any{"a-b": 1} }, "method_params"},
		{"bad scale", func(c *Config) { c.Datasets[0].Scale = []float64{5, 1} }, "scale"},
		{"method runs above the config's", func(c *Config) { c.Methods[0].Runs = 4 }, "runs 4"},
		{"negative method runs", func(c *Config) { c.Methods[0].Runs = -1 }, "runs -1"},
		{"rescale without scale", func(c *Config) {
			c.Datasets[0] = DataSpec{Name: "f", Source: "file", Path: "x", Holdout: 0.1, Rescale: []float64{0, 5}}
		}, "rescale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mutate(c)
			err := c.Validate()
			if tc.want == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseConfigRejectsUnknownFields(t *testing.T) {
	_, err := ParseConfig([]byte(`{"name":"x","datasets":[{"name":"a","source":"test-synth"}],"methods":[{"method":"global-mean"}],"metric":"rmse","epsilon":[1]}`))
	if err == nil || !strings.Contains(err.Error(), "epsilon") {
		t.Fatalf("want an unknown-field error naming epsilon, got %v", err)
	}
	// The old names say what replaced them.
	_, err = ParseConfig([]byte(`{"name":"x","datasets":[{"name":"a","source":"test-synth"}],"methods":[{"method":"bias","flags":{"damping":"5"}}],"metric":"rmse"}`))
	if err == nil || !strings.Contains(err.Error(), `"params"`) {
		t.Fatalf("want a hint naming params, got %v", err)
	}
	c, err := ParseConfig([]byte(`{"name":"x","datasets":[{"name":"a","source":"test-synth","scale":[1,5],"method_params":{"shift":1}}],
		"methods":[{"method":"test-noisy-mean","params":{"shift":"inf"}}],"metric":"rmse"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Methods[0].Params["shift"] != "inf" || c.Datasets[0].MethodParams["shift"] != 1.0 || c.Datasets[0].Scale[1] != 5 {
		t.Fatalf("decoded %+v", c)
	}
}

func TestPlanUnknownMethodOrParam(t *testing.T) {
	c := testConfig()
	c.Methods = append(c.Methods, MethodSpec{Method: "no-such-method"})
	if _, err := Plan(c); err == nil || !strings.Contains(err.Error(), "no-such-method") || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("want a clear not-registered error, got %v", err)
	}
	for _, m := range []MethodSpec{
		{Method: "test-noisy-mean", Params: map[string]any{"nope": 1}},
		{Method: "test-params", Params: map[string]any{"nope": 1}},
	} {
		c = testConfig()
		c.Methods[0] = m
		if _, err := Plan(c); err == nil || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("%s: want an error naming the parameter, got %v", m.Method, err)
		}
	}
	c = testConfig()
	c.Sweep = &Sweep{Name: "no_such", Target: "param", Values: []float64{1}}
	if _, err := Plan(c); err == nil || !strings.Contains(err.Error(), "no_such") {
		t.Fatalf("want a swept-parameter error, got %v", err)
	}
	c = testConfig()
	c.Sweep = &Sweep{Name: "shift", Target: "param", Values: []float64{1}}
	if _, err := Plan(c); err == nil || !strings.Contains(err.Error(), "both set and swept") {
		t.Fatalf("want a set-and-swept error, got %v", err)
	}
	// A file dataset without a declared scale cannot feed a method that needs one.
	c = testConfig()
	c.Datasets = []DataSpec{{Name: "f", Source: "file", Path: "x", Holdout: 0.1}}
	c.Methods = []MethodSpec{{Method: "dp-bias"}}
	if _, err := Plan(c); err == nil || !strings.Contains(err.Error(), `"scale"`) {
		t.Fatalf("want an error asking for the dataset's scale, got %v", err)
	}
}

func TestPlanKeysAndSeeds(t *testing.T) {
	c := testConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	// 2 private methods × 4 ε × 3 runs + 1 baseline × 3 runs.
	if want := 2*4*3 + 3; len(jobs) != want {
		t.Fatalf("%d jobs, want %d", len(jobs), want)
	}
	keys, seeds := map[string]bool{}, map[uint64]bool{}
	for _, j := range jobs {
		if keys[j.key] || seeds[j.seed] {
			t.Fatalf("duplicate key or seed at %s", j.key)
		}
		keys[j.key], seeds[j.seed] = true, true
	}
	// Adding a method changes no existing seed.
	c2 := testConfig()
	c2.Methods = append(c2.Methods, MethodSpec{Method: "bias"})
	jobs2, _ := Plan(c2)
	bySeed := map[string]uint64{}
	for _, j := range jobs2 {
		bySeed[j.key] = j.seed
	}
	for _, j := range jobs {
		if bySeed[j.key] != j.seed {
			t.Fatalf("seed of %s changed when a method was added", j.key)
		}
	}
}

func runToDir(t *testing.T, c *Config, dir string) []*Row {
	t.Helper()
	if err := Run(context.Background(), c, Options{Out: dir, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	rows, torn, err := ReadResults(filepath.Join(dir, "results.csv"))
	if err != nil || torn {
		t.Fatalf("reading results: torn=%v err=%v", torn, err)
	}
	return rows
}

func byKey(rows []*Row) map[string]*Row {
	m := map[string]*Row{}
	for _, r := range rows {
		m[r.Key] = r
	}
	return m
}

func TestRunWritesEverything(t *testing.T) {
	c := testConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rows := runToDir(t, c, dir)
	if len(rows) != 27 {
		t.Fatalf("%d rows, want 27", len(rows))
	}
	for _, f := range []string{"summary.csv", "report.md", "config.json", "fig-toy.png", "fig-toy.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	r := byKey(rows)["toy|noisy||eps=0.5|0"]
	if r == nil || r.GEpsilon != 0.5 || r.GStatus != "proven" || r.GNote != "fake, note, with commas" || r.Metrics["rmse"] <= 0 {
		t.Fatalf("row not recorded with its guarantee: %+v", r)
	}
	if base := byKey(rows)["toy|global-mean||eps=|1"]; base == nil || !math.IsInf(base.GEpsilon, 1) || base.GStatus != "none" {
		t.Fatalf("baseline row wrong: %+v", base)
	}
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"error falls with ε", "fig-toy.png", "| noisy | 0.5 |", "non-private"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// A second run does nothing new.
	before := trainCalls.Load()
	rows2 := runToDir(t, c, dir)
	if trainCalls.Load() != before || len(rows2) != len(rows) {
		t.Fatalf("re-run trained %d more times and has %d rows", trainCalls.Load()-before, len(rows2))
	}
}

// The method gets the declared facts: the dataset's scale, the catalogue
// of every item of the source (train and test) and the population.
func TestDeclaredFactsReachTheMethod(t *testing.T) {
	c := testConfig()
	c.Methods = c.Methods[:1]
	c.Runs, c.Epsilons = 1, []float64{1}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	runToDir(t, c, t.TempDir())
	v, ok := seenInputs.Load(jobs[0].seed)
	if !ok {
		t.Fatal("the method did not run")
	}
	in := v.(release.Input)
	if in.Declared.Scale == nil || *in.Declared.Scale != (release.Scale{Min: 0, Max: 6}) {
		t.Errorf("declared scale %v, want [0, 6]", in.Declared.Scale)
	}
	if cat := in.Declared.Catalogue; cat == nil || cat.Len() != 7 {
		t.Errorf("catalogue %v, want the 7 items of train and test", cat)
	} else if _, ok := cat.Index("6"); !ok {
		t.Error("the catalogue lacks the item rated only in the test set")
	}
	if in.Declared.Population != 12 {
		t.Errorf("population %d, want 12", in.Declared.Population)
	}
	if in.Ratings.NumItems() != 6 {
		t.Errorf("the method trained on %d items, want the 6 of the training set", in.Ratings.NumItems())
	}
}

// A joint-DP model holds no users; its users' own states evaluate it.
// Non-matrix artefacts are evaluated through their saved file.
func TestReleaseKinds(t *testing.T) {
	c := testConfig()
	c.Methods = []MethodSpec{
		{Method: "dp-bias"},
		{Method: "test-const"},
	}
	c.Runs, c.Epsilons = 1, []float64{1, 8}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rows := byKey(runToDir(t, c, t.TempDir()))
	for _, k := range []string{"toy|dp-bias||eps=8|0", "toy|test-const||eps=|0"} {
		r := rows[k]
		if r == nil || !(r.Metrics["rmse"] > 0 && r.Metrics["rmse"] < 3) {
			t.Fatalf("%s: %+v", k, r)
		}
	}
	// All 13 test ratings: the one of an item no training rating names is
	// scored too, since that item is in the declared catalogue.
	if r := rows["toy|dp-bias||eps=8|0"]; r.N != 13 || r.GNotion != "joint" || r.GUnit != "user" {
		t.Errorf("dp-bias row: n %d, notion %s, unit %s", r.N, r.GNotion, r.GUnit)
	}
}

// An interrupted sweep, resumed, ends with exactly the rows (and the same
// numbers, thanks to per-run seeds) of an uninterrupted one.
func TestInterruptedSweepResumes(t *testing.T) {
	c := testConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	full := byKey(runToDir(t, c, t.TempDir()))

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancelFn.Store(cancel)
	cancelAfter.Store(trainCalls.Load() + 10)
	err := Run(ctx, c, Options{Out: dir, Workers: 2})
	cancelAfter.Store(0)
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("interrupted run returned %v", err)
	}
	partial, _, err := ReadResults(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(partial) == 0 || len(partial) >= len(full) {
		t.Fatalf("interrupted sweep recorded %d of %d rows", len(partial), len(full))
	}
	// Simulate a crash in the middle of writing a row.
	f, _ := os.OpenFile(filepath.Join(dir, "results.csv"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("toy|noisy||eps=4|2,toy,test-no")
	f.Close()
	resumed := byKey(runToDir(t, c, dir))
	if len(resumed) != len(full) {
		t.Fatalf("resumed sweep has %d rows, want %d", len(resumed), len(full))
	}
	for k, r := range full {
		q := resumed[k]
		if q == nil || q.Seed != r.Seed || q.Metrics["rmse"] != r.Metrics["rmse"] {
			t.Fatalf("row %s differs after resume: %+v vs %+v", k, q, r)
		}
	}
}

func TestSweepOverDataAndParam(t *testing.T) {
	for _, target := range []string{"data", "param"} {
		t.Run(target, func(t *testing.T) {
			c := testConfig()
			c.Runs = 2
			c.Epsilons = []float64{1, 4}
			if target == "data" {
				c.Sweep = &Sweep{Name: "users", Target: "data", Values: []float64{5, 10}}
			} else {
				c.Methods[1].Params = nil
				c.Sweep = &Sweep{Name: "shift", Target: "param", Values: []float64{0, 1}}
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			rows := runToDir(t, c, dir)
			if want := 2 * (2*2*2 + 2); len(rows) != want {
				t.Fatalf("%d rows, want %d", len(rows), want)
			}
			for _, f := range []string{"fig-toy-" + c.Sweep.Name + "-0.png", "fig-toy-noisy-vs-" + c.Sweep.Name + ".png"} {
				if target == "data" {
					f = strings.Replace(f, "-0.png", "-5.png", 1)
				}
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("missing figure: %v", err)
				}
			}
			if target == "data" {
				// The swept value reached the generator: 5 users → 5 test ratings
				// of items the model knows (item 6 is rated in the test set only).
				for _, r := range rows {
					if r.Value == 5 && r.N != 5 {
						t.Fatalf("run %s evaluated %d ratings, want 5", r.Key, r.N)
					}
				}
				return
			}
			// The swept shift reached the method: shift 1 moves every
			// prediction by 1, so its error is larger at every ε.
			rs := byKey(rows)
			for _, e := range []string{"1", "4"} {
				for run := range 2 {
					a, b := rs[fmt.Sprintf("toy|noisy|shift=0|eps=%s|%d", e, run)], rs[fmt.Sprintf("toy|noisy|shift=1|eps=%s|%d", e, run)]
					if a == nil || b == nil || a.Seed == b.Seed {
						t.Fatalf("rows for ε %s run %d missing or sharing a seed", e, run)
					}
				}
			}
		})
	}
}

func TestSummariseMeanSD(t *testing.T) {
	c := testConfig()
	rows := []*Row{
		{Dataset: "toy", Label: "noisy", Epsilon: 1, Value: math.NaN(), Metrics: map[string]float64{"rmse": 1}},
		{Dataset: "toy", Label: "noisy", Epsilon: 1, Value: math.NaN(), Metrics: map[string]float64{"rmse": 3}},
		{Dataset: "toy", Label: "noisy", Epsilon: 2, Value: math.NaN(), Metrics: map[string]float64{"rmse": 5}},
	}
	cells := Summarise(c, rows)
	if len(cells) != 2 || cells[0].Mean["rmse"] != 2 || math.Abs(cells[0].SD["rmse"]-math.Sqrt2) > 1e-12 || cells[0].N["rmse"] != 2 {
		t.Fatalf("cell 0 = %+v", cells[0])
	}
	if !math.IsNaN(cells[1].SD["rmse"]) || cells[1].N["rmse"] != 1 {
		t.Fatalf("one-run cell should have NaN sd: %+v", cells[1])
	}
}

func TestResultsRoundTrip(t *testing.T) {
	r := &Row{Key: "a|b", Dataset: "a", Method: "m", Label: "b", Value: math.NaN(), Epsilon: 2, Run: 3, Seed: 42,
		Metrics: map[string]float64{"rmse": 0.5}, N: 7, Seconds: 0.25, GEpsilon: math.Inf(1), GDelta: 1e-6,
		GUnit: "user", GNotion: "joint", GStatus: "proven", GClaimed: math.NaN(), GNote: "a \"quoted\", note\nwith newline"}
	var sb strings.Builder
	if err := WriteResults(&sb, []*Row{r}); err != nil {
		t.Fatal(err)
	}
	rows, torn, err := parseResults("x", []byte(sb.String()))
	if err != nil || torn || len(rows) != 1 {
		t.Fatalf("rows=%d torn=%v err=%v", len(rows), torn, err)
	}
	q := rows[0]
	if q.Key != r.Key || q.Seed != 42 || q.Metrics["rmse"] != 0.5 || !math.IsInf(q.GEpsilon, 1) || q.GNote != r.GNote || !math.IsNaN(q.Value) {
		t.Fatalf("round trip changed the row: %+v", q)
	}
}

func TestDatasetMethodParamsAndRestriction(t *testing.T) {
	c := testConfig()
	c.Datasets = append(c.Datasets, DataSpec{Name: "toy2", Source: "test-synth", MethodParams: map[string]any{"shift": 100, "no_such_param": 1}})
	c.Methods[0].Datasets = []string{"toy2"}
	c.Runs, c.Epsilons = 1, []float64{1}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rows := byKey(runToDir(t, c, t.TempDir()))
	if rows["toy|noisy||eps=1|0"] != nil {
		t.Fatal("noisy ran on toy, which it is restricted away from")
	}
	// toy2 shifts every prediction by 100, so its RMSE is far above toy's;
	// the spec's own shift (0.5) wins for "shifted".
	n2, s1, s2 := rows["toy2|noisy||eps=1|0"], rows["toy|shifted||eps=1|0"], rows["toy2|shifted||eps=1|0"]
	if n2 == nil || s1 == nil || s2 == nil {
		t.Fatalf("missing rows: %v", rows)
	}
	if n2.Metrics["rmse"] < 1.5 {
		t.Errorf("dataset method param not applied: RMSE %g", n2.Metrics["rmse"])
	}
	if s2.Metrics["rmse"] > 1.5 {
		t.Errorf("dataset param overrode the method's own param: RMSE %g", s2.Metrics["rmse"])
	}
}

// A method with its own Runs runs on the first Runs splits only; the
// others run on every split.
func TestMethodRuns(t *testing.T) {
	c := testConfig()
	c.Methods[0].Runs = 1
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	jobs, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]map[int]bool{}
	for _, j := range jobs {
		l := j.method.LabelOf()
		if runs[l] == nil {
			runs[l] = map[int]bool{}
		}
		runs[l][j.run] = true
	}
	if len(runs["noisy"]) != 1 || !runs["noisy"][0] {
		t.Errorf("noisy (runs 1) ran on splits %v, want {0}", runs["noisy"])
	}
	if len(runs["shifted"]) != 3 || len(runs["global-mean"]) != 3 {
		t.Errorf("the other methods ran on %d and %d splits, want 3", len(runs["shifted"]), len(runs["global-mean"]))
	}
}

// TestConfigureParams pins methods.Configure / SetParam as the runner uses
// them: values from JSON (numbers, bools, strings), strings as on the
// command line ("inf", "true", "0.5"), and errors that name the parameter.
func TestConfigureParams(t *testing.T) {
	for _, tc := range []struct {
		name    string
		params  map[string]any
		check   func(c *paramsConfig) bool
		wantErr string
	}{
		{"defaults", nil, func(c *paramsConfig) bool { return c.Iters == 10 && c.Alpha == 1 }, ""},
		{"JSON number into int", map[string]any{"max_iter": 3.0}, func(c *paramsConfig) bool { return c.Iters == 3 }, ""},
		{"Go int into int", map[string]any{"max_iter": 4}, func(c *paramsConfig) bool { return c.Iters == 4 }, ""},
		{"string into int", map[string]any{"max_iter": "7"}, func(c *paramsConfig) bool { return c.Iters == 7 }, ""},
		{"fraction into int", map[string]any{"max_iter": 3.5}, nil, "max_iter"},
		{"number into uint64", map[string]any{"seed_offset": 9.0}, func(c *paramsConfig) bool { return c.Seed == 9 }, ""},
		{"negative into uint64", map[string]any{"seed_offset": -1.0}, nil, "seed_offset"},
		{"number into float", map[string]any{"alpha": 0.25}, func(c *paramsConfig) bool { return c.Alpha == 0.25 }, ""},
		{"string into float", map[string]any{"alpha": "0.5"}, func(c *paramsConfig) bool { return c.Alpha == 0.5 }, ""},
		{"inf", map[string]any{"alpha": "inf"}, func(c *paramsConfig) bool { return math.IsInf(c.Alpha, 1) }, ""},
		{"not a number", map[string]any{"alpha": "big"}, nil, "alpha"},
		{"embedded field", map[string]any{"rate": 2.0}, func(c *paramsConfig) bool { return c.Rate == 2 }, ""},
		{"bool", map[string]any{"debias": true}, func(c *paramsConfig) bool { return c.On }, ""},
		{"bool as string", map[string]any{"debias": "true"}, func(c *paramsConfig) bool { return c.On }, ""},
		{"bool from a number", map[string]any{"debias": 1.0}, nil, "debias"},
		{"string", map[string]any{"link": "probit"}, func(c *paramsConfig) bool { return c.Link == "probit" }, ""},
		{"string from a number", map[string]any{"link": 2.0}, nil, "link"},
		{"list from JSON", map[string]any{"levels": []any{1.0, 2.0}}, func(c *paramsConfig) bool { return len(c.Levels) == 2 && c.Levels[1] == 2 }, ""},
		{"list from a string", map[string]any{"levels": "1, 3"}, func(c *paramsConfig) bool { return len(c.Levels) == 2 && c.Levels[1] == 3 }, ""},
		{"unknown name", map[string]any{"max_iters": 3.0}, nil, `"max_iters"`},
		{"flag name instead of JSON name", map[string]any{"max-iter": 3.0}, nil, `"max-iter"`},
		{"fails validation", map[string]any{"max_iter": -1.0}, nil, "--max-iter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := methods.Configure("test-params", tc.params)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c := cfg.(*paramsConfig); !tc.check(c) {
				t.Fatalf("config %+v", c)
			}
		})
	}
	if !methods.HasParam(&paramsConfig{}, "rate") || methods.HasParam(&paramsConfig{}, "max-iter") {
		t.Error("HasParam must find embedded fields by JSON name and nothing by flag name")
	}
}

// Local-DP collection randomizes on the declared scale, not the data's
// range, and over the whole declared catalogue.
func TestCollectUsesDeclaredScale(t *testing.T) {
	b := ratings.NewBuilder(ratings.DupError)
	for u := range 5 {
		for i := range 3 {
			if err := b.Add(fmt.Sprint(u), fmt.Sprint(i), float64(2+(u+i)%3), 0); err != nil { // values 2..4
				t.Fatal(err)
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := model.NewCatalogue([]string{"0", "1", "2", "3", "4", "5"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	decl := release.Declared{Scale: &release.Scale{Min: 1, Max: 5}, Catalogue: cat, Population: 5}
	for _, tc := range []struct {
		mech   string
		levels int
	}{{"laplace", 0}, {"rr", 5}} {
		path, got, err := Collect(context.Background(), m, tc.mech, 2, decl, noise.Seeded(1), t.TempDir(), 1)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ldp.ParseHeader(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if h.Scale.Min != 1 || h.Scale.Max != 5 || h.Scale.Levels != tc.levels || h.Items != 6 || !h.Reproducible {
			t.Errorf("%s: header %+v, want the declared scale [1, 5] (%d levels) over 6 catalogue items", tc.mech, h, tc.levels)
		}
		if got.Len() == 0 {
			t.Errorf("%s: no reports read back", tc.mech)
		}
		os.Remove(path)
	}
	if _, _, err := Collect(context.Background(), m, "rr", 2, release.Declared{}, noise.Seeded(1), t.TempDir(), 1); err == nil || !strings.Contains(err.Error(), "scale") {
		t.Errorf("collecting without a declared scale: %v", err)
	}
}

// A file dataset declares its scale (mapped by rescale), its catalogue
// (train and test items) and its population.
func TestFileSourceDeclaresFacts(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "train.tsv"), []byte("1\ta\t-10\n1\tb\t10\n2\ta\t0\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "test.tsv"), []byte("2\tb\t5\n3\tc\t-5\n"), 0o644)
	d := DataSpec{Name: "f", Source: "file", Path: "train.tsv", Test: "test.tsv", Format: "tsv", Scale: []float64{-10, 10}, Rescale: []float64{0, 5}}
	s, err := Generate(context.Background(), d, 1, dir)
	if err != nil {
		t.Fatal(err)
	}
	decl, err := declared(d, s)
	if err != nil {
		t.Fatal(err)
	}
	if *decl.Scale != (release.Scale{Min: 0, Max: 5}) || decl.Catalogue.Len() != 3 || decl.Population != 3 {
		t.Fatalf("declared %v, %d items, %d users; want [0, 5], 3, 3", decl.Scale, decl.Catalogue.Len(), decl.Population)
	}
	lo, hi := s.Train.Range()
	if lo != 0 || hi != 5 {
		t.Errorf("rescaled training range [%g, %g], want [0, 5] (the declared scale mapped linearly)", lo, hi)
	}
	if v := s.Test.Values(); len(v) != 2 || math.Abs(float64(v[0])-3.75) > 1e-6 && math.Abs(float64(v[1])-3.75) > 1e-6 {
		t.Errorf("rescaled test values %v, want 3.75 and 1.25", v)
	}
}

// Every reproduction plans (its methods are registered and its params
// configure them), declares the scale of its file datasets, and every
// dataset method_param is a parameter of one of its methods (a dataset
// param no method has is skipped, so a typo would go unnoticed).
func TestReproductionsPlan(t *testing.T) {
	for _, r := range Reproductions() {
		if !r.IsSweep() {
			if len(r.Files()) == 0 {
				t.Errorf("%s: a measurement must name the files it reads", r.Name)
			}
			continue
		}
		for _, scale := range []string{"quick", "paper"} {
			c, err := r.Config(scale)
			if err != nil {
				t.Fatalf("%s %s: %v", r.Name, scale, err)
			}
			if _, err := Plan(c); err != nil {
				t.Errorf("%s: %v", c.Name, err)
			}
			for _, d := range c.Datasets {
				if d.Source == "file" && d.Scale == nil {
					t.Errorf("%s: dataset %s declares no scale", c.Name, d.Name)
				}
				for _, k := range sortedKeys(d.MethodParams) {
					if !someMethodHas(c, k) {
						t.Errorf("%s: dataset %s sets %s, which none of its methods has", c.Name, d.Name, k)
					}
				}
			}
		}
	}
}

func someMethodHas(c *Config, param string) bool {
	for _, m := range c.Methods {
		reg, err := methods.Lookup(m.Method)
		if err != nil {
			continue
		}
		if methods.HasParam(reg.New(), param) {
			return true
		}
	}
	return false
}

// The Gram-signal measurement runs on a tiny MovieLens-shaped file and
// writes its report.
func TestGramSignalMeasurement(t *testing.T) {
	r, err := LookupReproduction("001-gram-signal")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	if err := r.CheckData(data); err == nil || !strings.Contains(err.Error(), "ratings.tsv") {
		t.Fatalf("missing data: %v", err)
	}
	// The error says where to download the data and the layout expected,
	// and points at nothing outside the repository.
	if err := r.CheckData(""); err == nil || !strings.Contains(err.Error(), "grouplens.org") ||
		!strings.Contains(err.Error(), "user<TAB>item<TAB>rating") || !strings.Contains(err.Error(), "PRIVREC_DATA_DIR") ||
		strings.Contains(err.Error(), "shared") {
		t.Errorf("missing data without a data dir: %v", err)
	}
	os.MkdirAll(filepath.Join(data, "ml-1m"), 0o755)
	var sb strings.Builder
	s := noise.Seeded(3)
	for u := range 40 {
		for i := range 12 {
			if s.Float64() < 0.6 {
				fmt.Fprintf(&sb, "%d\t%d\t%d\n", u+1, i+1, 1+s.IntN(5))
			}
		}
	}
	os.WriteFile(filepath.Join(data, "ml-1m", "ratings.tsv"), []byte(sb.String()), 0o644)
	out := t.TempDir()
	if _, err := r.Config("quick"); err == nil {
		t.Error("a measurement has no config")
	}
	if err := r.Measure(context.Background(), "quick", data, out, MeasureOptions{Only: TopNSubset{Seeds: []int{0}}}); err == nil {
		t.Error("a measurement that runs as a whole took a subset")
	}
	if err := r.Measure(context.Background(), "quick", data, out, MeasureOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, _ := os.ReadFile(filepath.Join(out, "report.md"))
	for _, want := range []string{"Top eigenvalues", "| 1 |", "| 20 |"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
}

func TestReproductionNamesSorted(t *testing.T) {
	var names []string
	for _, r := range Reproductions() {
		names = append(names, r.Name)
	}
	if !sort.StringsAreSorted(names) || len(names) < 17 {
		t.Fatalf("reproductions %v", names)
	}
}
