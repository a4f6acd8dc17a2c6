package main

import (
	"context"
	"fmt"
	"io"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratingio"
)

func init() {
	register(&command{name: "eval", summary: "score a model on held-out ratings (RMSE, MAE, accuracy, ARE, top-k) or held-out users (Recall@k, NDCG@k, MRR)", run: runEval})
}

func runEval(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("eval --model MODEL --data FILE [--truth FILE] [-k 10] [--json]\n       privrec eval --model MODEL --history FILE --targets FILE [-k 10,20,50,100] [--train FILE] [--popularity-from FILE] [--json]", `
Score a saved model on held-out ratings, applying the transformations the
model recorded (binarisation threshold, scaling, item restriction).
Rating models report RMSE and MAE on the original scale; one-bit models
report sign accuracy. --truth (a file with every entry of the true matrix,
from 'privrec data synth --truth') adds ARE = ‖M̂−M‖²_F/‖M‖²_F. Top-k
metrics rank each test user's unseen items and count test ratings at or
above --relevant (default: the held-out ratings' mean) as relevant. --worst-items N
lists the N items with the highest held-out RMSE (among items with at least
--min-ratings held-out ratings) with their titles: the model's, when its
catalogue had titles at training, else those of --items FILE (a catalogue:
MovieLens u.item or movies.dat, or "ID<TAB>title" lines).

Held-out users (the top-N protocol of Liang et al., WWW 2018, "strong
generalisation"): --history FILE and --targets FILE hold users the model
was not trained on (privrec data split --users writes them). Each user of
--targets is scored from her own ratings in --history through the public
model (fold-in, as her device does), every item not in her history is
ranked, and the list is compared with her targets: Recall@k (hits in the
top k over min(k, |targets|)) and NDCG@k for each k of -k (default
10,20,50,100), MRR (first hit within the largest k), coverage@k (fraction
of the catalogue in some user's top k) and popularity@k (mean number of
interactions of the recommended items, counted in --popularity-from FILE,
else in --train FILE, else in the histories). Targets below the
model's positive rule (or --positive) are not interactions and are dropped;
target items outside the catalogue count as misses. Errors, with nothing
computed: a history rating of an item outside the model's catalogue (names
FILE:LINE; --unknown-items skip ignores such ratings with a warning), an
empty file, --positive above the model's declared scale, a held-out user
who is one of the model's users or of --train FILE. --data may be given
too: both reports are printed.`,
		`  privrec eval --model ml100k.model --data u1.test --format movielens-100k --json
  privrec eval --model ml100k.model --data u1.test --format movielens-100k \
      --worst-items 5 --items u.item
  privrec data split --data ratings.dat --users 600,600 --positive 4 --seed 1 --out split/
  privrec train --data split/train.tsv --method popularity --positive 4 --scale 1:5 \
      --items movies.dat --out pop.model
  privrec eval --model pop.model --history split/test-history.tsv \
      --targets split/test-targets.tsv -k 20,100 --train split/train.tsv`)
	var d dataFlags
	d.add(fs)
	modelPath := fs.String("model", "", "model file from privrec train")
	truth := fs.String("truth", "", "full true matrix (synthetic data) for ARE")
	kFlag := fs.String("k", "", "cut-off for precision@k, recall@k, NDCG@k with --data (default 10; 0: skip); a list for held-out users (default 10,20,50,100)")
	history := fs.String("history", "", "held-out users' own ratings, each user scored from hers (with --targets)")
	targets := fs.String("targets", "", "held-out users' target items (with --history)")
	trainPath := fs.String("train", "", "with --history: the training file, to check no held-out user is in it")
	popFrom := fs.String("popularity-from", "", "with --history: count each item's interactions in this file for popularity@k (default: --train, else the histories)")
	positive := fs.Float64("positive", 0, "with --history: targets ≥ T are interactions (default: the model's rule, else all)")
	unknownItems := fs.String("unknown-items", "error", "with --history: a history rating of an item outside the model's catalogue is an error, or skip (ignored, with a warning)")
	relevant := fs.Float64("relevant", 0, "rating at or above which a held-out item is relevant (0: the held-out ratings' mean)")
	states := fs.String("user-state", "", "directory of the users' own states (models that hold no users: joint DP)")
	worst := fs.Int("worst-items", 0, "list the N items with the highest held-out RMSE, with titles (0: none)")
	minRatings := fs.Int("min-ratings", 10, "held-out ratings an item needs to be listed by --worst-items")
	itemsPath := fs.String("items", "", "catalogue with item titles (u.item, movies.dat, ID<TAB>title) for --worst-items")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("--model is required")
	}
	set := setFlags(fs)
	heldOut := *history != "" || *targets != ""
	if heldOut && (*history == "" || *targets == "") {
		return usagef("--history and --targets go together: each user of --targets is scored from her ratings in --history")
	}
	if !heldOut {
		for _, f := range []string{"train", "popularity-from", "positive", "unknown-items"} {
			if set[f] {
				return usagef("--%s belongs to the held-out-users protocol: give --history and --targets", f)
			}
		}
	}
	if *unknownItems != "error" && *unknownItems != "skip" {
		return usagef("--unknown-items %q: want error or skip", *unknownItems)
	}
	k, ks := 10, defaultHeldOutKs
	switch {
	case *kFlag == "":
	case *kFlag == "0" && !heldOut:
		k = 0 // --data without top-k metrics
	default:
		parsed, err := parseKs(*kFlag)
		if err != nil {
			return usagef("%v", err)
		}
		if d.path != "" && len(parsed) > 1 {
			return usagef("-k %s: the --data metrics take one cut-off", *kFlag)
		}
		k, ks = parsed[0], parsed
	}
	var ho *heldOutArgs
	if heldOut {
		ho = &heldOutArgs{modelPath: *modelPath, history: *history, targets: *targets, train: *trainPath,
			popularityFrom: *popFrom, ks: ks, positive: optFloat(set["positive"], *positive), unknownItems: *unknownItems}
	}
	if d.path != "" || !heldOut {
		return runEvalRatings(ctx, &d, evalRatingsArgs{modelPath: *modelPath, truth: *truth, k: k, relevant: *relevant, states: *states,
			worst: *worst, minRatings: *minRatings, itemsPath: *itemsPath, json: *jsonOut}, ho, out)
	}
	res, err := evalHeldOut(ctx, &d, *ho)
	if err != nil {
		return err
	}
	if *jsonOut {
		return writeJSON(out, res)
	}
	printHeldOut(out, res)
	fmt.Fprintf(out, "Guarantee: %s\n", res.Guarantee)
	return nil
}

