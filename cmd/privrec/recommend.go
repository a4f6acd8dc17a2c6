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

// recommendArgs are recommend's flags.
type recommendArgs struct {
	d                                    dataFlags
	modelPath, user, stateDir, itemsPath string
	k, workers                           int
	json, allUsers                       bool
}

func runRecommend(ctx context.Context, args []string, out io.Writer) error {
	a, err := parseRecommendArgs(args)
	if err != nil {
		return err
	}
	if a.allUsers {
		return runRecommendAll(ctx, &a.d, a.modelPath, a.itemsPath, a.k, a.json, a.workers, out)
	}
	m, err := loadMatrixModel(a.modelPath, "recommend works")
	if err != nil {
		return err
	}
	recs, from, err := recommendOne(m, a)
	if err != nil {
		return err
	}
	if err := addTitles(recs, a.itemsPath); err != nil {
		return err
	}
	if a.json {
		return writeJSON(out, map[string]any{"user": a.user, "method": m.Method, "recommendations": recs, "guarantee": m.Guarantee})
	}
	printRecommendations(out, m, a.user, from, recs)
	return nil
}

const recommendSynopsis = `
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
outside the model's catalogue are ignored, with a warning.`

const recommendExamples = `  privrec recommend --model ml100k.model --user 42 -k 5
  privrec recommend --model ml.model --user 42 --user-state ml-users/
  privrec recommend --model ml.model --user 42 --data my-ratings.tsv --format tsv
  privrec recommend --model ml.model --data test-history.tsv --all-users -k 20 > top20.tsv
  privrec recommend --model ml.model --data test-history.tsv --all-users -k 20 --json | head -1`

// parseRecommendArgs reads and checks recommend's flags.
func parseRecommendArgs(args []string) (*recommendArgs, error) {
	fs := newFlags("recommend --model MODEL --user ID [--user-state DIR | --data FILE] [-k 10] [--json]\n       privrec recommend --model MODEL --data FILE --all-users [-k 10] [--json] [--workers N]",
		recommendSynopsis, recommendExamples)
	a := &recommendArgs{}
	a.d.add(fs)
	fs.StringVar(&a.modelPath, "model", "", "model file from privrec train")
	fs.StringVar(&a.user, "user", "", "external user ID, as in the training data")
	fs.StringVar(&a.stateDir, "user-state", "", "directory of users' own states (joint-DP models)")
	fs.IntVar(&a.k, "k", 10, "number of recommendations")
	fs.StringVar(&a.itemsPath, "items", "", "catalogue with item titles (u.item, movies.dat, ID<TAB>title), for models that carry none")
	fs.BoolVar(&a.json, "json", false, "print JSON on stdout (with --all-users: JSON lines, one object per user)")
	fs.BoolVar(&a.allUsers, "all-users", false, "recommend for every user of --data FILE, each from her own ratings (TSV, or JSON lines with --json)")
	fs.IntVar(&a.workers, "workers", 0, "with --all-users: goroutines scoring users (0: all cores)")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	if a.k <= 0 {
		return nil, usagef("-k must be positive")
	}
	if a.allUsers {
		return a, a.checkAllUsers()
	}
	if a.modelPath == "" || a.user == "" {
		return nil, usagef("--model and --user are required (or --data FILE --all-users)")
	}
	if a.stateDir != "" && a.d.path != "" {
		return nil, usagef("give either --user-state or --data, not both")
	}
	return a, nil
}

// checkAllUsers checks the flags of recommend --all-users.
func (a *recommendArgs) checkAllUsers() error {
	switch {
	case a.modelPath == "":
		return usagef("--model is required")
	case a.user != "":
		return usagef("give either --user ID or --all-users, not both")
	case a.stateDir != "":
		return usagef("--all-users scores the users of --data FILE from their own ratings; --user-state is for one user")
	case a.d.path == "":
		return usagef("--all-users needs --data FILE: every user of the file is scored from her own ratings")
	case a.workers < 0:
		return usagef("--workers %d: want N ≥ 0", a.workers)
	}
	return nil
}

// recommendOne lists the top k for --user: from her own state, from her
// own ratings folded in, or from the model's users; from says which.
func recommendOne(m *model.Model, a *recommendArgs) (recs []model.Recommendation, from string, err error) {
	switch {
	case a.stateDir != "":
		st, err := loadUserState(m, a.modelPath, a.stateDir, a.user)
		if err != nil {
			return nil, "", err
		}
		return m.RecommendFor(st, a.k), "her own state", nil
	case a.d.path != "":
		r, err := a.d.read()
		if err != nil {
			return nil, "", err
		}
		u, ok := r.Users.Lookup(a.user)
		if !ok {
			return nil, "", fmt.Errorf("%s has no ratings of user %q", a.d.path, a.user)
		}
		ids, fv := r.UserRatings(u)
		st, err := m.FoldInUser(a.user, ids, fv)
		if err != nil {
			return nil, "", err
		}
		return m.RecommendFor(st, a.k), "her own ratings folded in", nil
	}
	if m.Users == nil {
		return nil, "", usagef("the %s model holds no users (joint DP): pass --user-state DIR or --data FILE", m.Method)
	}
	u, ok := m.UserIndex(a.user)
	if !ok {
		return nil, "", fmt.Errorf("user %q is not in the model (it knows %d users)", a.user, m.NumUsers())
	}
	return m.Recommend(u, a.k, nil), "the model", nil
}

// addTitles names the recommended items that have no title from the
// catalogue at itemsPath ("": none).
func addTitles(recs []model.Recommendation, itemsPath string) error {
	if itemsPath == "" {
		return nil
	}
	c, err := model.LoadCatalogue(itemsPath)
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
	return nil
}

// printRecommendations writes the list as text, with the guarantee.
func printRecommendations(out io.Writer, m *model.Model, user, from string, recs []model.Recommendation) {
	fmt.Fprintf(out, "Top %d for user %s (%s, from %s):\n", len(recs), user, m.Method, from)
	for i, r := range recs {
		if r.Title != "" {
			fmt.Fprintf(out, "%3d. %-40s (item %s)  score %.3f\n", i+1, r.Title, r.Item, r.Score)
		} else {
			fmt.Fprintf(out, "%3d. item %-12s score %.3f\n", i+1, r.Item, r.Score)
		}
	}
	fmt.Fprintf(out, "Guarantee: %s\n", m.Guarantee)
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
