// Command privrec-beam trains privrec's private models whose global step
// is a sum over users (dp-popularity, dp-bias, dp-ease, dp-ials, dpals with its ALS
// steps) on Apache Beam, from ratings files or a central-mode privrec
// serve database:
// each statistic is summed by a pipeline (read → group by user → each
// user's contribution → combine per block), and the noise is added once,
// on this driver, after the pipeline has finished, by the same code as
// `privrec train`. It writes the same public model file and report.
//
// Usage:
//
//	privrec-beam --method dp-ease --data ratings.tsv --format tsv \
//	    --items items.tsv --epsilon 1 --out ease.model [--runner prism]
//
// Runners: Prism in this process by default; --runner universal
// --endpoint HOST:PORT for a Flink or Spark job server, --runner dataflow
// with Dataflow's flags (docs/BEAM.md has the exact commands).
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/privrec/privrec/beam/pipeline"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

const help = `privrec-beam trains a private privrec model on Apache Beam.

Each statistic of the method (a sum over users of bounded per-user
contributions) is computed by one Beam pipeline: the ratings are read with
privrec's parsers (gzip included), grouped by user, each user's
contribution is computed on a worker by the same code as 'privrec train',
and the contributions are combined per block of coordinates. The noise is
drawn once per statistic, on this driver, after its pipeline has finished
— a retried bundle cannot draw it twice. Running this command again is a
second release of the same data: account for both (--ledger FILE records
each release, in the same file privrec train --ledger keeps, and reports
the composition of all of them).

A malformed line or a repeated (user, item) goes to the pipeline's error
output with its source and position and enters no sum; the run then fails
before any noise is drawn, its error naming the first refused row (file,
line, reason) and how many were refused (on stderr only: they are
private; --work DIR lists them all).

The pipelines' sums are exact, un-noised statistics of the data, outside
the guarantee. With Prism in this process (the default) they stay in
memory and never reach a disk, whatever way the run ends. --work DIR
keeps them, and every refused row, in DIR (files mode 0600) after the
run: delete them when done. Other runners need --work.

--data may name a central-mode privrec serve database instead of files
(postgres://… or sqlite:FILE): its reports table is read through Beam's
databaseio, each user's latest rating of an item kept, as privrec train
--data URL reads it (--format is then not needed).

Methods: dp-popularity, dp-bias and dpals (public model only: each user
computes her own state on her side; dpals' counts, bias statistics and
covariance features, and with --param steps=T its T ALS steps, each one
pipeline with the previous step's public item factors as a side input),
dp-ease, dp-ials (its counts, initial Gram and, with --param steps=T or
when its plan asks for them, each step's item statistics over the users'
own rows, solved on the workers and never written).

Example:
  privrec-beam --method dp-ease --data ratings.tsv --format tsv --scale 1:5 \
      --items items.tsv --epsilon 1 --out ease.model --json
Memory: Prism keeps every element of a pipeline in this process;
PRIVREC_MEMPROFILE=FILE rewrites an in-use heap profile to FILE at each
new heap high (go tool pprof -sample_index=inuse_space privrec-beam FILE),
and Go's GOMEMLIMIT caps the heap the collector lets grow.

Runners (Beam's own flags):
  --runner prism (default, in this process)
  --runner universal --endpoint localhost:8099 --environment_type LOOPBACK|DOCKER
  --runner dataflow --project P --region R --staging_location gs://B/staging
`

type params map[string]string

func (p params) String() string { return fmt.Sprint(map[string]string(p)) }

func (p params) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("--param %q: want NAME=VALUE (the method's JSON parameter name)", s)
	}
	p[k] = v
	return nil
}

func main() {
	// SIGINT and SIGTERM cancel the run: the pipeline stops and nothing
	// is released. Un-noised sums never reach a disk unless --work names
	// a directory (they stay in this process's memory with Prism).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopWatch := watchHeap(ctx, os.Getenv("PRIVREC_MEMPROFILE"), slog.Default())
	err := run(ctx, os.Args[1:], os.Stdout)
	stopWatch()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted, nothing was released: %w", err)
		}
		fmt.Fprintln(os.Stderr, "privrec-beam:", err)
		stop()
		os.Exit(1)
	}
}