// optFloat is v when the flag was given, else nil.
func optFloat(given bool, v float64) *float64 {
	if !given {
		return nil
	}
	return &v
}

type evalRatingsArgs struct {
	modelPath, truth, states, itemsPath string
	k, worst, minRatings                int
	relevant                            float64
	json                                bool
}

// runEvalRatings is the random-split evaluation (--data), followed by the
// held-out users' report when both are asked for.
func runEvalRatings(ctx context.Context, d *dataFlags, a evalRatingsArgs, ho *heldOutArgs, out io.Writer) error {
	test, err := d.read()
	if err != nil {
		return err
	}
	if a.worst < 0 || a.minRatings < 1 {
		return usagef("--worst-items must be ≥ 0 and --min-ratings ≥ 1")
	}
	opt := methods.EvalOptions{K: a.k, Relevant: a.relevant, WorstItems: a.worst, MinItemRatings: a.minRatings}
	if a.itemsPath != "" {
		c, err := model.LoadCatalogue(a.itemsPath)
		if err != nil {
			return usagef("--items: %v", err)
		}
		if titles := c.Titles(); titles != nil {
			opt.Titles = make(map[string]string, len(titles))
			for k, id := range c.IDs() {
				opt.Titles[id] = titles[k]
			}
		}
	}
	if a.states != "" {
		if opt.States, err = model.LoadUserStates(a.states); err != nil {
			return err
		}
		if kind, _ := model.PeekKind(a.modelPath); kind == model.KindLowRank {
			m, err := model.Load(a.modelPath)
			if err != nil {
				return err
			}
			if err := fitStates(opt.States, m, a.modelPath, a.states); err != nil {
				return err
			}
		}
	}
	if a.truth != "" {
		o, err := d.options()
		if err != nil {
			return err
		}
		o.Format = "auto"
		o.HasScale = false
		if opt.Truth, err = ratingio.ReadFile(a.truth, o); err != nil {
			return fmt.Errorf("reading truth: %w", err)
		}
	}
	rep, err := methods.EvaluateFile(ctx, a.modelPath, test, opt)
	if err != nil {
		return err
	}
	var ho2 *heldOutResult
	if ho != nil {
		if ho2, err = evalHeldOut(ctx, d, *ho); err != nil {
			return err
		}
	}
	if a.json {
		if ho2 != nil {
			return writeJSON(out, map[string]any{"random_split": rep, "held_out": ho2})
		}
		return writeJSON(out, rep)
	}
	fmt.Fprintf(out, "%s on %d held-out ratings", rep.Method, rep.N)
	if rep.Dropped > 0 {
		fmt.Fprintf(out, " (%d of unknown users or items skipped)", rep.Dropped)
	}
	fmt.Fprintln(out)
	show := func(name string, v *float64) {
		if v != nil {
			fmt.Fprintf(out, "  %-14s %.4f\n", name, *v)
		}
	}
	show("RMSE", rep.RMSE)
	show("MAE", rep.MAE)
	show("accuracy", rep.Accuracy)
	show("ARE", rep.ARE)
	if rep.K > 0 {
		show(fmt.Sprintf("precision@%d", rep.K), rep.Precision)
		show(fmt.Sprintf("recall@%d", rep.K), rep.Recall)
		show(fmt.Sprintf("NDCG@%d", rep.K), rep.NDCG)
	}
	if a.worst > 0 {
		if len(rep.Items) == 0 {
			fmt.Fprintf(out, "No item has %d held-out ratings (or the model predicts signs): no worst items.\n", a.minRatings)
		} else {
			fmt.Fprintf(out, "Worst %d items by held-out RMSE (items with ≥ %d held-out ratings):\n", len(rep.Items), a.minRatings)
		}
		for i, it := range rep.Items {
			if it.Title != "" {
				fmt.Fprintf(out, "%3d. %-40s (item %s)  RMSE %.4f over %d\n", i+1, it.Title, it.Item, it.RMSE, it.N)
			} else {
				fmt.Fprintf(out, "%3d. item %-12s RMSE %.4f over %d\n", i+1, it.Item, it.RMSE, it.N)
			}
		}
	}
	if ho2 != nil {
		printHeldOut(out, ho2)
	}
	fmt.Fprintf(out, "Guarantee: %s\n", rep.Guarantee)
	return nil
}
