package topn

import (
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
)

func TestReadItemFeatures(t *testing.T) {
	ids := []string{"1", "2", "3"}
	tests := []struct {
		name, in string
		want     [][]string // feature names per item, intercept left out
		skipped  int
		err      string
	}{
		{name: "tsv", in: "1\tdrama,comedy\n# note\n\n2\tcomedy, comedy\n9\tx\n",
			want: [][]string{{"drama", "comedy"}, {"comedy"}, nil}, skipped: 1},
		{name: "movies.dat", in: "3::Heat (1995)::Action|Crime|Thriller\r\n1::Toy Story (1995)::Animation\n2::Untitled::(no genres listed)\n",
			want: [][]string{{"genre:Animation", "years:1995-1999"}, nil, {"genre:Action", "genre:Crime", "genre:Thriller", "years:1995-1999"}}},
		{name: "no features", in: "1\t\n", want: [][]string{nil, nil, nil}},
		{name: "twice", in: "1\ta\n1\tb\n", err: "f:2: item \"1\" appears twice"},
		{name: "no tab", in: "1 a\n", err: "f:1: want ITEM<TAB>"},
		{name: "movies.dat fields", in: "1::a\n", err: "f:1: want ID::TITLE::GENRES"},
		{name: "empty id", in: "\tx\n", err: "f:1: empty item ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, skipped, err := ReadItemFeatures(strings.NewReader(tc.in), "f", ids)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if skipped != tc.skipped {
				t.Errorf("skipped %d, want %d", skipped, tc.skipped)
			}
			for j, want := range tc.want {
				if f.Of[j][0] != 0 {
					t.Errorf("item %d: first feature %d, want the intercept", j, f.Of[j][0])
				}
				var got []string
				for _, k := range f.Of[j][1:] {
					got = append(got, f.Names[k])
				}
				if !slices.Equal(got, want) {
					t.Errorf("item %d: features %q, want %q", j, got, want)
				}
			}
		})
	}
}

func FuzzReadItemFeatures(f *testing.F) {
	f.Add("1\ta,b\n2::T (1999)::A|B\n")
	f.Add("#\n\n3\t\n")
	f.Fuzz(func(t *testing.T, in string) {
		ids := []string{"1", "2", "3"}
		fs, _, err := ReadItemFeatures(strings.NewReader(in), "f", ids)
		if err != nil {
			return
		}
		if len(fs.Of) != len(ids) {
			t.Fatalf("%d feature lists for %d items", len(fs.Of), len(ids))
		}
		for _, of := range fs.Of {
			if len(of) == 0 || of[0] != 0 {
				t.Fatalf("an item without the intercept: %v", of)
			}
			for _, k := range of {
				if int(k) >= fs.Len() {
					t.Fatalf("feature %d of %d", k, fs.Len())
				}
			}
		}
	})
}

// TestFeaturePopularityMatchesProfile: two genres of equally popular
// items; a user whose items are of genre a ranks genre a's items first,
// and with the intercept alone the model is popularity (items by count,
// those with a count ≤ 0 last).
func TestFeaturePopularityMatchesProfile(t *testing.T) {
	ids := []string{"a1", "a2", "b1", "b2", "z"}
	f, _, err := ReadItemFeatures(strings.NewReader("a1\ta\na2\ta\nb1\tb\nb2\tb\n"), "f", ids)
	if err != nil {
		t.Fatal(err)
	}
	counts := []float64{10, 8, 11, 9, -1}
	scores := func(f *ItemFeatures, items []int32) []float64 {
		v, bias, err := FeaturePopularity(counts, f, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		m := &model.Model{Rank: 2 * f.Len(), V: v, ItemBias: bias, Items: ids}
		row, err := foldFeatureProfile(m, items, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, len(ids))
		for j := range out {
			for k, x := range row {
				out[j] += x * v[j*m.Rank+k]
			}
			out[j] += bias[j]
		}
		return out
	}
	s := scores(f, []int32{0})
	if !(s[1] > s[2] && s[1] > s[3] && s[3] > s[4]) {
		t.Errorf("scores %v: genre a's a2 should lead b's items, the uncounted z last", s)
	}
	plain, _, err := ReadItemFeatures(strings.NewReader(""), "f", ids)
	if err != nil {
		t.Fatal(err)
	}
	s = scores(plain, []int32{0})
	if !(s[2] > s[0] && s[0] > s[3] && s[3] > s[1] && s[1] > s[4]) {
		t.Errorf("intercept only: scores %v, want the order of the counts %v", s, counts)
	}
}

// TestFoldEASEFeatures: her row is her EASE row (Σ Z_i over her covered
// items) beside her profile scaled so that her positive feature scores
// sum to feature_weight × her number of items.
func TestFoldEASEFeatures(t *testing.T) {
	ids := []string{"a1", "a2", "b1", "b2"}
	f, _, err := ReadItemFeatures(strings.NewReader("a1\ta\na2\ta\nb1\tb\nb2\tb\n"), "f", ids)
	if err != nil {
		t.Fatal(err)
	}
	fv, bias, err := FeaturePopularity([]float64{10, 8, 11, 9}, f, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	d := f.Len()
	const r = 1
	ease := []float64{0.5, 0.2, 0, 0} // a1, a2 covered; b1, b2 not
	rank := r + 2*d
	v := make([]float64, len(ids)*rank)
	for j := range ids {
		v[j*rank] = ease[j]
		copy(v[j*rank+r:(j+1)*rank], fv[j*2*d:(j+1)*2*d])
	}
	m := &model.Model{Rank: rank, V: v, ItemBias: bias, Items: ids, FoldIn: FoldEASEFeatures,
		Params: map[string]any{"ease_rank": float64(r), "feature_weight": 0.5}}
	row, err := foldEASEFeatures(m, []int32{0, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	z := make([]float64, 1)
	ZFromV(ease[:1], z)
	if row[0] != z[0] {
		t.Errorf("EASE part %g, want Z of a1 %g", row[0], z[0])
	}
	var total float64
	for j := range ids {
		var s float64
		for k := r; k < r+d; k++ {
			s += row[k] * v[j*rank+k]
		}
		total += max(s, 0)
	}
	if want := 0.5 * 2; total < want*(1-1e-12) || total > want*(1+1e-12) {
		t.Errorf("feature scores sum to %g, want %g", total, want)
	}
	for k := r + d; k < rank; k++ {
		if row[k] != 0 {
			t.Fatalf("row[%d] = %g: the feature columns must not score", k, row[k])
		}
	}
	m.Params = nil
	if _, err := foldEASEFeatures(m, []int32{0}, nil); err == nil {
		t.Error("a model without ease_rank folded in")
	}
}
