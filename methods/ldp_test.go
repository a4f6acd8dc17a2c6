package methods_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
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

func trainLDP(t *testing.T, name string, data *ratings.Matrix, args ...string) (*methods.Result, error) {
	t.Helper()
	meth, err := methods.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	tr := meth.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return tr.Train(context.Background(), data, methods.Common{Epsilon: 1, Rand: noise.Seeded(1), Noise: noise.Seeded(2), Seed: 1,
		Workers: 2, Log: slog.New(slog.DiscardHandler)})
}

// TestLDPTrainCollected: a collect file trains through ldp-laplace and
// ldp-rr with --collected, whether the data come from ldp's own reader or
// from ratingio (once ratingio skips '#' comment lines; until then that
// half is skipped with a message), and a mismatched --data is refused.
func TestLDPTrainCollected(t *testing.T) {
	m := ldpRatings(t)
	dir := t.TempDir()
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		r, err := ldp.New(mech, 2, ldp.Scale{Min: 1, Max: 5, Levels: 5})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := ldp.Collect(context.Background(), &buf, m, r, noise.Seeded(3), 2); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, string(mech)+".tsv")
		if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		_, z, err := ldp.ReadCollected(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		name := "ldp-" + string(mech)
		for _, extra := range [][]string{{"--debias"}, {"--debias", "--lambda-rule", "discrepancy"}, {}} {
			res, err := trainLDP(t, name, z, append([]string{"--collected", path}, extra...)...)
			if err != nil {
				t.Fatalf("%s %v: %v", name, extra, err)
			}
			g := res.Guarantee
			if g.Notion != privacy.Local || !(g.Epsilon >= 2 && g.Epsilon < 2+1e-9) || g.Status != privacy.Proven || !g.Reproducible {
				t.Errorf("%s: guarantee %+v, want local ε = 2, proven, reproducible", name, g)
			}
			for u := range 5 {
				if p := res.Model.Predict(int32(u), int32(u)); !(p >= 1 && p <= 5) {
					t.Errorf("%s %v: prediction %v outside 1…5", name, extra, p)
				}
			}
		}
		// A --data that is not the collect file's reports is refused.
		if _, err := trainLDP(t, name, m, "--collected", path, "--debias"); err == nil || !strings.Contains(err.Error(), "reports") {
			t.Errorf("%s with the true ratings as --data: error %v, want a report-count mismatch", name, err)
		}
		// Through the ratings reader, as `privrec train --data Z.tsv` does.
		zr, err := ratingio.ReadFile(path, ratingio.Options{Format: "tsv"})
		if err != nil {
			t.Logf("ratingio cannot read the collect file yet (comment lines): %v", err)
			continue
		}
		if zr.Len() != z.Len() || zr.NumUsers() != z.NumUsers() || zr.NumItems() != z.NumItems() {
			t.Errorf("%s: ratingio read %d reports (%d × %d), ldp.ReadCollected %d (%d × %d)", mech, zr.Len(), zr.NumUsers(), zr.NumItems(), z.Len(), z.NumUsers(), z.NumItems())
		}
		if _, err := trainLDP(t, name, zr, "--collected", path, "--debias"); err != nil {
			t.Errorf("%s on ratingio's reading of the collect file: %v", name, err)
		}
	}
}

// TestLDPClean: the non-private reference trains on true ratings, carries
// no guarantee and beats the global mean in-sample on data with a strong
// user effect (deterministic: fixed seeds).
func TestLDPClean(t *testing.T) {
	m := ldpRatings(t)
	res, err := trainLDP(t, "ldp-clean", m, "--debias")
	if err != nil {
		t.Fatal(err)
	}
	if res.Guarantee.Status != privacy.None {
		t.Errorf("ldp-clean guarantee %+v, want none", res.Guarantee)
	}
	var se, sm float64
	mean := m.Mean()
	m.All(func(e ratings.Entry) bool {
		d := res.Model.Predict(e.User, e.Item) - float64(e.Value)
		se += d * d
		sm += (mean - float64(e.Value)) * (mean - float64(e.Value))
		return true
	})
	if !(se < 0.7*sm) {
		t.Errorf("ldp-clean in-sample SSE %.2f not below 0.7 × global mean's %.2f", se, sm)
	}
	if _, err := trainLDP(t, "ldp-clean", m, "--rating-scale", "2:3"); err == nil {
		t.Errorf("ldp-clean accepted ratings outside --rating-scale")
	}
}
