package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

func init() {
	register(&command{name: "collect", summary: "randomize a ratings file on the users' side (local DP), as each client would", run: runCollect})
}

const collectSynopsis = `
Transform a ratings file exactly as each user's device would before sending
it (local differential privacy, seeds 002/003): every client randomizes her
whole vector over the declared item catalogue (--items), missing entries
included, on the declared rating scale (--scale), with fresh crypto/rand
randomness. The output is what the service receives: a TSV of
"user item value" lines after a "# privrec-collect v2" header that records
the mechanism, ε, the noise sampler and the declared facts — the scale,
the number of catalogue items and the number of clients. Nothing in the
header is computed from the ratings.

What the clients must know in advance is declared, never read from the data:
  --scale MIN:MAX   the rating scale (required); --levels d for rr
                    (default MAX−MIN+1 when MIN and MAX are integers)
  --items FILE      the catalogue every report covers (required): one item
                    ID per line, an optional title after a tab. Ratings of
                    items outside it are not reported.
  --users FILE      the clients, one user ID per line (optional). In a
                    simulation from a ratings file the users in the file
                    are the clients — each sends one report, and who the
                    clients are is public under local DP; a client without
                    any rating is not in a ratings file, so list her here.

--mechanism laplace: the modified Laplace mechanism. Ratings are mapped from
  the scale to [−1, 1]; each rating is kept w.p. e^{ε/2}/(e^{ε/2}+1) with
  Laplace(2/ε) noise added, otherwise removed; each missing cell becomes a
  pure-noise rating Laplace(2/ε) w.p. 1/(e^{ε/2}+1). Values are written in the
  normalised units. The noise comes from the bounded-time sampler (a
  running time that does not grow with the noise).
--mechanism rr: randomized response over {missing, 1…d} (d = rating levels):
  the true value is kept w.p. e^ε/(e^ε+d), else one of the d others uniformly.
  Values are written as levels 1…d.

Each client also sends her own mean rating (the scale's midpoint when she has
none) with Laplace noise at --mean-epsilon (default an eighth of the whole
report: n·ε/7 for n catalogue items at per-rating ε, at most 16; 0 sends
none): a "#mean" line per client. The per-cell reports at the small ε a
whole-catalogue report affords cannot tell the service even the average
rating; with the mean reports the ldp-* methods estimate it privately and
shrink their recovery toward it, so they never predict worse than that mean.

Each cell is ε-DP per rating (one cell changing arbitrarily, rated ↔ missing
included), and n·ε-DP per user over the n catalogue items; the mean report
adds its ε to both (basic composition). Both totals are printed.
The counts of ratings, kept, removed and invented ratings and of ratings
outside the catalogue compare the reports with the true ratings: they are
exact facts of the private data, never in the collect file, and printed
only with --seed N --experiment (a simulation, labelled "not private").`

func runCollect(ctx context.Context, args []string, out io.Writer) error {
	c, err := parseCollectFlags(args)
	if err != nil {
		return err
	}
	p, err := c.plan()
	if err != nil {
		return err
	}
	start := time.Now()
	data, err := c.clients()
	if err != nil {
		return err
	}
	src := noise.Secure()
	if c.experiment {
		src = noise.Seeded(c.seed)
	}
	st, err := c.collect(ctx, out, data, p, src)
	if err != nil {
		return fmt.Errorf("collect: %w", err)
	}
	secs := time.Since(start).Seconds()
	if src.Reproducible() {
		p.per.Reproducible, p.user.Reproducible = true, true
	}
	return c.print(out, p, st, secs)
}

// collectFlags is privrec collect's command line.
type collectFlags struct {
	d                                         dataFlags
	mechName, meanFlag, items, users, outPath string
	eps                                       float64
	levels, workers                           int
	seed                                      uint64
	experiment, jsonOut                       bool
	// mech is the mechanism parsed; meanEps the ε of the mean reports
	// given (with --mean-epsilon auto: set by plan).
	mech    ldp.Mechanism
	meanEps float64
}

