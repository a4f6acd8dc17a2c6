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
	register(&command{name: "eval", summary: "score a model on held-out ratings (RMSE, MAE, accuracy, ARE, top-k)", run: runEval})
}

func runEval(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("eval --model MODEL --data FILE [--truth FILE] [-k 10] [--json]", `
Score a saved model on held-out ratings, applying the transformations the
model recorded (binarisation threshold, scaling, item restriction).
Rating models report RMSE and MAE on the original scale; one-bit models
report sign accuracy. --truth (a file with every entry of the true matrix,
from 'privrec data synth --truth') adds ARE = ‖M̂−M‖²_F/‖M‖²_F. Top-k
metrics rank each test user's unseen items and count test ratings at or
above --relevant (default: the training mean) as relevant. --worst-items N
lists the N items with the highest held-out RMSE (among items with at least
--min-ratings held-out ratings) with their titles: the model's, when its
catalogue had titles at training, else those of --items FILE (a catalogue:
MovieLens u.item or movies.dat, or "ID<TAB>title" lines).`,
		`  privrec eval --model ml100k.model --data u1.test --format movielens-100k --json
  privrec eval --model ml100k.model --data u1.test --format movielens-100k \
      --worst-items 5 --items u.item`)
	var d dataFlags
	d.add(fs, "data")
	modelPath := fs.String("model", "", "model file from privrec train")
	truth := fs.String("truth", "", "full true matrix (synthetic data) for ARE")
	k := fs.Int("k", 10, "cut-off for precision@k, recall@k, NDCG@k (0: skip)")
	relevant := fs.Float64("relevant", 0, "rating at or above which a held-out item is relevant (0: the held-out mean)")
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
	test, err := d.read("data")
	if err != nil {
		return err
	}
	if *worst < 0 || *minRatings < 1 {
		return usagef("--worst-items must be ≥ 0 and --min-ratings ≥ 1")
	}
	opt := methods.EvalOptions{K: *k, Relevant: *relevant, WorstItems: *worst, MinItemRatings: *minRatings}
	if *itemsPath != "" {
		c, err := model.LoadCatalogue(*itemsPath)
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
	if *states != "" {
		if opt.States, err = model.LoadUserStates(*states); err != nil {
			return err
		}
	}
	if *truth != "" {
		o, err := d.options()
		if err != nil {
			return err
		}
		o.Format = "auto"
		o.HasScale = false
		if opt.Truth, err = ratingio.ReadFile(*truth, o); err != nil {
			return fmt.Errorf("reading truth: %w", err)
		}
	}
	rep, err := methods.EvaluateFile(ctx, *modelPath, test, opt)
	if err != nil {
		return err
	}
	if *jsonOut {
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
	if *worst > 0 {
		if len(rep.Items) == 0 {
			fmt.Fprintf(out, "No item has %d held-out ratings (or the model predicts signs): no worst items.\n", *minRatings)
		} else {
			fmt.Fprintf(out, "Worst %d items by held-out RMSE (items with ≥ %d held-out ratings):\n", len(rep.Items), *minRatings)
		}
		for i, it := range rep.Items {
			if it.Title != "" {
				fmt.Fprintf(out, "%3d. %-40s (item %s)  RMSE %.4f over %d\n", i+1, it.Title, it.Item, it.RMSE, it.N)
			} else {
				fmt.Fprintf(out, "%3d. item %-12s RMSE %.4f over %d\n", i+1, it.Item, it.RMSE, it.N)
			}
		}
	}
	fmt.Fprintf(out, "Guarantee: %s\n", rep.Guarantee)
	return nil
}
