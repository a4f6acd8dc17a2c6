package experiment

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// Options control a sweep.
type Options struct {
	// Out is the output directory (created if needed).
	Out string
	// DataDir resolves relative dataset paths.
	DataDir string
	// Workers is the number of runs trained at once (0: GOMAXPROCS).
	Workers int
	// Progress, when non-nil, gets a progress line with an ETA, rewritten
	// in place with a carriage return each second (for a terminal).
	Progress io.Writer
	// ProgressLines writes Progress as whole lines instead, one at each
	// tenth of the runs and at the end, with no carriage returns: for a
	// log file or a pipe.
	ProgressLines bool
	// Log gets warnings about failed runs (default slog.Default()).
	Log *slog.Logger
	// NoOutputs skips summary, figures and report (tests of the runner).
	NoOutputs bool
}

// job is one run to do.
type job struct {
	key      string
	ds       int
	method   MethodSpec
	private  bool
	value    float64
	eps      float64
	run      int
	splitKey string
	seed     uint64
	dataSeed uint64
}

// deriveSeed hashes the parts into a seed: the same cell and run always
// get the same seed, whatever else the config holds or the order runs
// happen in.
func deriveSeed(parts ...string) uint64 {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	s := binary.LittleEndian.Uint64(h[:8])
	if s == 0 {
		s = 1
	}
	return s
}

// Plan lists the runs of a config in a fixed order; it checks that every
// method is registered and that its parameters configure it (every swept
// value included).
func Plan(c *Config) ([]job, error) {
	var missing []string
	priv := map[string]bool{}
	for _, m := range c.Methods {
		reg, err := methods.Lookup(m.Method)
		if err != nil {
			missing = append(missing, m.Method)
			continue
		}
		priv[m.Method] = reg.Private
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("method(s) %s not registered in this build of privrec (registered: %s)",
			strings.Join(missing, ", "), strings.Join(methods.Names(), ", "))
	}
	swept := false
	for _, m := range c.Methods {
		reg, _ := methods.Lookup(m.Method)
		for _, d := range c.Datasets {
			if !m.runsOn(d.Name) {
				continue
			}
			if err := checkNeeds(reg, m, d); err != nil {
				return nil, err
			}
			for _, v := range c.sweepValues() {
				p, err := prepare(m, d, c.Sweep, v)
				if err != nil {
					return nil, err
				}
				swept = swept || p.swept
			}
		}
	}
	if s := c.Sweep; s != nil && s.Target == "param" && !swept {
		return nil, fmt.Errorf("swept parameter %s is not a parameter of any method in the config", s.Name)
	}
	var jobs []job
	for di, d := range c.Datasets {
		for _, v := range c.sweepValues() {
			for run := range c.Runs {
				splitKey := strings.Join([]string{d.Name, c.paramName(), fmtF(v), fmt.Sprint(run)}, "|")
				dataSeed := deriveSeed(c.Name, "data", splitKey)
				for _, m := range c.Methods {
					if !m.runsOn(d.Name) || (m.Runs > 0 && run >= m.Runs) {
						continue
					}
					eps := c.epsFor(m)
					if !priv[m.Method] {
						eps = []float64{math.NaN()}
					}
					for _, e := range eps {
						pv := ""
						if c.Sweep != nil {
							pv = c.Sweep.Name + "=" + fmtF(v)
						}
						key := strings.Join([]string{d.Name, m.LabelOf(), pv, "eps=" + fmtF(e), fmt.Sprint(run)}, "|")
						jobs = append(jobs, job{key: key, ds: di, method: m, private: priv[m.Method], value: v, eps: e, run: run,
							splitKey: splitKey, dataSeed: dataSeed, seed: deriveSeed(c.Name, "run", key)})
					}
				}
			}
		}
	}
	return jobs, nil
}

