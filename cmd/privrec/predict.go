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
	fs := newFlags("predict --model MODEL --data PAIRS [--user-state DIR | --history FILE] [--json]", predictSynopsis,
		`  privrec predict --model ml100k.model --data u1.test > predictions.tsv
  privrec predict --model ml-dp.model --data pairs.tsv --user-state ml-users/ --json
  privrec predict --model ml-dp.model --data pairs.tsv --history u1.base --format movielens-100k`)
	modelPath := fs.String("model", "", "model file from privrec train")
	pairsPath := fs.String("data", "", "the (user, item) pairs, one per line")
	fs.StringVar(pairsPath, "in", "", "same as --data")
	stateDir := fs.String("user-state", "", "directory of the users' own states (joint-DP models)")
	var h dataFlags
	h.addFormat(fs)
	history := fs.String("history", "", "the users' own ratings, folded in on the public model (joint-DP models)")
	jsonOut := fs.Bool("json", false, "print one JSON object instead of TSV")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	switch {
	case *modelPath == "" || *pairsPath == "":
		return usagef("--model and --data PAIRS are required")
	case *stateDir != "" && *history != "":
		return usagef("give either --user-state or --history, not both")
	}
	m, err := loadMatrixModel(*modelPath, "predict works")
	if err != nil {
		return err
	}
	f, err := os.Open(*pairsPath)
	if err != nil {
		return err
	}
	pairs, err := ratingio.ReadPairs(f, *pairsPath)
	f.Close()
	if err != nil {
		return err
	}
	// Each user's part: her row of the model, her stored state, or her
	// history folded in.
	var states *model.UserStates
	switch {
	case *stateDir != "":
		if states, err = model.LoadUserStates(*stateDir); err != nil {
			return err
		}
		if err := fitStates(states, m, *modelPath, *stateDir); err != nil {
			return err
		}
	case *history != "":
		h.path = *history
		r, err := h.read()
		if err != nil {
			return fmt.Errorf("--history: %w", err)
		}
		states = &model.UserStates{Method: m.Method, Rank: m.Rank}
		for u := range r.NumUsers() {
			ids, vals := r.UserRatings(int32(u))
			st, err := m.FoldInUser(r.Users.Name(int32(u)), ids, vals)
			if err != nil {
				return fmt.Errorf("--history: %w", err)
			}
			states.States = append(states.States, *st)
		}
	case m.Users == nil:
		return usagef("the %s model holds no users (joint DP): pass --user-state DIR or --history FILE", m.Method)
	}
	preds := make([]float64, len(pairs))
	for k, p := range pairs {
		if err := ctx.Err(); err != nil {
			return err
		}
		i, ok := m.ItemIndex(p.Item)
		if !ok {
			return fmt.Errorf("%s:%d: item %q is not in the model's catalogue", *pairsPath, p.Line, p.Item)
		}
		if states != nil {
			st, ok := states.Lookup(p.User)
			if !ok {
				return fmt.Errorf("%s:%d: user %q has no state in %s", *pairsPath, p.Line, p.User, stateSource(*stateDir, *history))
			}
			if err := m.CheckState(st); err != nil {
				return err
			}
			preds[k] = m.PredictFor(st, i)
			continue
		}
		u, ok := m.UserIndex(p.User)
		if !ok {
			return fmt.Errorf("%s:%d: user %q is not in the model (it knows %d users)", *pairsPath, p.Line, p.User, m.NumUsers())
		}
		preds[k] = m.Predict(u, i)
	}
	if *jsonOut {
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
		return writeJSON(out, map[string]any{"model": *modelPath, "predictions": rows})
	}
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
