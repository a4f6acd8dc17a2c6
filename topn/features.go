package topn

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
)

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
func FeaturePopularity(counts []float64, f *model.ItemFeatures, ridge float64) (v, bias []float64, err error) {
	n, d := len(counts), f.Len()
	if len(f.Of) != n {
		return nil, nil, fmt.Errorf("feature popularity: %d counts for %d items with features", n, len(f.Of))
	}
	inv, err := ridgeInverse(f, counts, ridge)
	if err != nil {
		return nil, nil, err
	}
	v, bias = make([]float64, n*2*d), make([]float64, n)
	for j, c := range counts {
		idx, w := f.Unit(j)
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
func ridgeInverse(f *model.ItemFeatures, counts []float64, ridge float64) (*mat.Dense, error) {
	d := f.Len()
	c := mat.NewSymDense(d, nil)
	for j, cj := range counts {
		if cj <= 0 {
			continue
		}
		idx, w := f.Unit(j)
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

// AddFeaturePrior adds weight × S to the Gram g over the covered items
// (g's column q is item covered[q]), S_ab = f̂_a·f̂_b the cosine of the
// two items' public features without the intercept (f̂ the indicator of
// an item's other features scaled to unit norm; an item with none adds
// nothing). It is the side-information prior of Jeunen, Van Balen and
// Goethals ("Closed-Form Models for Collaborative Filtering with
// Side-Information", RecSys 2020): EASE on XᵀX + β FFᵀ, as if every
// feature were a user who holds its items. On a noised Gram it pulls the
// weights of items the noise cannot separate toward their features'
// likeness; it reads only public features, so it is post-processing.
func AddFeaturePrior(g *mat.SymDense, f *model.ItemFeatures, covered []int, weight float64) error {
	m := g.SymmetricDim()
	if len(covered) != m {
		return fmt.Errorf("feature prior: %d covered items for a Gram of %d", len(covered), m)
	}
	// holders[k] are the Gram columns of the covered items with feature k
	// and their unit weights.
	type holder struct {
		col int
		w   float64
	}
	holders := make([][]holder, f.Len())
	for q, j := range covered {
		if j < 0 || j >= len(f.Of) {
			return fmt.Errorf("feature prior: item %d outside the %d items with features", j, len(f.Of))
		}
		var own []int32
		for _, k := range f.Of[j] {
			if k != 0 { // not the intercept
				own = append(own, k)
			}
		}
		for _, k := range own {
			holders[k] = append(holders[k], holder{q, 1 / math.Sqrt(float64(len(own)))})
		}
	}
	raw := g.RawSymmetric()
	for _, hs := range holders {
		for x, a := range hs {
			for _, b := range hs[x:] {
				p, r := min(a.col, b.col), max(a.col, b.col)
				raw.Data[p*raw.Stride+r] += weight * a.w * b.w
			}
		}
	}
	return nil
}