// checkNeeds refuses, before anything runs, a method that needs the
// declared scale on a file dataset that declares none (generators know
// their scale).
func checkNeeds(reg *methods.Method, m MethodSpec, d DataSpec) error {
	needScale := m.Collect != ""
	for _, n := range reg.Needs {
		needScale = needScale || n == "scale"
	}
	if needScale && d.Source == "file" && d.Scale == nil {
		return fmt.Errorf("method %s needs the rating scale of dataset %s declared: set \"scale\": [min, max] in the dataset (e.g. [1, 5] for MovieLens)", m.LabelOf(), d.Name)
	}
	return nil
}

func (c *Config) paramName() string {
	if c.Sweep == nil {
		return ""
	}
	return c.Sweep.Name
}

// prepared is one run's method, configured.
type prepared struct {
	reg *methods.Method
	cfg methods.Config
	// swept is true when the swept parameter is one of the method's.
	swept bool
}

// prepare merges a run's parameters — the spec's own, then the dataset's
// method_params the method has, then the swept value — and configures the
// method with them (methods.Configure: an unknown or mistyped parameter is
// an error naming it).
func prepare(m MethodSpec, d DataSpec, s *Sweep, v float64) (*prepared, error) {
	reg, err := methods.Lookup(m.Method)
	if err != nil {
		return nil, err
	}
	def := reg.New()
	params := make(map[string]any, len(m.Params)+len(d.MethodParams)+1)
	for k, x := range m.Params {
		params[k] = x
	}
	for k, x := range d.MethodParams {
		if _, own := m.Params[k]; !own && methods.HasParam(def, k) {
			params[k] = x
		}
	}
	if d.HoldoutUsers != nil && d.Positive != 0 && methods.HasParam(def, "positive") {
		if _, set := params["positive"]; !set {
			params["positive"] = d.Positive // protocol users: the dataset's interactions rule
		}
	}
	p := &prepared{reg: reg}
	if s != nil && s.Target == "param" && methods.HasParam(def, s.Name) {
		if _, set := m.Params[s.Name]; set {
			return nil, fmt.Errorf("method %s: parameter %s is both set and swept", m.LabelOf(), s.Name)
		}
		params[s.Name], p.swept = v, true
	}
	if p.cfg, err = methods.Configure(m.Method, params); err != nil {
		return nil, fmt.Errorf("method %s on %s: %w", m.LabelOf(), d.Name, err)
	}
	return p, nil
}

// splitCache shares one run's data among the methods and ε values that use
// it, and forgets it once the last of them has finished.
type splitCache struct {
	mu      sync.Mutex
	entries map[string]*splitEntry
}

type splitEntry struct {
	once    sync.Once
	split   *Split
	decl    release.Declared
	err     error
	pending int
}

// get returns a run's data and the facts declared about it.
func (sc *splitCache) get(ctx context.Context, c *Config, j job, dataDir string) (*Split, release.Declared, error) {
	sc.mu.Lock()
	e := sc.entries[j.splitKey]
	sc.mu.Unlock()
	e.once.Do(func() {
		d := c.Datasets[j.ds]
		if c.Sweep != nil && c.Sweep.Target == "data" {
			d = d.withParam(c.Sweep.Name, j.value)
		}
		g, err := generator(d.Source)
		if err != nil {
			e.err = err
			return
		}
		e.split, e.err = g(ctx, d, j.dataSeed, dataDir)
		if e.err != nil {
			e.err = fmt.Errorf("dataset %s: %w", d.Name, e.err)
			return
		}
		e.decl, e.err = declared(d, e.split)
	})
	return e.split, e.decl, e.err
}

func (sc *splitCache) done(j job) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	e := sc.entries[j.splitKey]
	e.pending--
	if e.pending == 0 {
		delete(sc.entries, j.splitKey)
	}
}

