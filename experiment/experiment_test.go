package experiment

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// trainCalls counts fake trainings; cancelAfter, when > 0, cancels
// cancelFn once that many trainings have started (an interrupted sweep).
var (
	trainCalls  atomic.Int64
	cancelAfter atomic.Int64
	cancelFn    atomic.Value // context.CancelFunc
)

func init() {
	// A fake private method: the training mean plus Laplace noise of scale
	// 1/ε, so error falls with ε. Its guarantee is made up for the test.
	methods.Register(&methods.Method{
		Name: "test-noisy-mean", Summary: "test only", Private: true,
		Flags: func(fs *flag.FlagSet) methods.Trainer {
			shift := fs.Float64("shift", 0, "added to the prediction")
			return methods.TrainerFunc(func(ctx context.Context, data *ratings.Matrix, c methods.Common) (*methods.Result, error) {
				n := trainCalls.Add(1)
				if k := cancelAfter.Load(); k > 0 && n >= k {
					if f, ok := cancelFn.Load().(context.CancelFunc); ok {
						f()
					}
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				m := model.New("test-noisy-mean", data)
				m.U, m.V = []float64{}, []float64{}
				m.Offset = data.Mean() + noise.Laplace(c.Noise, 1/c.Epsilon) + *shift
				g := privacy.Guarantee{Epsilon: c.Epsilon, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven, Note: "fake, note, with commas"}
				return &methods.Result{Model: m, Guarantee: g}, nil
			})
		},
	})
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
		Datasets: []DataSpec{{Name: "toy", Source: "test-synth"}},
		Methods: []MethodSpec{
			{Method: "test-noisy-mean", Label: "noisy"},
			{Method: "test-noisy-mean", Label: "shifted", Flags: map[string]string{"shift": "0.5"}},
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
		{"bad delta", func(c *Config) { c.Delta = 2 }, "delta"},
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
}

func TestPlanUnknownMethod(t *testing.T) {
	c := testConfig()
	c.Methods = append(c.Methods, MethodSpec{Method: "no-such-method"})
	if _, err := Plan(c); err == nil || !strings.Contains(err.Error(), "no-such-method") || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("want a clear not-registered error, got %v", err)
	}
	c = testConfig()
	c.Methods[0].Flags = map[string]string{"nope": "1"}
	if _, err := Plan(c); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("want a flag error, got %v", err)
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
	if d := os.Getenv("PRIVREC_KEEP_TEST_OUTPUT"); d != "" {
		dir = d // to look at the figures: PRIVREC_KEEP_TEST_OUTPUT=/tmp/x go test -run WritesEverything
	}
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

func TestSweepOverDataAndFlag(t *testing.T) {
	for _, target := range []string{"data", "flag"} {
		t.Run(target, func(t *testing.T) {
			c := testConfig()
			c.Runs = 2
			c.Epsilons = []float64{1, 4}
			if target == "data" {
				c.Sweep = &Sweep{Name: "users", Target: "data", Values: []float64{5, 10}}
			} else {
				c.Methods[1].Flags = nil
				c.Sweep = &Sweep{Name: "shift", Target: "flag", Values: []float64{0, 1}}
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
				// The swept value reached the generator: 5 users → 5 test ratings.
				for _, r := range rows {
					if r.Value == 5 && r.N != 5 {
						t.Fatalf("run %s evaluated %d ratings, want 5", r.Key, r.N)
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

func TestDatasetMethodFlagsAndRestriction(t *testing.T) {
	c := testConfig()
	c.Datasets = append(c.Datasets, DataSpec{Name: "toy2", Source: "test-synth", MethodFlags: map[string]string{"shift": "100", "no-such-flag": "1"}})
	c.Methods[0].Datasets = []string{"toy2"}
	c.Runs, c.Epsilons = 1, []float64{1}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rows := byKey(runToDir(t, c, t.TempDir()))
	if rows["toy|noisy||eps=1|0"] != nil {
		t.Fatal("noisy ran on toy, which it is restricted away from")
	}
	// toy2 shifts every prediction by 100 (clamped to the data range), so
	// its RMSE is far above toy's; the spec's own shift (0.5) wins for "shifted".
	n2, s1, s2 := rows["toy2|noisy||eps=1|0"], rows["toy|shifted||eps=1|0"], rows["toy2|shifted||eps=1|0"]
	if n2 == nil || s1 == nil || s2 == nil {
		t.Fatalf("missing rows: %v", rows)
	}
	if n2.Metrics["rmse"] < 1.5 {
		t.Errorf("dataset method flag not applied: RMSE %g", n2.Metrics["rmse"])
	}
	if s2.Metrics["rmse"] > 1.5 {
		t.Errorf("dataset flag overrode the method's own flag: RMSE %g", s2.Metrics["rmse"])
	}
}

// Every flag a reproduction sets (a method's own, or a dataset's
// method_flags) must be a flag of one of its methods: a dataset flag no
// method has is silently skipped, so a typo (say "rho_0") would change
// nothing and go unnoticed.
func TestReproductionFlagsExist(t *testing.T) {
	for _, r := range Reproductions() {
		for _, scale := range []string{"quick", "paper"} {
			c, err := r.Config(scale)
			if err != nil {
				t.Fatalf("%s %s: %v", r.Name, scale, err)
			}
			has := map[string]bool{}
			for _, m := range c.Methods {
				reg, err := methods.Lookup(m.Method)
				if err != nil {
					continue // an unregistered method is reported by reproduce --list
				}
				if reg.Flags == nil {
					continue // typed Config: checked by methods.Configure
				}
				fs := flag.NewFlagSet(m.Method, flag.ContinueOnError)
				reg.Flags(fs)
				fs.VisitAll(func(f *flag.Flag) { has[f.Name] = true })
				for k := range m.Flags {
					if fs.Lookup(k) == nil {
						t.Errorf("%s: method %s has no flag --%s", c.Name, m.LabelOf(), k)
					}
				}
			}
			for _, d := range c.Datasets {
				for k := range d.MethodFlags {
					if !has[k] {
						t.Errorf("%s: dataset %s sets --%s, which none of its methods has", c.Name, d.Name, k)
					}
				}
			}
		}
	}
}
