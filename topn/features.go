package topn

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
)

// ItemFeatures are public item features (a catalogue's genres, release
// years, …): Of[j] lists item j's features as indices into Names. They
// are declared public — they cost no privacy — and a model may store them.
type ItemFeatures struct {
	Names []string
	Of    [][]int32
}

// Intercept is the feature every item has (feature 0): with no other
// feature the feature models reduce to popularity.
const Intercept = "(every item)"

// ReadItemFeatures reads the features of the catalogue items ids from r,
// one item a line, in either form:
//
//   - ITEM<TAB>FEATURE[,FEATURE…] (a generic table; no features after the
//     tab is allowed);
//   - MovieLens' movies.dat, ID::TITLE::GENRE[|GENRE…]: the genres become
//     features "genre:G" and a release year in the title's trailing
//     "(YYYY)" the 5-year feature "years:1995-1999".
//
// Blank lines and lines starting with # are skipped; items not in the
// catalogue are skipped (skipped counts them); catalogue items the file
// does not name have the intercept only. name labels errors (file:line:
// reason).
func ReadItemFeatures(r io.Reader, name string, ids []string) (f *ItemFeatures, skipped int, err error) {
	index := make(map[string]int, len(ids))
	for k, id := range ids {
		index[id] = k
	}
	f = &ItemFeatures{Names: []string{Intercept}, Of: make([][]int32, len(ids))}
	for j := range f.Of {
		f.Of[j] = []int32{0}
	}
	feature := map[string]int32{Intercept: 0}
	seen := make([]bool, len(ids))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimRight(sc.Text(), "\r")
		if s := strings.TrimSpace(t); s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		id, names, err := parseFeatureLine(t)
		if err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		j, ok := index[id]
		if !ok {
			skipped++
			continue
		}
		if seen[j] {
			return nil, 0, fmt.Errorf("%s:%d: item %q appears twice", name, line, id)
		}
		seen[j] = true
		for _, n := range names {
			k, ok := feature[n]
			if !ok {
				k = int32(len(f.Names))
				feature[n] = k
				f.Names = append(f.Names, n)
			}
			f.Of[j] = append(f.Of[j], k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", name, err)
	}
	return f, skipped, nil
}

// parseFeatureLine splits one line into the item ID and its distinct
// feature names.
func parseFeatureLine(t string) (string, []string, error) {
	var id string
	var names []string
	if strings.Contains(t, "::") {
		parts := strings.Split(t, "::")
		if len(parts) != 3 {
			return "", nil, fmt.Errorf("want ID::TITLE::GENRES, got %d fields", len(parts))
		}
		id = strings.TrimSpace(parts[0])
		for _, g := range strings.Split(parts[2], "|") {
			if g = strings.TrimSpace(g); g != "" && g != "(no genres listed)" {
				names = append(names, "genre:"+g)
			}
		}
		if y, ok := titleYear(parts[1]); ok {
			lo := y - y%5
			names = append(names, fmt.Sprintf("years:%d-%d", lo, lo+4))
		}
	} else {
		before, after, ok := strings.Cut(t, "\t")
		if !ok {
			return "", nil, fmt.Errorf("want ITEM<TAB>FEATURE[,FEATURE…] or ID::TITLE::GENRES")
		}
		id = strings.TrimSpace(before)
		for _, n := range strings.Split(after, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	if id == "" {
		return "", nil, fmt.Errorf("empty item ID")
	}
	return id, distinct(names), nil
}

// titleYear is the year in a title's trailing "(YYYY)".
func titleYear(title string) (int, bool) {
	t := strings.TrimSpace(title)
	if len(t) < 6 || t[len(t)-1] != ')' || t[len(t)-6] != '(' {
		return 0, false
	}
	y, err := strconv.Atoi(t[len(t)-5 : len(t)-1])
	return y, err == nil && y > 0
}

func distinct(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Len is the number of features (the intercept included).
func (f *ItemFeatures) Len() int { return len(f.Names) }

// unit is item j's feature indicator scaled to unit norm.
func (f *ItemFeatures) unit(j int) (idx []int32, w float64) {
	idx = f.Of[j]
	return idx, 1 / math.Sqrt(float64(len(idx)))
}

// FoldFeatureProfile: a feature model's V holds, for item j, its weights
// (the first Rank/2 columns) beside its public unit feature vector f_j (the
// last Rank/2); her row is her feature profile p = Σ_{i ∈ her items} f_i
// scaled to unit norm in the first half (zero in the second), so her score
// of j is p·(item j's weights).
const FoldFeatureProfile model.FoldIn = "feature-profile"

// FoldEASEFeatures: a hybrid's V holds, for item j, an EASE part (the
// first r = params "ease_rank" columns, fold-in ease-lowrank's V_j; zero
// for the items the Gram does not cover), then a feature model's weights
// and f_j (d columns each, as FoldFeatureProfile's). Her row is her EASE
// row Σ_{i ∈ her items} Z_i, then her unit profile p scaled by
// β·n/Σ_j max(p·w_j, 0) (β = params "feature_weight", n her items): the
// feature model's scores summed over the catalogue equal her number of
// items, the scale of EASE's, which predicts her indicator.
const FoldEASEFeatures model.FoldIn = "ease-features"

func init() {
	model.RegisterFoldIn(FoldFeatureProfile, foldFeatureProfile)
	model.RegisterFoldIn(FoldEASEFeatures, foldEASEFeatures)
}

func foldFeatureProfile(m *model.Model, items []int32, _ []float64) ([]float64, error) {
	if m.Rank%2 != 0 {
		return nil, fmt.Errorf("fold-in %s: rank %d is odd", FoldFeatureProfile, m.Rank)
	}
	row := make([]float64, m.Rank)
	featureProfile(m, items, 0, m.Rank/2, row)
	return row, nil
}

// featureProfile writes into row[off:off+d] her unit profile, the sum of
// the f_i stored in V's columns off+d … off+2d−1 of her items.
func featureProfile(m *model.Model, items []int32, off, d int, row []float64) {
	p := row[off : off+d]
	for _, i := range items {
		f := m.V[int(i)*m.Rank+off+d : int(i)*m.Rank+off+2*d]
		for k, x := range f {
			p[k] += x
		}
	}
	var s float64
	for _, x := range p {
		s += x * x
	}
	if s > 0 {
		for k := range p {
			p[k] /= math.Sqrt(s)
		}
	}
}

func foldEASEFeatures(m *model.Model, items []int32, _ []float64) ([]float64, error) {
	rf, err := param(m, "ease_rank")
	if err != nil {
		return nil, err
	}
	beta, err := param(m, "feature_weight")
	if err != nil {
		return nil, err
	}
	r := int(rf)
	if r < 0 || r > m.Rank || (m.Rank-r)%2 != 0 {
		return nil, fmt.Errorf("fold-in %s: ease rank %d does not fit rank %d", FoldEASEFeatures, r, m.Rank)
	}
	d := (m.Rank - r) / 2
	row := make([]float64, m.Rank)
	z := make([]float64, r)
	for _, i := range items {
		ZFromV(m.V[int(i)*m.Rank:int(i)*m.Rank+r], z)
		for k, x := range z {
			row[k] += x
		}
	}
	featureProfile(m, items, r, d, row)
	p := row[r : r+d]
	var total float64
	for j := range m.NumItems() {
		w := m.V[j*m.Rank+r : j*m.Rank+r+d]
		var s float64
		for k, x := range p {
			s += x * w[k]
		}
		total += max(s, 0)
	}
	scale := 0.0
	if total > 0 {
		scale = beta * float64(len(items)) / total
	}
	for k := range p {
		p[k] *= scale
	}
	return row, nil
}

// FeaturePopularity is the item side of the public-feature popularity
// model (post-processing of released counts and the public features):
// item j's weights are c_j (C + λI)⁻¹ f_j with c_j its noised count,
// f_j its unit feature vector, C = Σ_j max(c_j, 0) f_j f_jᵀ the catalogue's
// count-weighted feature second moment and λ = ridge·tr(C)/d. A user with
// unit profile p scores j by c_j·pᵀ(C + λI)⁻¹f_j: the item's popularity
// times how far its features match hers beyond what popularity alone
// explains. Items with a noised count ≤ 0 rank last, by count. It returns
// V (items × 2d: the weights, then f_j, for FoldFeatureProfile) and the
// item biases.
func FeaturePopularity(counts []float64, f *ItemFeatures, ridge float64) (v, bias []float64, err error) {
	n, d := len(counts), f.Len()
	if len(f.Of) != n {
		return nil, nil, fmt.Errorf("feature popularity: %d counts for %d items with features", n, len(f.Of))
	}
	inv, err := f.ridgeInverse(counts, ridge)
	if err != nil {
		return nil, nil, err
	}
	v, bias = make([]float64, n*2*d), make([]float64, n)
	for j, c := range counts {
		idx, w := f.unit(j)
		row := v[j*2*d : (j+1)*2*d]
		for _, k := range idx {
			row[d+int(k)] = w
		}
		if c <= 0 {
			bias[j] = Uncovered + c
			continue
		}
		for a := range d {
			var s float64
			for _, k := range idx {
				s += inv.At(a, int(k))
			}
			row[a] = c * w * s
		}
	}
	return v, bias, nil
}

// ridgeInverse is (C + λI)⁻¹, C = Σ_j max(c_j, 0) f_j f_jᵀ, λ = ridge·tr(C)/d.
func (f *ItemFeatures) ridgeInverse(counts []float64, ridge float64) (*mat.Dense, error) {
	d := f.Len()
	c := mat.NewSymDense(d, nil)
	for j, cj := range counts {
		if cj <= 0 {
			continue
		}
		idx, w := f.unit(j)
		for _, a := range idx {
			for _, b := range idx {
				if a <= b {
					c.SetSym(int(a), int(b), c.At(int(a), int(b))+cj*w*w)
				}
			}
		}
	}
	var tr float64
	for a := range d {
		tr += c.At(a, a)
	}
	lambda := ridge * tr / float64(d)
	if !(lambda > 0) {
		lambda = 1 // no positive count: any ridge keeps C + λI invertible
	}
	for a := range d {
		c.SetSym(a, a, c.At(a, a)+lambda)
	}
	var inv mat.Dense
	if err := inv.Inverse(c); err != nil {
		return nil, fmt.Errorf("feature popularity: inverting the feature moment: %w", err)
	}
	return &inv, nil
}
