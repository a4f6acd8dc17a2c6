package methods_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// ldpRatings is a small 1…5 rating matrix with a user effect (made here,
// not read from shared data).
func ldpRatings(t *testing.T) *ratings.Matrix {
	t.Helper()
	src := noise.Seeded(5)
	b := ratings.NewBuilder(ratings.DupError)
	for u := range 60 {
		for i := range 40 {
			if src.Float64() < 0.3 {
				v := math.Min(5, math.Max(1, float64(2+u%3)+float64(src.IntN(2))))
				if err := b.Add(fmt.Sprint("u", u), fmt.Sprint("i", i), v, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ldpCatalogue is the declared catalogue: the 40 items of ldpRatings and
// two nobody rated.
func ldpCatalogue(t *testing.T) *model.Catalogue {
	t.Helper()
	var ids []string
	for i := range 42 {
		ids = append(ids, fmt.Sprint("i", i))
	}
	c, err := model.NewCatalogue(ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// collectFile runs the clients on m (each also sending her mean report at
// ldp.DefaultMeanEpsilon) and writes the collect file in dir.
func collectFile(t *testing.T, dir string, m *ratings.Matrix, mech ldp.Mechanism, eps float64, cat *model.Catalogue) (string, *ratings.Matrix) {
	return collectFileMean(t, dir, m, mech, eps, ldp.DefaultMeanEpsilon(eps, cat.Len()), cat)
}

// collectFileMean is collectFile with the mean reports' ε (0: none).
func collectFileMean(t *testing.T, dir string, m *ratings.Matrix, mech ldp.Mechanism, eps, meanEps float64, cat *model.Catalogue) (string, *ratings.Matrix) {
	t.Helper()
	sc, err := ldp.DeclaredScale(1, 5, 0, mech)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	c, err := ldp.SimulateTo(context.Background(), &buf, m, mech, eps, meanEps, sc, cat.IDs(), noise.Seeded(3), 2)
	if err != nil {
		t.Fatal(err)
	}
	z := c.Reports
	path := filepath.Join(dir, fmt.Sprintf("%s-%g.tsv", mech, meanEps))
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, z
}

func trainLDP(t *testing.T, name string, in release.Input, params map[string]any) (*release.Release, error) {
	t.Helper()
	cfg, err := methods.Configure(name, params)
	if err != nil {
		t.Fatal(err)
	}
	return methods.Train(context.Background(), name, cfg, in, methods.Env{Epsilon: 1, Rand: noise.Seeded(1), Noise: noise.Seeded(2), Seed: 1,
		Workers: 2, Log: slog.New(slog.DiscardHandler)})
}

// TestLDPTrainCollected: a collect file trains ldp-laplace and ldp-rr,
// named as the --data file or with --collected, whether the reports come
// from ldp's own reader or from ratingio. The guarantee is the clients'
// per-user one (n·ε over the n catalogue items, plus the mean report's ε)
// under the local relation; the report holds facts of the reports and
// declared facts only (the shrinkage's facts are functions of the
// reports), and the model is on the declared catalogue when --items is
// given.
func TestLDPTrainCollected(t *testing.T) {
	m := ldpRatings(t)
	cat := ldpCatalogue(t)
	dir := t.TempDir()
	wantKeys := []string{"catalogue_items", "clients", "estimated_true_ratings", "iterations", "lambda", "lambda_rule", "mean_epsilon", "mechanism", "noise_op_norm",
		"per_rating_epsilon", "per_user_epsilon", "rank", "refit", "report_norm", "reports", "residual", "rho", "sampler", "shrink", "zero_solution"}
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		path, z := collectFile(t, dir, m, mech, 2, cat)
		name := "ldp-" + string(mech)
		for _, tc := range []struct {
			in     release.Input
			params map[string]any
		}{
			{release.Input{Ratings: z, Source: path}, map[string]any{"debias": true}},
			{release.Input{Ratings: z}, map[string]any{"debias": true, "lambda_rule": "discrepancy", "collected": path}},
			{release.Input{Ratings: z, Source: path, Declared: release.Declared{Catalogue: cat}}, nil},
		} {
			r, err := trainLDP(t, name, tc.in, tc.params)
			if err != nil {
				t.Fatalf("%s %v: %v", name, tc.params, err)
			}
			g := r.Guarantee
			mean := ldp.DefaultMeanEpsilon(2, cat.Len())
			wantEps := 2*float64(cat.Len()) + mean
			if g.Notion != privacy.Local || g.Unit != privacy.UnitUser || g.Relation != privacy.RelationLocalReport || g.Status != privacy.Proven ||
				!(g.Epsilon >= wantEps && g.Epsilon <= wantEps*(1+1e-9)) || !g.Reproducible {
				t.Errorf("%s: guarantee %+v, want local, per user ε = 42 × 2 + the mean report's %g, proven, reproducible", name, g, mean)
			}
			if e := r.Report["per_rating_epsilon"].(float64); !(e >= 2+mean && e < (2+mean)*(1+1e-9)) {
				t.Errorf("%s: per-rating ε %v, want 2 (the header's) + %g (the mean report)", name, e, mean)
			}
			sh, _ := r.Report["shrink"].(map[string]any)
			if w, ok := sh["weights"].([]float64); !ok || len(w) != 2 || sh["mean_reports"] != 60 || !(sh["target"].(float64) >= 1 && sh["target"].(float64) <= 5) {
				t.Errorf("%s: shrinkage %v, want two weights from 60 mean reports and a target on the scale", name, sh)
			}
			keys := make([]string, 0, len(r.Report))
			for k := range r.Report {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("%s: report keys %v, want %v", name, keys, wantKeys)
			}
			if r.Report["clients"] != 60 || r.Report["catalogue_items"] != 42 || r.Report["reports"] != int64(z.Len()) {
				t.Errorf("%s: report %v", name, r.Report)
			}
			mdl := r.Model()
			if tc.in.Declared.Catalogue != nil && !slices.Equal(mdl.Items, cat.IDs()) {
				t.Errorf("%s with --items: model items %v, want the catalogue", name, mdl.Items)
			}
			for u := range 5 {
				if p := mdl.Predict(int32(u), int32(u)); !(p >= 1 && p <= 5) {
					t.Errorf("%s %v: prediction %v outside 1…5", name, tc.params, p)
				}
			}
		}
		// Through the ratings reader, as `privrec train --data Z.tsv` does.
		zr, err := ratingio.ReadFile(path, ratingio.Options{Format: "tsv"})
		if err != nil {
			t.Fatalf("ratingio cannot read the collect file: %v", err)
		}
		if zr.Len() != z.Len() || zr.NumUsers() != z.NumUsers() || zr.NumItems() != z.NumItems() {
			t.Errorf("%s: ratingio read %d reports (%d × %d), ldp.ReadCollected %d (%d × %d)", mech, zr.Len(), zr.NumUsers(), zr.NumItems(), z.Len(), z.NumUsers(), z.NumItems())
		}
		if _, err := trainLDP(t, name, release.Input{Ratings: zr, Source: path}, map[string]any{"debias": true}); err != nil {
			t.Errorf("%s on ratingio's reading of the collect file: %v", name, err)
		}
	}
}

// TestLDPRefuses (defects 3 and 5): ldp-laplace and ldp-rr train only from
// a collect file whose mechanism is theirs, on that file's reports, and
// refuse declared facts that contradict the header. The old code trained
// on raw ratings without a header (ε from --epsilon, "proven local DP").
func TestLDPRefuses(t *testing.T) {
	m := ldpRatings(t)
	cat := ldpCatalogue(t)
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.tsv")
	var b strings.Builder
	m.All(func(e ratings.Entry) bool {
		fmt.Fprintf(&b, "%s\t%s\t%g\n", m.Users.Name(e.User), m.Items.Name(e.Item), e.Value)
		return true
	})
	if err := os.WriteFile(raw, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	lapPath, lapZ := collectFile(t, dir, m, ldp.Laplace, 2, cat)
	other, _ := model.NewCatalogue([]string{"i0", "i1"}, nil)
	wrongScale := release.Scale{Min: 0, Max: 5}
	for _, tc := range []struct {
		name, method string
		in           release.Input
		want         string
	}{
		{"raw ratings, no file", "ldp-laplace", release.Input{Ratings: m}, "privrec collect"},
		{"raw ratings file", "ldp-rr", release.Input{Ratings: m, Source: raw}, "privrec collect"},
		{"raw ratings, declared scale", "ldp-rr", release.Input{Ratings: m, Source: raw, Declared: release.Declared{Scale: &release.Scale{Min: 1, Max: 5}}}, "privrec collect"},
		{"other mechanism", "ldp-rr", release.Input{Ratings: lapZ, Source: lapPath}, "ldp-laplace"},
		{"true ratings with the header", "ldp-laplace", release.Input{Ratings: m, Source: lapPath}, "reports"},
		{"scale differs", "ldp-laplace", release.Input{Ratings: lapZ, Source: lapPath, Declared: release.Declared{Scale: &wrongScale}}, "--scale"},
		{"catalogue differs", "ldp-laplace", release.Input{Ratings: lapZ, Source: lapPath, Declared: release.Declared{Catalogue: other}}, "--items"},
		{"population differs", "ldp-laplace", release.Input{Ratings: lapZ, Source: lapPath, Declared: release.Declared{Population: 61}}, "--population"},
	} {
		r, err := trainLDP(t, tc.method, tc.in, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			g := ""
			if r != nil {
				g = r.Guarantee.String()
			}
			t.Errorf("%s (%s): error %v (guarantee %q), want a refusal mentioning %q", tc.name, tc.method, err, g, tc.want)
		}
	}
}

// TestLDPClean: the non-private reference trains on true ratings, carries
// no guarantee and beats the global mean in-sample on data with a strong
// user effect (deterministic: fixed seeds).
func TestLDPClean(t *testing.T) {
	m := ldpRatings(t)
	r, err := trainLDP(t, "ldp-clean", release.Input{Ratings: m}, map[string]any{"debias": true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Guarantee.Status != privacy.None {
		t.Errorf("ldp-clean guarantee %+v, want none", r.Guarantee)
	}
	mdl := r.Model()
	var se, sm float64
	mean := m.Mean()
	m.All(func(e ratings.Entry) bool {
		d := mdl.Predict(e.User, e.Item) - float64(e.Value)
		se += d * d
		sm += (mean - float64(e.Value)) * (mean - float64(e.Value))
		return true
	})
	if !(se < 0.7*sm) {
		t.Errorf("ldp-clean in-sample SSE %.2f not below 0.7 × global mean's %.2f", se, sm)
	}
	narrow := release.Scale{Min: 2, Max: 3}
	if _, err := trainLDP(t, "ldp-clean", release.Input{Ratings: m, Declared: release.Declared{Scale: &narrow}}, nil); err == nil || !strings.Contains(err.Error(), "--scale") {
		t.Errorf("ldp-clean with ratings outside --scale: %v", err)
	}
	for _, p := range []map[string]any{{"max_rank": 0}, {"gamma": 1}, {"lambda_rule": "nope"}, {"refit": true}, {"rho": -1}} {
		if _, err := methods.Configure("ldp-clean", p); err == nil {
			t.Errorf("Configure(ldp-clean, %v) accepted", p)
		}
	}
}

// TestLDPAudit: the whole-artefact audit of ldp-laplace and ldp-rr with
// the devices simulated (DevicePrepare: each run collects the side's raw
// ratings with the run's noise, then trains on the reports). No un-noised
// public field may differ between the neighbours, the item outside the
// catalogue must not appear, and the ε lower bound must stay under the
// per-user guarantee. Differences and canaries are deterministic facts of
// the code; the bound is at confidence 1 − 10⁻⁶, so the false-failure rate
// is at most 10⁻⁶ per method (fixed seeds make the run repeatable).
func TestLDPAudit(t *testing.T) {
	runs, samples := 10, 60
	if testing.Short() {
		samples = 30
	}
	for _, name := range []string{"ldp-laplace", "ldp-rr"} {
		cfg, err := methods.Configure(name, map[string]any{"debias": true, "max_rank": 4})
		if err != nil {
			t.Fatal(err)
		}
		const eps = 1.0
		rep, err := methods.Audit(context.Background(), name, cfg, methods.AuditOptions{ReleaseRuns: raceReleaseRuns, Epsilon: eps, Runs: runs, Samples: samples,
			Confidence: 1 - 1e-6, Seed: 11, Prepare: methods.DevicePrepare(name, eps)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: relation %q, claimed ε %.4g, %d fields (%d noised), ε lower bound %.3f on %s (%s), %.1f s",
			name, rep.Relation, rep.ClaimedEpsilon, rep.Fields, rep.Noised, rep.EpsilonLowerBound, rep.Statistic, rep.Event, rep.Seconds)
		if rep.Violation || rep.Relation != privacy.RelationLocalReport || rep.Noised == 0 {
			t.Errorf("%s: audit %+v", name, rep)
		}
	}
	if methods.DevicePrepare("dp-bias", 1) != nil {
		t.Errorf("dp-bias has a device step")
	}
}

// TestLDPShrink: with the clients' mean reports, a collection at a per-cell
// ε too small for any signal trains a model that predicts the clients'
// private mean everywhere (both weights 0); without mean reports, or with
// no_shrink, the recovery is not shrunk and the report says so; a collect
// file missing one client's mean report is refused, naming the problem.
func TestLDPShrink(t *testing.T) {
	m := ldpRatings(t)
	cat := ldpCatalogue(t)
	dir := t.TempDir()
	path, z := collectFile(t, dir, m, ldp.RR, 0.01, cat)
	r, err := trainLDP(t, "ldp-rr", release.Input{Ratings: z, Source: path}, map[string]any{"debias": true})
	if err != nil {
		t.Fatal(err)
	}
	sh := r.Report["shrink"].(map[string]any)
	target := sh["target"].(float64)
	if w := sh["weights"].([]float64); w[0] != 0 || w[1] != 0 {
		t.Errorf("per-cell ε = 0.01: weights %v, want 0 (no signal)", w)
	}
	mdl := r.Model()
	for u := range int32(len(mdl.Users)) {
		for i := range int32(len(mdl.Items)) {
			if p := mdl.Predict(u, i); math.Abs(p-target) > 1e-9 {
				t.Fatalf("prediction (%d, %d) = %v, want the private mean %v", u, i, p, target)
			}
		}
	}
	if r, err := trainLDP(t, "ldp-rr", release.Input{Ratings: z, Source: path}, map[string]any{"debias": true, "no_shrink": true}); err != nil {
		t.Fatal(err)
	} else if note := r.Report["shrink"].(map[string]any)["note"]; !strings.Contains(note.(string), "--no-shrink") {
		t.Errorf("no_shrink: report %v", note)
	}
	plain, zp := collectFileMean(t, dir, m, ldp.RR, 0.01, 0, cat)
	if r, err := trainLDP(t, "ldp-rr", release.Input{Ratings: zp, Source: plain}, map[string]any{"debias": true}); err != nil {
		t.Fatal(err)
	} else if note := r.Report["shrink"].(map[string]any)["note"]; !strings.Contains(note.(string), "no mean reports") ||
		!(r.Guarantee.Epsilon >= 0.01*42 && r.Guarantee.Epsilon < 0.01*42*(1+1e-9)) {
		t.Errorf("without mean reports: shrink %v, guarantee ε %v (want 42 × 0.01)", note, r.Guarantee.Epsilon)
	}
	// One client's mean report dropped.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	var kept []string
	dropped := false
	for _, l := range lines {
		if !dropped && strings.HasPrefix(l, ldp.MeanPrefix) {
			dropped = true
			continue
		}
		kept = append(kept, l)
	}
	bad := filepath.Join(dir, "bad.tsv")
	if err := os.WriteFile(bad, []byte(strings.Join(kept, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := trainLDP(t, "ldp-rr", release.Input{Ratings: z, Source: bad}, map[string]any{"debias": true}); err == nil || !strings.Contains(err.Error(), "mean report") {
		t.Errorf("a client without a mean report: %v", err)
	}
}