// Run runs the sweep into opt.Out: it skips runs already in results.csv,
// appends each finished run at once, and then writes summary.csv, the
// figures and report.md from all runs of the config. Failed runs are
// logged and not recorded (re-running retries them); Run then returns an
// error naming how many failed.
func Run(ctx context.Context, c *Config, opt Options) error {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	jobs, err := Plan(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(opt.Out, 0o755); err != nil {
		return fmt.Errorf("creating output directory: %w", err)
	}
	if err := writeConfigCopy(c, opt.Out); err != nil {
		return err
	}
	resPath := filepath.Join(opt.Out, "results.csv")
	rows, torn, err := ReadResults(resPath)
	if err != nil {
		return err
	}
	if torn {
		opt.Log.Warn("results.csv ended in a partly written line (interrupted run); dropping it", "file", resPath)
	}
	done := map[string]bool{}
	for _, r := range rows {
		done[r.Key] = true
	}
	var todo []job
	for _, j := range jobs {
		if !done[j.key] {
			todo = append(todo, j)
		}
	}
	w, err := openResults(resPath, torn)
	if err != nil {
		return err
	}
	runErr := runJobs(ctx, c, opt, todo, len(jobs)-len(todo), len(jobs), w)
	if err := w.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("closing results: %w", err)
	}
	if opt.NoOutputs || errors.Is(runErr, context.Canceled) {
		return runErr
	}
	if err := WriteOutputs(c, opt.Out); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// runJobs runs the jobs of todo on opt.Workers workers, appending each
// finished run to w, with a progress line; skipped runs were already done
// (of total).
func runJobs(ctx context.Context, c *Config, opt Options, todo []job, skipped, total int, w *resultsWriter) error {
	if len(todo) == 0 {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "experiment %s: all %d runs already done\n", c.Name, total)
		}
		return nil
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(todo))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jr := &jobRunner{c: c, opt: opt, todo: todo, skipped: skipped, total: total, w: w,
		cache: newSplitCache(todo), inner: max(1, runtime.GOMAXPROCS(0)/workers), cancel: cancel,
		start: time.Now(), lastDecile: -1}
	stopTicks := jr.tick()
	jr.dispatch(ctx, workers)
	stopTicks()
	jr.progress(true)
	return jr.result(ctx)
}

// jobRunner is one runJobs: its jobs, workers' shared state and counts.
type jobRunner struct {
	c              *Config
	opt            Options
	todo           []job
	skipped, total int
	w              *resultsWriter
	cache          *splitCache
	inner          int // workers each run may use
	cancel         context.CancelFunc
	start          time.Time

	mu               sync.Mutex
	finished, failed int
	errs             []error // the first five failures
	fatal            error   // results.csv could not be written
	lastDecile       int
}

// newSplitCache counts, for each split, the jobs that use it (the cache
// drops a split when its last job is done).
func newSplitCache(todo []job) *splitCache {
	cache := &splitCache{entries: map[string]*splitEntry{}}
	for _, j := range todo {
		e := cache.entries[j.splitKey]
		if e == nil {
			e = &splitEntry{}
			cache.entries[j.splitKey] = e
		}
		e.pending++
	}
	return cache
}

// tick writes the progress line each second until the returned function
// is called.
func (jr *jobRunner) tick() (stop func()) {
	tick := time.NewTicker(time.Second)
	stopTick := make(chan struct{})
	go func() {
		for {
			select {
			case <-tick.C:
				jr.progress(false)
			case <-stopTick:
				return
			}
		}
	}()
	return func() {
		close(stopTick)
		tick.Stop()
	}
}

// dispatch hands the jobs to the workers until all are done or ctx ends.
func (jr *jobRunner) dispatch(ctx context.Context, workers int) {
	ch := make(chan job)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jr.work(ctx, ch)
		}()
	}
	for _, j := range jr.todo {
		if ctx.Err() != nil {
			break
		}
		select {
		case ch <- j:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
}

// work runs the jobs of ch, appending each result; a failure to append
// is fatal and cancels the sweep.
func (jr *jobRunner) work(ctx context.Context, ch <-chan job) {
	for j := range ch {
		row, err := runOne(ctx, jr.c, jr.opt, j, jr.cache, jr.inner)
		jr.cache.done(j)
		if err == nil {
			err = jr.w.Append(row)
			if err != nil {
				jr.mu.Lock()
				jr.fatal = err
				jr.mu.Unlock()
				jr.cancel()
			}
		}
		jr.count(ctx, j, err)
	}
}

// count records a finished or failed run (a run cut short by
// cancellation is neither).
func (jr *jobRunner) count(ctx context.Context, j job, err error) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		jr.failed++
		if len(jr.errs) < 5 {
			jr.errs = append(jr.errs, fmt.Errorf("%s: %w", j.key, err))
		}
		jr.opt.Log.Warn("run failed", "run", j.key, "err", err)
	} else if err == nil {
		jr.finished++
	}
}

