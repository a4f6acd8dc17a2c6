package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service/store"
)

func init() {
	register(&command{name: "train", summary: "train a (private) recommender and save the model with its guarantee", run: runTrain})
}

const trainSynopsis = `
Train a model with one method and save it, with its privacy guarantee, to
--out. Each method adds its own flags: see them with
  privrec train --method NAME --help

A private method needs --epsilon: there is no silent default for the
privacy you grant (non-private methods ignore it, and ldp-* methods take ε
from the collect file they train on). --delta defaults to 1e-6 for (ε, δ)
methods. With --user-state DIR, each user's state records the model file it
belongs to, and recommend, eval and predict refuse it with any other model.

Privacy noise comes from crypto/rand. --seed makes the non-private
randomness (initialisation, shuffling) repeatable; --experiment also seeds
the privacy noise, which is for experiments only: the model then records
that its noise was reproducible and its guarantee says so.

Training again on the same data is another release: the privacy of the
two composes. --ledger FILE keeps the count: each release is recorded in
the file before its model is written, and the report gives its number
and the composition of all of them (privrec-beam --ledger shares the
file format, so releases on Beam and in process add up).

Recommending (top-N lists) rather than predicting ratings: the top-N
methods popularity, ease and ials (non-private) and dp-popularity and
dp-ease (private) rank items from a user's own interactions; --positive T
makes ratings ≥ T the interactions. The recommended private recommender is
dp-ease (user-level joint DP; docs/topn.md):
  privrec train --data ratings.tsv --method dp-ease --epsilon 1 --positive 4 \
      --scale 1:5 --items items.tsv --out rec.model
  privrec recommend --model rec.model --user 42 --data her-ratings.tsv -k 10`

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
		needs := ""
		for _, n := range m.Needs {
			needs += "; needs --" + n
		}
		if m.PerUser {
			needs += "; needs --user-state"
		}
		fmt.Fprintf(&b, "  %-14s %s (%s%s%s)\n", m.Name, m.Summary, priv, seed, needs)
	}
	return b.String()
}

