package client

import (
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service/api"
)

// localConfig is what a server publishes for rr over 4 items at
// per-report ε = 2 (the per-item ε slightly below 2/4, as the server
// computes it).
func localConfig(t *testing.T) *api.Config {
	t.Helper()
	cfg := &api.Config{Mode: api.ModeLocal, Mechanism: "rr", ReportEpsilon: 2, Budget: 4, Scale: api.Scale{Min: 1, Max: 5, Levels: 5}, Units: "levels",
		Items: []api.Item{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}}
	cfg.CellEpsilon = 0.5
	for range 100 {
		r, err := randomizer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.PerUser(4).Epsilon <= 2 {
			return cfg
		}
		cfg.CellEpsilon *= 1 - 1e-12
	}
	t.Fatal("no per-item ε fits")
	return nil
}

func TestCheckConfig(t *testing.T) {
	cfg := localConfig(t)
	if err := CheckConfig(cfg); err != nil {
		t.Fatal(err)
	}
	// A server that publishes ε = 2 per report but asks for per-item
	// ε = 1 over 4 items (4-DP per report) is refused.
	lying := *cfg
	lying.CellEpsilon = 1
	if err := CheckConfig(&lying); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("a lying configuration: %v", err)
	}
	over := *cfg
	over.Budget = 1
	if err := CheckConfig(&over); err == nil {
		t.Fatal("a report ε over the budget was accepted")
	}
	units := *cfg
	units.Units = "normalised"
	if err := CheckConfig(&units); err == nil {
		t.Fatal("wrong units accepted")
	}
}

// TestRandomize: a report covers every item, its values are levels or
// missing, items outside the catalogue are counted and not reported, and
// off-scale ratings are refused. The outputs are random (crypto/rand);
// only their form is checked.
func TestRandomize(t *testing.T) {
	cfg := localConfig(t)
	rep, outside, err := Randomize(cfg, Ratings{"a": 5, "c": 1, "zz": 3}, noise.Secure(), "r-1")
	if err != nil {
		t.Fatal(err)
	}
	if outside != 1 || rep.ID != "r-1" || rep.Epsilon != 2 || len(rep.Values) != 4 {
		t.Fatalf("report %+v, %d outside", rep, outside)
	}
	for _, v := range rep.Values {
		if v != nil && (*v != math.Trunc(*v) || *v < 1 || *v > 5) {
			t.Fatalf("value %v is not a level", *v)
		}
	}
	if _, _, err := Randomize(cfg, Ratings{"a": 7}, noise.Secure(), "r-2"); err == nil {
		t.Fatal("a rating off the scale was randomized")
	}
	// Central mode: the ratings as they are.
	central := &api.Config{Mode: api.ModeCentral, Mechanism: "none", Budget: 1, Scale: api.Scale{Min: 1, Max: 5}, Units: "rating", Items: cfg.Items}
	rep, _, err = Randomize(central, Ratings{"b": 4.5}, nil, "r-3")
	if err != nil || rep.Values[1] == nil || *rep.Values[1] != 4.5 || rep.Values[0] != nil || rep.Epsilon != 0 {
		t.Fatalf("central report %+v, %v", rep, err)
	}
}

func TestReadRatings(t *testing.T) {
	r, err := ReadRatings(strings.NewReader("item,rating\n# mine\na,5\nb 3\nc\t1\n"), "x")
	if err != nil || len(r) != 3 || r["a"] != 5 || r["b"] != 3 || r["c"] != 1 {
		t.Fatalf("%v %v", r, err)
	}
	r, err = ReadRatings(strings.NewReader("u1 a 5\nu1 b 2\n"), "x")
	if err != nil || len(r) != 2 {
		t.Fatalf("%v %v", r, err)
	}
	for _, bad := range []string{"u1 a 5\nu2 b 2\n", "a 5\na 4\n", "a 5\nb x\n", "a 1 2 3\n"} {
		if _, err := ReadRatings(strings.NewReader(bad), "x"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRecommend: the client's top-k from a public part: her rated items
// are left out, and with her ratings high on the first factor she gets
// the items that load on it.
func TestRecommend(t *testing.T) {
	cat, _ := model.NewCatalogue([]string{"a", "b", "c", "d", "e"}, []string{"A", "B", "C", "D", "E"})
	m := model.NewPublic("test", cat)
	m.Rank = 1
	m.V = []float64{1, 1, 1, -1, -1}
	m.Offset = 3
	m.FoldIn, m.FoldLambda = model.FoldRidge, 0.1
	m.Guarantee = privacy.Guarantee{Epsilon: 1, Unit: privacy.UnitUser, Notion: privacy.Local, Status: privacy.Proven}
	pub, err := api.FromModel(m)
	if err != nil {
		t.Fatal(err)
	}
	rel := &api.Release{ID: 1, Model: pub}
	recs, err := Recommend(rel, Ratings{"a": 5, "d": 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Title == "" {
		t.Fatalf("%+v", recs)
	}
	for _, r := range recs {
		if r.Item == "a" || r.Item == "d" {
			t.Fatalf("recommended her rated item %s", r.Item)
		}
	}
	if recs[0].Item != "b" && recs[0].Item != "c" {
		t.Fatalf("top item %s, want b or c", recs[0].Item)
	}
	if _, err := Recommend(rel, Ratings{}, 0); err == nil {
		t.Fatal("k = 0 accepted")
	}
	// A public part that holds users is refused by api.FromModel.
	m.Users, m.U = []string{"u"}, []float64{1}
	if _, err := api.FromModel(m); err == nil {
		t.Fatal("a model with users was served")
	}
}