// options are privrec-beam's own flags (Beam's runner flags stay in the
// process's flag set, where beam.Init reads them).
type options struct {
	data, format, cols, column, scale, items, method string
	eps, delta                                       float64
	seed                                             uint64
	experiment, jsonOut                              bool
	outPath, work, ledger                            string
	ps                                               params
}

// parseFlags parses args into the options and Beam's flags. A flag error
// is one line naming the flag (no flag dump); --help prints the help,
// privrec-beam's flags, then Beam's, and returns flag.ErrHelp.
func parseFlags(args []string, out io.Writer) (*options, error) {
	own := flag.NewFlagSet("privrec-beam", flag.ContinueOnError)
	o := &options{ps: params{}}
	own.StringVar(&o.data, "data", "", "ratings files: comma-separated paths, globs or filesystem URLs (gs://…); or a central-mode privrec serve database (postgres://… or sqlite:FILE), whose reports table is read through databaseio")
	own.StringVar(&o.format, "format", "", "file format (required for files): "+strings.Join(formats, ", "))
	own.StringVar(&o.cols, "cols", "", "tsv/csv column mapping, as privrec train's --cols")
	own.StringVar(&o.column, "column", "", "uci-rc rating column, as privrec train's --column")
	own.StringVar(&o.scale, "scale", "", "declared rating scale MIN:MAX")
	own.StringVar(&o.items, "items", "", "declared public item catalogue: one item ID per line, an optional title after a tab")
	own.StringVar(&o.method, "method", "", "dp-popularity, dp-bias, dp-ease, dp-ials or dpals")
	own.Float64Var(&o.eps, "epsilon", 1, "privacy parameter ε")
	own.Float64Var(&o.delta, "delta", 1e-6, "privacy parameter δ")
	own.Uint64Var(&o.seed, "seed", 0, "seed for non-private randomness (0: random)")
	own.BoolVar(&o.experiment, "experiment", false, "also seed the privacy noise from --seed (experiments only; recorded in the model)")
	own.StringVar(&o.outPath, "out", "", "where to write the public model")
	own.StringVar(&o.work, "work", "", "directory where each pipeline writes its UN-NOISED sums and every refused row (files mode 0600), kept after the run: private statistics outside the guarantee, delete them when done. Default: none — with Prism in this process the sums stay in memory and never reach a disk; other runners need --work on a filesystem their workers reach")
	own.BoolVar(&o.jsonOut, "json", false, "print a JSON report on stdout")
	own.StringVar(&o.ledger, "ledger", "", "the curator's ledger of this data's releases (the file privrec train --ledger keeps; created if missing): this release is recorded before the model is written and the report gives its number and the composition of all")
	own.Var(o.ps, "param", "a method parameter NAME=VALUE by its JSON name (repeatable), e.g. --param cap=50")
	fs := flag.CommandLine // Beam's runner flags are registered here
	own.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	fs.Init("privrec-beam", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(out, own, fs)
			return nil, err
		}
		return nil, fmt.Errorf("%w (privrec-beam --help lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: every input is a flag (privrec-beam --help)", fs.Arg(0))
	}
	return o, o.check()
}

// formats are the file formats privrec-beam reads (ratingio's, without
// detection).
var formats = []string{"movielens-100k", "movielens", "movielens-csv", "netflix", "jester-wide", "uci-rc", "tsv", "csv"}

