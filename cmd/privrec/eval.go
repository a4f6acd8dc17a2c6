package main

import (
	"context"
	"fmt"
	"io"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
)

func init() {
	register(&command{name: "eval", summary: "score a model on held-out ratings (RMSE, MAE, accuracy, ARE, top-k) or held-out users (Recall@k, NDCG@k, MRR)", run: runEval})
}

const evalSynopsis = `
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
too: both reports are printed.`

const evalExample = `  privrec eval --model ml100k.model --data u1.test --format movielens-100k --json
  privrec eval --model ml100k.model --data u1.test --format movielens-100k \
      --worst-items 5 --items u.item
  privrec data split --data ratings.dat --users 600,600 --positive 4 --seed 1 --out split/
  privrec train --data split/train.tsv --method popularity --positive 4 --scale 1:5 \
      --items movies.dat --out pop.model
  privrec eval --model pop.model --history split/test-history.tsv \
      --targets split/test-targets.tsv -k 20,100 --train split/train.tsv`

func runEval(ctx context.Context, args []string, out io.Writer) error {
	a, err := parseEvalArgs(args)
	if err != nil {
		return err
	}
	if a.d.path != "" || a.heldOut == nil {
		return runEvalRatings(ctx, &a.d, a.ratings, a.heldOut, out)
	}
	return runEvalHeldOut(ctx, &a.d, *a.heldOut, a.ratings.json, out)
}

// evalArgs is eval's command line: the --data evaluation's settings and,
// with --history and --targets, the held-out users'.
type evalArgs struct {
	d       dataFlags
	ratings evalRatingsArgs
	heldOut *heldOutArgs
}

// parseEvalArgs reads eval's flags and refuses a combination that belongs
// to neither protocol.
func parseEvalArgs(args []string) (*evalArgs, error) {
	a := &evalArgs{}
	fs := newFlags("eval --model MODEL --data FILE [--truth FILE] [-k 10] [--json]\n       privrec eval --model MODEL --history FILE --targets FILE [-k 10,20,50,100] [--train FILE] [--popularity-from FILE] [--json]", evalSynopsis, evalExample)
	a.d.add(fs)
	r := &a.ratings
	fs.StringVar(&r.modelPath, "model", "", "model file from privrec train")
	fs.StringVar(&r.truth, "truth", "", "full true matrix (synthetic data) for ARE")
	kFlag := fs.String("k", "", "cut-off for precision@k, recall@k, NDCG@k with --data (default 10; 0: skip); a list for held-out users (default 10,20,50,100)")
	var ho heldOutArgs
	fs.StringVar(&ho.history, "history", "", "held-out users' own ratings, each user scored from hers (with --targets)")
	fs.StringVar(&ho.targets, "targets", "", "held-out users' target items (with --history)")
	fs.StringVar(&ho.train, "train", "", "with --history: the training file, to check no held-out user is in it")
	fs.StringVar(&ho.popularityFrom, "popularity-from", "", "with --history: count each item's interactions in this file for popularity@k (default: --train, else the histories)")
	positive := fs.Float64("positive", 0, "with --history: targets ≥ T are interactions (default: the model's rule, else all)")
	fs.StringVar(&ho.unknownItems, "unknown-items", "error", "with --history: a history rating of an item outside the model's catalogue is an error, or skip (ignored, with a warning)")
	fs.Float64Var(&r.relevant, "relevant", 0, "rating at or above which a held-out item is relevant (0: the held-out ratings' mean)")
	fs.StringVar(&r.states, "user-state", "", "directory of the users' own states (models that hold no users: joint DP)")
	fs.IntVar(&r.worst, "worst-items", 0, "list the N items with the highest held-out RMSE, with titles (0: none)")
	fs.IntVar(&r.minRatings, "min-ratings", 10, "held-out ratings an item needs to be listed by --worst-items")
	fs.StringVar(&r.itemsPath, "items", "", "catalogue with item titles (u.item, movies.dat, ID<TAB>title) for --worst-items")
	fs.BoolVar(&r.json, "json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	if r.modelPath == "" {
		return nil, usagef("--model is required")
	}
	set := setFlags(fs)
	heldOut := ho.history != "" || ho.targets != ""
	if err := checkEvalProtocol(set, heldOut, ho); err != nil {
		return nil, err
	}
	var err error
	if r.k, ho.ks, err = evalCutoffs(*kFlag, heldOut, a.d.path); err != nil {
		return nil, err
	}
	if heldOut {
		ho.modelPath, ho.positive = r.modelPath, optFloat(set["positive"], *positive)
		a.heldOut = &ho
	}
	return a, nil
}

// checkEvalProtocol refuses --history without --targets (or the reverse),
// a held-out-users flag without them, and an unknown --unknown-items.
func checkEvalProtocol(set map[string]bool, heldOut bool, ho heldOutArgs) error {
	if heldOut && (ho.history == "" || ho.targets == "") {
		return usagef("--history and --targets go together: each user of --targets is scored from her ratings in --history")
	}
	if !heldOut {
		for _, f := range []string{"train", "popularity-from", "positive", "unknown-items"} {
			if set[f] {
				return usagef("--%s belongs to the held-out-users protocol: give --history and --targets", f)
			}
		}
	}
	if ho.unknownItems != "error" && ho.unknownItems != "skip" {
		return usagef("--unknown-items %q: want error or skip", ho.unknownItems)
	}
	return nil
}

