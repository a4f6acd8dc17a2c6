package release_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/synth"
)

func codes(ws []release.Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Code)
	}
	return out
}

// TestWarningsTable: each judgement on hand-made releases, from the
// report and the public model only.
func TestWarningsTable(t *testing.T) {
	items := make([]string, 100)
	for j := range items {
		items[j] = fmt.Sprint("i", j)
	}
	edge := release.NoiseEdge(10, 100) // ≈ 10·3.29
	pop := func(top float64) *model.Model {
		m := &model.Model{Method: "dp-popularity", Items: items, ItemBias: make([]float64, 100)}
		m.ItemBias[0] = top
		return m
	}
	ease := func(kept int) *model.Model {
		return &model.Model{Method: "dp-ease", Items: items, Params: map[string]any{"kept_eigenvalues": kept}}
	}
	for _, tc := range []struct {
		name string
		rep  release.Report
		m    *model.Model
		f    release.Facts
		want []string
	}{
		{"popularity, signal", release.Report{"sigma": 10.0}, pop(edge + 1), release.Facts{Users: 1000}, nil},
		{"popularity, nothing above the edge", release.Report{"sigma": 10.0}, pop(edge - 1), release.Facts{Users: 1000}, []string{release.WarnBelowNoise}},
		{"popularity, too few users", release.Report{"sigma": 10.0}, pop(edge + 1), release.Facts{Users: 20}, []string{release.WarnTooFewUsers}},
		{"population not stated", release.Report{"sigma": 10.0}, pop(edge + 1), release.Facts{}, nil},
		{"ease, eigenpairs kept", release.Report{"sigma_counts": 10.0, "covered_items": 50}, ease(3), release.Facts{Users: 1000}, nil},
		{"ease, the 6-user release", release.Report{"sigma_counts": 74.0, "sigma_gram": 40.0, "covered_items": 2}, ease(0), release.Facts{Users: 6},
			[]string{release.WarnTooFewUsers, release.WarnBelowNoise, release.WarnFewCovered}},
		{"ease, from JSON numbers", release.Report{"sigma_counts": json.Number("10"), "covered_items": json.Number("9")}, ease(1), release.Facts{}, []string{release.WarnFewCovered}},
		{"list of 5", release.Report{"sigma_counts": 10.0, "covered_items": 9}, ease(1), release.Facts{List: 5}, nil},
		{"dpals", release.Report{"sigma_bias": 1.0, "items_with_factors": 3}, &model.Model{Method: "dpals", Items: items}, release.Facts{Users: 5}, []string{release.WarnFewCovered}},
		{"dp-bias's σ is not of counts", release.Report{"sigma": 100.0}, &model.Model{Method: "dp-bias", Items: items}, release.Facts{Users: 5}, nil},
		{"non-private", release.Report{"items": 100}, &model.Model{Method: "ease", Items: items}, release.Facts{Users: 5}, nil},
		{"catalogue shorter than the list, all covered", release.Report{"covered_items": 8}, &model.Model{Method: "ease", Items: items[:8]}, release.Facts{}, nil},
		{"catalogue shorter than the list, some covered", release.Report{"covered_items": 7}, &model.Model{Method: "ease", Items: items[:8]}, release.Facts{}, []string{release.WarnFewCovered}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := release.Warnings(tc.rep, tc.m, tc.f)
			if !slices.Equal(codes(got), tc.want) {
				t.Fatalf("warnings %v, want %v", got, tc.want)
			}
			for _, w := range got {
				if w.Message == "" {
					t.Errorf("warning %s without a message", w.Code)
				}
			}
		})
	}
}

// TestNoiseEdge: the edge is the (1 − 0.05/n) normal quantile times σ.
func TestNoiseEdge(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want float64
	}{{1, 1.6449}, {100, 3.2905}, {3706, 4.1975}} {
		if got := release.NoiseEdge(1, tc.n); math.Abs(got-tc.want) > 1e-3 {
			t.Errorf("edge over %d items %.4f, want %.4f", tc.n, got, tc.want)
		}
	}
}

// TestWarningsTrained: dp-ease and dp-popularity trained on 6 users at
// ε = 1 are warned (too few users, nothing above the noise), the same
// methods on 3 000 users at ε = 8 are not. Seeded noise: each outcome is
// fixed; with fresh noise the 6-user judgements hold always (the too-few
// judgement reads σ and the population only; at σ ≈ 40 no noised count
// nor Gram eigenvalue from 6 users rises above the edge unless the noise
// itself does, probability ≤ 5 %), and the large population's counts
// exceed their edge by many σ.
func TestWarningsTrained(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four models")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		users   int
		epsilon float64
		warned  bool
	}{{6, 1, true}, {3000, 8, false}} {
		data, err := synth.ImplicitMatrix(ctx, synth.ImplicitConfig{Users: tc.users, Items: 40, Interactions: int64(tc.users) * 8, Rank: 2, PopExponent: 0.9, Taste: 0.5}, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"dp-ease", "dp-popularity"} {
			meth, err := methods.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			cat, err := model.NewCatalogue(catalogueIDs(data.NumItems(), data.Items.Name), nil)
			if err != nil {
				t.Fatal(err)
			}
			in := release.Input{Ratings: data, Declared: release.Declared{Catalogue: cat}}
			env := methods.Env{Epsilon: tc.epsilon, Delta: 1e-6, Noise: noise.Seeded(7), Rand: noise.Seeded(8), Seed: 8}
			rel, err := methods.Train(ctx, name, meth.New(), in, env)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ws := release.Warnings(rel.Report, rel.Model(), release.Facts{Users: tc.users})
			t.Logf("%s, %d users, ε = %g: %v", name, tc.users, tc.epsilon, ws)
			if tc.warned != (len(ws) > 0) {
				t.Errorf("%s over %d users at ε = %g: warnings %v", name, tc.users, tc.epsilon, ws)
			}
			if tc.warned && !slices.Contains(codes(ws), release.WarnTooFewUsers) {
				t.Errorf("%s over %d users: not warned of too few users: %v", name, tc.users, ws)
			}
			for _, w := range ws {
				if strings.TrimSpace(w.Message) == "" {
					t.Errorf("empty message for %s", w.Code)
				}
			}
		}
	}
}

func catalogueIDs(n int, name func(int32) string) []string {
	ids := make([]string, n)
	for j := range ids {
		ids[j] = name(int32(j))
	}
	return ids
}
