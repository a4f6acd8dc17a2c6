package client

import (
	"fmt"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/service/api"
)

// Recommend computes the user's own top-k from the public part of a
// release and her own ratings, on her device: her row is folded in from
// the public item factors (model.FoldInUser) and the items she rated are
// left out (model.RecommendFor). Nothing is sent anywhere.
func Recommend(rel *api.Release, r Ratings, k int) ([]model.Recommendation, error) {
	m, err := rel.Model.Model()
	if err != nil {
		return nil, fmt.Errorf("client: release %d: %w", rel.ID, err)
	}
	return RecommendFrom(m, r, k)
}

// RecommendFrom is Recommend on a public model the device already holds
// (e.g. one it built from a two-aggregator release, dap.ReleasedModel).
func RecommendFrom(m *model.Model, r Ratings, k int) ([]model.Recommendation, error) {
	if k < 1 {
		return nil, fmt.Errorf("client: k must be ≥ 1, got %d", k)
	}
	ids, vals := r.Items()
	st, err := m.FoldInUser("me", ids, vals)
	if err != nil {
		return nil, fmt.Errorf("client: folding in: %w", err)
	}
	return m.RecommendFor(st, k), nil
}
