package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy/noise"
)

func init() {
	register(&command{name: "train", summary: "train a (private) recommender and save the model with its guarantee", run: runTrain})
}

const trainSynopsis = `
Train a model with one method and save it, with its privacy guarantee, to
--out. Each method adds its own flags: see them with
  privrec train --method NAME --help

Privacy noise comes from crypto/rand. --seed makes the non-private
randomness (initialisation, shuffling) repeatable; --experiment also seeds
the privacy noise, which is for experiments only: the model then records
that its noise was reproducible and its guarantee says so.`

// methodFromArgs finds --method before the flag set (which depends on it) exists.
func methodFromArgs(args []string) string {
	for i, a := range args {
		for _, p := range []string{"--method", "-method"} {
			if a == p && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
		}
	}
	return ""
}

func methodList() string {
	var b strings.Builder
	for _, m := range methods.All() {
		priv := "private"
		if !m.Private {
			priv = "non-private baseline"
		}
		seed := ""
		if m.Seed != "" {
			seed = ", seed " + m.Seed
		}
		fmt.Fprintf(&b, "  %-14s %s (%s%s)\n", m.Name, m.Summary, priv, seed)
	}
	return b.String()
}

func runTrain(ctx context.Context, args []string, out io.Writer) error {
	name := methodFromArgs(args)
	example := `  privrec train --data u1.base --format movielens-100k --method onebit-inp \
      --epsilon 4 --out ml100k.model
  privrec eval --model ml100k.model --data u1.test --format movielens-100k

Methods:
` + methodList()
	fs := newFlags("train --data FILE --method NAME [--epsilon E] [--delta D] --out MODEL [method flags]", trainSynopsis, example)
	var d dataFlags
	d.add(fs, "data")
	fs.String("method", "", "training method (see the list below)")
	eps := fs.Float64("epsilon", 1, "privacy parameter ε (ignored by non-private methods)")
	delta := fs.Float64("delta", 1e-6, "privacy parameter δ for (ε, δ) methods")
	seed := fs.Uint64("seed", 0, "seed for non-private randomness (0: random)")
	experiment := fs.Bool("experiment", false, "also seed the privacy noise from --seed (experiments only; recorded in the model)")
	outPath := fs.String("out", "", "where to write the model")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	workers := fs.Int("workers", 0, "goroutines to use (0: all cores)")
	var trainer methods.Trainer
	if name != "" {
		m, err := methods.Lookup(name)
		if err != nil {
			return usagef("%v", err)
		}
		trainer = m.Flags(fs)
	}
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if trainer == nil {
		return usagef("--method is required; known methods:\n%s", methodList())
	}
	if *outPath == "" {
		return usagef("--out is required")
	}
	data, err := d.read("data")
	if err != nil {
		return err
	}
	s := *seed
	if s == 0 {
		var b [8]byte
		rand.Read(b[:])
		s = binary.LittleEndian.Uint64(b[:])
	}
	c := methods.Common{
		Epsilon: *eps, Delta: *delta, Seed: s, Workers: *workers, DataPath: d.path,
		Rand:  noise.Seeded(s),
		Noise: noise.Secure(),
		Log:   slog.Default(),
	}
	if *experiment {
		if *seed == 0 {
			return usagef("--experiment needs an explicit --seed")
		}
		c.Noise = noise.Seeded(s ^ 0x6e6f697365) // a stream distinct from Rand's
	}
	if !*jsonOut {
		c.Progress = progressPrinter(os.Stderr, name)
	}
	start := time.Now()
	res, err := trainer.Train(ctx, data, c)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	secs := time.Since(start).Seconds()
	if c.Noise.Reproducible() {
		res.Guarantee.Reproducible = true
	}
	if res.Model != nil {
		res.Model.Guarantee = res.Guarantee
		if res.Model.Params == nil {
			res.Model.Params = map[string]any{}
		}
		res.Model.Params["epsilon"], res.Model.Params["delta"], res.Model.Params["seed"] = *eps, *delta, s
	}
	if err := res.SaveTo(*outPath); err != nil {
		return err
	}
	if *jsonOut {
		rep := map[string]any{}
		for k, v := range res.Info {
			rep[k] = v
		}
		rep["method"], rep["seconds"], rep["guarantee"], rep["out"] = name, secs, res.Guarantee, *outPath
		rep["users"], rep["items"], rep["ratings"] = data.NumUsers(), data.NumItems(), data.Len()
		return writeJSON(out, rep)
	}
	fmt.Fprintf(out, "Trained %s on %s in %.2f s → %s\nGuarantee: %s\n", name, data, secs, *outPath, res.Guarantee)
	for k, v := range res.Info {
		fmt.Fprintf(out, "  %s: %v\n", k, v)
	}
	return nil
}

// progressPrinter reports long runs on w, at most a few times a second.
func progressPrinter(w io.Writer, what string) func(done, total int) {
	var last time.Time
	return func(done, total int) {
		if done < total && time.Since(last) < 250*time.Millisecond {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "\r%s: %d/%d", what, done, total)
		if done >= total {
			fmt.Fprintln(w)
		}
	}
}
