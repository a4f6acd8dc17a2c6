package api

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
)

// PublicModel is the public part of a low-rank release as JSON: the item
// side (factors, biases, catalogue), the transformations and how a user's
// own row is folded in. It never holds users.
type PublicModel struct {
	Method      string          `json:"method"`
	Params      map[string]any  `json:"params,omitempty"`
	Transform   model.Transform `json:"transform"`
	Output      model.Output    `json:"output"`
	FoldIn      model.FoldIn    `json:"fold_in,omitempty"`
	FoldLambda  float64         `json:"fold_lambda,omitempty"`
	UserDamping float64         `json:"user_damping,omitempty"`
	Items       []string        `json:"items"`
	Titles      []string        `json:"titles,omitempty"`
	Rank        int             `json:"rank"`
	// ItemFactors is items × rank, row-major.
	ItemFactors []float64 `json:"item_factors"`
	ItemBias    []float64 `json:"item_bias,omitempty"`
	Offset      float64   `json:"offset"`
}

// FromModel converts the public part of a model. A model that still holds
// users (rows, biases or seen items) or a dense score matrix is refused:
// only the item side may be served.
func FromModel(m *model.Model) (PublicModel, error) {
	if len(m.Users) > 0 || len(m.U) > 0 || m.UserBias != nil || m.SeenPtr != nil {
		return PublicModel{}, fmt.Errorf("api: the model holds users; split them off (model.SplitUsers) before serving its public part")
	}
	if m.Dense != nil {
		return PublicModel{}, fmt.Errorf("api: a dense model cannot be served (no item factors to fold a user in)")
	}
	if err := m.Validate(); err != nil {
		return PublicModel{}, err
	}
	p := PublicModel{
		Method: m.Method, Params: Finite(m.Params), Transform: m.Transform, Output: m.Output,
		FoldIn: m.FoldIn, FoldLambda: m.FoldLambda, UserDamping: m.UserDamping,
		Items: append([]string(nil), m.Items...), Rank: m.Rank,
		ItemFactors: append([]float64{}, m.V...), Offset: m.Offset,
	}
	if m.Titles != nil {
		p.Titles = append([]string(nil), m.Titles...)
	}
	if m.ItemBias != nil {
		p.ItemBias = append([]float64(nil), m.ItemBias...)
	}
	for _, x := range []float64{m.Offset, m.FoldLambda, m.UserDamping} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return PublicModel{}, fmt.Errorf("api: the model holds a non-finite value")
		}
	}
	return p, nil
}

// Model rebuilds a model.Model (item side only) from the public part, for
// FoldInUser and RecommendFor on the user's device.
func (p PublicModel) Model() (*model.Model, error) {
	if p.Rank < 0 || len(p.ItemFactors) != len(p.Items)*p.Rank {
		return nil, fmt.Errorf("api: %d item factors for %d items of rank %d", len(p.ItemFactors), len(p.Items), p.Rank)
	}
	m := &model.Model{
		Method: p.Method, Params: p.Params, Transform: p.Transform, Output: p.Output,
		FoldIn: p.FoldIn, FoldLambda: p.FoldLambda, UserDamping: p.UserDamping,
		Items: p.Items, Titles: p.Titles, Rank: p.Rank, V: p.ItemFactors, U: []float64{},
		ItemBias: p.ItemBias, Offset: p.Offset,
	}
	if m.Output == "" {
		m.Output = model.Ratings
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return m, nil
}
