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
	a, err := parseDataSplitArgs(args)
	if err != nil {
		return err
	}
	if a.set["users"] {
		a.users.seed, a.users.json = a.seed, a.json
		return runUserSplit(ctx, &a.d, a.set, a.users, out)
	}
	if err := checkDataSplitArgs(a); err != nil {
		return err
	}
	rep, err := splitRatings(ctx, a)
	if err != nil {
		return err
	}
	if a.json {
		return writeJSON(out, rep)
	}
	fmt.Fprintf(out, "%d ratings (%d users × %d items) → %s: %d train, %s: %d test (%d users with test ratings)\n",
		rep.Ratings, rep.Users, rep.Items, rep.Train, rep.TrainRating, rep.Test, rep.TestRatings, rep.TestUsers)
	return nil
}

// dataSplitArgs is data split's command line: a --holdout or --per-user
// split, or with --users the held-out-users split.
type dataSplitArgs struct {
	d                   dataFlags
	holdout             float64
	perUser             int
	seed                uint64
	topItems, capXi     int
	trainPath, testPath string
	users               userSplitArgs
	json                bool
	set                 map[string]bool // the flags given
}

func parseDataSplitArgs(args []string) (*dataSplitArgs, error) {
	fs := newFlags("data split --data FILE (--holdout FRAC | --per-user K) --seed S --train OUT --test OUT [--json]\n       privrec data split --data FILE --users VAL,TEST [--positive T] [--min-positives N] [--target-frac F] --seed S --out DIR [--json]", dataSplitSynopsis, dataSplitExample)
	a := &dataSplitArgs{}
	a.d.add(fs)
	fs.Float64Var(&a.holdout, "holdout", 0, "fraction of all ratings to hold out, in (0, 1)")
	fs.IntVar(&a.perUser, "per-user", 0, "number of ratings to hold out per user (users with ≤ K ratings keep all)")
	fs.Uint64Var(&a.seed, "seed", 0, "seed of the random choices (the split is reproducible for a seed)")
	fs.IntVar(&a.topItems, "top-items", 0, "before splitting, keep only the N most-rated items (0: all)")
	fs.IntVar(&a.capXi, "cap", 0, "before splitting, keep at most XI random ratings per user (0: no cap)")
	fs.StringVar(&a.trainPath, "train", "", "where to write the training ratings (TSV)")
	fs.StringVar(&a.testPath, "test", "", "where to write the held-out ratings (TSV)")
	u := &a.users
	fs.StringVar(&u.users, "users", "", "VAL,TEST: hold out VAL validation and TEST test users (strong generalisation; writes five files into --out)")
	fs.Float64Var(&u.positive, "positive", 0, "with --users: ratings ≥ T are the interactions, others are dropped (default: all)")
	fs.IntVar(&u.minPos, "min-positives", 5, "with --users: drop users with fewer interactions")
	fs.Float64Var(&u.frac, "target-frac", 0.2, "with --users: fraction of a held-out user's interactions that become targets")
	fs.StringVar(&u.out, "out", "", "with --users: directory for the five files (created if needed)")
	fs.BoolVar(&a.json, "json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	a.set = setFlags(fs)
	return a, nil
}

// checkDataSplitArgs refuses a --holdout or --per-user split's flags out
// of range or naming the same file twice.
func checkDataSplitArgs(a *dataSplitArgs) error {
	for _, f := range []string{"positive", "min-positives", "target-frac", "out"} {
		if a.set[f] {
			return usagef("--%s belongs to the held-out-users split: give --users VAL,TEST", f)
		}
	}
	switch {
	case a.set["holdout"] == a.set["per-user"]:
		return usagef("give exactly one of --holdout and --per-user")
	case a.set["holdout"] && !(a.holdout > 0 && a.holdout < 1):
		return usagef("--holdout %v: want a fraction in (0, 1)", a.holdout)
	case a.set["per-user"] && a.perUser < 1:
		return usagef("--per-user %d: want K ≥ 1", a.perUser)
	case a.topItems < 0:
		return usagef("--top-items %d: want N ≥ 0", a.topItems)
	case a.capXi < 0:
		return usagef("--cap %d: want XI ≥ 0", a.capXi)
	case a.trainPath == "" || a.testPath == "":
		return usagef("--train and --test are required")
	case sameFile(a.trainPath, a.testPath):
		return usagef("--train and --test name the same file")
	case a.d.path != "" && (sameFile(a.d.path, a.trainPath) || sameFile(a.d.path, a.testPath)):
		return usagef("--train and --test must differ from --data")
	}
	return nil
}

// splitRatings reads the ratings, restricts them (--top-items, --cap),
// splits them and writes both files, all or nothing.
func splitRatings(ctx context.Context, a *dataSplitArgs) (*splitReport, error) {
	m, err := a.d.read()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &splitReport{In: a.d.path, Train: a.trainPath, Test: a.testPath, Seed: a.seed, TopItems: a.topItems, Cap: a.capXi}
	m = transform.TopItems(m, a.topItems)
	m = transform.CapPerUser(m, a.capXi, a.seed)
	var train, test *ratings.Matrix
	if a.set["holdout"] {
		rep.Holdout = &a.holdout
		train, test = transform.HoldOut(m, a.holdout, a.seed)
	} else {
		rep.PerUser = &a.perUser
		train, test = transform.HoldOutPerUser(m, a.perUser, a.seed)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err = atomicfile.WriteAll(0o644,
		atomicfile.File{Path: a.trainPath, Write: func(w io.Writer) error { return ratingio.WriteTSV(w, train) }},
		atomicfile.File{Path: a.testPath, Write: func(w io.Writer) error { return ratingio.WriteTSV(w, test) }},
	)
	if err != nil {
		return nil, err
	}
	rep.Users, rep.Items, rep.Ratings = m.NumUsers(), m.NumItems(), m.Len()
	rep.TrainRating, rep.TestRatings = train.Len(), test.Len()
	rep.TestUsers = countUsers(test)
	return rep, nil
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
