package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/transform"
)

func init() {
	registerData(&command{name: "split", summary: "split ratings into canonical train/test TSV files (random, per-user or held-out users)", run: runDataSplit})
}

const dataSplitSynopsis = `
Split a ratings file into a training and a test file, both in canonical TSV
(user \t item \t rating [\t time], the original IDs), ready for
'privrec train --format tsv' and 'privrec eval --format tsv'.

Exactly one of:
  --holdout FRAC   hold out a uniformly random FRAC of all ratings
                   (exactly round(FRAC × ratings) of them)
  --per-user K     hold out K uniformly chosen ratings of every user; a user
                   with at most K ratings keeps them all in train
  --users VAL,TEST the strong-generalisation split of top-N evaluation
                   (Liang et al., WWW 2018): hold out VAL validation and TEST
                   test users, disjoint from the training users and from
                   each other; each held-out user's interactions are split
                   into a history (what her device scores from) and targets
                   (what a good list finds). Writes five files into --out
                   DIR: train.tsv, validation-history.tsv,
                   validation-targets.tsv, test-history.tsv,
                   test-targets.tsv. With it:
      --positive T       ratings ≥ T are the interactions, the others are
                         dropped (default: every rating is one)
      --min-positives N  users with fewer than N interactions are dropped
                         (default 5)
      --target-frac F    fraction of a held-out user's interactions that
                         become her targets (default 0.2; at least 1 and at
                         most all but 1)
                   Train a top-N model on train.tsv, then score it with
                   privrec eval --history test-history.tsv
                   --targets test-targets.tsv (tune on the validation pair).

Optionally, before a --holdout or --per-user split (the setup of seed 001):
  --top-items N    keep only the N most-rated items (ties: first seen)
  --cap XI         keep a uniform random sample of at most XI ratings per user

The split is a deterministic function of the data and --seed: the same
input and seed give the same files. The files are written only if
everything succeeds (through temporary files renamed into place); on an
error nothing is written.`

const dataSplitExample = `  privrec data split --data u.data --format movielens-100k --holdout 0.2 --seed 7 \
      --train ml.train.tsv --test ml.test.tsv
  privrec data split --data ratings.dat --format movielens --users 600,600 --positive 4 \
      --min-positives 5 --target-frac 0.2 --seed 1 --out ml1m-users/ --json
  privrec data split --data ratings.dat --format movielens --top-items 400 --cap 80 \
      --holdout 0.01 --seed 1 --train train.tsv --test test.tsv --json`

type splitReport struct {
	In          string   `json:"in"`
	Train       string   `json:"train"`
	Test        string   `json:"test"`
	Seed        uint64   `json:"seed"`
	Holdout     *float64 `json:"holdout,omitempty"`
	PerUser     *int     `json:"per_user,omitempty"`
	TopItems    int      `json:"top_items,omitempty"`
	Cap         int      `json:"cap,omitempty"`
	Users       int      `json:"users"`
	Items       int      `json:"items"`
	Ratings     int      `json:"ratings"`
	TrainRating int      `json:"train_ratings"`
	TestRatings int      `json:"test_ratings"`
	TestUsers   int      `json:"test_users"`
}