// check names the first required flag that is missing.
func (o *options) check() error {
	switch {
	case o.method == "":
		return fmt.Errorf("--method is required: dp-popularity, dp-bias, dp-ease, dp-ials or dpals (privrec-beam --help)")
	case o.data == "":
		return fmt.Errorf("--data is required: the ratings files, or a central-mode privrec serve database (privrec-beam --help)")
	case o.format == "" && !store.IsURL(o.data):
		return fmt.Errorf("--format is required for files (privrec-beam does not detect it): one of %s", strings.Join(formats, ", "))
	case o.format == "auto":
		return fmt.Errorf("--format auto: privrec-beam needs the format named, one of %s", strings.Join(formats, ", "))
	case o.outPath == "":
		return fmt.Errorf("--out is required: where to write the public model")
	}
	return nil
}

// printHelp prints the help, privrec-beam's flags, then Beam's own.
func printHelp(w io.Writer, own, all *flag.FlagSet) {
	fmt.Fprint(w, help, "\nFlags:\n")
	own.SetOutput(w)
	own.PrintDefaults()
	runner := flag.NewFlagSet("beam", flag.ContinueOnError)
	all.VisitAll(func(f *flag.Flag) {
		if own.Lookup(f.Name) == nil {
			runner.Var(f.Value, f.Name, f.Usage)
		}
	})
	fmt.Fprint(w, "\nBeam's flags (the runner and its options):\n")
	runner.SetOutput(w)
	runner.PrintDefaults()
}

// privateTemp points TMPDIR at a new directory of this run's, removed by
// cleanup: Beam's loopback runner leaves a placeholder file
// ("beamloopbackworker-*", empty) in the temporary directory at each
// pipeline, which this run then takes away with the directory. (A killed
// process, SIGKILL, leaves the directory and its empty placeholders; the
// sums are never there.)
func privateTemp() (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "privrec-beam-")
	if err != nil {
		return nil, err
	}
	old, had := os.LookupEnv("TMPDIR")
	if err := os.Setenv("TMPDIR", dir); err != nil {
		os.Remove(dir)
		return nil, err
	}
	return func() {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
		if err := os.RemoveAll(dir); err != nil {
			slog.Warn("removing the run's temporary directory", "err", err)
		}
	}, nil
}

// workDir is where the pipelines write: the directory the operator named,
// or, when the workers run in this process (Prism, the default, with its
// loopback workers), a directory in memory that no kill can leave behind.
// Any other runner needs --work.
func workDir(named string) (string, error) {
	if named != "" {
		return named, nil
	}
	runner, endpoint, env := flagValue("runner"), flagValue("endpoint"), flagValue("environment_type")
	if (runner == "" || runner == "prism" || runner == "PrismRunner") && endpoint == "" && (env == "" || strings.EqualFold(env, "loopback")) {
		return pipeline.MemoryWorkDir(), nil
	}
	return "", fmt.Errorf("--work is required with --runner %q, --endpoint %q, --environment_type %q: the workers write the un-noised sums there, on a filesystem the driver and they reach (keep it private; the sums are outside the guarantee)", runner, endpoint, env)
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	beam.Init()
	j, err := o.plan(ctx)
	if err != nil {
		return err
	}
	if o.work != "" && !strings.Contains(o.work, "://") {
		defer func() {
			if _, err := os.Stat(o.work); err == nil {
				slog.Warn("the pipelines' un-noised sums and refused rows are kept in --work (files mode 0600): private, outside the guarantee; delete them when done", "work", o.work)
			}
		}()
	}
	cleanup, err := privateTemp()
	if err != nil {
		return err
	}
	defer cleanup()
	start := time.Now()
	// What the pipelines write to a local --work is readable by this user
	// only.
	restore := privateFiles()
	rel, err := methods.Train(ctx, o.method, j.cfg, j.in, j.env)
	restore()
	if err != nil {
		return err // a RefusedError's count and rows go to the operator (stderr) only
	}
	return o.publish(out, j, rel, time.Since(start).Seconds())
}

// job is a planned run: the method's configuration, the declared public
// facts, the training environment with its Beam engine.
type job struct {
	cfg     methods.Config
	in      release.Input
	env     methods.Env
	seed    uint64
	inputs  []string // the data's sources, as the ledger records them (passwords redacted)
	engines []*pipeline.Engine
}

