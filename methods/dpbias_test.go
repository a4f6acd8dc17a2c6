package methods_test

import (
	"context"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
)

// dp-bias with its defaults passes the whole-artefact audit: no public
// field fixed under the noise differs between the neighbours, no canary
// ID is public, and the ε lower bound stays under the claim. Fixed seed:
// deterministic; for a correct method the Clopper–Pearson bound exceeds
// the claim with probability ≤ 5 % over seeds.
func TestDPBiasAudit(t *testing.T) {
	rep, err := methods.Audit(context.Background(), "dp-bias", methods.NewDPBiasConfig(), methods.AuditOptions{ReleaseRuns: raceReleaseRuns,
		Epsilon: 1, Delta: 1e-5, Runs: 6, Samples: 150, Seed: 21})
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
}

// At a huge ε dp-bias is close to the non-private bias baseline, and each
// user's state is what fold-in computes from the public model and her own
// ratings. Fixed seeds: deterministic.
func TestDPBiasLimit(t *testing.T) {
	train, test, cat := lowRankRatings(t, 400, 60, 1, 0.5, 0.3, 3)
	sc := release.Scale{Min: 1, Max: 5}
	in := release.Input{Ratings: train, Declared: release.Declared{Scale: &sc, Catalogue: cat}}
	env := methods.Env{Epsilon: 1e6, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(2)}
	rel, err := methods.Train(context.Background(), "dp-bias", methods.NewDPBiasConfig(), in, env)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Guarantee.Notion != privacy.Joint || rel.Guarantee.Relation != privacy.RelationUserReplace || rel.Guarantee.Unit != privacy.UnitUser {
		t.Errorf("guarantee %+v", rel.Guarantee)
	}
	m := rel.Model()
	if len(m.Users) != 0 || m.UserBias != nil {
		t.Fatal("the public model holds users")
	}
	joined, err := m.Join(rel.PerUser)
	if err != nil {
		t.Fatal(err)
	}
	got := rmseOf(t, joined, test)
	want := trainRMSE(t, "bias", nil, in, env, test)
	t.Logf("dp-bias at ε = 10⁶: %.4f; non-private bias: %.4f", got, want)
	if got > want+0.03 {
		t.Errorf("dp-bias at ε = 10⁶ has RMSE %.4f, the non-private bias model %.4f", got, want)
	}
	// Fold-in reproduces every user's state.
	checkFoldIn(t, m, rel.PerUser.States[:20], train)
}
