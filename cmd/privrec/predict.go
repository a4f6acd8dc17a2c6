package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
)

func init() {
	register(&command{name: "predict", summary: "export a model's predictions for (user, item) pairs: TSV or JSON", run: runPredict})
}

const predictSynopsis = `
Predict the model's value for each (user, item) pair of --data PAIRS and
write them out: the predicted rating on the original scale for a rating
model (clamped to it), the latent score for a sign or top-N model. PAIRS
holds a user ID and an item ID per line, separated by a tab, a comma, "::"
or spaces; further fields (a rating, a time) are ignored, so a held-out
ratings file serves as it is, and a first line of column names (user,item)
is skipped.

A model that holds its users (non-private and entry-level models) answers
alone. A joint-DP model holds only the public item side; each user's
predictions then come from her own part:
  --user-state DIR   the users' own states, as privrec train --user-state
                     wrote them with this model (others are refused);
  --history FILE     the users' own ratings (any ratings format), folded in
                     on the public item factors, as her device would.

Output: TSV with a header line "user  item  prediction" (tab-separated),
or with --json one object {"model", "predictions": [{"user", "item",
"prediction"}, …]}. A pair naming an item the model does not know, or a
user it cannot score, is an error naming its line; nothing is written.
Predictions made from users' states or histories are each user's own
outputs (joint DP covers what everyone else sees): keep such a file inside
the trusted boundary, like the states themselves.`

func runPredict(ctx context.Context, args []string, out io.Writer) error {
	a, err := parsePredictArgs(args)
	if err != nil {
		return err
	}
	m, err := loadMatrixModel(a.modelPath, "predict works")
	if err != nil {
		return err
	}
	pairs, err := readPairsFile(a.pairsPath)
	if err != nil {
		return err
	}
	states, err := predictStates(m, a)
	if err != nil {
		return err
	}
	preds, err := predictPairs(ctx, m, states, pairs, a)
	if err != nil {
		return err
	}
	if a.json {
		return writePredictionsJSON(out, a.modelPath, pairs, preds)
	}
	return writePredictionsTSV(out, pairs, preds)
}

// predictArgs is predict's command line.
type predictArgs struct {
	modelPath, pairsPath, stateDir, history string
	h                                       dataFlags // --history's format
	json                                    bool
}

func parsePredictArgs(args []string) (*predictArgs, error) {
	fs := newFlags("predict --model MODEL --data PAIRS [--user-state DIR | --history FILE] [--json]", predictSynopsis,
		`  privrec predict --model ml100k.model --data u1.test > predictions.tsv
  privrec predict --model ml-dp.model --data pairs.tsv --user-state ml-users/ --json
  privrec predict --model ml-dp.model --data pairs.tsv --history u1.base --format movielens-100k`)
	a := &predictArgs{}
	fs.StringVar(&a.modelPath, "model", "", "model file from privrec train")
	fs.StringVar(&a.pairsPath, "data", "", "the (user, item) pairs, one per line")
	fs.StringVar(&a.pairsPath, "in", "", "same as --data")
	fs.StringVar(&a.stateDir, "user-state", "", "directory of the users' own states (joint-DP models)")
	a.h.addFormat(fs)
	fs.StringVar(&a.history, "history", "", "the users' own ratings, folded in on the public model (joint-DP models)")
	fs.BoolVar(&a.json, "json", false, "print one JSON object instead of TSV")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	switch {
	case a.modelPath == "" || a.pairsPath == "":
		return nil, usagef("--model and --data PAIRS are required")
	case a.stateDir != "" && a.history != "":
		return nil, usagef("give either --user-state or --history, not both")
	}
	return a, nil
}

// readPairsFile reads the (user, item) pairs of path.
func readPairsFile(path string) ([]ratingio.Pair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ratingio.ReadPairs(f, path)
}

