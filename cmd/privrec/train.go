package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"flag"
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
  privrec recommend --model rec.model --user 42 --data her-ratings.tsv -k 10
Where the catalogue's item features are public (genres, years: movies.dat, or
ITEM<TAB>FEATURE,… lines), declare them and use dp-ease-features, which reads
them as a prior on dp-ease's noised Gram and beside it:
  privrec train --data ratings.tsv --method dp-ease-features --epsilon 1 \
      --positive 4 --scale 1:5 --items movies.dat --item-features movies.dat --out rec.model`

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
	t, err := parseTrainFlags(args)
	if err != nil {
		return err
	}
	in, err := t.input()
	if err != nil {
		return err
	}
	env, err := t.env()
	if err != nil {
		return err
	}
	start := time.Now()
	rel, err := t.train(ctx, in, env)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	t.stamp(rel, env.Seed)
	led, err := t.record(rel)
	if err != nil {
		return err
	}
	if err := t.write(rel); err != nil {
		return err
	}
	return t.print(out, rel, trainWarnings(rel, in), secs, led)
}

// trainFlags is privrec train's command line: the method with its config
// (bound to the method's own flags) and the common flags.
type trainFlags struct {
	fs   *flag.FlagSet
	d    dataFlags
	name string
	meth *methods.Method
	cfg  methods.Config

	eps, delta                       float64
	seed                             uint64
	experiment, jsonOut              bool
	outPath, stateDir, items, ledger string
	itemFeatures                     string
	population, workers              int
}

// parseTrainFlags parses privrec train's command line and refuses what
// cannot be trained, before anything is read or written.
func parseTrainFlags(args []string) (*trainFlags, error) {
	t := &trainFlags{name: methodFromArgs(args)}
	example := `  privrec train --data u1.base --format movielens-100k --method onebit-inp \
      --epsilon 4 --threshold 3.5 --out ml100k.model
  privrec train --data ratings.dat --format movielens --method dpsvd --scale 1:5 \
      --items movies.txt --epsilon 1 --out ml.model --user-state ml-users/
  privrec eval --model ml100k.model --data u1.test --format movielens-100k

