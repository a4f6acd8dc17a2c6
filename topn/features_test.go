package topn

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
)

// TestFeaturePopularityMatchesProfile: two genres of equally popular
// items; a user whose items are of genre a ranks genre a's items first,
// and with the intercept alone the model is popularity (items by count,
// those with a count ≤ 0 last).
func TestFeaturePopularityMatchesProfile(t *testing.T) {
	ids := []string{"a1", "a2", "b1", "b2", "z"}
	f, err := model.ReadItemFeatures(strings.NewReader("a1\ta\na2\ta\nb1\tb\nb2\tb\n"), "f", ids)
	if err != nil {
		t.Fatal(err)
	}
	counts := []float64{10, 8, 11, 9, -1}
	scores := func(f *model.ItemFeatures, items []int32) []float64 {
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
	plain, err := model.ReadItemFeatures(strings.NewReader(""), "f", ids)
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
	f, err := model.ReadItemFeatures(strings.NewReader("a1\ta\na2\ta\nb1\tb\nb2\tb\n"), "f", ids)
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

// TestAddFeaturePrior: the prior adds weight × the cosine of two covered
// items' features without the intercept (in the Gram's column order),
// nothing for an item with the intercept alone, and refuses a cover that
// does not match the Gram.
func TestAddFeaturePrior(t *testing.T) {
	f, err := model.ReadItemFeatures(strings.NewReader("a\tx,y\nb\tx\nc\ty\nd\t\n"), "f", []string{"a", "b", "c", "d"})
	if err != nil {
		t.Fatal(err)
	}
	covered := []int{1, 0, 3, 2} // columns: b, a, d, c
	g := mat.NewSymDense(4, nil)
	g.SetSym(0, 1, 5) // the released entry stays under the prior
	if err := AddFeaturePrior(g, f, covered, 2); err != nil {
		t.Fatal(err)
	}
	h := 1 / math.Sqrt2
	want := [][]float64{
		{2, 5 + 2*h, 0, 0},     // b: x
		{5 + 2*h, 2, 0, 2 * h}, // a: x, y (unit: 1/√2 each)
		{0, 0, 0, 0},           // d: the intercept only
		{0, 2 * h, 0, 2},       // c: y
	}
	for i := range 4 {
		for j := range 4 {
			if math.Abs(g.At(i, j)-want[i][j]) > 1e-12 {
				t.Errorf("prior[%d][%d] = %g, want %g", i, j, g.At(i, j), want[i][j])
			}
		}
	}
	if err := AddFeaturePrior(g, f, covered[:3], 1); err == nil {
		t.Error("a cover of 3 items for a Gram of 4: no error")
	}
	if err := AddFeaturePrior(g, f, []int{0, 1, 2, 9}, 1); err == nil {
		t.Error("a covered item outside the features: no error")
	}
}