// result is runJobs' error: the fatal one, cancellation, or the failed
// runs.
func (jr *jobRunner) result(ctx context.Context) error {
	if jr.fatal != nil {
		return jr.fatal
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if jr.failed > 0 {
		return fmt.Errorf("%d of %d runs failed (not recorded; re-run to retry): %w", jr.failed, len(jr.todo), errors.Join(jr.errs...))
	}
	return nil
}

// progress writes the progress line: rewritten in place, or (with
// ProgressLines) a whole line at each tenth of the runs and at the end.
func (jr *jobRunner) progress(last bool) {
	opt := jr.opt
	if opt.Progress == nil {
		return
	}
	jr.mu.Lock()
	f, n := jr.finished, jr.failed
	jr.mu.Unlock()
	el := time.Since(jr.start)
	eta := "?"
	if f > 0 {
		eta = (time.Duration(float64(el) / float64(f) * float64(len(jr.todo)-f))).Round(time.Second).String()
	}
	pct := 100 * float64(jr.skipped+f) / float64(jr.total)
	if opt.ProgressLines {
		decile := int(pct / 10)
		jr.mu.Lock()
		same := decile == jr.lastDecile
		jr.lastDecile = decile
		jr.mu.Unlock()
		if same && !last {
			return
		}
	}
	fmt.Fprint(opt.Progress, jr.progressLine(f, n, el, eta, pct, last))
}

// progressLine formats the progress after f finished and n failed runs.
func (jr *jobRunner) progressLine(f, n int, el time.Duration, eta string, pct float64, last bool) string {
	opt := jr.opt
	line := fmt.Sprintf("\rexperiment %s: %d/%d runs (%.0f%%)", jr.c.Name, jr.skipped+f, jr.total, pct)
	if opt.ProgressLines {
		line = line[1:]
	}
	if jr.skipped > 0 {
		line += fmt.Sprintf(", %d resumed", jr.skipped)
	}
	if n > 0 {
		line += fmt.Sprintf(", %d failed", n)
	}
	line += fmt.Sprintf(", elapsed %s, ETA %s", el.Round(time.Second), eta)
	switch {
	case opt.ProgressLines:
		line += "\n"
	case last:
		line += "   \n"
	default:
		line += "   "
	}
	return line
}

// runOne trains and evaluates one run.
func runOne(ctx context.Context, c *Config, opt Options, j job, cache *splitCache, workers int) (*Row, error) {
	split, decl, err := cache.get(ctx, c, j, opt.DataDir)
	if err != nil {
		return nil, err
	}
	d := c.Datasets[j.ds]
	eps := j.eps
	if math.IsNaN(eps) {
		eps = 1 // a placeholder: non-private methods ignore ε
	}
	env := methods.Env{
		Epsilon: eps, Delta: c.Delta, Seed: j.seed, Workers: workers,
		Rand: noise.Seeded(j.seed),
		// Experiments use a seeded noise stream so runs are repeatable;
		// the guarantee is marked Reproducible.
		Noise: noise.Seeded(j.seed ^ 0x6e6f697365),
		Log:   slog.New(quietHandler{opt.Log.Handler()}).With("run", j.key),
	}
	p, err := prepare(j.method, d, c.Sweep, j.value)
	if err != nil {
		return nil, err
	}
	if err := needsMet(p.reg, j.method, d, decl); err != nil {
		return nil, err
	}
	in := release.Input{Ratings: split.Train, Declared: decl}
	if j.method.Collect != "" {
		path, collected, err := Collect(ctx, split.Train, j.method.Collect, eps, decl, env.Noise, opt.Out, workers)
		if err != nil {
			return nil, fmt.Errorf("local-DP collection: %w", err)
		}
		defer os.Remove(path)
		in.Ratings, in.Source = collected, path
	}
	t0 := time.Now()
	out, err := trainTyped(ctx, p, j.method.Method, in, env)
	if err != nil {
		return nil, fmt.Errorf("training: %w", err)
	}
	secs := time.Since(t0).Seconds()
	g := out.guarantee
	// A private method drew its noise from the seeded stream; a
	// non-private one drew none and carries no such warning.
	g.Reproducible = g.Reproducible || p.reg.Private
	eo := methods.EvalOptions{K: c.K, Truth: split.Truth, States: out.states}
	var rep *methods.Report
	if split.Held != nil {
		rep, err = evalHeldOutUsers(ctx, c, split, out.model, workers)
	} else if out.model != nil {
		out.model.Guarantee = g
		rep, err = methods.EvaluateModel(ctx, out.model, split.Test, eo)
	} else {
		rep, err = evalSaved(ctx, out.save, split.Test, eo, opt.Out)
	}
	if err != nil {
		return nil, fmt.Errorf("evaluating: %w", err)
	}
	row := &Row{Key: j.key, Dataset: d.Name, Method: j.method.Method, Label: j.method.LabelOf(),
		Param: c.paramName(), Value: j.value, Epsilon: j.eps, Run: j.run, Seed: j.seed,
		Metrics: reportMetrics(rep), N: rep.N, Seconds: secs,
		GEpsilon: g.Epsilon, GDelta: g.Delta, GRho: g.Rho, GUnit: string(g.Unit), GNotion: string(g.Notion),
		GStatus: string(g.Status), GClaimed: g.ClaimedEpsilon, GNote: g.Note}
	if row.GClaimed == 0 {
		row.GClaimed = math.NaN()
	}
	return row, nil
}

// needsMet says which declared fact a method lacks, in an experiment's terms.
func needsMet(reg *methods.Method, m MethodSpec, d DataSpec, decl release.Declared) error {
	if decl.Scale != nil {
		return nil
	}
	need := m.Collect != ""
	for _, n := range reg.Needs {
		need = need || n == "scale"
	}
	if need {
		return fmt.Errorf("method %s needs the rating scale of dataset %s declared: set \"scale\": [min, max] in the dataset", m.LabelOf(), d.Name)
	}
	return nil
}

// trained is what one run's training released, in the form evaluation
// needs.
type trained struct {
	// model is the public low-rank model (nil for other kinds, which
	// save writes to a file).
	model *model.Model
	// states are the users' own states of a joint-DP model (nil otherwise).
	states *model.UserStates
	save   func(path string) error
	// guarantee covers the public part.
	guarantee privacy.Guarantee
}

// trainTyped trains a typed Config through methods.Train.
func trainTyped(ctx context.Context, p *prepared, name string, in release.Input, env methods.Env) (*trained, error) {
	rel, err := methods.Train(ctx, name, p.cfg, in, env)
	if err != nil {
		return nil, err
	}
	save := func(path string) error { return atomicfile.Write(path, 0o600, rel.Public.Write) }
	return &trained{model: rel.Model(), states: rel.PerUser, save: save, guarantee: rel.Guarantee}, nil
}

// Collect randomizes ratings with a local-DP mechanism ("laplace" or
// "rr") at per-rating ε exactly as users' devices would (ldp.SimulateTo),
// each also sending her mean report at ldp.DefaultMeanEpsilon:
// every user of m reports over the whole declared catalogue, on the
// declared rating scale (a device must know both in advance; ratings are
// clamped to the scale). Randomized response needs a scale whose ends are
// whole numbers: its levels are the integers between them. It writes the
// collect file into dir and returns its path (a method reads the header
// through Input.Source; the caller removes the file) and the reports the
// service receives.
func Collect(ctx context.Context, m *ratings.Matrix, mech string, eps float64, decl release.Declared, src *noise.Source, dir string, workers int) (string, *ratings.Matrix, error) {
	mc, err := ldp.ParseMechanism(mech)
	if err != nil {
		return "", nil, err
	}
	if decl.Scale == nil || decl.Catalogue == nil {
		return "", nil, fmt.Errorf("the rating scale and the catalogue must be declared: the clients randomize on them")
	}
	sc := ldp.Scale{Min: decl.Scale.Min, Max: decl.Scale.Max}
	if mc == ldp.RR {
		if sc.Min != math.Trunc(sc.Min) || sc.Max != math.Trunc(sc.Max) {
			return "", nil, fmt.Errorf("randomized response needs a scale with whole-number ends (its levels), got [%g, %g]", sc.Min, sc.Max)
		}
		sc.Levels = int(sc.Max-sc.Min) + 1
	}
	f, err := os.CreateTemp(dir, ".collected-*.tsv")
	if err != nil {
		return "", nil, fmt.Errorf("temporary file: %w", err)
	}
	path := f.Name()
	bw := bufio.NewWriter(f)
	c, err := ldp.SimulateTo(ctx, bw, release.ClampToScale(m, *decl.Scale), mc, eps, ldp.DefaultMeanEpsilon(eps, decl.Catalogue.Len()), sc, decl.Catalogue.IDs(), src, workers)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", nil, err
	}
	return path, c.Reports, nil
}