// parseCollectFlags parses privrec collect's command line and refuses
// flags that do not go together.
func parseCollectFlags(args []string) (*collectFlags, error) {
	example := `  privrec collect --mechanism laplace --epsilon 2 --data ua.base \
      --format movielens-100k --scale 1:5 --items u.item --out ua.ldp.tsv
  privrec train --data ua.ldp.tsv --format tsv --method ldp-laplace \
      --debias --out ua.ldp.model
  privrec eval --model ua.ldp.model --data ua.test --format movielens-100k`
	fs := newFlags("collect --mechanism laplace|rr --epsilon E --data FILE --scale MIN:MAX --items FILE --out PERTURBED.tsv", collectSynopsis, example)
	c := &collectFlags{}
	c.d.add(fs)
	fs.StringVar(&c.mechName, "mechanism", "", "laplace (modified Laplace) or rr (randomized response)")
	fs.Float64Var(&c.eps, "epsilon", 0, "per-rating privacy parameter ε")
	fs.StringVar(&c.meanFlag, "mean-epsilon", "auto", "ε of each client's mean-rating report: auto (an eighth of the whole report, n·ε/7 over the n catalogue items, at most 16), a number ≥ 0, or 0 for none (the ldp-* methods then cannot shrink toward a mean)")
	fs.StringVar(&c.items, "items", "", "the declared item catalogue every report covers (required): one item ID per line, an optional title after a tab")
	fs.StringVar(&c.users, "users", "", "the clients, one user ID per line (default: the users in --data)")
	fs.IntVar(&c.levels, "levels", 0, "rr: number of rating levels d on the declared scale (0: MAX−MIN+1 when MIN and MAX are integers)")
	fs.StringVar(&c.outPath, "out", "", "where to write the perturbed ratings (- for stdout)")
	fs.Uint64Var(&c.seed, "seed", 0, "seed the noise (experiments only; recorded in the header)")
	fs.BoolVar(&c.experiment, "experiment", false, "required together with --seed: a seeded collection is not private")
	fs.IntVar(&c.workers, "workers", 0, "goroutines (0: all cores)")
	fs.BoolVar(&c.jsonOut, "json", false, "print a JSON report on stdout (needs --out FILE)")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	return c, c.check()
}

// check refuses flags that do not go together.
func (c *collectFlags) check() error {
	var err error
	if c.mech, err = ldp.ParseMechanism(c.mechName); err != nil {
		return usagef("--mechanism: %v", err)
	}
	if !(c.eps > 0) {
		return usagef("--epsilon must be positive")
	}
	if c.meanFlag != "auto" {
		v, err := strconv.ParseFloat(c.meanFlag, 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			return usagef("--mean-epsilon must be auto or a finite number ≥ 0, got %q", c.meanFlag)
		}
		c.meanEps = v
	}
	if c.outPath == "" {
		return usagef("--out is required")
	}
	if c.jsonOut && c.outPath == "-" {
		return usagef("--json needs --out FILE (stdout carries the report)")
	}
	if (c.seed != 0) != c.experiment {
		return usagef("--seed and --experiment go together (seeded noise is for experiments only)")
	}
	return nil
}

// collectPlan is what the clients are told before any rating is read: the
// declared scale and catalogue, the randomizer, the mean reporter (nil:
// no mean reports), and the guarantees per rating and per user.
type collectPlan struct {
	sc        ldp.Scale
	cat       *model.Catalogue
	r         ldp.Randomizer
	mean      *ldp.MeanReporter
	per, user privacy.Guarantee
}

// plan builds the collection from the declared facts alone, warning of a
// collection without mean reports or with cells the noise drowns.
func (c *collectFlags) plan() (*collectPlan, error) {
	if c.d.scale == "" {
		return nil, usagef("--scale MIN:MAX is required: the clients must be told the rating scale before any rating is read (it goes into the header; taking it from the data would make the header depend on the private ratings)")
	}
	declared, err := release.ParseScale(c.d.scale)
	if err != nil {
		return nil, usagef("--scale: %v", err)
	}
	p := &collectPlan{}
	if p.sc, err = ldp.DeclaredScale(declared.Min, declared.Max, c.levels, c.mech); err != nil {
		return nil, usagef("%v", err)
	}
	if c.items == "" {
		return nil, usagef("--items FILE is required: the catalogue every report covers (each client randomizes every catalogue item, missing ones included); the items that happen to have ratings are private")
	}
	if p.cat, err = model.LoadCatalogue(c.items); err != nil {
		return nil, usagef("--items: %v", err)
	}
	if p.r, err = ldp.New(c.mech, c.eps, p.sc); err != nil {
		return nil, usagef("%v", err)
	}
	if c.meanFlag == "auto" {
		c.meanEps = ldp.DefaultMeanEpsilon(c.eps, p.cat.Len())
	}
	if c.meanEps > 0 {
		if p.mean, err = ldp.NewMeanReporter(c.meanEps, p.sc); err != nil {
			return nil, usagef("--mean-epsilon: %v", err)
		}
	} else {
		slog.Warn("collect: --mean-epsilon 0: the clients send no mean report, so ldp-laplace and ldp-rr cannot shrink their recovery toward a private mean (at small ε they may predict worse than a constant)")
	}
	if p.per, p.user, err = ldp.Guarantees(p.r, p.cat.Len(), c.meanEps); err != nil {
		return nil, usagef("%v", err)
	}
	if w := ldp.CellWarning(c.mech, c.eps, p.cat.Len(), p.sc); w != "" {
		slog.Warn("collect: " + w)
	}
	return p, nil
}

