package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/fleet"
	"github.com/privrec/privrec/experiment"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
)

func init() {
	register(&command{name: "dap", summary: "no trusted curator: the two-aggregator path (dap simulate: MovieLens devices through two privrec serve --role processes vs the central release)", run: runDAP})
}

const dapSynopsis = `
The two-aggregator path (docs/AGGREGATION.md): devices send secret shares
of bounded contributions to a leader and a helper (privrec serve --role
leader|helper), which verify a validity proof together and each add
discrete Gaussian noise to their own aggregate share.

  privrec dap enrol      --leader URL --token-file FILE
  privrec dap contribute --leader URL --helper URL --token-file FILE --task ID \
                         --ratings FILE --ledger FILE [--budget-rho B] [--allow-split-noise]
      a device: rebuild the task's statistic from its public plan, derive
      its sensitivity, range and σ from the plan and refuse a task that
      states less (or splits the noise, unless --allow-split-noise),
      compute her part from her own ratings, shard it, seal the helper's
      share to the helper's key, count the ρ she derived in her own
      ledger, upload once
  privrec dap task create --leader URL --admin-token-file FILE --method M --name NAME \
                         --items FILE --scale MIN:MAX --devices N [--epsilon E]
      build the method's next task from its public plan and the declared
      facts, create it at both aggregators; once every task is released,
      publish the model recipe NAME (privrec dap task create --help)
  privrec dap task       --leader URL --admin-token-file FILE --file TASK.json
      create a task written by hand (its whole lattice)
  privrec dap collect    --leader URL --admin-token-file FILE --task ID [--json]
      close the task, aggregate, and publish the release: a summary
      (--json: the whole release)
  privrec dap recommend  --leader URL --model NAME --ratings FILE [--k 10]
      a device: build the published model NAME (GET /dap/v1/models: its
      method, settings and tasks) from the tasks' releases with the
      method's own code, compute her row from her own ratings and print
      her recommendations; nothing is sent (the browser runs the same code)
  privrec dap simulate --data FILE --items FILE --scale MIN:MAX [flags]
      end-to-end experiment: every training user of a ratings file is a
      simulated device holding only her own ratings; two privrec serve
      --role processes on loopback aggregate; the released models are
      compared with the central in-process release at the same ε (test
      RMSE and Recall@20 on held-out ratings), with per-device and
      aggregator costs.`

func runDAP(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "simulate":
			return runDAPSimulate(ctx, args[1:], out)
		case "task":
			if len(args) > 1 && args[1] == "create" {
				return runDAPTaskCreate(ctx, args[2:], out)
			}
			return runDAPDevice(ctx, args[0], args[1:], out)
		case "enrol", "contribute", "collect", "recommend":
			return runDAPDevice(ctx, args[0], args[1:], out)
		}
	}
	fs := newFlags("dap simulate [flags]", dapSynopsis, "  privrec dap simulate --data ml-1m/ratings.tsv --items ml-1m/items.tsv --scale 1:5 --methods dp-bias,dp-popularity")
	if err := parse(fs, args, true); err != nil {
		return err
	}
	return usagef("dap: want a subcommand: enrol, contribute, task, collect, recommend or simulate (privrec dap --help)")
}

// simResult is one method's figures for one seed.
type simResult struct {
	Method  string     `json:"method"`
	Seed    uint64     `json:"seed"`
	Central simMetrics `json:"central"`
	// CentralHalfRho is the central release at half the ρ: the noise
	// standard deviation of the two aggregators' each-alone release (√2×).
	CentralHalfRho simMetrics    `json:"central_half_rho"`
	DAP            simMetrics    `json:"dap"`
	Tasks          []fleet.Stats `json:"tasks"`
	// DeviceRho is the ρ each device's own ledger counted.
	DeviceRho float64 `json:"device_rho"`
	Guarantee string  `json:"guarantee"`
	// CoveredCentral and CoveredDAP are the items of dp-ease's Gram (or
	// dp-ials' initial Gram) in the central release and through the
	// aggregators (capped at what a device affords); 0 for the other
	// methods.
	CoveredCentral int `json:"covered_items_central,omitempty"`
	CoveredDAP     int `json:"covered_items_dap,omitempty"`
	// Model is the recipe published at the leader for devices to build
	// the model from the releases (GET /dap/v1/models/{name}).
	Model string `json:"model,omitempty"`
	// AggregatorCPU is each aggregator process's CPU seconds (user +
	// system) over this method's tasks, uploads included, and per report
	// (two privrec serve processes on Linux only).
	AggregatorCPU          map[string]float64 `json:"aggregator_cpu_seconds,omitempty"`
	AggregatorCPUPerReport map[string]float64 `json:"aggregator_cpu_seconds_per_report,omitempty"`
}

