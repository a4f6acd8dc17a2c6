package release

import (
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
)

func TestParseScale(t *testing.T) {
	cases := []struct {
		in       string
		min, max float64
		err      string
	}{
		{"1:5", 1, 5, ""},
		{"-10:10", -10, 10, ""},
		{" 0 : 2 ", 0, 2, ""},
		{"5:1", 0, 0, "MIN < MAX"},
		{"1", 0, 0, "want MIN:MAX"},
		{"a:5", 0, 0, "not a number"},
		{"1:NaN", 0, 0, "finite"},
		{"1:inf", 0, 0, "finite"},
	}
	for _, tc := range cases {
		s, err := ParseScale(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || s.Min != tc.min || s.Max != tc.max {
			t.Errorf("%q: %+v, %v", tc.in, s, err)
		}
	}
}

func sample(t *testing.T) *ratings.Matrix {
	t.Helper()
	b := ratings.NewBuilder(ratings.DupError)
	for k, r := range []struct {
		u, i string
		v    float64
	}{{"u1", "x", 1}, {"u1", "secret", 5}, {"u2", "y", 9}, {"u2", "x", -3}} {
		if err := b.Add(r.u, r.i, r.v, int64(k+1)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Defect 2 of the honest-release issue: the item set of a user-level
// release is the declared catalogue, never the union of users' rows.
func TestOnCatalogue(t *testing.T) {
	cat, err := model.NewCatalogue([]string{"y", "x", "z"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := OnCatalogue(sample(t), cat)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Items.Names(), ","); got != "y,x,z" {
		t.Errorf("items %s, want the catalogue y,x,z", got)
	}
	if m.Len() != 3 || m.NumItems() != 3 {
		t.Errorf("%d ratings over %d items, want 3 over 3 (the uncatalogued one dropped)", m.Len(), m.NumItems())
	}
	if v, ok := m.Get(1, 0); !ok || v != 9 {
		t.Errorf("u2's rating of y = %v %v", v, ok)
	}
	c := ClampToScale(m, Scale{Min: 1, Max: 5})
	lo, hi := c.Range()
	if lo != 1 || hi != 5 {
		t.Errorf("clamped range [%v, %v]", lo, hi)
	}
}

// Rows stay sorted by catalogue index and keep their values whether the
// catalogue lists the data's items in their order (no sort needed) or not.
func TestOnCatalogueOrders(t *testing.T) {
	data := sample(t)
	for _, ids := range [][]string{
		data.Items.Names(),        // the data's own order
		{"x", "y", "z"},           // another order, maybe the same
		{"z", "y", "secret", "x"}, // reversed
		{"secret", "x", "q", "y"}, // interleaved with unknown items
	} {
		cat, err := model.NewCatalogue(ids, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := OnCatalogue(data, cat)
		if err != nil {
			t.Fatal(err)
		}
		for u := range int32(m.NumUsers()) {
			cols, vals := m.UserRow(u)
			for k := range cols {
				if k > 0 && cols[k] <= cols[k-1] {
					t.Fatalf("catalogue %v: user %d's row %v is not sorted", ids, u, cols)
				}
				want, ok := data.Get(u, mustLookup(t, data, m.Items.Name(cols[k])))
				if !ok || want != vals[k] {
					t.Errorf("catalogue %v: user %d item %s = %v, data has %v", ids, u, m.Items.Name(cols[k]), vals[k], want)
				}
			}
		}
	}
}

func mustLookup(t *testing.T, m *ratings.Matrix, id string) int32 {
	t.Helper()
	i, ok := m.Items.Lookup(id)
	if !ok {
		t.Fatalf("item %s not in the data", id)
	}
	return i
}

func TestNeedDeclared(t *testing.T) {
	in := Input{Ratings: sample(t)}
	if _, err := in.NeedScale("m"); err == nil || !strings.Contains(err.Error(), "--scale") {
		t.Errorf("NeedScale: %v", err)
	}
	if _, err := in.NeedCatalogue("m"); err == nil || !strings.Contains(err.Error(), "--items") {
		t.Errorf("NeedCatalogue: %v", err)
	}
}

func TestReleaseValidate(t *testing.T) {
	m := &model.Model{Method: "t", Items: []string{"a"}, V: []float64{}, U: []float64{}}
	g := privacy.Guarantee{Epsilon: 1, Unit: privacy.UnitUser, Notion: privacy.Joint, Status: privacy.Proven}
	r := &Release{Public: m, Guarantee: g}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "relation") {
		t.Errorf("a private release without a relation: %v", err)
	}
	r.Guarantee.Relation = privacy.RelationUserReplace
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
	if (&Release{Guarantee: g}).Validate() == nil {
		t.Error("no public artefact accepted")
	}
}
