package devicemodel_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/devicemodel"
	"github.com/privrec/privrec/dap/fleet"
	"github.com/privrec/privrec/internal/ratingstest"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
)

// data is 60 users' ratings of 12 items (1–5), deterministic.
func data(t *testing.T) (*ratings.Matrix, *model.Catalogue) {
	t.Helper()
	m, cat, err := ratingstest.Pattern(60, 12, "i%02d")
	if err != nil {
		t.Fatal(err)
	}
	return m, cat
}

// TestBuildMatchesOrchestrator trains dpals, dp-bias, dp-ease and dp-ials (two
// tasks: the counts, then the Gram over the covered items) through two real
// aggregators (in-process servers on loopback), publishes each recipe at
// the leader, and rebuilds each model from the recipe and the releases
// as a device does: the model is the orchestrator's, number for number,
// and so are a user's recommendations. A release out of order, or one
// whose task differs from what the method asks for, is refused.
func TestBuildMatchesOrchestrator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the two aggregators (a few seconds)")
	}
	ctx := context.Background()
	m, cat := data(t)
	p, err := fleet.StartPair(ctx, t.TempDir(), 1e6, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f := &fleet.Fleet{Leader: p.LeaderURL, Helper: p.HelperURL, AdminToken: p.AdminToken, BudgetRho: 1e6}
	if err := f.Enrol(ctx, m.NumUsers()); err != nil {
		t.Fatal(err)
	}
	sc := release.Scale{Min: 1, Max: 5}
	for _, name := range []string{"dpals", "dp-bias", "dp-ease", "dp-ials"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := methods.Configure(name, nil)
			if err != nil {
				t.Fatal(err)
			}
			var fe *fleet.Engine
			const seed = 5
			env := methods.Env{Epsilon: 8, Delta: 1e-6, Seed: seed, Rand: noise.Seeded(seed), Noise: noise.Secure(),
				Engine: func(plan statistic.RowPlan) (statistic.Engine, error) {
					fe = &fleet.Engine{Fleet: f, Plan: plan, Devices: m.NumUsers(), StepBits: 8, GramStepBits: 9, Prefix: "b-" + name,
						Ratings: func(u int) ([]string, []float64) { return m.UserRatings(int32(u)) }}
					return fe, nil
				}}
			rel, err := methods.Train(ctx, name, cfg, release.Input{Declared: release.Declared{Scale: &sc, Catalogue: cat}}, env)
			if err != nil {
				t.Fatal(err)
			}
			rec := fe.Recipe("model-"+name, name, nil, 8, 1e-6, seed, [2]float64{1, 5})
			if err := f.PublishModel(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if err := f.PublishModel(ctx, rec); err == nil {
				t.Error("the same recipe was published twice")
			}
			got, rels, err := devicemodel.Fetch(ctx, &dap.Client{Leader: p.LeaderURL}, rec.Name)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d tasks %v, rank %d", name, len(rels), got.Tasks, rel.Model().Rank)
			dm, err := devicemodel.Build(ctx, got, rels, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := rel.Model()
			if a, b := modelJSON(t, dm), modelJSON(t, want); a != b {
				i := 0
				for i < len(a) && i < len(b) && a[i] == b[i] {
					i++
				}
				t.Fatalf("the device's model differs from the orchestrator's at byte %d:\n%.200s\n%.200s", i, a[max(0, i-80):], b[max(0, i-80):])
			}
			ids, vals := m.UserRatings(3)
			mine := client.Ratings{}
			for k, id := range ids {
				mine[id] = vals[k]
			}
			a, err := client.RecommendFrom(dm, mine, 5)
			if err != nil {
				t.Fatal(err)
			}
			b, err := client.RecommendFrom(want, mine, 5)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a, b) || len(a) == 0 {
				t.Errorf("recommendations %v, orchestrator's %v", a, b)
			}
			// Refusals: the releases reversed; a task's ρ changed.
			if len(rels) > 1 {
				rev := slices.Clone(rels)
				slices.Reverse(rev)
				r2 := got
				r2.Tasks = slices.Clone(got.Tasks)
				slices.Reverse(r2.Tasks)
				if _, err := devicemodel.Build(ctx, r2, rev, nil); err == nil {
					t.Error("releases in the wrong order were accepted")
				}
			}
			bad := slices.Clone(rels)
			bad[0].Task.Rho *= 2
			if bad[0].Task, err = dap.NewTask(bad[0].Task); err != nil {
				t.Fatal(err)
			}
			if _, err := devicemodel.Build(ctx, got, bad, nil); err == nil {
				t.Error("a release whose task's ρ differs was accepted")
			}
		})
	}
}

func modelJSON(t *testing.T, m *model.Model) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