// predictStates is each user's part when the model does not hold it: her
// stored state, or her history folded in; nil when the model's own rows
// serve.
func predictStates(m *model.Model, a *predictArgs) (*model.UserStates, error) {
	switch {
	case a.stateDir != "":
		states, err := model.LoadUserStates(a.stateDir)
		if err != nil {
			return nil, err
		}
		if err := fitStates(states, m, a.modelPath, a.stateDir); err != nil {
			return nil, err
		}
		return states, nil
	case a.history != "":
		a.h.path = a.history
		r, err := a.h.read()
		if err != nil {
			return nil, fmt.Errorf("--history: %w", err)
		}
		return foldInHistories(m, r)
	case m.Users == nil:
		return nil, usagef("the %s model holds no users (joint DP): pass --user-state DIR or --history FILE", m.Method)
	}
	return nil, nil
}

// foldInHistories is every user's state of r folded in on the public
// model, as her device computes it.
func foldInHistories(m *model.Model, r *ratings.Matrix) (*model.UserStates, error) {
	states := &model.UserStates{Method: m.Method, Rank: m.Rank}
	for u := range r.NumUsers() {
		ids, vals := r.UserRatings(int32(u))
		st, err := m.FoldInUser(r.Users.Name(int32(u)), ids, vals)
		if err != nil {
			return nil, fmt.Errorf("--history: %w", err)
		}
		states.States = append(states.States, *st)
	}
	return states, nil
}

// predictPairs is the model's prediction for each pair: from the user's
// state when states is not nil, else from the model's row of her.
func predictPairs(ctx context.Context, m *model.Model, states *model.UserStates, pairs []ratingio.Pair, a *predictArgs) ([]float64, error) {
	preds := make([]float64, len(pairs))
	for k, p := range pairs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		i, ok := m.ItemIndex(p.Item)
		if !ok {
			return nil, fmt.Errorf("%s:%d: item %q is not in the model's catalogue", a.pairsPath, p.Line, p.Item)
		}
		if states != nil {
			st, ok := states.Lookup(p.User)
			if !ok {
				return nil, fmt.Errorf("%s:%d: user %q has no state in %s", a.pairsPath, p.Line, p.User, stateSource(a.stateDir, a.history))
			}
			if err := m.CheckState(st); err != nil {
				return nil, err
			}
			preds[k] = m.PredictFor(st, i)
			continue
		}
		u, ok := m.UserIndex(p.User)
		if !ok {
			return nil, fmt.Errorf("%s:%d: user %q is not in the model (it knows %d users)", a.pairsPath, p.Line, p.User, m.NumUsers())
		}
		preds[k] = m.Predict(u, i)
	}
	return preds, nil
}

// writePredictionsJSON writes {"model", "predictions": [{"user", "item",
// "prediction"}, …]}.
func writePredictionsJSON(out io.Writer, modelPath string, pairs []ratingio.Pair, preds []float64) error {
	type row struct {
		User       string   `json:"user"`
		Item       string   `json:"item"`
		Prediction *float64 `json:"prediction"`
	}
	rows := make([]row, len(pairs))
	for k, p := range pairs {
		v := preds[k]
		rows[k] = row{p.User, p.Item, &v}
	}
	return writeJSON(out, map[string]any{"model": modelPath, "predictions": rows})
}

// writePredictionsTSV writes "user  item  prediction" lines under a header.
func writePredictionsTSV(out io.Writer, pairs []ratingio.Pair, preds []float64) error {
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "user\titem\tprediction")
	for k, p := range pairs {
		fmt.Fprintf(w, "%s\t%s\t%s\n", p.User, p.Item, strconv.FormatFloat(preds[k], 'g', 6, 64))
	}
	return w.Flush()
}

// stateSource names where users' states came from, for errors.
func stateSource(dir, history string) string {
	if dir != "" {
		return dir
	}
	return "--history " + history
}

// loadMatrixModel loads a low-rank matrix model, refusing other kinds
// (tensor models) with what works on matrix models only: "WHAT on matrix
// (low-rank) models".
func loadMatrixModel(path, what string) (*model.Model, error) {
	kind, err := model.PeekKind(path)
	if err != nil {
		return nil, err
	}
	if kind != model.KindLowRank {
		return nil, fmt.Errorf("%s is a %q model; %s on matrix (low-rank) models", path, kind, what)
	}
	return model.Load(path)
}
