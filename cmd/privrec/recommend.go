package main

import (
	"context"
	"fmt"
	"io"

	"github.com/privrec/privrec/model"
)

func init() {
	register(&command{name: "recommend", summary: "top-k recommendations for a user from a model", run: runRecommend})
}

func runRecommend(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("recommend --model MODEL --user ID [-k 10] [--json]", `
List the k items with the highest predicted ratings for one user, leaving
out the items she rated in training.`,
		`  privrec recommend --model ml100k.model --user 42 -k 5`)
	modelPath := fs.String("model", "", "model file from privrec train")
	user := fs.String("user", "", "external user ID, as in the training data")
	k := fs.Int("k", 10, "number of recommendations")
	jsonOut := fs.Bool("json", false, "print JSON on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" || *user == "" {
		return usagef("--model and --user are required")
	}
	if *k <= 0 {
		return usagef("-k must be positive")
	}
	kind, err := model.PeekKind(*modelPath)
	if err != nil {
		return err
	}
	if kind != model.KindLowRank {
		return fmt.Errorf("%s is a %q model; recommend works on matrix (low-rank) models", *modelPath, kind)
	}
	m, err := model.Load(*modelPath)
	if err != nil {
		return err
	}
	u, ok := m.UserIndex(*user)
	if !ok {
		return fmt.Errorf("user %q is not in the model (it knows %d users)", *user, m.NumUsers())
	}
	recs := m.Recommend(u, *k, nil)
	if *jsonOut {
		return writeJSON(out, map[string]any{"user": *user, "method": m.Method, "recommendations": recs, "guarantee": m.Guarantee})
	}
	fmt.Fprintf(out, "Top %d for user %s (%s):\n", len(recs), *user, m.Method)
	for i, r := range recs {
		fmt.Fprintf(out, "%3d. item %-12s score %.3f\n", i+1, r.Item, r.Score)
	}
	fmt.Fprintf(out, "Guarantee: %s\n", m.Guarantee)
	return nil
}
