package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/privrec/privrec/model"
)

func init() {
	register(&command{name: "recommend", summary: "top-k recommendations for a user, or for every user of a ratings file (--all-users)", run: runRecommend})
}

func runRecommend(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("recommend --model MODEL --user ID [--user-state DIR | --data FILE] [-k 10] [--json]\n       privrec recommend --model MODEL --data FILE --all-users [-k 10] [--json] [--workers N]", `
List the k items with the highest predicted ratings for one user, leaving
out the items she rated. Items are named by title when the model's
catalogue had titles at training, or from --items FILE.

A model that holds its users (non-private and entry-level models) works
alone. A joint-DP model holds only the public item side; a user's
recommendations then come from the public model plus her own part:
  --user-state DIR   her own state, as privrec train --user-state wrote it;
  --data FILE        her own ratings (any ratings format; the rows of --user
                     are used), folded in on the public item factors — the
                     computation her device does.

Batch scoring: --all-users with --data FILE lists the top k of every
user of FILE, each from her own ratings in FILE through the public model
(fold-in, exactly the list of --user ID --data FILE), on all cores
(--workers N). The output streams, in the file's user order, so memory
stays bounded (the ratings file itself is held): TSV with a header line,
  user  rank  item  score  title
(tab-separated; rank 1 is best; score as privrec recommend prints it; the
title empty when neither the model nor --items has one), or with --json
JSON lines, one object per user:
  {"user":"42","recommendations":[{"item":"50","title":"Star Wars (1977)","score":4.61},…]}
A summary (users, seconds) goes to the log on stderr. Ratings of items
outside the model's catalogue are ignored, with a warning.`,
		`  privrec recommend --model ml100k.model --user 42 -k 5
  privrec recommend --model ml.model --user 42 --user-state ml-users/
  privrec recommend --model ml.model --user 42 --data my-ratings.tsv --format tsv
  privrec recommend --model ml.model --data test-history.tsv --all-users -k 20 > top20.tsv
  privrec recommend --model ml.model --data test-history.tsv --all-users -k 20 --json | head -1`)
	var d dataFlags
	d.add(fs)
	modelPath := fs.String("model", "", "model file from privrec train")
	user := fs.String("user", "", "external user ID, as in the training data")
	stateDir := fs.String("user-state", "", "directory of users' own states (joint-DP models)")
	k := fs.Int("k", 10, "number of recommendations")
	itemsPath := fs.String("items", "", "catalogue with item titles (u.item, movies.dat, ID<TAB>title), for models that carry none")
	jsonOut := fs.Bool("json", false, "print JSON on stdout (with --all-users: JSON lines, one object per user)")
	allUsers := fs.Bool("all-users", false, "recommend for every user of --data FILE, each from her own ratings (TSV, or JSON lines with --json)")
	workers := fs.Int("workers", 0, "with --all-users: goroutines scoring users (0: all cores)")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *k <= 0 {
		return usagef("-k must be positive")
	}
	if *allUsers {
		switch {
		case *modelPath == "":
			return usagef("--model is required")
		case *user != "":
			return usagef("give either --user ID or --all-users, not both")
		case *stateDir != "":
			return usagef("--all-users scores the users of --data FILE from their own ratings; --user-state is for one user")
		case d.path == "":
			return usagef("--all-users needs --data FILE: every user of the file is scored from her own ratings")
		case *workers < 0:
			return usagef("--workers %d: want N ≥ 0", *workers)
		}
		return runRecommendAll(ctx, &d, *modelPath, *itemsPath, *k, *jsonOut, *workers, out)
	}
	if *modelPath == "" || *user == "" {
		return usagef("--model and --user are required (or --data FILE --all-users)")
	}
	if *stateDir != "" && d.path != "" {
		return usagef("give either --user-state or --data, not both")
	}
	m, err := loadMatrixModel(*modelPath, "recommend works")
	if err != nil {
		return err
	}
	var recs []model.Recommendation
	from := "the model"
	switch {
	case *stateDir != "":
		st, err := loadUserState(m, *modelPath, *stateDir, *user)
		if err != nil {
			return err
		}
		recs, from = m.RecommendFor(st, *k), "her own state"
	case d.path != "":
		r, err := d.read()
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
			return usagef("the %s model holds no users (joint DP): pass --user-state DIR or --data FILE", m.Method)
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

// runRecommendAll is recommend --all-users.
func runRecommendAll(ctx context.Context, d *dataFlags, modelPath, itemsPath string, k int, jsonOut bool, workers int, out io.Writer) error {
	m, err := loadMatrixModel(modelPath, "recommend works")
	if err != nil {
		return err
	}
	var titles map[string]string
	if itemsPath != "" {
		c, err := model.LoadCatalogue(itemsPath)
		if err != nil {
			return usagef("--items: %v", err)
		}
		if t := c.Titles(); t != nil {
			titles = make(map[string]string, len(t))
			for j, id := range c.IDs() {
				titles[id] = t[j]
			}
		}
	}
	r, err := d.read()
	if err != nil {
		return err
	}
	warnUnknownItems(m, r, d.path)
	start := time.Now()
	n, err := recommendAll(ctx, m, r, k, titles, jsonOut, workers, out)
	if err != nil {
		return err
	}
	slog.Info("recommended", "users", n, "k", k, "model", m.Method, "seconds", fmt.Sprintf("%.2f", time.Since(start).Seconds()))
	return nil
}

// loadUserState reads a user's own state and checks that it belongs to
// the model file at modelPath (privrec train binds the two).
func loadUserState(m *model.Model, modelPath, dir, user string) (*model.UserState, error) {
	one, err := model.LoadUserState(dir, user)
	if err != nil {
		return nil, err
	}
	if err := fitStates(one, m, modelPath, dir); err != nil {
		return nil, err
	}
	st := &one.States[0]
	if err := m.CheckState(st); err != nil {
		return nil, err
	}
	return st, nil
}

// fitStates checks that the states read from dir belong to the model file
// at modelPath.
func fitStates(s *model.UserStates, m *model.Model, modelPath, dir string) error {
	fp, err := model.FileFingerprint(modelPath)
	if err != nil {
		return err
	}
	if err := s.Fits(m, fp); err != nil {
		return fmt.Errorf("--user-state %s with --model %s: %w", dir, modelPath, err)
	}
	return nil
}
