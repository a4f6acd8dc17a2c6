package methods

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/synth"
)

// dp-ials at a large ε finds a user's planted group far better than
// popularity (which cannot tell the equally popular groups apart), with
// the initial factors alone and with noised ALS steps; the model survives
// a save and a load; the guarantee covers ε under the user-replace
// relation. Fixed seeds: deterministic. Measured margins: dp-ials
// Recall@10 ≥ 0.8 in every row against popularity's ≈ 0.3, so the
// thresholds (≥ 0.6 and 0.2 above popularity) leave room for changes of
// the noise stream.
func TestDPIALSOnPlantedGroups(t *testing.T) {
	heldOut := plantedHeldOut(t)
	recallOf := func(method string, params map[string]any, eps float64) (float64, *release.Release) {
		t.Helper()
		rep, rel := heldOut(method, params, eps)
		return rep.Recall[10], rel
	}
	pop, _ := recallOf("popularity", map[string]any{"positive": 4.0}, 0)
	for _, tc := range []struct {
		name   string
		params map[string]any
	}{
		{"planned", map[string]any{"positive": 4.0}},
		{"init only", map[string]any{"positive": 4.0, "steps": 0}},
		{"two steps", map[string]any{"positive": 4.0, "steps": 2, "step_cover": 0.0}},
		{"two steps, no per-item gram", map[string]any{"positive": 4.0, "steps": 2, "step_cover": 0.0, "gram_scale": 0.0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const eps = 50
			got, rel := recallOf("dp-ials", tc.params, eps)
			t.Logf("dp-ials Recall@10 %.3f, popularity %.3f; report %v", got, pop, rel.Report)
			if got < 0.6 || got < pop+0.2 {
				t.Errorf("Recall@10 = %.3f, popularity %.3f", got, pop)
			}
			g := rel.Guarantee
			if !g.Private() || g.Epsilon > eps*(1+1e-9) || g.Relation != privacy.RelationUserReplace || g.Notion != privacy.Joint || g.Unit != privacy.UnitUser {
				t.Errorf("guarantee %+v", g)
			}
			if steps, _ := tc.params["steps"].(int); steps > 0 && rel.Report["steps"] != steps {
				t.Errorf("ran %v steps, asked for %d", rel.Report["steps"], steps)
			}
		})
	}
}

// On a Netflix-like synthetic population (power-law popularity, genre
// taste) dp-ials at ε = 8 with one step beats popularity on held-out
// users. The user ridge λ = 0.01 suits this population better than the
// MovieLens-tuned default (0.003). Fixed seeds: deterministic; measured
// Recall@20 0.421 against 0.286 (0.317 before the factors were scaled to
// the users' ridge, issue 39), so the margin asked for (0.02) leaves room.
func TestDPIALSSyntheticImplicit(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on 20 000 users")
	}
	cfg := synth.ImplicitConfig{Users: 20000, Items: 500, Interactions: 500_000, Rank: 8, PopExponent: 0.8, ActivitySpread: 0.8, Taste: 0.6}
	in, sp := implicitHeldOut(t, cfg, 4, 800)
	recall := map[string]float64{}
	for _, tc := range []struct {
		method string
		params map[string]any
	}{{"popularity", nil}, {"dp-ials", map[string]any{"steps": 1, "lambda": 0.01}}} {
		c, err := Configure(tc.method, tc.params)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := Train(context.Background(), tc.method, c, in, Env{Epsilon: 8, Delta: 1e-6, Noise: noise.Seeded(5), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := EvaluateHeldOut(context.Background(), rel.Model(), sp.TestHistory, sp.TestTargets, HeldOutOptions{Ks: []int{20}})
		if err != nil {
			t.Fatal(err)
		}
		recall[tc.method] = rep.Recall[20]
		t.Logf("%s Recall@20 %.3f %v", tc.method, rep.Recall[20], rel.Report)
	}
	if recall["dp-ials"] < recall["popularity"]+0.02 {
		t.Errorf("dp-ials %.3f does not beat popularity %.3f", recall["dp-ials"], recall["popularity"])
	}
}

// The whole-artefact audit finds no un-noised field, no canary and no
// privacy loss above the claim, with the defaults (on the audit's tiny
// data only the counts and the initial Gram are released) and with every
// item covered and two steps, so that the steps' releases run. Fixed
// seeds: deterministic; for a correct method the Clopper–Pearson bound
// exceeds the claim with probability ≤ 5 % over seeds.
func TestDPIALSAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the method a few hundred times")
	}
	for _, tc := range []struct {
		name   string
		params map[string]any
	}{
		{"defaults", nil},
		{"steps", map[string]any{"steps": 2, "step_cover": 0.0, "cover_scale": 50.0, "init_denoise": 0.0, "rank": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Configure("dp-ials", tc.params)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Audit(context.Background(), "dp-ials", cfg, AuditOptions{ReleaseRuns: raceReleaseRuns, Epsilon: 1, Delta: 1e-5, Runs: 6, Samples: 150, Seed: 23})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Violation || len(rep.Differences) > 0 || len(rep.Canaries) > 0 {
				t.Fatalf("audit found a violation: %+v", rep)
			}
			if rep.Noised == 0 {
				t.Errorf("no noised field: %+v", rep)
			}
			t.Logf("ε lower bound %.3f (claimed %.3f) on %s", rep.EpsilonLowerBound, rep.ClaimedEpsilon, rep.Statistic)
		})
	}
}