// evalSaved evaluates a model of another kind (e.g. a tensor model)
// through a saved file, as privrec eval would.
func evalSaved(ctx context.Context, save func(path string) error, test *ratings.Matrix, eo methods.EvalOptions, dir string) (*methods.Report, error) {
	f, err := os.CreateTemp(dir, ".model-*")
	if err != nil {
		return nil, fmt.Errorf("temporary model file: %w", err)
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	if err := save(path); err != nil {
		return nil, fmt.Errorf("saving model: %w", err)
	}
	return methods.EvaluateFile(ctx, path, test, eo)
}

func reportMetrics(r *methods.Report) map[string]float64 {
	m := map[string]float64{}
	set := func(name string, v *float64) {
		if v != nil {
			m[name] = *v
		}
	}
	set("rmse", r.RMSE)
	set("mae", r.MAE)
	set("accuracy", r.Accuracy)
	set("are", r.ARE)
	set("precision_at_k", r.Precision)
	set("recall_at_k", r.Recall)
	set("ndcg_at_k", r.NDCG)
	return m
}

// quietHandler passes on warnings and errors only: a sweep's runs would
// otherwise bury the progress line under their informational logs.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}

// evalHeldOutUsers scores a model on the held-out users of protocol
// "users" (the test users, or the validation users with evaluate
// "validation"): Recall@K and NDCG@K as recall_at_k and ndcg_at_k, N the
// users scored.
func evalHeldOutUsers(ctx context.Context, c *Config, split *Split, m *model.Model, workers int) (*methods.Report, error) {
	if m == nil {
		return nil, fmt.Errorf("protocol users scores matrix models only")
	}
	hist, tgt := split.Held.TestHistory, split.Held.TestTargets
	if c.Evaluate == "validation" {
		hist, tgt = split.Held.ValHistory, split.Held.ValTargets
	}
	pop := make(map[string]float64)
	for i := range int32(split.Held.Train.NumItems()) {
		if n := split.Held.Train.ItemCount(i); n > 0 {
			pop[split.Held.Train.Items.Name(i)] = float64(n)
		}
	}
	h, err := methods.EvaluateHeldOut(ctx, m, hist, tgt, methods.HeldOutOptions{Ks: []int{c.K}, Popularity: pop, Workers: workers})
	if err != nil {
		return nil, err
	}
	r, n := h.Recall[c.K], h.NDCG[c.K]
	return &methods.Report{N: h.Users, K: c.K, Recall: &r, NDCG: &n, Method: h.Method, Guarantee: h.Guarantee}, nil
}
