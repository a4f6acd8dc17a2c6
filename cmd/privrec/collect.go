package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
)

func init() {
	register(&command{name: "collect", summary: "randomize a ratings file on the users' side (local DP), as each client would", run: runCollect})
}

const collectSynopsis = `
Transform a ratings file exactly as each user's device would before sending
it (local differential privacy, seeds 002/003): every user randomizes her
whole vector over ALL items, missing entries included, with fresh
crypto/rand randomness. The output is what the service receives: a TSV of
"user item value" lines after a "# privrec-collect v1" header that records
the mechanism, ε, the rating scale and the population size.

--mechanism laplace: the modified Laplace mechanism. Ratings are mapped from
  the scale to [−1, 1]; each rating is kept w.p. e^{ε/2}/(e^{ε/2}+1) with
  Laplace(2/ε) noise added, otherwise removed; each missing cell becomes a
  pure-noise rating Laplace(2/ε) w.p. 1/(e^{ε/2}+1). Values are written in the
  normalised units.
--mechanism rr: randomized response over {missing, 1…d} (d = rating levels):
  the true value is kept w.p. e^ε/(e^ε+d), else one of the d others uniformly.
  Values are written as levels 1…d.

Each is ε-DP per rating (one cell changing arbitrarily, rated ↔ missing
included) and n·ε-DP per user for n items; both are printed.`

func runCollect(ctx context.Context, args []string, out io.Writer) error {
	example := `  privrec collect --mechanism laplace --epsilon 2 --data ua.base \
      --format movielens-100k --scale 1:5 --out ua.ldp.tsv
  privrec train --data ua.ldp.tsv --format tsv --method ldp-laplace \
      --collected ua.ldp.tsv --debias --out ua.ldp.model
  privrec eval --model ua.ldp.model --data ua.test --format movielens-100k`
	fs := newFlags("collect --mechanism laplace|rr --epsilon E --data FILE --out PERTURBED.tsv", collectSynopsis, example)
	var d dataFlags
	d.add(fs, "data")
	mechName := fs.String("mechanism", "", "laplace (modified Laplace) or rr (randomized response)")
	eps := fs.Float64("epsilon", 0, "per-rating privacy parameter ε")
	levels := fs.Int("levels", 0, "rating levels d for rr (0: from --scale/the data on an integer or half-integer grid)")
	outPath := fs.String("out", "", "where to write the perturbed ratings (- for stdout)")
	seed := fs.Uint64("seed", 0, "seed the noise (experiments only; recorded in the header)")
	experiment := fs.Bool("experiment", false, "required together with --seed: a seeded collection is not private")
	workers := fs.Int("workers", 0, "goroutines (0: all cores)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout (needs --out FILE)")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	mech, err := ldp.ParseMechanism(*mechName)
	if err != nil {
		return usagef("--mechanism: %v", err)
	}
	if !(*eps > 0) {
		return usagef("--epsilon must be positive")
	}
	if *outPath == "" {
		return usagef("--out is required")
	}
	if *jsonOut && *outPath == "-" {
		return usagef("--json needs --out FILE (stdout carries the report)")
	}
	if (*seed != 0) != *experiment {
		return usagef("--seed and --experiment go together (seeded noise is for experiments only)")
	}
	start := time.Now()
	data, err := d.read("data")
	if err != nil {
		return err
	}
	sc := ldp.DetectScale(data)
	if d.scale != "" {
		// d.read has validated --scale (MIN:MAX, MIN < MAX); parse it again
		// here without swallowing errors.
		lo, hi, _ := strings.Cut(d.scale, ":")
		var err1, err2 error
		sc.Min, err1 = strconv.ParseFloat(lo, 64)
		sc.Max, err2 = strconv.ParseFloat(hi, 64)
		if err1 != nil || err2 != nil {
			return usagef("--scale %q: want MIN:MAX", d.scale)
		}
		sc.Levels = 0
		// The data's grid step (1 or 0.5) fixes the levels of the declared
		// scale when the declared range is a whole number of steps.
		if det := ldp.DetectScale(data); det.Levels > 0 {
			step := (det.Max - det.Min) / float64(det.Levels-1)
			if det.Levels == 1 || step == 0 {
				step = 1
			}
			k := (sc.Max - sc.Min) / step
			if math.Abs(k-math.Round(k)) < 1e-9 {
				sc.Levels = int(math.Round(k)) + 1
			}
		}
	} else {
		fmt.Fprintf(os.Stderr, "collect: no --scale given; using the data's range [%g, %g] (declare the scale: the clients must know it in advance)\n", sc.Min, sc.Max)
	}
	if *levels > 0 {
		sc.Levels = *levels
	}
	r, err := ldp.New(mech, *eps, sc)
	if err != nil {
		return usagef("%v", err)
	}
	src := noise.Secure()
	if *experiment {
		src = noise.Seeded(*seed)
	}
	var w io.Writer = out
	var f *os.File
	if *outPath != "-" {
		f, err = os.CreateTemp(dirOf(*outPath), ".collect-*")
		if err != nil {
			return fmt.Errorf("collect: %w", err)
		}
		defer os.Remove(f.Name())
		w = f
	}
	st, err := ldp.Collect(ctx, w, data, r, src, *workers)
	if err != nil {
		if f != nil {
			f.Close()
		}
		return fmt.Errorf("collect: %w", err)
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return fmt.Errorf("collect: %w", err)
		}
		if err := os.Rename(f.Name(), *outPath); err != nil {
			return fmt.Errorf("collect: %w", err)
		}
	}
	secs := time.Since(start).Seconds()
	per, user := r.PerRating(), r.PerUser(data.NumItems())
	if src.Reproducible() {
		per.Reproducible, user.Reproducible = true, true
	}
	if *jsonOut {
		return writeJSON(out, map[string]any{
			"mechanism": string(mech), "epsilon": *eps, "out": *outPath, "seconds": secs,
			"scale_min": sc.Min, "scale_max": sc.Max, "levels": sc.Levels, "units": r.Units(),
			"users": st.Users, "items": st.Items, "cells": st.Cells, "ratings": st.Ratings,
			"kept": st.Kept, "removed": st.Removed, "invented": st.Invented, "reported": st.Reported,
			"guarantee": per, "per_user_guarantee": user,
		})
	}
	if *outPath == "-" {
		return nil
	}
	fmt.Fprintf(out, "Collected %d users × %d items (%d cells, %d ratings) with %s at ε = %g in %.2f s → %s\n",
		st.Users, st.Items, st.Cells, st.Ratings, mech, *eps, secs, *outPath)
	fmt.Fprintf(out, "  kept %d, removed %d, invented %d; %d reports written (%s units)\n", st.Kept, st.Removed, st.Invented, st.Reported, r.Units())
	fmt.Fprintf(out, "Per rating: %s\nPer user:   %s\n", per, user)
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i+1]
	}
	return "."
}