// Bad settings are errors naming the flag; a missing catalogue names
// --items.
func TestDPIALSBadInput(t *testing.T) {
	data, cat := plantedTopN(t, 50, 2, 5, 0.5, 0.1, 2)
	scale := release.Scale{Min: 1, Max: 5}
	full := release.Input{Ratings: data, Declared: release.Declared{Scale: &scale, Catalogue: cat}}
	noCat := release.Input{Ratings: data, Declared: release.Declared{Scale: &scale}}
	for _, tc := range []struct {
		params map[string]any
		in     release.Input
		want   string
	}{
		{nil, noCat, "--items"},
		{map[string]any{"positive": 6.0}, full, "--positive 6 is above the declared scale"},
		{map[string]any{"rank": 0}, full, "--rank"},
		{map[string]any{"steps": -2}, full, "--steps"},
		{map[string]any{"steps": 21}, full, "--steps"},
		{map[string]any{"count_share": 0.0}, full, "--count-share"},
		{map[string]any{"init_share": 0.95}, full, "--init-share"},
		{map[string]any{"row_clip": 0.0}, full, "--row-clip"},
		{map[string]any{"rhs_scale": -1.0}, full, "--rhs-scale"},
		{map[string]any{"global_scale": 0.0}, full, "--global-scale"},
		{map[string]any{"gram_scale": -1.0}, full, "--gram-scale"},
		{map[string]any{"weight_exponent": 3.0}, full, "--weight-exponent"},
		{map[string]any{"nu": 5.0}, full, "--nu"},
		{map[string]any{"item_lambda": 0.0}, full, "--item-lambda"},
		{map[string]any{"max_init_items": 1}, full, "--max-init-items"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			cfg, err := Configure("dp-ials", tc.params)
			if err == nil {
				_, err = Train(context.Background(), "dp-ials", cfg, tc.in, Env{Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1)})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// The planned number of steps grows with users and budget, and a
// cancelled context stops training.
func TestDPIALSPlanAndCancel(t *testing.T) {
	prev := 0
	for _, users := range []int{100, 6000, 100000, 1000000} {
		s := planSteps(users, 1)
		if s < prev || s > 20 {
			t.Errorf("%d users: %d steps (previous %d)", users, s, prev)
		}
		prev = s
	}
	data, cat := plantedTopN(t, 300, 2, 5, 0.5, 0.1, 3)
	in := release.Input{Ratings: data, Declared: release.Declared{Catalogue: cat}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Train(ctx, "dp-ials", DefaultDPIALS(), in, Env{Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1)}); err == nil {
		t.Error("training ignored a cancelled context")
	}
}

// Every release honours Env.NoiseFactor (the audit's under-noising knob):
// with the noise scaled by 10⁻⁹ two trainings on different noise streams
// give the same model up to rounding, which they would not if any release
// drew its noise at full scale (checked by making the steps' release
// ignore the factor: the test then fails). Deterministic (fixed seeds).
func TestDPIALSHonoursNoiseFactor(t *testing.T) {
	data, cat := plantedTopN(t, 600, 3, 10, 0.5, 0.05, 4)
	in := release.Input{Ratings: data, Declared: release.Declared{Catalogue: cat}}
	params := map[string]any{"positive": 4.0, "steps": 2, "step_cover": 0.0}
	train := func(noiseSeed uint64, factor float64) *model.Model {
		cfg, err := Configure("dp-ials", params)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := Train(context.Background(), "dp-ials", cfg, in, Env{Epsilon: 1, Delta: 1e-6,
			Noise: noise.Seeded(noiseSeed), Rand: noise.Seeded(9), Seed: 9, NoiseFactor: factor})
		if err != nil {
			t.Fatal(err)
		}
		if rel.Report["steps"] != 2 {
			t.Fatalf("ran %v steps, want 2", rel.Report["steps"])
		}
		return rel.Model()
	}
	// Compared through what users see — their scores from their own
	// histories — which do not depend on the factors' basis (the planted
	// groups give equal eigenvalues, whose eigenvectors any perturbation
	// rotates), and the released counts.
	maxDiff := func(a, b *model.Model) float64 {
		d := 0.0
		for i := range a.ItemBias {
			d = max(d, math.Abs(a.ItemBias[i]-b.ItemBias[i])*1e9) // counts
		}
		sa, sb := make([]float64, len(a.Items)), make([]float64, len(b.Items))
		for u := range int32(40) {
			items, _ := data.UserRow(u)
			var names []string
			var vals []float64
			for _, j := range items {
				names = append(names, data.Items.Name(j))
				vals = append(vals, 5)
			}
			ua, err := a.FoldInUser("u", names, vals)
			if err != nil {
				t.Fatal(err)
			}
			ub, err := b.FoldInUser("u", names, vals)
			if err != nil {
				t.Fatal(err)
			}
			a.Scores(ua, sa)
			b.Scores(ub, sb)
			for i := range sa {
				d = max(d, math.Abs(sa[i]-sb[i]))
			}
		}
		return d
	}
	if d := maxDiff(train(1, 1e-9), train(2, 1e-9)); d > 1e-4 {
		t.Errorf("with the noise scaled by 1e-9 two noise streams differ by %g", d)
	}
	if d := maxDiff(train(1, 1), train(2, 1)); d < 1e-2 {
		t.Errorf("with full noise two noise streams differ by only %g", d)
	}
}

// TestDPIALSPlanAtTwoScales: the most factors dp-ials' plan allows grows
// with the covered items of its initial Gram, which grow with N·√ρ: on
// MovieLens-1M (6 040 users) it is 64 and 81 at ε = 1 and 8 (where 10
// and 31 eigenpairs clear the noise), on Jester-1's 100 jokes 64, and
// on the 469 255-user Netflix-shaped population's 2 000 covered items it
// is 250 at every ε (where rank 64 bound at every ε, issue 39). A smaller
// --rank is kept as given; with noised steps the cap stays 64.
func TestDPIALSPlanAtTwoScales(t *testing.T) {
	c := DefaultDPIALS()
	for _, tc := range []struct {
		name         string
		users, items int
		eps          float64
		m, rankCap   int
	}{
		{"MovieLens-1M ε = 1", 6_040, 3_706, 1, 186, 64},
		{"MovieLens-1M ε = 8", 6_040, 3_706, 8, 651, 81},
		{"Jester-1 ε = 8", 43_109, 100, 8, 100, 64},
		{"Netflix-shaped 42 582 ε = 1", 42_582, 17_770, 1, 683, 85},
		{"Netflix-shaped 469 255 ε = 0.5", 469_255, 17_770, 0.5, 2_000, 250},
		{"Netflix-shaped 469 255 ε = 8", 469_255, 17_770, 8, 2_000, 250},
	} {
		rho, err := accountant.RhoForApprox(tc.eps, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		rhoInit := math.Nextafter(rho-math.Nextafter(c.CountShare*rho, 0), 0)
		m := (&DPEASEConfig{CoverScale: c.CoverScale, MaxItems: c.MaxInitItems}).covered(tc.users, tc.items, rhoInit)
		if k := c.planRank(m, 0); m != tc.m || k != tc.rankCap {
			t.Errorf("%s: %d covered items, rank cap %d; want %d, %d", tc.name, m, k, tc.m, tc.rankCap)
		}
	}
	given := *c
	given.Rank = 32
	if k := given.planRank(2000, 0); k != 32 {
		t.Errorf("--rank 32: rank cap %d", k)
	}
	if k := c.planRank(2000, 1); k != 64 {
		t.Errorf("with a step: rank cap %d, want 64", k)
	}
}