// plan checks the flags against the method, the declared facts and the
// data, and builds the engine: nothing is written.
func (o *options) plan(ctx context.Context) (*job, error) {
	dir, err := workDir(o.work)
	if err != nil {
		return nil, err
	}
	cfg, err := o.methodConfig()
	if err != nil {
		return nil, err
	}
	j := &job{cfg: cfg}
	opt := ratingio.Options{Format: o.format, Cols: o.cols, Column: o.column}
	if o.scale != "" {
		sc, err := release.ParseScale(o.scale)
		if err != nil {
			return nil, fmt.Errorf("--scale: %w", err)
		}
		j.in.Declared.Scale = &sc
		opt.HasScale, opt.Min, opt.Max = true, sc.Min, sc.Max
	}
	if o.items != "" {
		c, err := model.LoadCatalogue(o.items)
		if err != nil {
			return nil, fmt.Errorf("--items: %w", err)
		}
		j.in.Declared.Catalogue = c
	}
	var pc pipeline.Config
	if store.IsURL(o.data) {
		if pc, err = storeConfig(ctx, o.data); err != nil {
			return nil, err
		}
		j.inputs = []string{store.Redact(o.data)}
	} else {
		if pc.Inputs, err = expand(o.data); err != nil {
			return nil, err
		}
		j.inputs = pc.Inputs
	}
	if j.env, j.seed, err = o.environment(); err != nil {
		return nil, err
	}
	pc.Read, pc.WorkDir, pc.Run = opt, dir, beamx.Run
	j.env.Engine = pc.Factory(&j.engines)
	return j, nil
}

// methodConfig is the method's configuration with the --param values.
func (o *options) methodConfig() (methods.Config, error) {
	meth, err := methods.Lookup(o.method)
	if err != nil {
		return nil, fmt.Errorf("--method: %w", err)
	}
	if !meth.Engine {
		return nil, fmt.Errorf("--method %s cannot run on Beam (its statistics are not summed by an engine yet)", o.method)
	}
	cfg := meth.New()
	keys := make([]string, 0, len(o.ps))
	for k := range o.ps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v any = o.ps[k]
		if err := json.Unmarshal([]byte(o.ps[k]), &v); err != nil {
			v = o.ps[k]
		}
		if err := methods.SetParam(cfg, k, v); err != nil {
			return nil, fmt.Errorf("--param %s: %w", k, err)
		}
	}
	return cfg, nil
}

// environment is the privacy parameters and the randomness: the seed
// (random unless given) and the noise (secure unless --experiment).
func (o *options) environment() (methods.Env, uint64, error) {
	s := o.seed
	if s == 0 {
		var b [8]byte
		rand.Read(b[:])
		s = binary.LittleEndian.Uint64(b[:])
	}
	env := methods.Env{Epsilon: o.eps, Delta: o.delta, Seed: s, Rand: noise.Seeded(s), Noise: noise.Secure(), Log: slog.Default()}
	if o.experiment {
		if o.seed == 0 {
			return env, 0, fmt.Errorf("--experiment needs an explicit --seed")
		}
		env.Noise = noise.Seeded(s ^ 0x6e6f697365) // privrec train's experiment stream
	}
	return env, s, nil
}