type simMetrics struct {
	RMSE    jsonFloat `json:"rmse"`
	Recall  jsonFloat `json:"recall_at_20"`
	Seconds float64   `json:"seconds"`
}

// jsonFloat writes NaN (a metric a model kind does not have) as null.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// simArgs are dap simulate's flags, checked and parsed.
type simArgs struct {
	data                                *string
	holdout, eps, delta                 *float64
	devices, workers, aggEvery          *int
	inProcess, centralOnly, arith, json *bool
	lattice                             *latticeFlags
	scale                               release.Scale
	catalogue                           *model.Catalogue
	seeds                               []uint64
	params                              map[string]map[string]any
	methods                             []string
}

func runDAPSimulate(ctx context.Context, args []string, out io.Writer) error {
	a, err := parseSimArgs(args)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "privrec-dap-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var results []simResult
	for _, seed := range a.seeds {
		rs, err := a.simulateSeed(ctx, seed, filepath.Join(dir, fmt.Sprint("seed", seed)), out)
		results = append(results, rs...)
		if err != nil {
			return err
		}
	}
	if *a.json {
		e := json.NewEncoder(out)
		e.SetIndent("", "  ")
		return e.Encode(results)
	}
	printSimMeans(out, results)
	return nil
}

// parseSimArgs reads and checks dap simulate's flags, the declared scale
// and catalogue, the seeds, the methods and their parameters.
func parseSimArgs(args []string) (*simArgs, error) {
	example := `  privrec dap simulate --data /data/ml-1m/ratings.tsv --items /data/ml-1m/items.tsv --scale 1:5 \
      --methods dp-bias,dp-popularity --epsilon 8 --seeds 1,2,3 --json`
	fs := newFlags("dap simulate --data FILE --items FILE --scale MIN:MAX [flags]", dapSynopsis, example)
	a := &simArgs{}
	a.data = fs.String("data", "", "ratings file (user, item, rating; TSV)")
	items := fs.String("items", "", "the declared catalogue (one item ID per line, optional title after a tab)")
	scaleFlag := fs.String("scale", "", "declared rating scale MIN:MAX")
	a.holdout = fs.Float64("holdout", 0.1, "fraction of the ratings held out at random per seed for testing")
	methodList := fs.String("methods", "dp-bias,dp-ease", "comma-separated methods with an engine (dp-bias, dp-popularity, dp-ease: the recommended private top-N method, its Gram capped at what a device affords, --max-report-elements)")
	a.eps = fs.Float64("epsilon", 8, "ε of each release (central and through the aggregators)")
	a.delta = fs.Float64("delta", 1e-6, "δ of each release")
	seeds := fs.String("seeds", "1", "comma-separated seeds (split, central noise, aggregators' noise)")
	a.devices = fs.Int("devices", 0, "use only the first N training users as devices (0: all); the central release then uses the same users")
	a.lattice = addLatticeFlags(fs)
	params := fs.String("params", "", "method parameters, METHOD.KEY=VALUE comma-separated (e.g. dp-ease.max_items=60)")
	a.inProcess = fs.Bool("in-process", false, "run both aggregators in this process instead of two privrec serve processes")
	a.centralOnly = fs.Bool("central-only", false, "only the central releases (at ρ and ρ/2), no aggregators")
	a.arith = fs.Bool("arith-only", false, "experiments: the aggregators' exact arithmetic and noise in this process, without the cryptography or servers (fleet.Arith; same tasks, quantization and noise code)")
	a.workers = fs.Int("workers", 0, "devices working at once (0: all cores)")
	a.aggEvery = fs.Int("aggregate-every", 512, "the administrator runs the leader's aggregation each time N more reports are uploaded, while devices keep uploading, so the leader holds about N reports' shares at a time (0: once, after the last upload; verification throughput is then measured without the devices' load)")
	a.json = fs.Bool("json", false, "print the results as JSON")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	if *a.data == "" || *items == "" || *scaleFlag == "" {
		return nil, usagef("--data, --items and --scale are required")
	}
	if *a.aggEvery < 0 {
		return nil, usagef("--aggregate-every %d: want 0 (after the last upload) or a positive number of reports", *a.aggEvery)
	}
	if _, err := a.lattice.lattice(); err != nil {
		return nil, err
	}
	var err error
	if a.scale, a.catalogue, err = loadDeclared(*scaleFlag, *items); err != nil {
		return nil, err
	}
	if a.seeds, err = parseSeeds(*seeds); err != nil {
		return nil, err
	}
	if a.params, err = parseMethodParams(*params); err != nil {
		return nil, err
	}
	a.methods = strings.Split(*methodList, ",")
	return a, checkEngineMethods(a.methods)
}

