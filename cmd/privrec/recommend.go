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
	fs := newFlags("recommend --model MODEL --user ID [--user-state DIR | --ratings FILE] [-k 10] [--json]", `
List the k items with the highest predicted ratings for one user, leaving
out the items she rated. Items are named by title when the model's
catalogue had titles at training, or from --items FILE.

A model that holds its users (non-private and entry-level models) works
alone. A joint-DP model holds only the public item side; a user's
recommendations then come from the public model plus her own part:
  --user-state DIR   her own state, as privrec train --user-state wrote it;
  --ratings FILE     her own ratings (any ratings format; the rows of --user
                     are used), folded in on the public item factors — the
                     computation her device does.`,
		`  privrec recommend --model ml100k.model --user 42 -k 5
  privrec recommend --model ml.model --user 42 --user-state ml-users/
  privrec recommend --model ml.model --user 42 --ratings my-ratings.tsv --format tsv`)
	var d dataFlags
	d.add(fs, "ratings")
	modelPath := fs.String("model", "", "model file from privrec train")
	user := fs.String("user", "", "external user ID, as in the training data")
	stateDir := fs.String("user-state", "", "directory of users' own states (joint-DP models)")
	k := fs.Int("k", 10, "number of recommendations")
	itemsPath := fs.String("items", "", "catalogue with item titles (u.item, movies.dat, ID<TAB>title), for models that carry none")
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
	if *stateDir != "" && d.path != "" {
		return usagef("give either --user-state or --ratings, not both")
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
	var recs []model.Recommendation
	from := "the model"
	switch {
	case *stateDir != "":
		st, err := model.LoadUserState(*stateDir, *user)
		if err != nil {
			return err
		}
		if err := m.CheckState(st); err != nil {
			return err
		}
		recs, from = m.RecommendFor(st, *k), "her own state"
	case d.path != "":
		r, err := d.read("ratings")
		if err != nil {
			return err
		}
		u, ok := r.Users.Lookup(*user)
		if !ok {
			return fmt.Errorf("%s has no ratings of user %q", d.path, *user)
		}
		ids, fv := r.UserRatings(u)
		st, err := m.FoldInUser(*user, ids, fv)
		if err != nil {
			return err
		}
		recs, from = m.RecommendFor(st, *k), "her own ratings folded in"
	default:
		if m.Users == nil {
			return usagef("the %s model holds no users (joint DP): pass --user-state DIR or --ratings FILE", m.Method)
		}
		u, ok := m.UserIndex(*user)
		if !ok {
			return fmt.Errorf("user %q is not in the model (it knows %d users)", *user, m.NumUsers())
		}
		recs = m.Recommend(u, *k, nil)
	}
	if *itemsPath != "" {
		c, err := model.LoadCatalogue(*itemsPath)
		if err != nil {
			return usagef("--items: %v", err)
		}
		if titles := c.Titles(); titles != nil {
			for i := range recs {
				if j, ok := c.Index(recs[i].Item); ok && recs[i].Title == "" {
					recs[i].Title = titles[j]
				}
			}
		}
	}
	if *jsonOut {
		return writeJSON(out, map[string]any{"user": *user, "method": m.Method, "recommendations": recs, "guarantee": m.Guarantee})
	}
	fmt.Fprintf(out, "Top %d for user %s (%s, from %s):\n", len(recs), *user, m.Method, from)
	for i, r := range recs {
		if r.Title != "" {
			fmt.Fprintf(out, "%3d. %-40s (item %s)  score %.3f\n", i+1, r.Title, r.Item, r.Score)
		} else {
			fmt.Fprintf(out, "%3d. item %-12s score %.3f\n", i+1, r.Item, r.Score)
		}
	}
	fmt.Fprintf(out, "Guarantee: %s\n", m.Guarantee)
	return nil
}