// publish records the release in the ledger, writes the model and prints
// the report, with privrec train's warnings where the noise drowns the
// statistic.
func (o *options) publish(out io.Writer, j *job, rel *release.Release, secs float64) error {
	if m := rel.Model(); m != nil {
		if m.Params == nil {
			m.Params = map[string]any{}
		}
		m.Params["epsilon"], m.Params["delta"], m.Params["seed"] = o.eps, o.delta, j.seed
	}
	rerun := "each run of privrec-beam is a new release of the data: two runs spend the budget twice (--ledger FILE counts them)"
	var led *release.LedgerSummary
	if o.ledger != "" {
		s, err := release.RecordRelease(o.ledger, release.LedgerEntry{Time: time.Now().UTC(), Method: o.method, Engine: "beam",
			Data: strings.Join(j.inputs, ","), Out: o.outPath, Guarantee: rel.Guarantee})
		if err != nil {
			return fmt.Errorf("--ledger: %w (the model was not written)", err)
		}
		led, rerun = &s, "this run is "+s.String()
	}
	if err := model.WriteFileAtomic(o.outPath, rel.Public.Write); err != nil {
		return err
	}
	runs := 0
	for _, e := range j.engines {
		runs += e.Runs()
	}
	warnings := release.Warnings(rel.Report, rel.Model(), release.Facts{Users: j.users()})
	if warnings == nil {
		warnings = []release.Warning{}
	}
	if o.jsonOut {
		rep := map[string]any{}
		for k, v := range rel.Report {
			rep[k] = v
		}
		rep["method"], rep["seconds"], rep["guarantee"], rep["out"] = o.method, secs, rel.Guarantee, o.outPath
		rep["engine"], rep["pipelines"], rep["rerun"], rep["warnings"] = "beam", runs, rerun, warnings
		if led != nil {
			rep["ledger"] = led
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "Trained %s on Beam (%d pipeline(s)) in %.2f s → %s\n", o.method, runs, secs, o.outPath)
	fmt.Fprintf(out, "Guarantee: %s\n", rel.Guarantee)
	fmt.Fprintf(out, "Note: %s.\n", rerun)
	if err := rel.Report.WriteText(out); err != nil {
		return err
	}
	for _, w := range warnings {
		if _, err := fmt.Fprintf(out, "WARNING: %s\n", w.Message); err != nil {
			return err
		}
	}
	return nil
}

// users is the population for the warnings (release.Warnings): the
// declared one, else the number of users the pipelines grouped (public
// under the replace-one-user relation, as privrec train judges it).
func (j *job) users() int {
	if n := j.in.Declared.Population; n > 0 {
		return n
	}
	users := 0
	for _, e := range j.engines {
		if e.Runs() > 0 {
			users = max(users, e.Users())
		}
	}
	return users
}

// expand turns the --data list into inputs: local globs expanded (a
// pattern matching nothing, or a directory, is an error), URLs kept as
// they are.
func expand(list string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.Contains(p, "://") {
			out = append(out, p)
			continue
		}
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("--data %q: %w", p, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("--data %q: no such file", p)
		}
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && st.IsDir() {
				return nil, fmt.Errorf("--data %s is a directory: name the ratings files in it (a glob such as --data '%s' works)", f, filepath.Join(f, "*"))
			}
			abs, err := filepath.Abs(f)
			if err != nil {
				return nil, err
			}
			out = append(out, abs)
		}
	}
	return out, nil
}

// storeConfig is the pipelines' source for a `privrec serve` database:
// its reports table, in central mode only (a local-mode collection holds
// randomized reports, which the ldp-* methods train on in process).
func storeConfig(ctx context.Context, url string) (pipeline.Config, error) {
	st, err := store.Open(ctx, url)
	if err != nil {
		return pipeline.Config{}, fmt.Errorf("--data: %w", err)
	}
	defer st.Close()
	cfg, err := service.StoredConfig(ctx, st)
	if err != nil {
		return pipeline.Config{}, fmt.Errorf("--data %s: %w", store.Redact(url), err)
	}
	if cfg.Mode != api.ModeCentral {
		return pipeline.Config{}, fmt.Errorf("--data %s: a %s-mode collection holds randomized reports; privrec-beam reads the true ratings of a central-mode one (train ldp-* methods with privrec train)", store.Redact(url), cfg.Mode)
	}
	ids := make([]string, len(cfg.Items))
	for j, it := range cfg.Items {
		ids[j] = it.ID
	}
	return pipeline.Config{Store: url, StoreItems: ids}, nil
}
