// Package model is the low-rank model every matrix method produces:
// factors (or, for output perturbation, a dense completed matrix), biases,
// the transformations applied to the training data, the method and its
// parameters, a fingerprint of the training data and the privacy
// Guarantee. Models are saved in a documented, versioned file format
// (docs/MODEL_FORMAT.md): read, predict and recommend work on any model.
package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/privacy"
)

// Output says what a model's score means.
type Output string

const (
	// Ratings: the score, after the inverse transformation, is a predicted rating.
	Ratings Output = "rating"
	// Signs: the score is a latent value whose sign predicts like (+1) or dislike (−1).
	Signs Output = "sign"
	// Scores: the score ranks items for a user (a top-N model); it is not a
	// rating and is never clamped or rescaled.
	Scores Output = "score"
)

// Rated reports whether scores are predicted ratings (Ratings, or the
// empty Output of older files).
func (o Output) Rated() bool { return o == Ratings || o == "" }

// Transform records what was done to the training ratings before the
// solver saw them; predictions undo it and eval/recommend apply it to
// their input.
type Transform struct {
	// Binarise, when set, mapped a rating v to +1 if v > Threshold, else −1.
	Binarise  bool    `json:"binarise,omitempty"`
	Threshold float64 `json:"threshold,omitempty"`
	// Scale, when set, mapped [FromMin, FromMax] linearly onto [ToMin, ToMax].
	Scale *Scale `json:"scale,omitempty"`
	// UserCentred: each user's mean (on the scaled values) was subtracted;
	// the means are the model's UserBias.
	UserCentred bool `json:"user_centred,omitempty"`
	// MaxPerUser is the cap ξ on ratings per user (0 = none).
	MaxPerUser int `json:"max_per_user,omitempty"`
	// TopItems is the N of a most-rated-items restriction (0 = none); the
	// kept items are the model's Items.
	TopItems int `json:"top_items,omitempty"`
	// Clamp is the declared rating scale predictions are clamped to (nil:
	// none). It is a declared public fact, never read from the data.
	Clamp *Range `json:"clamp,omitempty"`
	// Positive, when set, made the ratings ≥ *Positive the interactions of
	// a top-N model (the others were dropped); a user's fold-in uses the
	// same rule, and every item she rated is left out of her list.
	Positive *float64 `json:"positive,omitempty"`
}

// Scale is a linear map of the rating scale.
type Scale struct {
	FromMin, FromMax, ToMin, ToMax float64
}

// Apply maps v from the original scale.
func (s *Scale) Apply(v float64) float64 {
	return (v-s.FromMin)/(s.FromMax-s.FromMin)*(s.ToMax-s.ToMin) + s.ToMin
}

// Invert maps v back to the original scale.
func (s *Scale) Invert(v float64) float64 {
	return (v-s.ToMin)/(s.ToMax-s.ToMin)*(s.FromMax-s.FromMin) + s.FromMin
}

// Range is a closed interval [Min, Max] (a declared rating scale).
type Range struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Validate checks Min < Max, both finite.
func (r Range) Validate() error {
	if math.IsNaN(r.Min) || math.IsNaN(r.Max) || math.IsInf(r.Min, 0) || math.IsInf(r.Max, 0) || !(r.Min < r.Max) {
		return fmt.Errorf("range [%g, %g] must have finite MIN < MAX", r.Min, r.Max)
	}
	return nil
}

// Width is Max − Min.
func (r Range) Width() float64 { return r.Max - r.Min }

// FoldIn names how a user's own row is computed from the public item
// factors and her own ratings (on her device, or by privrec recommend
// --ratings).
type FoldIn string

const (
	// FoldRidge: u = argmin Σ_j (r_j − b − o − b_j − u·v_j)² + λ‖u‖², with the
	// user's bias b her mean residual when the model is user-centred.
	FoldRidge FoldIn = "ridge"
	// FoldProject: u = s · Σ_j r_j v_j with s = n_items / |Ω_u| (seed 001's
	// private SVD: each user projects her own row on the released subspace).
	FoldProject FoldIn = "project"
)

