package methods

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/topn"
	"github.com/privrec/privrec/transform"
)

// plantedTopN builds ratings on 1–5 for users in groups: a user of group g
// rates 5 each item of block g with probability pIn, and rates any item 2
// (not a positive at threshold 4) or, with probability pOut, 4. Every block
// is equally popular, so popularity cannot tell groups apart.
func plantedTopN(t *testing.T, users, groups, per int, pIn, pOut float64, seed uint64) (*ratings.Matrix, *model.Catalogue) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 11))
	n := groups * per
	ids := make([]string, n)
	for j := range ids {
		ids[j] = fmt.Sprintf("i%d", j)
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := ratings.NewBuilder(ratings.DupError)
	line := int64(0)
	for u := range users {
		g := u % groups
		for j := range n {
			v := 0.0
			switch {
			case j/per == g && r.Float64() < pIn:
				v = 5
			case r.Float64() < pOut:
				v = 4
			case r.Float64() < 0.05:
				v = 2
			}
			if v > 0 {
				line++
				if err := b.Add(fmt.Sprintf("u%d", u), ids[j], v, line); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m, cat
}

// TestTopNMethodsOnPlantedGroups trains every top-N method on planted
// groups and scores held-out users from their histories. The personalised
// models must find a user's block far better than popularity, whose
// Recall@10 is near the 1/groups share of each block; the private ones at
// a large ε. Fixed seeds; the thresholds sit well inside the margins seen
// (the personalised models reach ≥ 0.8, popularity ≈ 0.3).
// plantedHeldOut is the planted-groups problem split into training users
// and 200 held-out users (30 % of their positives as targets), and a
// function that trains a method on it, saves and reloads its public model
// (fold-in rule included) and returns the held-out report.
func plantedHeldOut(t *testing.T) func(method string, params map[string]any, eps float64) (*HeldOutReport, *release.Release) {
	t.Helper()
	data, cat := plantedTopN(t, 1200, 4, 15, 0.5, 0.01, 1)
	pos := transform.MinPerUser(transform.Positives(data, 4), 5)
	sp, err := transform.SplitUsers(pos, 0, 200, 0.3, 1)
	if err != nil {
		t.Fatal(err)
	}
	scale := release.Scale{Min: 1, Max: 5}
	in := release.Input{Ratings: sp.Train, Declared: release.Declared{Scale: &scale, Catalogue: cat}}
	return func(method string, params map[string]any, eps float64) (*HeldOutReport, *release.Release) {
		t.Helper()
		cfg, err := Configure(method, params)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := Train(context.Background(), method, cfg, in, Env{Epsilon: eps, Delta: 1e-6, Noise: noise.Seeded(3), Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var buf bytes.Buffer
		if err := rel.Model().Write(&buf); err != nil {
			t.Fatal(err)
		}
		m, err := model.Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := EvaluateHeldOut(context.Background(), m, sp.TestHistory, sp.TestTargets, HeldOutOptions{Ks: []int{10}})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return rep, rel
	}
}

func TestTopNMethodsOnPlantedGroups(t *testing.T) {
	heldOut := plantedHeldOut(t)
	recall := map[string]float64{}
	for _, c := range []struct {
		method string
		eps    float64
		min    float64
	}{
		{"popularity", 0, 0},
		{"ease", 0, 0.7},
		{"ials", 0, 0.7},
		{"dp-popularity", 1, 0},
		{"dp-ease", 50, 0.6},
	} {
		rep, rel := heldOut(c.method, map[string]any{"positive": 4.0}, c.eps)
		recall[c.method] = rep.Recall[10]
		t.Logf("%-14s Recall@10 %.3f coverage %.2f", c.method, rep.Recall[10], rep.Coverage[10])
		if rep.Recall[10] < c.min {
			t.Errorf("%s: Recall@10 = %.3f, want ≥ %.2f", c.method, rep.Recall[10], c.min)
		}
		if g := rel.Guarantee; c.eps > 0 && (!g.Private() || g.Epsilon > c.eps*(1+1e-9) || g.Relation == "") {
			t.Errorf("%s: guarantee %+v does not cover ε = %g with a stated relation", c.method, g, c.eps)
		}
	}
	if d := math.Abs(recall["dp-popularity"] - recall["popularity"]); d > 0.1 {
		t.Errorf("dp-popularity at ε = 1 is %.3f from popularity", d)
	}
}

// TestTopNBadInput: each bad setting or missing fact is an error naming
// the flag, before anything is trained.
func TestTopNBadInput(t *testing.T) {
	data, cat := plantedTopN(t, 50, 2, 5, 0.5, 0.1, 2)
	scale := release.Scale{Min: 1, Max: 5}
	full := release.Input{Ratings: data, Declared: release.Declared{Scale: &scale, Catalogue: cat}}
	noCat := release.Input{Ratings: data, Declared: release.Declared{Scale: &scale}}
	cases := []struct {
		method string
		params map[string]any
		in     release.Input
		want   string
	}{
		{"ease", map[string]any{"positive": 6.0}, full, "--positive 6 is above the declared scale"},
		{"dp-ease", map[string]any{"positive": 4.0}, noCat, "--items"},
		{"dp-popularity", nil, noCat, "--items"},
		{"ease", map[string]any{"lambda": -1.0}, full, "--lambda"},
		{"ials", map[string]any{"rank": 0}, full, "rank"},
		{"ials", map[string]any{"lambda_norm": -1.0}, full, "--lambda-norm"},
		{"ials", map[string]any{"epochs": 0, "epoch_work": 0.0}, full, "--epochs"},
		{"ials", map[string]any{"warm_share": 1.0}, full, "--warm-share"},
		{"dp-ease", map[string]any{"count_share": 1.0}, full, "--count-share"},
		{"dp-popularity", map[string]any{"cap": 0.5}, full, "--cap"},
		{"dp-ease", map[string]any{"lambda_diag": 4.0}, full, "--lambda-diag-max 3 must be finite and ≥ --lambda-diag 4"},
		{"popularity", map[string]any{"positive": []float64{3, 4}}, full, "--positive takes one threshold"},
	}
	for _, c := range cases {
		t.Run(c.method+"/"+c.want, func(t *testing.T) {
			cfg, err := Configure(c.method, c.params)
			if err == nil {
				_, err = Train(context.Background(), c.method, cfg, c.in, Env{Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1)})
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

// TestDPEASECoverPlan: the covered items grow with users and budget and
// stay within the bounds.
func TestDPEASECoverPlan(t *testing.T) {
	c := NewDPEASEDefaults()
	prev := 0
	for _, users := range []int{100, 1000, 10000, 100000} {
		m := c.covered(users, 3000, 0.02)
		if m < prev || m < 2 || m > c.MaxItems {
			t.Errorf("%d users: %d covered items (previous %d)", users, m, prev)
		}
		prev = m
	}
	if c.covered(1000000, 50, 1) != 50 {
		t.Error("covered items exceed the catalogue")
	}
}

// TestDPEASERidge: dp-ease's ridge coefficient is lambda-diag for a
// small kept model, grows with the kept eigenpairs (r/lambda-rank) and
// stops at lambda-diag-max (ease's 3); equal bounds fix it.
func TestDPEASERidge(t *testing.T) {
	c := NewDPEASEDefaults()
	const diag, edge = 100.0, 50.0
	cases := []struct {
		kept int
		coef float64
	}{
		{0, 1},  // nothing kept
		{48, 1}, // MovieLens-1M at ε = 8
		{96, 1.5},
		{160, 2.5},
		{256, 3}, // the rank cap
	}
	for _, k := range cases {
		r := c.ridge(diag, edge, k.kept)
		if math.Abs(r.Coef-k.coef) > 1e-9 || math.Abs(r.Lambda-(k.coef*diag+c.LambdaScale*edge)) > 1e-6 {
			t.Errorf("%d kept: coefficient %g λ %g, want %g", k.kept, r.Coef, r.Lambda, k.coef)
		}
	}
	c.LambdaDiagMax = c.LambdaDiag
	if r := c.ridge(diag, edge, 256); r.Coef != c.LambdaDiag {
		t.Errorf("lambda-diag-max = lambda-diag: coefficient %g, want %g", r.Coef, c.LambdaDiag)
	}
}

// TestIALSPlanAtTwoScales: the default ials plan on MovieLens-1M's
// training shape is its validation-best λ = 0.01 (within 1 %) and 16
// epochs; on the 469 255-user Netflix-shaped population it is λ ≈ 0.0054
// (the same as at 42 582 users: the same density), and the budget that
// does not reach 16 full epochs goes to 8 warm-start epochs on an eighth
// of the users and 4 full ones. Given settings are kept as they are.
func TestIALSPlanAtTwoScales(t *testing.T) {
	c, err := Configure("ials", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.(*IALSConfig)
	for _, tc := range []struct {
		name                       string
		users, items, interactions int
		lambda                     float64
		epochs, warm               int
	}{
		{"MovieLens-1M", 4_834, 3_706, 457_763, 0.01, 16, 0},
		{"Netflix-shaped 42 582", 42_582, 17_770, 4_759_913, 0.0054, 16, 0},
		{"Netflix-shaped 469 255", 469_255, 17_770, 52_491_391, 0.0054, 4, 8},
	} {
		p := cfg.plan(tc.users, tc.items, tc.interactions)
		if math.Abs(p.lambda-tc.lambda) > 0.01*tc.lambda || p.epochs != tc.epochs || p.warmEpochs != tc.warm {
			t.Errorf("%s: λ = %.5f, %d + %d warm epochs; want λ = %g (±1 %%), %d + %d", tc.name, p.lambda, p.epochs, p.warmEpochs, tc.lambda, tc.epochs, tc.warm)
		}
		// The report's warm_share is the plan's: the configured share only where a warm start runs.
		if wantShare := map[bool]float64{true: cfg.WarmShare, false: 0}[tc.warm > 0]; p.warmShare != wantShare {
			t.Errorf("%s: warm share %g with %d warm epochs, want %g", tc.name, p.warmShare, tc.warm, wantShare)
		}
		work := float64(p.epochs)*topn.IALSEpochWork(tc.users, tc.items, tc.interactions, cfg.Rank, cfg.CGSteps) +
			topn.IALSWarmWork(tc.users, tc.items, tc.interactions, cfg.Rank, cfg.CGSteps, cfg.WarmShare, p.warmEpochs)
		if p.epochs < 16 && work > cfg.EpochWork*1e9 {
			t.Errorf("%s: the plan's work %.3g exceeds the budget %.3g", tc.name, work, cfg.EpochWork*1e9)
		}
	}
	cold := *cfg
	cold.WarmShare = 0
	if p := cold.plan(469_255, 17_770, 52_491_391); p.epochs != 5 || p.warmEpochs != 0 {
		t.Errorf("--warm-share 0: %d + %d warm epochs, want 5 + 0", p.epochs, p.warmEpochs)
	}
	given := *cfg
	given.Lambda, given.Epochs = 0.03, 7
	if p := given.plan(469_255, 17_770, 52_491_391); p.lambda != 0.03 || p.epochs != 7 || p.warmEpochs != 0 {
		t.Errorf("--lambda 0.03 --epochs 7 planned as λ = %g, %d epochs", p.lambda, p.epochs)
	}
}
