package methods_test

import (
	"context"
	"strings"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/release"
)

// leakyBias is dp-bias with a planted leak: it adds a fact of the private
// data to its public output without noise.
type leakyBias struct {
	methods.DPBiasConfig
	leak string
}

func (c *leakyBias) Train(ctx context.Context, in release.Input, env methods.Env) (*release.Release, error) {
	r, err := c.DPBiasConfig.Train(ctx, in, env)
	if err != nil {
		return nil, err
	}
	switch c.leak {
	case "mean-in-report":
		r.Report["train_mean"] = in.Ratings.Mean()
	case "mean-in-model":
		r.Model().Params["data_mean"] = in.Ratings.Mean()
	case "users-in-model":
		r.Model().Params["users"] = in.Ratings.Users.Names()
	}
	return r, nil
}

// The audit's field comparison is deterministic given its seed: a leak is
// a field fixed under the noise, so it is found with certainty (no
// false-failure rate); the ε bound is Clopper–Pearson at 95 % simultaneous
// confidence over its events, so a correct method shows a violation there
// with probability ≤ 5 % — the seeds are fixed, so the test is repeatable.
func TestAuditWholeArtefact(t *testing.T) {
	base := methods.DPBiasConfig{ItemDamping: 5, UserDamping: 5}
	cases := []struct {
		name     string
		cfg      methods.Config
		wantDiff string // substring of a reported difference ("" = none)
		wantCan  bool
	}{
		{"dp-bias", &base, "", false},
		{"planted mean in report", &leakyBias{base, "mean-in-report"}, "report.train_mean", false},
		{"planted mean in model", &leakyBias{base, "mean-in-model"}, "params.data_mean", false},
		// Under replace-one-user the canary is on both sides, so the user
		// list does not differ; the canary search finds it.
		{"planted user IDs", &leakyBias{base, "users-in-model"}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := methods.Audit(context.Background(), "dp-bias", tc.cfg, methods.AuditOptions{
				Epsilon: 1, Delta: 1e-5, Runs: 6, Samples: 150, Seed: 11})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, d := range rep.Differences {
				found = found || (tc.wantDiff != "" && strings.Contains(d, tc.wantDiff))
			}
			switch {
			case tc.wantDiff == "" && len(rep.Differences) > 0:
				t.Errorf("differences on a correct method: %v", rep.Differences)
			case tc.wantDiff != "" && !found:
				t.Errorf("planted leak %s not caught; differences %v", tc.wantDiff, rep.Differences)
			}
			if tc.wantCan != (len(rep.Canaries) > 0) {
				t.Errorf("canaries = %v, want found=%v", rep.Canaries, tc.wantCan)
			}
			if tc.wantDiff == "" && !tc.wantCan {
				if rep.Violation || rep.EpsilonLowerBound > rep.ClaimedEpsilon {
					t.Errorf("violation on a correct method: %+v", rep)
				}
				if rep.Noised == 0 || rep.Statistic == "" {
					t.Errorf("no noised field found: %+v", rep)
				}
			} else if !rep.Violation {
				t.Errorf("a leak must be a violation: %+v", rep)
			}
		})
	}
}