// parseSeeds reads --seeds: comma-separated unsigned integers.
func parseSeeds(list string) ([]uint64, error) {
	var seeds []uint64
	for _, s := range strings.Split(list, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, usagef("--seeds: %q is not a seed", s)
		}
		seeds = append(seeds, v)
	}
	return seeds, nil
}

// checkEngineMethods checks that each method releases its statistics
// through an engine (only those run through the aggregators).
func checkEngineMethods(names []string) error {
	for _, n := range names {
		m, err := methods.Lookup(n)
		if err != nil {
			return usagef("--methods: %v", err)
		}
		if !m.Engine {
			return usagef("--methods: %s does not release its statistics through an engine: it cannot run through the aggregators (see docs/AGGREGATION.md)", n)
		}
	}
	return nil
}

// simulateSeed runs every method on seed's split: centrally only, with
// the aggregators' arithmetic in this process, or through two
// aggregators (their files in dir). It prints each result as it comes
// (unless --json) and returns those it has, with the first error.
func (a *simArgs) simulateSeed(ctx context.Context, seed uint64, dir string, out io.Writer) ([]simResult, error) {
	split, err := experiment.Generate(ctx, experiment.DataSpec{Name: filepath.Base(*a.data), Source: "file", Path: *a.data, Format: "tsv",
		Scale: []float64{a.scale.Min, a.scale.Max}, Holdout: *a.holdout}, seed, "")
	if err != nil {
		return nil, err
	}
	train := split.Train
	if *a.devices > 0 && *a.devices < train.NumUsers() {
		if train, err = firstUsers(train, *a.devices); err != nil {
			return nil, err
		}
	}
	run := &simRun{simArgs: a, seed: seed, train: train, test: split.Test,
		decl: release.Declared{Scale: &a.scale, Catalogue: a.catalogue}, out: out}
	if *a.centralOnly || *a.arith {
		return run.local(ctx)
	}
	return run.throughAggregators(ctx, dir)
}

// simRun is one seed of dap simulate: its split and the results so far.
type simRun struct {
	*simArgs
	seed        uint64
	train, test *ratings.Matrix
	decl        release.Declared
	out         io.Writer
	results     []simResult
}

// engine is the aggregators' engine for method name (f nil: the
// arithmetic alone).
func (r *simRun) engine(f *fleet.Fleet, name string, plan statistic.RowPlan) fleet.Engine {
	l := r.lattice
	return fleet.Engine{Fleet: f, Plan: plan, Devices: r.train.NumUsers(), StepBits: *l.stepBits, GramStepBits: *l.gramBits, MaxReportElements: *l.maxElements,
		Noise: dap.NoiseMode(*l.noise), Prefix: fmt.Sprintf("s%d-%s", r.seed, name),
		Ratings: func(u int) ([]string, []float64) { return r.train.UserRatings(int32(u)) }}
}

// method simulates one method and keeps (and, in text mode, prints) its
// result.
func (r *simRun) method(ctx context.Context, name string, f *fleet.Fleet, mk func(statistic.RowPlan) statistic.Engine) (*simResult, error) {
	res, err := simulateMethod(ctx, name, r.params[name], r.train, r.test, r.decl, *r.eps, *r.delta, r.seed, f, mk)
	if err != nil {
		return nil, fmt.Errorf("%s, seed %d: %w", name, r.seed, err)
	}
	return res, nil
}

// keep records a result and prints it in text mode.
func (r *simRun) keep(res *simResult) {
	r.results = append(r.results, *res)
	if !*r.json {
		printSim(r.out, res)
	}
}