func runTrain(ctx context.Context, args []string, out io.Writer) error {
	name := methodFromArgs(args)
	example := `  privrec train --data u1.base --format movielens-100k --method onebit-inp \
      --epsilon 4 --threshold 3.5 --out ml100k.model
  privrec train --data ratings.dat --format movielens --method dpsvd --scale 1:5 \
      --items movies.txt --epsilon 1 --out ml.model --user-state ml-users/
  privrec eval --model ml100k.model --data u1.test --format movielens-100k

Methods:
` + methodList()
	fs := newFlags("train --data FILE --method NAME [--epsilon E] [--delta D] [--scale MIN:MAX] [--items FILE] --out MODEL [--user-state DIR] [method flags]", trainSynopsis, example)
	var d dataFlags
	d.add(fs)
	fs.String("method", "", "training method (see the list below)")
	eps := fs.Float64("epsilon", 0, "privacy parameter ε: required by a private method (ignored by non-private ones and by ldp-* methods, whose ε is in the collect file)")
	delta := fs.Float64("delta", defaultDelta, "privacy parameter δ for (ε, δ) methods")
	seed := fs.Uint64("seed", 0, "seed for non-private randomness (0: random)")
	experiment := fs.Bool("experiment", false, "also seed the privacy noise from --seed (experiments only; recorded in the model)")
	outPath := fs.String("out", "", "where to write the public model")
	stateDir := fs.String("user-state", "", "directory for each user's own state (joint-DP methods: sharded, written all-or-nothing, never inside the public model)")
	items := fs.String("items", "", "declared public item catalogue: one item ID per line, an optional title after a tab")
	population := fs.Int("population", 0, "declared public number of users (0: undeclared)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	workers := fs.Int("workers", 0, "goroutines to use (0: all cores)")
	ledger := fs.String("ledger", "", "the curator's ledger of this data's releases (a JSON file, created if missing): this release is recorded in it before the model is written, and the report gives its number and the composition of all of them — training again on the same data is another release")
	var (
		meth *methods.Method
		cfg  methods.Config
	)
	if name != "" {
		m, err := methods.Lookup(name)
		if err != nil {
			return usagef("%v", err)
		}
		meth, cfg = m, m.New()
		if err := bindConfig(fs, cfg); err != nil {
			return methods.Named(name, err)
		}
	}
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if meth == nil {
		return usagef("--method is required; known methods:\n%s", methodList())
	}
	if *outPath == "" {
		return usagef("--out is required")
	}
	if err := atomicfile.CheckTarget(*outPath); err != nil {
		return usagef("--out %v", err) // before training or a ledger entry
	}
	if err := checkBudget(setFlags(fs), meth, *eps, *delta); err != nil {
		return err
	}
	if meth.PerUser && *stateDir == "" {
		return usagef("--user-state DIR is required for %s: each user's own state (her row, bias and rated items) is kept apart from the public model", name)
	}
	if *population < 0 {
		return usagef("--population must be ≥ 0, got %d", *population)
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", methods.Named(name, err))
	}
	in := release.Input{Source: d.path}
	if d.scale != "" {
		sc, err := release.ParseScale(d.scale)
		if err != nil {
			return usagef("--scale: %v", err)
		}
		in.Declared.Scale = &sc
	}
	if *items != "" {
		c, err := model.LoadCatalogue(*items)
		if err != nil {
			return usagef("--items: %v", err)
		}
		in.Declared.Catalogue = c
	}
	in.Declared.Population = *population
	// A top-N method's --positive T (ratings ≥ T are interactions) must
	// lie within the declared scale.
	if v, ok := configNumber(cfg, "positive"); ok && setFlags(fs)["positive"] {
		if err := checkPositive(v, in.Declared.Scale); err != nil {
			return err
		}
	}
	data, err := d.read()
	if err != nil {
		return err
	}
	in.Ratings, in.Source = data, d.path // a stored database is read through an exported collect file
	s := *seed
	if s == 0 {
		var b [8]byte
		rand.Read(b[:])
		s = binary.LittleEndian.Uint64(b[:])
	}
	env := methods.Env{
		Epsilon: *eps, Delta: *delta, Seed: s, Workers: *workers,
		Rand:  noise.Seeded(s),
		Noise: noise.Secure(),
		Log:   slog.Default(),
	}
	if *experiment {
		if *seed == 0 {
			return usagef("--experiment needs an explicit --seed")
		}
		env.Noise = noise.Seeded(s ^ 0x6e6f697365) // a stream distinct from Rand's
	}
	// Progress on stderr only when it is a terminal and the output is not
	// --json; a private method's line shows no training objective.
	var prog *progressLine
	if !*jsonOut && progressTerminal() {
		prog = newProgressLine(progressOut, name, meth.Private, nil)
		env.Progress, env.Status = prog.Progress, prog.Status
	}
	start := time.Now()
	rel, err := methods.Train(ctx, name, cfg, in, env)
	if prog != nil {
		prog.finish()
	}
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if m := rel.Model(); m != nil {
		if m.Params == nil {
			m.Params = map[string]any{}
		}
		m.Params["seed"] = s
		if meth.Private && !meth.EpsilonFromInput {
			m.Params["epsilon"], m.Params["delta"] = *eps, *delta
		}
	}
	var led *release.LedgerSummary
	if *ledger != "" {
		s, err := release.RecordRelease(*ledger, release.LedgerEntry{Time: time.Now().UTC(), Method: name, Engine: "in-process",
			Data: store.Redact(d.path), Out: *outPath, Guarantee: rel.Guarantee})
		if err != nil {
			return fmt.Errorf("--ledger: %w (the model was not written)", err)
		}
		led = &s
	}
	if rel.PerUser != nil {
		// The model's bytes are encoded once: the users' states name the
		// file they belong to by its fingerprint (privrec refuses them with
		// any other model), and are written before it. Such a model holds
		// the item side only, so the copy in memory is small.
		if *stateDir == "" {
			return fmt.Errorf("%s released per-user state: pass --user-state DIR", name)
		}
		var file bytes.Buffer
		if err := rel.Public.Write(&file); err != nil {
			return err
		}
		rel.PerUser.Model = model.Fingerprint(file.Bytes())
		if err := rel.PerUser.Save(*stateDir); err != nil {
			return err
		}
		if err := model.WriteFileAtomicBytes(*outPath, file.Bytes(), 0o644); err != nil {
			return err
		}
	} else if err := model.WriteFileAtomic(*outPath, rel.Public.Write); err != nil {
		// Streamed: a model that holds its users (als at Netflix size:
		// 665 MB) is not copied into memory once more.
		return err
	}
	warnings := trainWarnings(rel, in)
	if *jsonOut {
		rep := map[string]any{}
		for k, v := range rel.Report {
			rep[k] = v
		}
		rep["method"], rep["seconds"], rep["guarantee"], rep["out"] = name, secs, rel.Guarantee, *outPath
		rep["warnings"] = warnings
		if rel.PerUser != nil {
			rep["user_state"] = *stateDir
		}
		if led != nil {
			rep["ledger"] = led
		}
		return writeJSON(out, rep)
	}
	fmt.Fprintf(out, "Trained %s in %.2f s → %s\n", name, secs, *outPath)
	if rel.PerUser != nil {
		fmt.Fprintf(out, "Each user's own state → %s (give each user only her state)\n", *stateDir)
	}
	fmt.Fprintf(out, "Guarantee: %s\n", rel.Guarantee)
	if led != nil {
		fmt.Fprintf(out, "Ledger: %s\n", led)
	}
	if err := rel.Report.WriteText(out); err != nil {
		return err
	}
	return writeWarnings(out, warnings)
}

// trainWarnings judges whether the release's noise drowns its statistic
// (release.Warnings), with the population: the declared one, else the
// number of users in the data, which the curator running train knows
// (the count methods treat it as public under the replace-one-user
// relation; it is printed on her console, not written into the model).
func trainWarnings(rel *release.Release, in release.Input) []release.Warning {
	users := in.Declared.Population
	if users == 0 && in.Ratings != nil {
		users = in.Ratings.NumUsers()
	}
	ws := release.Warnings(rel.Report, rel.Model(), release.Facts{Users: users})
	if ws == nil {
		ws = []release.Warning{}
	}
	return ws
}

// defaultDelta is δ for (ε, δ) guarantees when --delta is not given, the
// same for train and client publish.
const defaultDelta = 1e-6

// checkBudget checks --epsilon and --delta before any data is read. A
// private method needs --epsilon stated: there is no silent default for
// the privacy a user grants. Methods whose ε comes from their input (a
// collect file) and non-private methods ignore it.
func checkBudget(set map[string]bool, meth *methods.Method, eps, delta float64) error {
	if !meth.Private || meth.EpsilonFromInput {
		return nil
	}
	if !set["epsilon"] {
		return usagef("--epsilon is required for %s, a private method: it is the privacy budget you grant (smaller is more private; 1 is a common choice, see docs/PRIVACY.md)", meth.Name)
	}
	return checkEpsDelta(eps, delta)
}

// checkEpsDelta checks the values of --epsilon and --delta, naming the flag.
func checkEpsDelta(eps, delta float64) error {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps <= 0 {
		return usagef("--epsilon %v: ε must be a finite number > 0", eps)
	}
	if math.IsNaN(delta) || delta < 0 || delta >= 1 {
		return usagef("--delta %v: δ must lie in [0, 1)", delta)
	}
	return nil
}
