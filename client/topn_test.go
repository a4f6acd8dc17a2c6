package client

import (
	"encoding/json"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/topn"
)

// TestRecommendTopN: a top-N release (fold-in ease-lowrank, scores not
// ratings) ranks on the device after a JSON round trip: two item groups on
// one factor, her positives in the first group, her non-positive rating
// ignored; she gets the rest of her group first and never her own items.
func TestRecommendTopN(t *testing.T) {
	cat, _ := model.NewCatalogue([]string{"a", "b", "c", "d", "e", "f"}, nil)
	m := model.NewPublic("dp-ease", cat)
	m.Output = model.Scores
	pos := 4.0
	m.Transform.Positive = &pos
	m.Rank, m.FoldIn = 1, topn.FoldEASELowRank
	m.V = []float64{0.5, 0.5, 0.5, -0.5, -0.5, -0.5}
	m.ItemBias = make([]float64, 6)
	m.Guarantee = privacy.Guarantee{Epsilon: 1, Unit: privacy.UnitUser, Notion: privacy.Joint, Status: privacy.Proven, Relation: privacy.RelationUserReplace}
	pub, err := api.FromModel(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(pub)
	if err != nil {
		t.Fatal(err)
	}
	var back api.PublicModel
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	recs, err := Recommend(&api.Release{ID: 1, Model: back}, Ratings{"a": 5, "b": 4, "d": 2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Item != "c" {
		t.Fatalf("recommendations %+v, want c first", recs)
	}
	for _, r := range recs {
		if r.Item == "a" || r.Item == "b" || r.Item == "d" {
			t.Fatalf("recommended her own item %s", r.Item)
		}
	}
}
