package methods

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// EvalOptions control evaluation.
type EvalOptions struct {
	// K is the cut-off for top-k metrics (0: skip them).
	K int
	// Relevant is the rating at or above which a held-out item counts as
	// relevant for top-k metrics (NaN or 0: the held-out ratings' mean).
	Relevant float64
	// Truth, when non-nil, is the full true matrix (synthetic data), for ARE.
	Truth *ratings.Matrix
	// States are the users' own states of a model that holds no users
	// (joint DP); evaluation joins them to the public model in memory.
	States *model.UserStates
	// WorstItems, when positive, lists that many items with the highest
	// held-out RMSE (rating models) among those with at least MinItemRatings
	// held-out ratings (0: 1), with their titles (Report.Items).
	WorstItems, MinItemRatings int
	// Titles names items by ID (e.g. from a catalogue given to eval), for
	// items whose model carries no title.
	Titles map[string]string
}

// ItemScore is one item's held-out error.
type ItemScore struct {
	Item  string  `json:"item"`
	Title string  `json:"title,omitempty"`
	N     int     `json:"n"`
	RMSE  float64 `json:"rmse"`
}

// Report is the outcome of an evaluation; metrics that do not apply are
// nil and omitted from JSON.
type Report struct {
	N         int      `json:"n"`
	Dropped   int      `json:"dropped,omitempty"`
	RMSE      *float64 `json:"rmse,omitempty"`
	MAE       *float64 `json:"mae,omitempty"`
	Accuracy  *float64 `json:"accuracy,omitempty"`
	ARE       *float64 `json:"are,omitempty"`
	K         int      `json:"k,omitempty"`
	Precision *float64 `json:"precision_at_k,omitempty"`
	Recall    *float64 `json:"recall_at_k,omitempty"`
	NDCG      *float64 `json:"ndcg_at_k,omitempty"`
	// Items are the worst items by held-out RMSE (EvalOptions.WorstItems).
	Items  []ItemScore `json:"worst_items,omitempty"`
	Method string      `json:"method"`
	// Guarantee is the model's, in plain words.
	Guarantee string `json:"guarantee"`
}

// Evaluator scores a saved model of one kind on held-out ratings.
type Evaluator func(ctx context.Context, modelPath string, test *ratings.Matrix, opt EvalOptions) (*Report, error)

var evaluators = map[string]Evaluator{}

// RegisterEvaluator makes eval understand models of a kind.
func RegisterEvaluator(kind string, e Evaluator) {
	if _, dup := evaluators[kind]; dup {
		panic("methods: duplicate evaluator for kind " + kind)
	}
	evaluators[kind] = e
}

// EvaluatorFor returns the evaluator of a model kind.
func EvaluatorFor(kind string) (Evaluator, error) {
	e, ok := evaluators[kind]
	if !ok {
		return nil, fmt.Errorf("no evaluator for model kind %q", kind)
	}
	return e, nil
}