// Model is a trained low-rank (or dense) users × items model. The public
// model file holds the item side (Items, V, ItemBias, Offset), the
// transformations, parameters and Guarantee. Users, U, UserBias and the
// seen-item lists are held only when the method's neighbouring relation
// makes them public (entry-level central DP, where who rated what is
// public, and non-private models); a joint-DP model keeps them out and
// hands each user her own UserState instead.
type Model struct {
	Method    string         `json:"method"`
	Params    map[string]any `json:"params,omitempty"`
	Guarantee privacy.Guarantee
	Transform Transform `json:"transform"`
	Output    Output    `json:"output"`

	Users []string `json:"-"`
	Items []string `json:"-"`
	// Titles are the catalogue's item titles, parallel to Items (nil: none).
	Titles []string `json:"-"`

	// FoldIn and FoldLambda say how a user's row is computed from her own
	// ratings when the model holds no users (joint DP).
	FoldIn     FoldIn  `json:"fold_in,omitempty"`
	FoldLambda float64 `json:"fold_lambda,omitempty"`
	// UserDamping shrinks a user's own bias (her mean residual, when
	// Transform.UserCentred) toward zero: Σ residuals / (n + UserDamping).
	UserDamping float64 `json:"user_damping,omitempty"`

	// Rank is the number of factor columns; U is users × Rank and V is
	// items × Rank, both row-major.
	Rank int
	U, V []float64
	// Dense, when non-nil, is the users × items score matrix (row-major)
	// used instead of the factors (output perturbation releases one).
	Dense []float64

	Offset   float64
	UserBias []float64 // per user (nil: zero)
	ItemBias []float64 // per item (nil: zero)

	// SeenPtr/SeenItems list, per user, the items rated in training
	// (CSR), so that recommendations exclude them.
	SeenPtr   []int64
	SeenItems []int32

	userIndex, itemIndex map[string]int32
}

// NumUsers is the number of users the model knows.
func (m *Model) NumUsers() int { return len(m.Users) }

// NumItems is the number of items the model knows.
func (m *Model) NumItems() int { return len(m.Items) }

// Validate checks that the arrays match the shape.
func (m *Model) Validate() error {
	nu, ni := len(m.Users), len(m.Items)
	if m.Dense != nil {
		if len(m.Dense) != nu*ni {
			return fmt.Errorf("model: dense scores have %d values, want %d × %d", len(m.Dense), nu, ni)
		}
	} else if m.Rank < 0 || (len(m.U) != nu*m.Rank && !(nu == 0 && m.U == nil)) || len(m.V) != ni*m.Rank {
		return fmt.Errorf("model: factor sizes %d and %d do not match %d users, %d items, rank %d", len(m.U), len(m.V), nu, ni, m.Rank)
	}
	if m.Titles != nil && len(m.Titles) != ni {
		return fmt.Errorf("model: %d titles for %d items", len(m.Titles), ni)
	}
	if m.UserBias != nil && len(m.UserBias) != nu {
		return fmt.Errorf("model: %d user biases for %d users", len(m.UserBias), nu)
	}
	if m.ItemBias != nil && len(m.ItemBias) != ni {
		return fmt.Errorf("model: %d item biases for %d items", len(m.ItemBias), ni)
	}
	if m.SeenPtr != nil {
		if len(m.SeenPtr) != nu+1 || m.SeenPtr[nu] != int64(len(m.SeenItems)) {
			return fmt.Errorf("model: seen-item lists do not match %d users", nu)
		}
		for _, it := range m.SeenItems {
			if it < 0 || int(it) >= ni {
				return fmt.Errorf("model: seen item index %d out of range", it)
			}
		}
	}
	for _, arr := range [][]float64{m.U, m.V, m.Dense, m.UserBias, m.ItemBias} {
		for _, x := range arr {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("model: holds a non-finite value")
			}
		}
	}
	return nil
}

func (m *Model) index() {
	if m.userIndex != nil {
		return
	}
	m.userIndex = make(map[string]int32, len(m.Users))
	for i, u := range m.Users {
		m.userIndex[u] = int32(i)
	}
	m.itemIndex = make(map[string]int32, len(m.Items))
	for i, it := range m.Items {
		m.itemIndex[it] = int32(i)
	}
}

// UserIndex returns the dense index of an external user ID.
func (m *Model) UserIndex(id string) (int32, bool) {
	m.index()
	u, ok := m.userIndex[id]
	return u, ok
}