func runDataSplit(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("data split --data FILE (--holdout FRAC | --per-user K) --seed S --train OUT --test OUT [--json]\n       privrec data split --data FILE --users VAL,TEST [--positive T] [--min-positives N] [--target-frac F] --seed S --out DIR [--json]", dataSplitSynopsis, dataSplitExample)
	var d dataFlags
	d.add(fs)
	holdout := fs.Float64("holdout", 0, "fraction of all ratings to hold out, in (0, 1)")
	perUser := fs.Int("per-user", 0, "number of ratings to hold out per user (users with ≤ K ratings keep all)")
	seed := fs.Uint64("seed", 0, "seed of the random choices (the split is reproducible for a seed)")
	topItems := fs.Int("top-items", 0, "before splitting, keep only the N most-rated items (0: all)")
	capXi := fs.Int("cap", 0, "before splitting, keep at most XI random ratings per user (0: no cap)")
	trainPath := fs.String("train", "", "where to write the training ratings (TSV)")
	testPath := fs.String("test", "", "where to write the held-out ratings (TSV)")
	users := fs.String("users", "", "VAL,TEST: hold out VAL validation and TEST test users (strong generalisation; writes five files into --out)")
	positive := fs.Float64("positive", 0, "with --users: ratings ≥ T are the interactions, others are dropped (default: all)")
	minPos := fs.Int("min-positives", 5, "with --users: drop users with fewer interactions")
	targetFrac := fs.Float64("target-frac", 0.2, "with --users: fraction of a held-out user's interactions that become targets")
	outDir := fs.String("out", "", "with --users: directory for the five files (created if needed)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	set := setFlags(fs)
	if set["users"] {
		return runUserSplit(ctx, &d, set, userSplitArgs{users: *users, positive: *positive, minPos: *minPos,
			frac: *targetFrac, seed: *seed, out: *outDir, json: *jsonOut}, out)
	}
	for _, f := range []string{"positive", "min-positives", "target-frac", "out"} {
		if set[f] {
			return usagef("--%s belongs to the held-out-users split: give --users VAL,TEST", f)
		}
	}
	switch {
	case set["holdout"] == set["per-user"]:
		return usagef("give exactly one of --holdout and --per-user")
	case set["holdout"] && !(*holdout > 0 && *holdout < 1):
		return usagef("--holdout %v: want a fraction in (0, 1)", *holdout)
	case set["per-user"] && *perUser < 1:
		return usagef("--per-user %d: want K ≥ 1", *perUser)
	case *topItems < 0:
		return usagef("--top-items %d: want N ≥ 0", *topItems)
	case *capXi < 0:
		return usagef("--cap %d: want XI ≥ 0", *capXi)
	case *trainPath == "" || *testPath == "":
		return usagef("--train and --test are required")
	case sameFile(*trainPath, *testPath):
		return usagef("--train and --test name the same file")
	case d.path != "" && (sameFile(d.path, *trainPath) || sameFile(d.path, *testPath)):
		return usagef("--train and --test must differ from --data")
	}
	m, err := d.read()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	rep := splitReport{In: d.path, Train: *trainPath, Test: *testPath, Seed: *seed, TopItems: *topItems, Cap: *capXi}
	m = transform.TopItems(m, *topItems)
	m = transform.CapPerUser(m, *capXi, *seed)
	var train, test *ratings.Matrix
	if set["holdout"] {
		rep.Holdout = holdout
		train, test = transform.HoldOut(m, *holdout, *seed)
	} else {
		rep.PerUser = perUser
		train, test = transform.HoldOutPerUser(m, *perUser, *seed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err = atomicfile.WriteAll(0o644,
		atomicfile.File{Path: *trainPath, Write: func(w io.Writer) error { return ratingio.WriteTSV(w, train) }},
		atomicfile.File{Path: *testPath, Write: func(w io.Writer) error { return ratingio.WriteTSV(w, test) }},
	)
	if err != nil {
		return err
	}
	rep.Users, rep.Items, rep.Ratings = m.NumUsers(), m.NumItems(), m.Len()
	rep.TrainRating, rep.TestRatings = train.Len(), test.Len()
	for u := range int32(test.NumUsers()) {
		if test.UserCount(u) > 0 {
			rep.TestUsers++
		}
	}
	if *jsonOut {
		return writeJSON(out, rep)
	}
	fmt.Fprintf(out, "%d ratings (%d users × %d items) → %s: %d train, %s: %d test (%d users with test ratings)\n",
		rep.Ratings, rep.Users, rep.Items, rep.Train, rep.TrainRating, rep.Test, rep.TestRatings, rep.TestUsers)
	return nil
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// sameFile reports whether two paths name the same file (after cleaning,
// or by identity when both exist).
func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