// local runs the methods centrally, and with --arith-only the
// aggregators' arithmetic and noise in this process.
func (r *simRun) local(ctx context.Context) ([]simResult, error) {
	for _, name := range r.methods {
		var mk func(statistic.RowPlan) statistic.Engine
		if *r.arith {
			mk = func(plan statistic.RowPlan) statistic.Engine {
				return &fleet.Arith{Engine: r.engine(nil, name, plan),
					LeaderNoise: noise.Seeded(r.seed*2 + 1), HelperNoise: noise.Seeded(r.seed*2 + 2)}
			}
		}
		res, err := r.method(ctx, name, nil, mk)
		if err != nil {
			return r.results, err
		}
		r.keep(res)
	}
	return r.results, nil
}

// throughAggregators starts two aggregators, enrols the devices and runs
// every method through them, counting the aggregators' CPU per method.
func (r *simRun) throughAggregators(ctx context.Context, dir string) ([]simResult, error) {
	pair, stop, cpu, err := startAggregators(ctx, dir, *r.inProcess, r.seed)
	if err != nil {
		return nil, err
	}
	defer stop()
	f := &fleet.Fleet{Leader: pair.LeaderURL, Helper: pair.HelperURL, AdminToken: pair.AdminToken, BudgetRho: 1e6, Workers: *r.workers, AggregateEvery: *r.aggEvery}
	if err := f.Enrol(ctx, r.train.NumUsers()); err != nil {
		return nil, err
	}
	for _, name := range r.methods {
		cpu0 := cpu()
		res, err := r.method(ctx, name, f, func(plan statistic.RowPlan) statistic.Engine {
			e := r.engine(f, name, plan)
			return &e
		})
		if err != nil {
			return r.results, err
		}
		res.aggregatorCPU(cpu0, cpu())
		r.keep(res)
	}
	return r.results, nil
}

// latticeFlags are the engine's public lattice settings (dap.Lattice), as
// flags of dap simulate and dap task create.
type latticeFlags struct {
	stepBits, gramBits, maxElements *int
	noise                           *string
}

func addLatticeFlags(fs *flag.FlagSet) *latticeFlags {
	return &latticeFlags{
		stepBits:    fs.Int("step-bits", 8, "fixed-point step 2^−BITS of the counts and bias statistics"),
		gramBits:    fs.Int("gram-step-bits", 9, "fixed-point step 2^−BITS of the Gram (dp-ease) and the covariance (dpals): coarser steps mean fewer bits per coordinate, so more covered items within a device's budget"),
		maxElements: fs.Int("max-report-elements", 1<<18, "a device's budget per task in Prio3 field elements (coordinates × bits; 16 bytes each in the report): dp-ease covers at most the items whose Gram fits (2^18: dp-ease's Gram over 228 items at 10 bits, ≈ 4.2 MB)"),
		noise:       fs.String("noise", string(dap.NoiseEachAlone), "each-alone (each aggregator's noise alone gives ε: the default) or honest-but-curious (split; holds only if both add theirs)"),
	}
}

// lattice checks the flags and returns the lattice they set.
func (l *latticeFlags) lattice() (dap.Lattice, error) {
	if *l.maxElements < 1 {
		return dap.Lattice{}, usagef("--max-report-elements %d: a device's budget must be at least one field element", *l.maxElements)
	}
	if m := dap.NoiseMode(*l.noise); m != dap.NoiseEachAlone && m != dap.NoiseSplit {
		return dap.Lattice{}, usagef("--noise %q: want %s or %s", *l.noise, dap.NoiseEachAlone, dap.NoiseSplit)
	}
	return dap.Lattice{StepBits: *l.stepBits, GramStepBits: *l.gramBits, Noise: dap.NoiseMode(*l.noise), MaxReportElements: *l.maxElements}, nil
}

// loadDeclared reads the declared rating scale and catalogue.
func loadDeclared(scale, items string) (release.Scale, *model.Catalogue, error) {
	sc, err := release.ParseScale(scale)
	if err != nil {
		return sc, nil, usagef("--scale: %v", err)
	}
	cat, err := model.LoadCatalogue(items)
	if err != nil {
		return sc, nil, usagef("--items: %v", err)
	}
	return sc, cat, nil
}