Methods:
` + methodList()
	fs := newFlags("train --data FILE --method NAME [--epsilon E] [--delta D] [--scale MIN:MAX] [--items FILE] --out MODEL [--user-state DIR] [method flags]", trainSynopsis, example)
	t.fs = fs
	t.d.add(fs)
	fs.String("method", "", "training method (see the list below)")
	fs.Float64Var(&t.eps, "epsilon", 0, "privacy parameter ε: required by a private method (ignored by non-private ones and by ldp-* methods, whose ε is in the collect file)")
	fs.Float64Var(&t.delta, "delta", defaultDelta, "privacy parameter δ for (ε, δ) methods")
	fs.Uint64Var(&t.seed, "seed", 0, "seed for non-private randomness (0: random)")
	fs.BoolVar(&t.experiment, "experiment", false, "also seed the privacy noise from --seed (experiments only; recorded in the model)")
	fs.StringVar(&t.outPath, "out", "", "where to write the public model")
	fs.StringVar(&t.stateDir, "user-state", "", "directory for each user's own state (joint-DP methods: sharded, written all-or-nothing, never inside the public model)")
	fs.StringVar(&t.items, "items", "", "declared public item catalogue: one item ID per line, an optional title after a tab")
	fs.StringVar(&t.itemFeatures, "item-features", "", "declared PUBLIC features of the --items catalogue (genres, years, …) for the feature models (dp-features, dp-ease-features): ITEM<TAB>FEATURE[,FEATURE…] per line, or MovieLens' movies.dat (genres and 5-year release bins)")
	fs.IntVar(&t.population, "population", 0, "declared public number of users (0: undeclared)")
	fs.BoolVar(&t.jsonOut, "json", false, "print a JSON report on stdout")
	fs.IntVar(&t.workers, "workers", 0, "goroutines to use (0: all cores)")
	fs.StringVar(&t.ledger, "ledger", "", "the curator's ledger of this data's releases (a JSON file, created if missing): this release is recorded in it before the model is written, and the report gives its number and the composition of all of them — training again on the same data is another release")
	if t.name != "" {
		m, err := methods.Lookup(t.name)
		if err != nil {
			return nil, usagef("%v", err)
		}
		t.meth, t.cfg = m, m.New()
		if err := bindConfig(fs, t.cfg); err != nil {
			return nil, methods.Named(t.name, err)
		}
	}
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	return t, t.check()
}

// check refuses a command line that cannot be trained.
func (t *trainFlags) check() error {
	if t.meth == nil {
		return usagef("--method is required; known methods:\n%s", methodList())
	}
	if t.outPath == "" {
		return usagef("--out is required")
	}
	if err := atomicfile.CheckTarget(t.outPath); err != nil {
		return usagef("--out %v", err) // before training or a ledger entry
	}
	if err := checkBudget(setFlags(t.fs), t.meth, t.eps, t.delta); err != nil {
		return err
	}
	if t.meth.PerUser && t.stateDir == "" {
		return usagef("--user-state DIR is required for %s: each user's own state (her row, bias and rated items) is kept apart from the public model", t.name)
	}
	if t.population < 0 {
		return usagef("--population must be ≥ 0, got %d", t.population)
	}
	if _, ok := t.cfg.(methods.FeatureModel); t.itemFeatures != "" && !ok {
		return usagef("--item-features: %s reads no item features (dp-features and dp-ease-features do)", t.name)
	}
	if err := t.cfg.Validate(); err != nil {
		return usagef("%v", methods.Named(t.name, err))
	}
	return nil
}

// input is the training input: the declared public facts (scale,
// catalogue, population), checked against the method's flags, and the
// ratings read.
func (t *trainFlags) input() (release.Input, error) {
	in := release.Input{Source: t.d.path}
	if t.d.scale != "" {
		sc, err := release.ParseScale(t.d.scale)
		if err != nil {
			return in, usagef("--scale: %v", err)
		}
		in.Declared.Scale = &sc
	}
	if t.items != "" {
		c, err := model.LoadCatalogue(t.items)
		if err != nil {
			return in, usagef("--items: %v", err)
		}
		in.Declared.Catalogue = c
	}
	if t.itemFeatures != "" {
		if in.Declared.Catalogue == nil {
			return in, usagef("--item-features needs --items: the features are those of the declared catalogue's items")
		}
		f, err := model.LoadItemFeatures(t.itemFeatures, in.Declared.Catalogue)
		if err != nil {
			return in, usagef("--item-features: %v", err)
		}
		in.Declared.ItemFeatures = f
	}
	in.Declared.Population = t.population
	// A top-N method's --positive T (ratings ≥ T are interactions) must
	// lie within the declared scale.
	if v, ok := configNumber(t.cfg, "positive"); ok && setFlags(t.fs)["positive"] {
		if err := checkPositive(v, in.Declared.Scale); err != nil {
			return in, err
		}
	}
	data, err := t.d.read()
	if err != nil {
		return in, err
	}
	in.Ratings, in.Source = data, t.d.path // a stored database is read through an exported collect file
	return in, nil
}

// env is the training environment: the budget, the seed (drawn when
// --seed is 0) and the privacy noise (crypto/rand, or seeded with
// --experiment).
func (t *trainFlags) env() (methods.Env, error) {
	s := t.seed
	if s == 0 {
		var b [8]byte
		rand.Read(b[:])
		s = binary.LittleEndian.Uint64(b[:])
	}
	env := methods.Env{
		Epsilon: t.eps, Delta: t.delta, Seed: s, Workers: t.workers,
		Rand:  noise.Seeded(s),
		Noise: noise.Secure(),
		Log:   slog.Default(),
	}
	if t.experiment {
		if t.seed == 0 {
			return env, usagef("--experiment needs an explicit --seed")
		}
		env.Noise = noise.Seeded(s ^ 0x6e6f697365) // a stream distinct from Rand's
	}
	return env, nil
}

// train trains the method, with a progress line on stderr only when it is
// a terminal and the output is not --json (a private method's line shows
// no training objective).
func (t *trainFlags) train(ctx context.Context, in release.Input, env methods.Env) (*release.Release, error) {
	var prog *progressLine
	if !t.jsonOut && progressTerminal() {
		prog = newProgressLine(progressOut, t.name, t.meth.Private, nil)
		env.Progress, env.Status = prog.Progress, prog.Status
	}
	rel, err := methods.Train(ctx, t.name, t.cfg, in, env)
	if prog != nil {
		prog.finish()
	}
	return rel, err
}

// stamp records the seed, and a private method's budget, in the model's
// parameters.
func (t *trainFlags) stamp(rel *release.Release, seed uint64) {
	m := rel.Model()
	if m == nil {
		return
	}
	if m.Params == nil {
		m.Params = map[string]any{}
	}
	m.Params["seed"] = seed
	if t.meth.Private && !t.meth.EpsilonFromInput {
		m.Params["epsilon"], m.Params["delta"] = t.eps, t.delta
	}
}

// record records the release in the --ledger, if any, before the model is
// written; it returns the ledger's summary (nil without one).
func (t *trainFlags) record(rel *release.Release) (*release.LedgerSummary, error) {
	if t.ledger == "" {
		return nil, nil
	}
	s, err := release.RecordRelease(t.ledger, release.LedgerEntry{Time: time.Now().UTC(), Method: t.name, Engine: "in-process",
		Data: store.Redact(t.d.path), Out: t.outPath, Guarantee: rel.Guarantee})
	if err != nil {
		return nil, fmt.Errorf("--ledger: %w (the model was not written)", err)
	}
	return &s, nil
}

// write writes the public model to --out, and the users' own states, if
// the method released them, to --user-state.
func (t *trainFlags) write(rel *release.Release) error {
	if rel.PerUser == nil {
		// Streamed: a model that holds its users (als at Netflix size:
		// 665 MB) is not copied into memory once more.
		return model.WriteFileAtomic(t.outPath, rel.Public.Write)
	}
	// The model's bytes are encoded once: the users' states name the
	// file they belong to by its fingerprint (privrec refuses them with
	// any other model), and are written before it. Such a model holds
	// the item side only, so the copy in memory is small.
	if t.stateDir == "" {
		return fmt.Errorf("%s released per-user state: pass --user-state DIR", t.name)
	}
	var file bytes.Buffer
	if err := rel.Public.Write(&file); err != nil {
		return err
	}
	rel.PerUser.Model = model.Fingerprint(file.Bytes())
	if err := rel.PerUser.Save(t.stateDir); err != nil {
		return err
	}
	return model.WriteFileAtomicBytes(t.outPath, file.Bytes(), 0o644)
}

// print prints train's report: JSON with --json, else text.
func (t *trainFlags) print(out io.Writer, rel *release.Release, warnings []release.Warning, secs float64, led *release.LedgerSummary) error {
	if t.jsonOut {
		rep := map[string]any{}
		for k, v := range rel.Report {
			rep[k] = v
		}
		rep["method"], rep["seconds"], rep["guarantee"], rep["out"] = t.name, secs, rel.Guarantee, t.outPath
		rep["warnings"] = warnings
		if rel.PerUser != nil {
			rep["user_state"] = t.stateDir
		}
		if led != nil {
			rep["ledger"] = led
		}
		return writeJSON(out, rep)
	}
	fmt.Fprintf(out, "Trained %s in %.2f s → %s\n", t.name, secs, t.outPath)
	if rel.PerUser != nil {
		fmt.Fprintf(out, "Each user's own state → %s (give each user only her state)\n", t.stateDir)
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
