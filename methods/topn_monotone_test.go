package methods

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/synth"
	"github.com/privrec/privrec/transform"
)

// monotoneEpsilons is the ε grid of the top-N sweep.
var monotoneEpsilons = []float64{0.5, 1, 2, 4, 8, 16}

// privateTopNRecall trains method on a small Netflix-shaped population
// (synth.Implicit: 5 000 users × 200 items, power-law popularity, genre
// taste; 500 held-out users, 20 % of their items as targets) at every ε of
// the grid with noise seeds base, base+1, base+2 and returns the mean
// held-out Recall@20 per ε.
func privateTopNRecall(t *testing.T, method string, base uint64, in release.Input, sp *transform.UserSplit) []float64 {
	t.Helper()
	out := make([]float64, len(monotoneEpsilons))
	for e, eps := range monotoneEpsilons {
		for s := range uint64(3) {
			cfg, err := Configure(method, nil)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := Train(context.Background(), method, cfg, in, Env{Epsilon: eps, Delta: 1e-6, Noise: noise.Seeded(base + s), Seed: 1})
			if err != nil {
				t.Fatalf("%s ε = %g: %v", method, eps, err)
			}
			rep, err := EvaluateHeldOut(context.Background(), rel.Model(), sp.TestHistory, sp.TestTargets, HeldOutOptions{Ks: []int{20}})
			if err != nil {
				t.Fatal(err)
			}
			out[e] += rep.Recall[20] / 3
		}
	}
	return out
}

// implicitHeldOut generates cfg's population (synth.ImplicitMatrix with
// seed), holds out test users with 20 % of their items as targets (users
// with ≥ 5 items; split seed 2) and returns the training input on the
// population's catalogue and the split.
func implicitHeldOut(t *testing.T, cfg synth.ImplicitConfig, seed uint64, test int) (release.Input, *transform.UserSplit) {
	t.Helper()
	data, err := synth.ImplicitMatrix(context.Background(), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := transform.SplitUsers(transform.MinPerUser(data, 5), 0, test, 0.2, 2)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := model.NewCatalogue(data.Items.Names(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return release.Input{Ratings: sp.Train, Declared: release.Declared{Catalogue: cat}}, sp
}

// TestDPEASENeverWorseForMoreBudget: on a synthetic population dp-ease's
// held-out Recall@20 (mean of 3 noise seeds) does not fall as ε grows
// (each ε's mean ≥ the previous one's − 0.01) and is never below
// dp-popularity's at the same ε (− 0.005). The ridge in units of the
// noise alone (lambda-diag 0, lambda-scale 0.3, the rule before issue 39)
// fails it: 0.507 at ε = 4, 0.432 at ε = 16. Fixed seeds:
// deterministic. False failures: over the noise seed triples
// PRIVREC_MONOTONE_SEED=1…10 (triple 100+3k…, the data fixed) and the
// default, all 11 runs passed with the ridge that follows the kept
// eigenpairs (and with the fixed a = 1 before it); the largest step down
// was 0.0007 (0.0049 before; 0.01 allowed) and dp-ease's smallest lead
// over dp-popularity +0.005 (at ε = 0.5). By count alone that bounds the false-failure rate of a
// new seed triple below 25 % (95 %); the margins put it well under that.
func TestDPEASENeverWorseForMoreBudget(t *testing.T) {
	cfg := synth.ImplicitConfig{Users: 5000, Items: 200, Interactions: 150_000, Rank: 8, PopExponent: 0.8, ActivitySpread: 0.8, Taste: 0.5}
	neverWorseForMoreBudget(t, "dp-ease", cfg, 7)
}

// neverWorseForMoreBudget trains method and dp-popularity on cfg's
// population (data seed dataSeed, 500 held-out users) at every ε of the
// grid with 3 noise seeds (100, 101, 102, or the triple 100 + 3k with
// PRIVREC_MONOTONE_SEED=k) and fails when method's mean Recall@20 falls by
// more than 0.01 from one ε to the next or is more than 0.005 below
// dp-popularity's at the same ε. Skipped with -short.
func neverWorseForMoreBudget(t *testing.T, method string, cfg synth.ImplicitConfig, dataSeed uint64) {
	t.Helper()
	if testing.Short() {
		t.Skip("trains 36 models")
	}
	in, sp := implicitHeldOut(t, cfg, dataSeed, 500)
	base := uint64(100)
	if s := os.Getenv("PRIVREC_MONOTONE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		base += 3 * v
	}
	pop := privateTopNRecall(t, "dp-popularity", base, in, sp)
	got := privateTopNRecall(t, method, base, in, sp)
	const tolStep, tolPop = 0.01, 0.005
	for e, eps := range monotoneEpsilons {
		t.Logf("ε = %-4g %s %.4f dp-popularity %.4f", eps, method, got[e], pop[e])
		if got[e] < pop[e]-tolPop {
			t.Errorf("ε = %g: %s %.4f below dp-popularity %.4f", eps, method, got[e], pop[e])
		}
		if e > 0 && got[e] < got[e-1]-tolStep {
			t.Errorf("ε = %g: %s %.4f below its %.4f at ε = %g", eps, method, got[e], got[e-1], monotoneEpsilons[e-1])
		}
	}
}

// TestDPIALSNeverWorseForMoreBudget: on a small dense population — 100
// items, every user holding about a fifth of them, as Jester-1's users do
// — dp-ials' held-out Recall@20 (mean of 3 noise seeds) does not fall as ε
// grows (each ε's mean ≥ the previous one's − 0.01) and is never below
// dp-popularity's at the same ε (− 0.005). With the item factors scaled
// to median norm 1 (the rule before issue 39's fix, under which the users'
// ridge depended on the catalogue's size and was worth a small fraction of
// an item on such a catalogue) it fails: 0.501 at ε = 2, then 0.476,
// 0.455 and 0.444 at ε = 4, 8, 16. Fixed seeds: deterministic. Measured
// with the fix: 0.419, 0.504, 0.552, 0.561, 0.569, 0.571 against
// dp-popularity's 0.41; over the default triple and PRIVREC_MONOTONE_SEED=1
// and 2 the largest step down was 0.005 (of the 0.01 allowed) and the
// smallest lead over dp-popularity 0.009.
func TestDPIALSNeverWorseForMoreBudget(t *testing.T) {
	cfg := synth.ImplicitConfig{Users: 4000, Items: 100, Interactions: 80_000, Rank: 8, PopExponent: 0.5, ActivitySpread: 0.5, Taste: 0.5}
	neverWorseForMoreBudget(t, "dp-ials", cfg, 11)
}