// evalCutoffs reads -k: the --data cut-off k (0: no top-k metrics) and the
// held-out users' list ks.
func evalCutoffs(kFlag string, heldOut bool, dataPath string) (k int, ks []int, err error) {
	switch {
	case kFlag == "":
		return 10, defaultHeldOutKs, nil
	case kFlag == "0" && !heldOut:
		return 0, defaultHeldOutKs, nil // --data without top-k metrics
	}
	parsed, err := parseKs(kFlag)
	if err != nil {
		return 0, nil, usagef("%v", err)
	}
	if dataPath != "" && len(parsed) > 1 {
		return 0, nil, usagef("-k %s: the --data metrics take one cut-off", kFlag)
	}
	return parsed[0], parsed, nil
}

// runEvalHeldOut is the held-out users' evaluation alone.
func runEvalHeldOut(ctx context.Context, d *dataFlags, ho heldOutArgs, jsonOut bool, out io.Writer) error {
	res, err := evalHeldOut(ctx, d, ho)
	if err != nil {
		return err
	}
	if jsonOut {
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
	opt, err := evalOptions(d, a)
	if err != nil {
		return err
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
	printEvalReport(out, rep, a)
	if ho2 != nil {
		printHeldOut(out, ho2)
	}
	fmt.Fprintf(out, "Guarantee: %s\n", rep.Guarantee)
	return nil
}

// evalOptions is the --data evaluation's options: the cut-offs, the
// titles of --items, the users' states of --user-state and the truth.
func evalOptions(d *dataFlags, a evalRatingsArgs) (methods.EvalOptions, error) {
	if a.worst < 0 || a.minRatings < 1 {
		return methods.EvalOptions{}, usagef("--worst-items must be ≥ 0 and --min-ratings ≥ 1")
	}
	opt := methods.EvalOptions{K: a.k, Relevant: a.relevant, WorstItems: a.worst, MinItemRatings: a.minRatings}
	var err error
	if a.itemsPath != "" {
		if opt.Titles, err = catalogueTitles(a.itemsPath); err != nil {
			return opt, err
		}
	}
	if a.states != "" {
		if opt.States, err = loadEvalStates(a.modelPath, a.states); err != nil {
			return opt, err
		}
	}
	if a.truth != "" {
		if opt.Truth, err = readTruth(d, a.truth); err != nil {
			return opt, err
		}
	}
	return opt, nil
}

// catalogueTitles is the titles of the catalogue at path by item ID (nil
// when it has none).
func catalogueTitles(path string) (map[string]string, error) {
	c, err := model.LoadCatalogue(path)
	if err != nil {
		return nil, usagef("--items: %v", err)
	}
	titles := c.Titles()
	if titles == nil {
		return nil, nil
	}
	byID := make(map[string]string, len(titles))
	for k, id := range c.IDs() {
		byID[id] = titles[k]
	}
	return byID, nil
}

// loadEvalStates loads the users' states of dir, checked against a
// low-rank model.
func loadEvalStates(modelPath, dir string) (*model.UserStates, error) {
	states, err := model.LoadUserStates(dir)
	if err != nil {
		return nil, err
	}
	if kind, _ := model.PeekKind(modelPath); kind == model.KindLowRank {
		m, err := model.Load(modelPath)
		if err != nil {
			return nil, err
		}
		if err := fitStates(states, m, modelPath, dir); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// readTruth reads the full true matrix (any format, no declared scale).
func readTruth(d *dataFlags, path string) (*ratings.Matrix, error) {
	o, err := d.options()
	if err != nil {
		return nil, err
	}
	o.Format = "auto"
	o.HasScale = false
	m, err := ratingio.ReadFile(path, o)
	if err != nil {
		return nil, fmt.Errorf("reading truth: %w", err)
	}
	return m, nil
}

// printEvalReport prints the --data evaluation's metrics and worst items.
func printEvalReport(out io.Writer, rep *methods.Report, a evalRatingsArgs) {
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
		printWorstItems(out, rep.Items, a.minRatings)
	}
}

// printWorstItems prints --worst-items' list, titled where a title is
// known.
func printWorstItems(out io.Writer, items []methods.ItemScore, minRatings int) {
	if len(items) == 0 {
		fmt.Fprintf(out, "No item has %d held-out ratings (or the model predicts signs): no worst items.\n", minRatings)
	} else {
		fmt.Fprintf(out, "Worst %d items by held-out RMSE (items with ≥ %d held-out ratings):\n", len(items), minRatings)
	}
	for i, it := range items {
		if it.Title != "" {
			fmt.Fprintf(out, "%3d. %-40s (item %s)  RMSE %.4f over %d\n", i+1, it.Title, it.Item, it.RMSE, it.N)
		} else {
			fmt.Fprintf(out, "%3d. item %-12s RMSE %.4f over %d\n", i+1, it.Item, it.RMSE, it.N)
		}
	}
}