// clients reads the ratings, with the declared --users as the clients.
func (c *collectFlags) clients() (*ratings.Matrix, error) {
	data, err := c.d.read()
	if err != nil {
		return nil, err
	}
	if c.users == "" {
		return data, nil
	}
	clients, err := model.LoadCatalogue(c.users) // one ID per line, as a catalogue
	if err != nil {
		return nil, usagef("--users: %v", err)
	}
	if data, err = ldp.WithClients(data, clients.IDs()); err != nil {
		return nil, fmt.Errorf("collect: --users: %w", err)
	}
	return data, nil
}

// collect randomizes every client's report with the noise from src and
// writes them to --out (- : out).
func (c *collectFlags) collect(ctx context.Context, out io.Writer, data *ratings.Matrix, p *collectPlan, src *noise.Source) (ldp.CollectStats, error) {
	var st ldp.CollectStats
	collect := func(w io.Writer) (err error) {
		st, err = ldp.CollectOver(ctx, w, data, p.r, p.mean, p.cat.IDs(), src, c.workers)
		return err
	}
	if c.outPath == "-" {
		return st, collect(out)
	}
	return st, atomicfile.Write(c.outPath, 0o644, collect)
}

// print prints collect's report. Exact counts of the true ratings (kept,
// removed, …) are facts of the private data: printed only for a seeded
// simulation (--experiment), labelled as not private.
func (c *collectFlags) print(out io.Writer, p *collectPlan, st ldp.CollectStats, secs float64) error {
	sc, r := p.sc, p.r
	if c.jsonOut {
		res := map[string]any{
			"mechanism": string(c.mech), "epsilon": c.eps, "mean_epsilon": c.meanEps, "out": c.outPath, "seconds": secs,
			"scale_min": sc.Min, "scale_max": sc.Max, "levels": sc.Levels, "units": r.Units(), "sampler": r.Sampler(),
			"users": st.Users, "items": st.Items, "cells": st.Cells, "reported": st.Reported,
			"guarantee": p.per, "per_user_guarantee": p.user,
		}
		if c.experiment {
			res["simulation"] = map[string]any{"private": false,
				"note":    "exact counts of the true ratings, for the experiment only: not private, never publish them",
				"ratings": st.Ratings, "kept": st.Kept, "removed": st.Removed, "invented": st.Invented, "outside_catalogue": st.Outside}
		}
		return writeJSON(out, res)
	}
	if c.outPath == "-" {
		if c.experiment && st.Outside > 0 {
			fmt.Fprintf(os.Stderr, "collect (experiment, not private): %d ratings of items outside the catalogue were not reported\n", st.Outside)
		}
		return nil
	}
	fmt.Fprintf(out, "Collected %d clients × %d catalogue items (%d cells) with %s at ε = %g in %.2f s → %s\n",
		st.Users, st.Items, st.Cells, c.mech, c.eps, secs, c.outPath)
	fmt.Fprintf(out, "  %d reports written (%s units, %s sampler)\n", st.Reported, r.Units(), r.Sampler())
	if p.mean != nil {
		fmt.Fprintf(out, "  %d mean reports at ε = %g (Laplace, variance %.4g each)\n", st.Users, c.meanEps, p.mean.Variance())
	}
	if c.experiment {
		fmt.Fprintf(out, "  experiment only, NOT PRIVATE (exact counts of the true ratings, not in the file): %d ratings, kept %d, removed %d, invented %d; %d ratings of items outside the catalogue not reported\n",
			st.Ratings, st.Kept, st.Removed, st.Invented, st.Outside)
	}
	fmt.Fprintf(out, "Per rating: %s\nPer user:   %s\n", p.per, p.user)
	return nil
}
