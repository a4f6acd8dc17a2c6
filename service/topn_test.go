package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store/storetest"
)

// TestCentralTopN: central mode publishes the recommended private top-N
// model (dp-ease), charges it like any user-level release, and a device
// ranks with it from its own ratings: her list leaves out her items.
func TestCentralTopN(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			opt := localOptions(t, 8)
			opt.Mechanism, opt.Epsilon, opt.Budget = api.MechanismNone, 0, 4
			s := newTestServer(t, kind, opt)
			cfg, err := s.client("").Config(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pop := synthPopulation(40, 8, 0.6, 4)
			users := make([]*client.Client, len(pop.rated))
			for u, r := range pop.rated {
				users[u] = enrolled(t, s)
				rep, _, err := client.Randomize(cfg, r, nil, client.NewReportID())
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := users[u].Submit(ctx, rep); err != nil {
					t.Fatal(err)
				}
			}
			res, err := s.client(adminToken).Publish(ctx, api.ReleaseRequest{Method: "dp-ease", Params: map[string]any{"positive": 3.0}, Epsilon: 1, Delta: 1e-6, Seed: 2})
			if err != nil {
				t.Fatalf("publishing dp-ease: %v", err)
			}
			if res.UsersCharged == 0 || res.MaxCharge <= 0 || res.Release.Model.Output != "score" {
				t.Fatalf("release %+v", res)
			}
			u := 0 // a user who has not rated everything
			for len(pop.rated[u]) > 5 {
				u++
			}
			rel, err := users[u].LatestRelease(ctx)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := client.Recommend(rel, pop.rated[u], 3)
			if err != nil || len(recs) == 0 {
				t.Fatalf("recommendations %v, %v", recs, err)
			}
			for _, r := range recs {
				if _, mine := pop.rated[u][r.Item]; mine {
					t.Fatalf("recommended her own item %s", r.Item)
				}
			}
		})
	}
}

// TestCentralWarned: a central dp-ease release over 6 users (issue 40's
// example: σ_counts ≈ 74, 2 covered items, no eigenpairs) is published
// with its warnings — in the admin's answer (too few users, too few
// covered items, and nothing above the noise edge when no eigenpair
// cleared it) and in the public release, which states no population and
// so carries all but the first.
func TestCentralWarned(t *testing.T) {
	ctx := context.Background()
	opt := localOptions(t, 40)
	opt.Mechanism, opt.Epsilon, opt.Budget = api.MechanismNone, 0, 8
	s := newTestServer(t, "sqlite", opt)
	cfg, err := s.client("").Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pop := synthPopulation(6, 40, 0.3, 5)
	var last *client.Client
	for _, r := range pop.rated {
		last = enrolled(t, s)
		rep, _, err := client.Randomize(cfg, r, nil, client.NewReportID())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := last.Submit(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.client(adminToken).Publish(ctx, api.ReleaseRequest{Method: "dp-ease", Epsilon: 1, Delta: 1e-6, Seed: 2})
	if err != nil {
		t.Fatalf("publishing dp-ease: %v", err)
	}
	codes := func(ws []release.Warning) []string {
		var c []string
		for _, w := range ws {
			c = append(c, w.Code)
		}
		return c
	}
	// "Nothing above the noise edge" (no eigenpair kept) is itself up to
	// the noise (fresh at every release): with 2 covered items a noise
	// eigenvalue clears the edge now and then.
	drop := func(c []string) []string {
		return slices.DeleteFunc(c, func(x string) bool { return x == release.WarnBelowNoise })
	}
	if got, want := drop(codes(res.Warnings)), []string{release.WarnTooFewUsers, release.WarnFewCovered}; !slices.Equal(got, want) {
		t.Errorf("the admin's answer warns %v, want %v: %v", got, want, res.Warnings)
	}
	if !strings.Contains(res.Warnings[0].Message, "with 6 users") {
		t.Errorf("the admin's warning does not name the population: %s", res.Warnings[0].Message)
	}
	pub, err := last.LatestRelease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := drop(codes(pub.Warnings)), []string{release.WarnFewCovered}; !slices.Equal(got, want) || len(pub.Warnings) != len(res.Warnings)-1 {
		t.Errorf("the public release warns %v, want %v", got, want)
	}
	for _, w := range pub.Warnings {
		if strings.Contains(w.Message, "6 users") {
			t.Errorf("the public release states the population: %s", w.Message)
		}
	}
}
