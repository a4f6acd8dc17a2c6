package fleet

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/internal/ratingstest"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
)

// testData is 40 users' ratings of 8 items (1–5), deterministic.
func testData(t *testing.T) (*ratings.Matrix, *model.Catalogue) {
	t.Helper()
	m, cat, err := ratingstest.Pattern(40, 8, "i%d")
	if err != nil {
		t.Fatal(err)
	}
	return m, cat
}

func newEngine(t *testing.T, m *ratings.Matrix, plan statistic.RowPlan) (*Engine, *Pair) {
	t.Helper()
	ctx := context.Background()
	p, err := StartPair(ctx, t.TempDir(), 1e6, 11, 12)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f := &Fleet{Leader: p.LeaderURL, Helper: p.HelperURL, AdminToken: p.AdminToken, BudgetRho: 1e6}
	if err := f.Enrol(ctx, m.NumUsers()); err != nil {
		t.Fatal(err)
	}
	return &Engine{Fleet: f, Plan: plan, Devices: m.NumUsers(), StepBits: 8, GramStepBits: 12, Prefix: "t",
		Ratings: func(u int) ([]string, []float64) { return m.UserRatings(int32(u)) }}, p
}

// TestEngineSumMatchesInProcess: the aggregators' release of the bias
// statistics at a huge ρ equals the in-process sum within the stated
// quantization error (< step per user and coordinate, toward zero) plus
// 6 standard deviations of the noise (false failure < 1e-8 per
// coordinate).
func TestEngineSumMatchesInProcess(t *testing.T) {
	ctx := context.Background()
	m, cat := testData(t)
	plan := statistic.RowPlan{Catalogue: cat.IDs(), Clamp: &[2]float64{1, 5}}
	e, _ := newEngine(t, m, plan)
	e.Fleet.AggregateEvery = 7 // aggregation jobs while devices upload; the sum spans them
	c := &statistic.Bias{Items: cat.Len(), Mid: 3, Half: 2, Clip: 2, Spread: true}
	mech, err := statistic.Mechanism(c.Spec(), 1e4, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	got, sd, err := e.SumNoised(ctx, c, mech)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := dap.NewDevice(e.Tasks[0])
	if err != nil {
		t.Fatal(err)
	}
	want, err := statistic.Sum(ctx, m.NumUsers(), func(u int) statistic.Row { return dev.RowOf(m.UserRatings(int32(u))) }, c)
	if err != nil {
		t.Fatal(err)
	}
	tk := e.Tasks[0]
	if sd != tk.ReleaseSD() || sd < math.Sqrt2*mech.Sigma()*0.999 {
		t.Errorf("noise sd %v: want the task's %v, ≥ √2·%v", sd, tk.ReleaseSD(), mech.Sigma())
	}
	tol := float64(m.NumUsers())*tk.Step + 6*tk.ReleaseSD()
	for j := range want {
		if d := math.Abs(got[j] - want[j]); d > tol {
			t.Errorf("coordinate %d: aggregators %v, in-process %v (|Δ| %v > %v)", j, got[j], want[j], d, tol)
		}
	}
	if st := e.Stats[0]; st.Accepted != m.NumUsers() || st.Rejected != 0 || st.ReportBytes == 0 || st.AggregateCalls < 2 {
		t.Errorf("stats %+v", st)
	}
	if _, err := e.Sum(ctx, c); err == nil {
		t.Error("the engine returned a sum without noise")
	}
}

// TestMethodsThroughAggregators trains dp-bias, dp-popularity and dp-ease with the
// aggregators as their engine (each statistic one task) and checks the
// releases are models of the catalogue, released without per-user state.
func TestMethodsThroughAggregators(t *testing.T) {
	ctx := context.Background()
	m, cat := testData(t)
	sc := release.Scale{Min: 1, Max: 5}
	in := release.Input{Declared: release.Declared{Scale: &sc, Catalogue: cat}}
	for _, name := range []string{"dp-bias", "dp-popularity", "dp-ease"} {
		t.Run(name, func(t *testing.T) {
			var e *Engine
			env := methods.Env{Epsilon: 4, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(2),
				Engine: func(plan statistic.RowPlan) (statistic.Engine, error) {
					e, _ = newEngine(t, m, plan)
					return e, nil
				}}
			cfg, err := methods.Configure(name, nil)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := methods.Train(ctx, name, cfg, in, env)
			if err != nil {
				t.Fatal(err)
			}
			if rel.PerUser != nil || rel.Public == nil || len(e.Tasks) == 0 {
				t.Fatalf("release %+v, %d tasks", rel, len(e.Tasks))
			}
			for _, tk := range e.Tasks {
				if tk.Rho <= 0 || tk.Relation != "replace-user" || tk.Noise != "each-alone" {
					t.Errorf("task %+v", tk)
				}
			}
		})
	}
}

// TestDPALSStepsZero: dpals with --steps 0 trains through the
// aggregators: its bias statistics and its covariance features (planned
// here on every item: cov_users_per_item 0) each become one task, the
// covariance summed and noised by the aggregators (never an un-noised
// Engine.Sum), and the guarantee composes both.
func TestDPALSStepsZero(t *testing.T) {
	ctx := context.Background()
	m, cat := testData(t)
	sc := release.Scale{Min: 1, Max: 5}
	in := release.Input{Declared: release.Declared{Scale: &sc, Catalogue: cat}}
	var e *Engine
	env := methods.Env{Epsilon: 4, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(2),
		Engine: func(plan statistic.RowPlan) (statistic.Engine, error) {
			e, _ = newEngine(t, m, plan)
			return e, nil
		}}
	cfg, err := methods.Configure("dpals", map[string]any{"steps": 0.0, "cov_users_per_item": 0.0, "cov_rank": 2.0, "rank": 7.0})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := methods.Train(ctx, "dpals", cfg, in, env)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, tk := range e.Tasks {
		kinds = append(kinds, tk.Statistic)
	}
	if len(kinds) != 2 || kinds[1] != "the item covariance" {
		t.Fatalf("tasks %q: want the bias statistics, then the item covariance", kinds)
	}
	if got := rel.Report["cov_items"]; got != cat.Len() {
		t.Errorf("covariance over %v items, want %d", got, cat.Len())
	}
	if s, _ := rel.Report["sigma_cov"].(float64); !(s > 0) || !strings.Contains(rel.Guarantee.Note, "Item covariance") {
		t.Errorf("σ of the covariance %v, guarantee %q", rel.Report["sigma_cov"], rel.Guarantee.Note)
	}
	if tk := e.Tasks[1]; tk.Bits < 2 || tk.Min >= 0 {
		t.Errorf("covariance task %+v: want signed coordinates", tk)
	}
}

// TestDPEASEWithinDeviceBudget: with a device budget (MaxReportElements)
// dp-ease covers the most items whose Gram a device affords, never a task
// beyond the budget; without one it covers what its rule plans.
func TestDPEASEWithinDeviceBudget(t *testing.T) {
	ctx := context.Background()
	m, cat := testData(t)
	in := release.Input{Declared: release.Declared{Catalogue: cat}}
	for _, tc := range []struct {
		budget, want int
	}{
		{200, 5}, // 5 items: 15 coordinates × 13 bits = 195; 6 items: 273
		{300, 6}, // 6 items: 273; 7 items: 28 × 13 = 364
		{0, 8},   // the default budget: the rule's plan (the whole catalogue here)
		{100, 3}, // 3 items: 6 × 13 = 78 (and the counts: 8 × 9 bits = 72)
		{30, -1}, // not even the counts fit: refused, nothing released
	} {
		t.Run(fmt.Sprint(tc.budget), func(t *testing.T) {
			var a *Arith
			env := methods.Env{Epsilon: 8, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(2),
				Engine: func(plan statistic.RowPlan) (statistic.Engine, error) {
					a = &Arith{Engine: Engine{Plan: plan, Devices: m.NumUsers(), StepBits: 8, GramStepBits: 12, MaxReportElements: tc.budget, Prefix: "b",
						Ratings: func(u int) ([]string, []float64) { return m.UserRatings(int32(u)) }},
						LeaderNoise: noise.Seeded(3), HelperNoise: noise.Seeded(4)}
					return a, nil
				}}
			cfg, err := methods.Configure("dp-ease", map[string]any{"cover_scale": 10.0})
			if err != nil {
				t.Fatal(err)
			}
			rel, err := methods.Train(ctx, "dp-ease", cfg, in, env)
			if tc.want < 0 {
				if err == nil || !strings.Contains(err.Error(), "too large") {
					t.Fatalf("want a too-large error, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rel.Report["covered_items"]; got != tc.want || rel.Report["covered_items_planned"] != 8 {
				t.Errorf("covered %v (planned %v), want %d (planned 8)", got, rel.Report["covered_items_planned"], tc.want)
			}
			for _, tk := range a.Tasks {
				if tc.budget > 0 && tk.Dimension*tk.Bits > tc.budget {
					t.Errorf("task %s: %d × %d field elements beyond the budget %d", tk.ID, tk.Dimension, tk.Bits, tc.budget)
				}
			}
		})
	}
}

// TestDPALSStepsRefused: dpals' ALS steps need each step's un-noised sum
// (their release is per item, on the driver), which the aggregators never
// return: --steps 2 through them is refused before any task is opened.
func TestDPALSStepsRefused(t *testing.T) {
	m, cat := testData(t)
	sc := release.Scale{Min: 1, Max: 5}
	in := release.Input{Declared: release.Declared{Scale: &sc, Catalogue: cat}}
	var e *Engine
	env := methods.Env{Epsilon: 4, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(2),
		Engine: func(plan statistic.RowPlan) (statistic.Engine, error) {
			e, _ = newEngine(t, m, plan)
			return e, nil
		}}
	cfg, err := methods.Configure("dpals", map[string]any{"steps": 2.0})
	if err != nil {
		t.Fatal(err)
	}
	_, err = methods.Train(context.Background(), "dpals", cfg, in, env)
	if err == nil || !strings.Contains(err.Error(), "adds its own noise") {
		t.Fatalf("err = %v, want --steps refused", err)
	}
	if e != nil && len(e.Tasks) != 0 {
		t.Errorf("%d tasks opened before the refusal", len(e.Tasks))
	}
}