func parseMethodParams(s string) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		m, key, ok2 := strings.Cut(k, ".")
		if !ok || !ok2 {
			return nil, usagef("--params: %q is not METHOD.KEY=VALUE", kv)
		}
		if out[m] == nil {
			out[m] = map[string]any{}
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[m][key] = f
		} else {
			out[m][key] = v
		}
	}
	return out, nil
}

// firstUsers keeps the first n users and their ratings (re-indexed, so
// the matrix has exactly n users).
func firstUsers(m *ratings.Matrix, n int) (*ratings.Matrix, error) {
	b := ratings.NewBuilder(ratings.DupError)
	for u := range int32(n) {
		ids, vals := m.UserRatings(u)
		for k, id := range ids {
			if err := b.Add(m.Users.Name(u), id, vals[k], 0); err != nil {
				return nil, err
			}
		}
	}
	return b.Build()
}

// simulateMethod trains name centrally and through the aggregators on the
// same split and evaluates both on the held-out ratings.
func simulateMethod(ctx context.Context, name string, params map[string]any, train, test *ratings.Matrix, decl release.Declared,
	eps, delta float64, seed uint64, f *fleet.Fleet, engine func(statistic.RowPlan) statistic.Engine) (*simResult, error) {
	cfg, err := methods.Configure(name, params)
	if err != nil {
		return nil, err
	}
	j := simJob{name: name, params: params, cfg: cfg, train: train, test: test, decl: decl, eps: eps, delta: delta, seed: seed,
		env: methods.Env{Epsilon: eps, Delta: delta, Seed: seed, Rand: noise.Seeded(seed), Noise: noise.Seeded(seed ^ 0x6e6f697365)}}
	res := &simResult{Method: name, Seed: seed}
	perUser, err := j.central(ctx, res)
	if err != nil {
		return nil, err
	}
	if err := j.centralHalfRho(ctx, res); err != nil {
		return nil, err
	}
	if engine == nil {
		res.DAP = simMetrics{RMSE: jsonFloat(math.NaN()), Recall: jsonFloat(math.NaN())} // not run
		return res, nil
	}
	if err := j.throughAggregators(ctx, res, f, engine, perUser); err != nil {
		return nil, err
	}
	return res, nil
}

// simJob is one method at one seed of dap simulate: the central release
// and the release through the aggregators, from the same settings.
type simJob struct {
	name        string
	params      map[string]any
	cfg         methods.Config
	train, test *ratings.Matrix
	decl        release.Declared
	eps, delta  float64
	seed        uint64
	env         methods.Env // the central release's
}

// central trains and scores the central release at ε; perUser reports
// whether it keeps a per-user part (then each device computes hers).
func (j simJob) central(ctx context.Context, res *simResult) (perUser bool, err error) {
	t0 := time.Now()
	rel, err := methods.Train(ctx, j.name, j.cfg, release.Input{Ratings: j.train, Declared: j.decl}, j.env)
	if err != nil {
		return false, fmt.Errorf("central: %w", err)
	}
	res.Central.Seconds = time.Since(t0).Seconds()
	res.CoveredCentral = coveredItems(rel)
	if res.Central.RMSE, res.Central.Recall, err = evalRelease(ctx, rel.Model(), rel.PerUser, j.train, j.test); err != nil {
		return false, fmt.Errorf("central: %w", err)
	}
	return rel.PerUser != nil, nil
}

// centralHalfRho trains and scores the central release at half its ρ
// (the noise of one aggregator's each-alone share), with its own noise.
func (j simJob) centralHalfRho(ctx context.Context, res *simResult) error {
	rho, err := accountant.RhoForApprox(j.eps, j.delta)
	if err != nil {
		return err
	}
	halfEps, err := accountant.ZCDPToApprox(rho/2, j.delta)
	if err != nil {
		return err
	}
	henv := j.env
	henv.Epsilon, henv.Noise = halfEps, noise.Seeded(j.seed^0x68616c66)
	hrel, err := methods.Train(ctx, j.name, j.cfg, release.Input{Ratings: j.train, Declared: j.decl}, henv)
	if err != nil {
		return fmt.Errorf("central at ρ/2: %w", err)
	}
	if res.CentralHalfRho.RMSE, res.CentralHalfRho.Recall, err = evalRelease(ctx, hrel.Model(), hrel.PerUser, j.train, j.test); err != nil {
		return fmt.Errorf("central at ρ/2: %w", err)
	}
	return nil
}

