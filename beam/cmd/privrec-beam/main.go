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
before any noise is drawn, naming how many rows were refused (on stderr
only: the count is private).

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stopWatch := watchHeap(ctx, os.Getenv("PRIVREC_MEMPROFILE"), slog.Default())
	err := run(ctx, os.Args[1:], os.Stdout)
	stopWatch()
	if err != nil {
		fmt.Fprintln(os.Stderr, "privrec-beam:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.CommandLine
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help, "\nFlags:\n")
		fs.PrintDefaults()
	}
	data := fs.String("data", "", "ratings files: comma-separated paths, globs or filesystem URLs (gs://…); or a central-mode privrec serve database (postgres://… or sqlite:FILE), whose reports table is read through databaseio")
	format := fs.String("format", "", "file format (required): movielens-100k, movielens, movielens-csv, netflix, jester-wide, uci-rc, tsv, csv")
	cols := fs.String("cols", "", "tsv/csv column mapping, as privrec train's --cols")
	column := fs.String("column", "", "uci-rc rating column, as privrec train's --column")
	scale := fs.String("scale", "", "declared rating scale MIN:MAX")
	items := fs.String("items", "", "declared public item catalogue: one item ID per line, an optional title after a tab")
	method := fs.String("method", "", "dp-popularity, dp-bias, dp-ease, dp-ials or dpals")
	eps := fs.Float64("epsilon", 1, "privacy parameter ε")
	delta := fs.Float64("delta", 1e-6, "privacy parameter δ")
	seed := fs.Uint64("seed", 0, "seed for non-private randomness (0: random)")
	experiment := fs.Bool("experiment", false, "also seed the privacy noise from --seed (experiments only; recorded in the model)")
	outPath := fs.String("out", "", "where to write the public model")
	work := fs.String("work", "", "directory for the pipelines' sums and refused rows (default: a new temporary directory, removed after a successful run)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	ledger := fs.String("ledger", "", "the curator's ledger of this data's releases (the file privrec train --ledger keeps; created if missing): this release is recorded before the model is written and the report gives its number and the composition of all")
	ps := params{}
	fs.Var(ps, "param", "a method parameter NAME=VALUE by its JSON name (repeatable), e.g. --param cap=50")
	if err := fs.Parse(args); err != nil {
		return err
	}
	beam.Init()
	fromStore := store.IsURL(*data)
	if *method == "" || *data == "" || *outPath == "" || (*format == "" && !fromStore) {
		fs.Usage()
		return fmt.Errorf("--method, --data, --format (for files) and --out are required")
	}
	meth, err := methods.Lookup(*method)
	if err != nil {
		return err
	}
	if !meth.Engine {
		return fmt.Errorf("%s cannot run on Beam (its statistics are not summed by an engine yet)", *method)
	}
	cfg := meth.New()
	keys := make([]string, 0, len(ps))
	for k := range ps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v any = ps[k]
		if err := json.Unmarshal([]byte(ps[k]), &v); err != nil {
			v = ps[k]
		}
		if err := methods.SetParam(cfg, k, v); err != nil {
			return fmt.Errorf("--param %s: %w", k, err)
		}
	}
	in := release.Input{}
	opt := ratingio.Options{Format: *format, Cols: *cols, Column: *column}
	if *scale != "" {
		sc, err := release.ParseScale(*scale)
		if err != nil {
			return fmt.Errorf("--scale: %w", err)
		}
		in.Declared.Scale = &sc
		opt.HasScale, opt.Min, opt.Max = true, sc.Min, sc.Max
	}
	if *items != "" {
		c, err := model.LoadCatalogue(*items)
		if err != nil {
			return fmt.Errorf("--items: %w", err)
		}
		in.Declared.Catalogue = c
	}
	var pc pipeline.Config
	if fromStore {
		if pc, err = storeConfig(ctx, *data); err != nil {
			return err
		}
	} else if pc.Inputs, err = expand(*data); err != nil {
		return err
	}
	inputs := pc.Inputs
	if fromStore {
		inputs = []string{store.Redact(*data)}
	}
	s := *seed
	if s == 0 {
		var b [8]byte
		rand.Read(b[:])
		s = binary.LittleEndian.Uint64(b[:])
	}
	env := methods.Env{Epsilon: *eps, Delta: *delta, Seed: s, Rand: noise.Seeded(s), Noise: noise.Secure(), Log: slog.Default()}
	if *experiment {
		if *seed == 0 {
			return fmt.Errorf("--experiment needs an explicit --seed")
		}
		env.Noise = noise.Seeded(s ^ 0x6e6f697365) // privrec train's experiment stream
	}
	dir := *work
	if dir == "" {
		if dir, err = os.MkdirTemp("", "privrec-beam-"); err != nil {
			return err
		}
	} else if !strings.Contains(dir, "://") {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	var engines []*pipeline.Engine
	pc.Read, pc.WorkDir, pc.Run = opt, dir, beamx.Run
	env.Engine = pc.Factory(&engines)
	start := time.Now()
	rel, err := methods.Train(ctx, *method, cfg, in, env)
	if err != nil {
		var re *pipeline.RefusedError
		if errors.As(err, &re) {
			// The count goes to the operator (stderr) only.
			return fmt.Errorf("%w", err)
		}
		return err
	}
	secs := time.Since(start).Seconds()
	if *work == "" {
		os.RemoveAll(dir)
	}
	if m := rel.Model(); m != nil {
		if m.Params == nil {
			m.Params = map[string]any{}
		}
		m.Params["epsilon"], m.Params["delta"], m.Params["seed"] = *eps, *delta, s
	}
	rerun := "each run of privrec-beam is a new release of the data: two runs spend the budget twice (--ledger FILE counts them)"
	var led *release.LedgerSummary
	if *ledger != "" {
		s, err := release.RecordRelease(*ledger, release.LedgerEntry{Time: time.Now().UTC(), Method: *method, Engine: "beam",
			Data: strings.Join(inputs, ","), Out: *outPath, Guarantee: rel.Guarantee})
		if err != nil {
			return fmt.Errorf("--ledger: %w (the model was not written)", err)
		}
		led, rerun = &s, "this run is "+s.String()
	}
	if err := model.WriteFileAtomic(*outPath, rel.Public.Write); err != nil {
		return err
	}
	runs := 0
	for _, e := range engines {
		runs += e.Runs()
	}
	if *jsonOut {
		rep := map[string]any{}
		for k, v := range rel.Report {
			rep[k] = v
		}
		rep["method"], rep["seconds"], rep["guarantee"], rep["out"] = *method, secs, rel.Guarantee, *outPath
		rep["engine"], rep["pipelines"], rep["rerun"] = "beam", runs, rerun
		if led != nil {
			rep["ledger"] = led
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "Trained %s on Beam (%d pipeline(s)) in %.2f s → %s\n", *method, runs, secs, *outPath)
	fmt.Fprintf(out, "Guarantee: %s\n", rel.Guarantee)
	fmt.Fprintf(out, "Note: %s.\n", rerun)
	return rel.Report.WriteText(out)
}

// expand turns the --data list into inputs: local globs expanded (a
// pattern matching nothing is an error), URLs kept as they are.
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