// ItemIndex returns the dense index of an external item ID.
func (m *Model) ItemIndex(id string) (int32, bool) {
	m.index()
	i, ok := m.itemIndex[id]
	return i, ok
}

// Score is the model's value for (u, i) on the solver's (transformed) scale.
func (m *Model) Score(u, i int32) float64 {
	if m.Dense != nil {
		return m.withBiases(m.Dense[int(u)*len(m.Items)+int(i)], u, i)
	}
	r := m.Rank
	return m.withBiases(dot(m.U[int(u)*r:int(u)*r+r], m.V[int(i)*r:int(i)*r+r]), u, i)
}

// withBiases is s plus the offset and the biases of user u and item i.
func (m *Model) withBiases(s float64, u, i int32) float64 {
	s += m.Offset
	if m.UserBias != nil {
		s += m.UserBias[u]
	}
	if m.ItemBias != nil {
		s += m.ItemBias[i]
	}
	return s
}

// dot is a·b (len(a) terms, in order).
func dot(a, b []float64) float64 {
	var s float64
	for k := range a {
		s += a[k] * b[k]
	}
	return s
}

// Predict is the model's prediction for (u, i): a rating on the original
// scale (clamped to it) for rating models, or the latent score for sign
// models.
func (m *Model) Predict(u, i int32) float64 {
	return m.output(m.Score(u, i))
}

// output turns a score into the model's prediction: back to the original
// scale and clamped for a rating model, the score itself otherwise.
func (m *Model) output(s float64) float64 {
	if !m.Output.Rated() {
		return s
	}
	if m.Transform.Scale != nil {
		s = m.Transform.Scale.Invert(s)
	}
	return m.clamp(s)
}

// predictAll writes Predict(u, i) of every item i into out (len
// NumItems): the same sums in the same order as Score, in one loop
// (ranking a user's items called Predict once per item).
func (m *Model) predictAll(u int32, out []float64) {
	if m.Dense != nil {
		for i := range out {
			out[i] = m.Predict(u, int32(i))
		}
		return
	}
	r := m.Rank
	uu := m.U[int(u)*r : int(u)*r+r]
	for i := range out {
		out[i] = m.output(m.withBiases(dot(uu, m.V[i*r:i*r+r]), u, int32(i)))
	}
}

func (m *Model) clamp(s float64) float64 {
	if c := m.Transform.Clamp; c != nil {
		s = min(max(s, c.Min), c.Max)
	}
	return s
}

// Seen returns the items user u rated in training (nil when not recorded).
func (m *Model) Seen(u int32) []int32 {
	if m.SeenPtr == nil {
		return nil
	}
	return m.SeenItems[m.SeenPtr[u]:m.SeenPtr[u+1]]
}

// Recommendation is one recommended item.
type Recommendation struct {
	Item  string  `json:"item"`
	Title string  `json:"title,omitempty"`
	Score float64 `json:"score"`
}

// Recommend returns the k items with the highest predictions for user u,
// excluding items u rated in training and any in exclude.
func (m *Model) Recommend(u int32, k int, exclude []int32) []Recommendation {
	scores := make([]float64, len(m.Items))
	m.predictAll(u, scores)
	return m.top(scores, k, append(slices.Clone(m.Seen(u)), exclude...))
}

// topK ranks every item not in skip by pred (ties by index), keeping a
// heap of the best k (TopIndices): a full sort of the catalogue per user
// made evaluating top-k metrics on MovieLens-1M several times slower than
// training.
func (m *Model) topK(pred func(int32) float64, k int, skip []int32) []Recommendation {
	scores := make([]float64, len(m.Items))
	for i := range scores {
		scores[i] = pred(int32(i))
	}
	return m.top(scores, k, skip)
}

// top lists the k best items by scores (one per item), leaving out skip.
func (m *Model) top(scores []float64, k int, skip []int32) []Recommendation {
	idx := TopIndices(scores, k, skip)
	out := make([]Recommendation, len(idx))
	for j, i := range idx {
		out[j] = Recommendation{Item: m.Items[i], Score: scores[i]}
		if m.Titles != nil {
			out[j].Title = m.Titles[i]
		}
	}
	return out
}