// throughAggregators trains the method with its statistics released by
// engine (the aggregators), publishes the recipe devices build the model
// from (with a fleet), and scores it with each device's own part.
func (j simJob) throughAggregators(ctx context.Context, res *simResult, f *fleet.Fleet, engine func(statistic.RowPlan) statistic.Engine, perUser bool) error {
	var eng statistic.Engine
	env := j.env
	// The aggregators' run gets its own post-processing randomness from
	// the seed, which its published recipe states (a device rebuilding
	// the model draws the same).
	env.Rand = noise.Seeded(j.seed)
	env.Engine = func(plan statistic.RowPlan) (statistic.Engine, error) {
		eng = engine(plan)
		return eng, nil
	}
	t0 := time.Now()
	drel, err := methods.Train(ctx, j.name, j.cfg, release.Input{Declared: j.decl}, env)
	if err != nil {
		return fmt.Errorf("through the aggregators: %w", err)
	}
	res.DAP.Seconds = time.Since(t0).Seconds()
	if fe, ok := eng.(*fleet.Engine); ok {
		if err := j.publish(ctx, res, f, fe, drel); err != nil {
			return err
		}
	}
	res.Guarantee = drel.Guarantee.String()
	res.CoveredDAP = coveredItems(drel)
	var states *model.UserStates
	if perUser {
		// Each device computes her own state from the public model and her
		// own ratings.
		if states, err = deviceStates(ctx, drel.Model(), j.train, j.name); err != nil {
			return err
		}
	}
	if res.DAP.RMSE, res.DAP.Recall, err = evalRelease(ctx, drel.Model(), states, j.train, j.test); err != nil {
		return fmt.Errorf("through the aggregators: %w", err)
	}
	if f != nil {
		res.DeviceRho = f.Ledger(0).SpentRho()
	}
	return nil
}

// publish records the fleet's task statistics and, with a fleet and a
// model, publishes what a device needs to build the model from the
// releases (the browser's recommendations; privrec dap recommend).
func (j simJob) publish(ctx context.Context, res *simResult, f *fleet.Fleet, fe *fleet.Engine, drel *release.Release) error {
	res.Tasks = fe.Stats
	if f == nil || drel.Model() == nil {
		return nil
	}
	rec := fe.Recipe(fe.Prefix, j.name, j.params, j.eps, j.delta, j.seed, [2]float64{j.decl.Scale.Min, j.decl.Scale.Max})
	if err := f.PublishModel(ctx, rec); err != nil {
		return err
	}
	res.Model = rec.Name
	return nil
}

// coveredItems is the items of the item–item Gram a release reports
// (dp-ials' initial Gram, dp-ease's), else 0.
func coveredItems(r *release.Release) int {
	if m, ok := r.Report["init_items"].(int); ok {
		return m
	}
	m, _ := r.Report["covered_items"].(int)
	return m
}

// deviceStates is what every device computes on her side.
func deviceStates(ctx context.Context, m *model.Model, train *ratings.Matrix, name string) (*model.UserStates, error) {
	n := train.NumUsers()
	st := &model.UserStates{Method: name, Rank: m.Rank, States: make([]model.UserState, n)}
	m.ItemIndex("") // built once before the goroutines read it
	var wg sync.WaitGroup
	errs := make([]error, runtime.GOMAXPROCS(0))
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := w; u < n; u += len(errs) {
				if ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				ids, vals := train.UserRatings(int32(u))
				s, err := m.FoldInUser(train.Users.Name(int32(u)), ids, vals)
				if err != nil {
					errs[w] = fmt.Errorf("device %d: %w", u, err)
					return
				}
				st.States[u] = *s
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return st, nil
}

// evalRelease scores a release on the held-out ratings: test RMSE for a
// rating model (with the users' own states), and for a top-N model (no
// per-user state) Recall@20 of each training user's list, from her own
// training ratings, against her held-out ratings ≥ 4.
func evalRelease(ctx context.Context, m *model.Model, states *model.UserStates, train, test *ratings.Matrix) (rmse, recall jsonFloat, err error) {
	rmse, recall = jsonFloat(math.NaN()), jsonFloat(math.NaN())
	if states == nil && m.Users == nil && m.Dense == nil {
		targets := test.Filter(func(e ratings.Entry) bool { return e.Value >= 4 })
		rep, err := methods.EvaluateHeldOut(ctx, m, train, targets, methods.HeldOutOptions{Ks: []int{20}})
		if err != nil {
			return 0, 0, err
		}
		return rmse, jsonFloat(rep.Recall[20]), nil
	}
	rep, err := methods.EvaluateModel(ctx, m, test, methods.EvalOptions{K: 20, States: states})
	if err != nil {
		return 0, 0, err
	}
	if rep.RMSE != nil {
		rmse = jsonFloat(*rep.RMSE)
	}
	if rep.Recall != nil {
		recall = jsonFloat(*rep.Recall)
	}
	return rmse, recall, nil
}

// aggregatorCPU records the aggregators' CPU between two readings.
func (r *simResult) aggregatorCPU(before, after map[string]float64) {
	reports := 0
	for _, t := range r.Tasks {
		reports += t.Accepted + t.Rejected
	}
	if before == nil || after == nil || reports == 0 {
		return
	}
	r.AggregatorCPU, r.AggregatorCPUPerReport = map[string]float64{}, map[string]float64{}
	for role, v := range after {
		r.AggregatorCPU[role] = v - before[role]
		r.AggregatorCPUPerReport[role] = (v - before[role]) / float64(reports)
	}
}

// procCPU is a process's user + system CPU seconds from /proc (Linux;
// USER_HZ 100), or false.
func procCPU(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command name (in parentheses, which may
	// contain spaces): state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (u + st) / 100, true
}

// startAggregators starts a leader and a helper: two privrec serve --role
// processes (this executable) on loopback, or in this process. cpu reads
// each process's CPU seconds so far (nil in process or off Linux).
func startAggregators(ctx context.Context, dir string, inProcess bool, seed uint64) (p *fleet.Pair, stop func(), cpu func() map[string]float64, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, nil, err
	}
	if inProcess {
		p, err := fleet.StartPair(ctx, dir, 1e6, seed*2+1, seed*2+2)
		if err != nil {
			return nil, nil, nil, err
		}
		return p, func() { p.Close() }, func() map[string]float64 { return nil }, nil
	}
	rp, err := newRoleProcs(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	if p, err = rp.startPair(); err != nil {
		rp.stop()
		return nil, nil, nil, err
	}
	return p, rp.stop, rp.cpu, nil
}

// roleProcs are privrec serve --role processes of this executable sharing
// one directory: the secret, the peer and admin tokens, each role's
// database, key and address file.
type roleProcs struct {
	exe, dir string
	files    map[string]string // secret, peer.token, admin.token
	procs    []*exec.Cmd
	roles    map[string]*exec.Cmd
}

// newRoleProcs writes fresh secrets (mode 0600) into dir.
func newRoleProcs(dir string) (*roleProcs, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	rp := &roleProcs{exe: exe, dir: dir, files: map[string]string{}, roles: map[string]*exec.Cmd{}}
	for _, n := range []string{"secret", "peer.token", "admin.token"} {
		s, err := newSecret()
		if err != nil {
			return nil, err
		}
		rp.files[n] = filepath.Join(dir, n)
		if err := os.WriteFile(rp.files[n], []byte(s+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	return rp, nil
}

// startPair starts the helper, then the leader pointing at it.
func (rp *roleProcs) startPair() (*fleet.Pair, error) {
	p := &fleet.Pair{LeaderDB: filepath.Join(rp.dir, "leader.db"), HelperDB: filepath.Join(rp.dir, "helper.db")}
	var err error
	if p.HelperURL, err = rp.start("helper"); err != nil {
		return nil, err
	}
	if p.LeaderURL, err = rp.start("leader", "--admin-token-file", rp.files["admin.token"], "--helper", p.HelperURL, "--budget-rho", "1e6", "--enrol-rate", "0"); err != nil {
		return nil, err
	}
	tok, err := readTokenFile(rp.files["admin.token"], "the admin token")
	if err != nil {
		return nil, err
	}
	p.AdminToken = tok
	return p, nil
}

// start starts one role and waits (30 s at most) for its address file.
func (rp *roleProcs) start(role string, extra ...string) (string, error) {
	addr := filepath.Join(rp.dir, role+".addr")
	args := append([]string{"serve", "--role", role, "--create", "--db", filepath.Join(rp.dir, role+".db"), "--key-file", filepath.Join(rp.dir, role+".key"),
		"--secret-file", rp.files["secret"], "--peer-token-file", rp.files["peer.token"], "--listen", "127.0.0.1:0",
		"--addr-file", addr, "--log-level", "warn"}, extra...)
	c := exec.Command(rp.exe, args...)
	c.Stderr = os.Stderr
	if prof := os.Getenv("PRIVREC_CPUPROFILE"); prof != "" {
		// Each aggregator profiles itself into its own file.
		c.Env = append(os.Environ(), "PRIVREC_CPUPROFILE="+prof+"."+role)
	}
	if err := c.Start(); err != nil {
		return "", fmt.Errorf("starting the %s: %w", role, err)
	}
	rp.procs = append(rp.procs, c)
	rp.roles[role] = c
	for range 600 {
		if b, err := os.ReadFile(addr); err == nil && len(b) > 0 {
			return "http://" + strings.TrimSpace(string(b)), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("the %s did not start within 30 s", role)
}

// cpu reads each role's CPU seconds so far (nil off Linux).
func (rp *roleProcs) cpu() map[string]float64 {
	out := map[string]float64{}
	for role, c := range rp.roles {
		v, ok := procCPU(c.Process.Pid)
		if !ok {
			return nil
		}
		out[role] = v
	}
	return out
}

// stop ends every started role (SIGTERM) and waits for it.
func (rp *roleProcs) stop() {
	for _, c := range rp.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}
}

// simScores says a model's scores, leaving out a metric it has none of
// (a top-N model predicts no ratings: no RMSE).
func simScores(rmse, recall float64) string {
	var parts []string
	if !math.IsNaN(rmse) {
		parts = append(parts, fmt.Sprintf("RMSE %.4f", rmse))
	}
	if !math.IsNaN(recall) {
		parts = append(parts, fmt.Sprintf("Recall@20 %.4f", recall))
	}
	if len(parts) == 0 {
		return "not scored"
	}
	return strings.Join(parts, " ")
}

func printSim(out io.Writer, r *simResult) {
	fmt.Fprintf(out, "%s seed %d: central %s (%.1f s); central at ρ/2 %s | two aggregators %s (%.1f s), device ledger ρ %.4g\n",
		r.Method, r.Seed, simScores(float64(r.Central.RMSE), float64(r.Central.Recall)), r.Central.Seconds,
		simScores(float64(r.CentralHalfRho.RMSE), float64(r.CentralHalfRho.Recall)),
		simScores(float64(r.DAP.RMSE), float64(r.DAP.Recall)), r.DAP.Seconds, r.DeviceRho)
	if r.CoveredDAP > 0 {
		fmt.Fprintf(out, "  covered items: %d central, %d through the aggregators (a device's budget)\n", r.CoveredCentral, r.CoveredDAP)
	}
	for _, t := range r.Tasks {
		fmt.Fprintf(out, "  task %s: %d devices, %.3f s and %d bytes per device, upload %.1f s, verification %.1f reports/s (%d accepted, %d rejected)\n",
			t.Task, t.Devices, t.DeviceSeconds, t.ReportBytes, t.UploadSeconds, t.ReportsPerSecond, t.Accepted, t.Rejected)
	}
	if c := r.AggregatorCPUPerReport; c != nil {
		fmt.Fprintf(out, "  aggregators' CPU per report (uploads, aggregation and collection): leader %.1f ms, helper %.1f ms\n", 1000*c["leader"], 1000*c["helper"])
	}
}

func printSimMeans(out io.Writer, rs []simResult) {
	type acc struct {
		n    int
		sums [6]float64 // central, central at ρ/2, two aggregators: RMSE and Recall@20
	}
	sums := map[string]*acc{}
	var order []string
	for _, r := range rs {
		a := sums[r.Method]
		if a == nil {
			a = &acc{}
			sums[r.Method] = a
			order = append(order, r.Method)
		}
		for i, m := range []simMetrics{r.Central, r.CentralHalfRho, r.DAP} {
			a.sums[2*i] += float64(m.RMSE)
			a.sums[2*i+1] += float64(m.Recall)
		}
		a.n++
	}
	for _, m := range order {
		a := sums[m]
		v := a.sums
		for i := range v {
			v[i] /= float64(a.n)
		}
		fmt.Fprintf(out, "%s, mean of %d: central %s; central at ρ/2 %s | two aggregators %s\n",
			m, a.n, simScores(v[0], v[1]), simScores(v[2], v[3]), simScores(v[4], v[5]))
	}
}
