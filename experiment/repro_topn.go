package experiment

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/plots"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/transform"
)

// Issue 22's measurement: top-N recommendation in the strong-generalisation
// protocol (Liang, Krishnan, Hoffman and Jebara, "Variational Autoencoders
// for Collaborative Filtering", WWW 2018): ratings ≥ 4 are interactions,
// users with ≥ 5 of them, validation and test users held out, each
// held-out user's interactions split 80 % history / 20 % targets, models
// trained on the other users only and each held-out user scored from her
// history through the public model (fold-in).

// TopNMethod is one line of a top-N reproduction.
type TopNMethod struct {
	// Method is the registered name; Label names the line (default Method).
	Method, Label string
	// Params set the method's Config by JSON name (as in MethodSpec).
	Params map[string]any
}

func (m TopNMethod) label() string {
	if m.Label != "" {
		return m.Label
	}
	return m.Method
}

// TopNSpec is a top-N reproduction: one dataset, its strong-generalisation
// split, and methods × ε × noise seeds.
type TopNSpec struct {
	Name, Title string
	// Path and Format name the ratings file, Items the declared catalogue
	// (one ID per line with an optional title, or MovieLens' u.item or
	// movies.dat), both relative to the data directory.
	Path, Format, Items string
	// Features, when set, names PUBLIC item features (relative to the
	// data directory; the forms model.ReadItemFeatures reads), declared
	// with the catalogue (release.Declared.ItemFeatures: the feature
	// models read them, the others ignore them); FeatureIDs, when
	// set, is a two-column table (with a header line) from the
	// catalogue's item IDs to the IDs the features file uses.
	Features, FeatureIDs string
	// Scale is the declared rating scale.
	Scale release.Scale
	// Positive: ratings ≥ Positive are interactions; MinPositives: users
	// with fewer are dropped; Val and Test users are held out with
	// TargetFrac of their interactions as targets; SplitSeed fixes the split.
	Positive     float64
	MinPositives int
	Val, Test    int
	TargetFrac   float64
	SplitSeed    uint64
	Methods      []TopNMethod
	// Epsilons is the grid of private methods, each run with Seeds noise
	// seeds; non-private methods run once. Delta for every private method.
	Epsilons []float64
	Seeds    int
	Delta    float64
	// Ks are the cut-offs evaluated; the tables show Recall@20 and NDCG@100.
	Ks []int
	// Workers bounds each training's and evaluation's parallelism (0: all cores).
	Workers int
	// Jobs is the number of trainings run at once for the private
	// methods' further noise seeds (0: GOMAXPROCS), each with one worker.
	// The non-private methods and each private cell's first seed train
	// alone with Workers, so their CPU-seconds are their own.
	Jobs int
	// Only restricts a run to some of the methods, ε and noise seeds
	// (empty: the whole grid); the report still shows every recorded run.
	Only TopNSubset
	// Log gets notes (skipped methods, finished runs); default slog.Default().
	Log *slog.Logger
}

// TopNSubset is a part of a top-N grid to run: some of its methods (by
// label), some of its ε and some of its noise seeds (0 … Seeds−1); an
// empty list keeps all. The ε and seeds restrict the private methods only
// (a non-private method trains once). The runs keep the grid's names and
// noise seeds, so a subset adds to, and resumes from, the grid's
// results.csv.
type TopNSubset struct {
	Methods  []string
	Epsilons []float64
	Seeds    []int
}

// IsZero reports whether the subset keeps the whole grid.
func (o TopNSubset) IsZero() bool {
	return len(o.Methods) == 0 && len(o.Epsilons) == 0 && len(o.Seeds) == 0
}

// check refuses a method, ε or seed that none of specs has: a subset
// selects from a grid and never adds to it.
func (o TopNSubset) check(specs ...TopNSpec) error {
	var labels, grid []string
	var seeds int
	for _, s := range specs {
		for _, m := range s.Methods {
			labels = append(labels, m.label())
		}
		for _, e := range s.Epsilons {
			grid = append(grid, fmtF(e))
		}
		seeds = max(seeds, s.Seeds, 1)
	}
	for _, m := range o.Methods {
		if !slices.Contains(labels, m) {
			return fmt.Errorf("method %q is not in the grid (%s)", m, strings.Join(slices.Compact(slices.Sorted(slices.Values(labels))), ", "))
		}
	}
	for _, e := range o.Epsilons {
		if !slices.Contains(grid, fmtF(e)) {
			return fmt.Errorf("ε = %g is not in the grid (%s)", e, strings.Join(slices.Compact(slices.Sorted(slices.Values(grid))), ", "))
		}
	}
	for _, seed := range o.Seeds {
		if seed < 0 || seed >= seeds {
			return fmt.Errorf("noise seed %d is not in the grid (0 … %d)", seed, seeds-1)
		}
	}
	return nil
}

// within is the part of the subset that s has (ok false when s has none
// of the methods, ε or seeds asked for).
func (o TopNSubset) within(s TopNSpec) (sub TopNSubset, ok bool) {
	for _, m := range s.Methods {
		if slices.Contains(o.Methods, m.label()) {
			sub.Methods = append(sub.Methods, m.label())
		}
	}
	for _, e := range o.Epsilons {
		if slices.ContainsFunc(s.Epsilons, func(x float64) bool { return sameValue(x, e) }) {
			sub.Epsilons = append(sub.Epsilons, e)
		}
	}
	for _, seed := range o.Seeds {
		if seed < max(s.Seeds, 1) {
			sub.Seeds = append(sub.Seeds, seed)
		}
	}
	ok = (len(o.Methods) == 0 || len(sub.Methods) > 0) && (len(o.Epsilons) == 0 || len(sub.Epsilons) > 0) && (len(o.Seeds) == 0 || len(sub.Seeds) > 0)
	return sub, ok
}

// keeps reports whether the subset keeps a job.
func (o TopNSubset) keeps(j topNJob, private bool) bool {
	if len(o.Methods) > 0 && !slices.Contains(o.Methods, j.m.label()) {
		return false
	}
	if !private {
		return true
	}
	if len(o.Epsilons) > 0 && !slices.ContainsFunc(o.Epsilons, func(e float64) bool { return sameValue(e, j.eps) }) {
		return false
	}
	return len(o.Seeds) == 0 || slices.Contains(o.Seeds, j.seed)
}

// topNRun is one trained model's evaluation on both held-out sets.
type topNRun struct {
	Label, Method string
	Epsilon       float64 // NaN for a non-private method
	Seed          int
	Seconds       float64
	// CPUSeconds is the process's user+system CPU time during the
	// training, NaN where other trainings ran at the same time.
	CPUSeconds float64
	// Plan is the model's report (λ, rank, covered items, σ …) as JSON.
	Plan string
	// Metrics by set ("validation", "test") and name ("recall@20", …).
	Metrics   map[string]map[string]float64
	GEpsilon  float64
	GDelta    float64
	Guarantee string
}

func (r *topNRun) key() string {
	return strings.Join([]string{r.Label, fmtF(r.Epsilon), strconv.Itoa(r.Seed)}, "|")
}

var topNSets = []string{"validation", "test"}

// topNMetricNames lists the metric columns for the cut-offs ks.
func topNMetricNames(ks []int) []string {
	var out []string
	for _, what := range []string{"recall", "ndcg", "coverage", "popularity"} {
		for _, k := range ks {
			out = append(out, fmt.Sprintf("%s@%d", what, k))
		}
	}
	return append(out, "mrr")
}

func (s *TopNSpec) defaults() {
	if s.Seeds <= 0 {
		s.Seeds = 1
	}
	if s.Delta == 0 {
		s.Delta = 1e-6
	}
	if len(s.Ks) == 0 {
		s.Ks = []int{10, 20, 50, 100}
	}
	for _, k := range []int{20, 100} {
		if !slices.Contains(s.Ks, k) {
			s.Ks = append(s.Ks, k)
		}
	}
	slices.Sort(s.Ks)
	if s.TargetFrac == 0 {
		s.TargetFrac = 0.2
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
}

// topNData is the prepared split of a TopNSpec.
type topNData struct {
	split *transform.UserSplit
	// train is what the methods get: every rating (on the declared
	// scale) of the training users; methods with a "positive" parameter
	// keep the ratings ≥ Positive themselves.
	train      *ratings.Matrix
	decl       release.Declared
	popularity map[string]float64
	summary    string
}

func (s *TopNSpec) prepare(dataDir string) (*topNData, error) {
	all, err := readCached(s.Name, resolve(dataDir, s.Path), s.Format, "")
	if err != nil {
		return nil, err
	}
	cat, err := model.LoadCatalogue(resolve(dataDir, s.Items))
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", s.Name, err)
	}
	pos := transform.MinPerUser(transform.Positives(all, s.Positive), s.MinPositives)
	split, err := transform.SplitUsers(pos, s.Val, s.Test, s.TargetFrac, s.SplitSeed)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", s.Name, err)
	}
	train := all.Filter(func(e ratings.Entry) bool { return split.Train.UserCount(e.User) > 0 })
	d := &topNData{split: split, train: train}
	nTrain := 0
	for u := range int32(split.Train.NumUsers()) {
		if split.Train.UserCount(u) > 0 {
			nTrain++
		}
	}
	sc := s.Scale
	d.decl = release.Declared{Scale: &sc, Catalogue: cat, Population: nTrain}
	d.popularity = make(map[string]float64, split.Train.NumItems())
	for i := range int32(split.Train.NumItems()) {
		if c := split.Train.ItemCount(i); c > 0 {
			d.popularity[split.Train.Items.Name(i)] = float64(c)
		}
	}
	d.summary = fmt.Sprintf("%d ratings of %d users × %d items; %d interactions (ratings ≥ %g) of %d users with ≥ %d; "+
		"%d training users (%d ratings, %d interactions), %d validation and %d test users (%d and %d targets); catalogue of %d items (%s)",
		all.Len(), all.NumUsers(), all.NumItems(), pos.Len(), s.Positive, nTrain+s.Val+s.Test, s.MinPositives,
		nTrain, train.Len(), split.Train.Len(), s.Val, s.Test, split.ValTargets.Len(), split.TestTargets.Len(), cat.Len(), s.Items)
	if s.Features != "" {
		d.summary += fmt.Sprintf("; public item features %s", s.Features)
	}
	return d, nil
}

// RunTopN runs a top-N reproduction into out: results.csv (one line per
// trained model, its validation and test metrics; re-running skips the
// lines already there), report.md (the tables on test users and on
// validation users, the figure, the setup: a section for RESULTS.md) and
// fig-recall20.png/.svg. A method this build does not register is
// skipped with a logged note.
func RunTopN(ctx context.Context, s TopNSpec, dataDir, out string) error {
	s.defaults()
	if err := s.Only.check(s); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating output directory: %w", err)
	}
	start := time.Now()
	var ms []TopNMethod
	var skipped []string
	private := map[string]bool{}
	for _, m := range s.Methods {
		reg, err := methods.Lookup(m.Method)
		if err != nil {
			s.Log.Info("method not registered in this build; skipped", "reproduction", s.Name, "method", m.Method)
			skipped = append(skipped, m.Method)
			continue
		}
		private[m.label()] = reg.Private
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return fmt.Errorf("%s: none of the methods %v is registered in this build", s.Name, skipped)
	}
	resPath := filepath.Join(out, "results.csv")
	names := topNMetricNames(s.Ks)
	runs, err := readTopNResults(resPath, names)
	if err != nil {
		return err
	}
	alone, pooled := s.topNJobs(ms, private)
	rec := &topNRecorder{s: &s, path: resPath, names: names, runs: runs, total: len(alone) + len(pooled), done: map[string]bool{}}
	for _, r := range runs {
		rec.done[r.key()] = true
	}
	for _, j := range append(slices.Clone(alone), pooled...) {
		if rec.done[(&topNRun{Label: j.m.label(), Epsilon: j.eps, Seed: j.seed}).key()] {
			rec.finished++
		}
	}
	// Nothing left to train: the report is rewritten from the recorded
	// runs without reading the data.
	if pop, ok, err := readTopNPopulation(out); err != nil {
		return err
	} else if ok && rec.finished == rec.total {
		return s.writeReport(out, pop.Summary, ms, private, skipped, runs, time.Since(start))
	}
	d, err := s.prepare(dataDir)
	if err != nil {
		return err
	}
	if d.decl.ItemFeatures, err = s.itemFeatures(dataDir, d.decl.Catalogue.IDs()); err != nil {
		return err
	}
	s.Log.Info("top-N split", "reproduction", s.Name, "data", d.summary, "runs left", rec.total-rec.finished)
	if err := writeTopNPopulation(out, d); err != nil {
		return err
	}
	// The non-private models and each private cell's first seed train one
	// at a time with every worker (their CPU-seconds are their own), the
	// other seeds Jobs at a time with one worker each.
	for _, j := range alone {
		if err := rec.run(ctx, d, j, s.Workers, true); err != nil {
			return err
		}
	}
	if err := rec.pool(ctx, d, pooled); err != nil {
		return err
	}
	runs = rec.runs
	return s.writeReport(out, d.summary, ms, private, skipped, runs, time.Since(start))
}

// topNJob is one training of a reproduction.
type topNJob struct {
	m    TopNMethod
	eps  float64
	seed int
}

// topNJobs lists the trainings the subset keeps: the non-private methods
// once and the private methods' first seed at every ε (alone), the
// private methods' other seeds (pooled).
func (s *TopNSpec) topNJobs(ms []TopNMethod, private map[string]bool) (alone, pooled []topNJob) {
	for _, m := range ms {
		if !private[m.label()] {
			if j := (topNJob{m, math.NaN(), 0}); s.Only.keeps(j, false) {
				alone = append(alone, j)
			}
			continue
		}
		for _, e := range s.Epsilons {
			for seed := range s.Seeds {
				j := topNJob{m, e, seed}
				if !s.Only.keeps(j, true) {
					continue
				}
				if seed == 0 {
					alone = append(alone, j)
				} else {
					pooled = append(pooled, j)
				}
			}
		}
	}
	return alone, pooled
}

// topNRecorder runs jobs not yet in results.csv and appends each run.
type topNRecorder struct {
	s        *TopNSpec
	path     string
	names    []string
	mu       sync.Mutex // guards what follows
	runs     []*topNRun
	done     map[string]bool
	total    int
	finished int
	started  time.Time
}

// run trains and scores one job unless it was recorded before; timed
// says no other training runs meanwhile (its CPU-seconds are recorded).
func (rec *topNRecorder) run(ctx context.Context, d *topNData, j topNJob, workers int, timed bool) error {
	r := &topNRun{Label: j.m.label(), Method: j.m.Method, Epsilon: j.eps, Seed: j.seed, CPUSeconds: math.NaN()}
	rec.mu.Lock()
	skip := rec.done[r.key()]
	if rec.started.IsZero() {
		rec.started = time.Now()
	}
	rec.mu.Unlock()
	if skip {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := rec.s.runOne(ctx, d, j.m, r, workers, timed); err != nil {
		return fmt.Errorf("%s: %s at ε = %g, seed %d: %w", rec.s.Name, j.m.label(), j.eps, j.seed, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err := appendTopNResult(rec.path, rec.names, r); err != nil {
		return err
	}
	rec.runs = append(rec.runs, r)
	rec.done[r.key()] = true
	rec.finished++
	rec.s.Log.Info("top-N run", "reproduction", rec.s.Name, "run", fmt.Sprintf("%d/%d", rec.finished, rec.total), "method", r.Label, "epsilon", j.eps, "seed", j.seed,
		"recall@20", fmt.Sprintf("%.4f", r.Metrics["test"]["recall@20"]), "ndcg@100", fmt.Sprintf("%.4f", r.Metrics["test"]["ndcg@100"]),
		"seconds", fmt.Sprintf("%.1f", r.Seconds), "cpu_seconds", cpuText(r.CPUSeconds), "elapsed", time.Since(rec.started).Round(time.Second))
	return nil
}

// pool runs jobs Jobs at a time, one worker each; the first error stops
// the others.
func (rec *topNRecorder) pool(ctx context.Context, d *topNData, jobs []topNJob) error {
	n := rec.s.Jobs
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	workers := 1
	if n == 1 {
		workers = rec.s.Workers
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, n)
	errs := make(chan error, len(jobs))
	var wg sync.WaitGroup
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := rec.run(ctx, d, j, workers, n == 1); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // the first error, nil when none
}

// cpuSeconds is the process's user+system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// runOne trains one model on the training users and scores it on both
// held-out sets.
func (s *TopNSpec) runOne(ctx context.Context, d *topNData, m TopNMethod, r *topNRun, workers int, timed bool) error {
	reg, err := methods.Lookup(m.Method)
	if err != nil {
		return err
	}
	params := map[string]any{}
	for k, v := range m.Params {
		params[k] = v
	}
	if _, set := params["positive"]; !set && methods.HasParam(reg.New(), "positive") {
		params["positive"] = s.Positive
	}
	cfg, err := methods.Configure(m.Method, params)
	if err != nil {
		return err
	}
	eps := r.Epsilon
	if math.IsNaN(eps) {
		eps = 1 // ignored by non-private methods
	}
	seed := deriveSeed(s.Name, "run", r.key())
	env := methods.Env{
		Epsilon: eps, Delta: s.Delta, Seed: seed, Workers: workers,
		Rand:  noise.Seeded(seed),
		Noise: noise.Seeded(seed ^ 0x6e6f697365), // experiments: seeded, marked reproducible
		Log:   slog.New(quietHandler{s.Log.Handler()}).With("run", r.key()),
	}
	t0, c0 := time.Now(), cpuSeconds()
	rel, err := methods.Train(ctx, m.Method, cfg, release.Input{Ratings: d.train, Declared: d.decl}, env)
	if err != nil {
		return fmt.Errorf("training: %w", err)
	}
	r.Seconds = time.Since(t0).Seconds()
	if timed {
		r.CPUSeconds = cpuSeconds() - c0
	}
	if plan, err := json.Marshal(rel.Report); err == nil {
		r.Plan = string(plan)
	} else {
		return fmt.Errorf("encoding the model's report: %w", err)
	}
	mod := rel.Model()
	if mod == nil {
		return fmt.Errorf("%s does not release a matrix model: it cannot score held-out users", m.Method)
	}
	g := rel.Guarantee
	g.Reproducible = g.Reproducible || reg.Private // noise drawn from the seeded stream
	mod.Guarantee = g
	r.GEpsilon, r.GDelta, r.Guarantee = g.Epsilon, g.Delta, g.String()
	r.Metrics = map[string]map[string]float64{}
	for _, set := range topNSets {
		hist, tgt := d.split.ValHistory, d.split.ValTargets
		if set == "test" {
			hist, tgt = d.split.TestHistory, d.split.TestTargets
		}
		rep, err := methods.EvaluateHeldOut(ctx, mod, hist, tgt, methods.HeldOutOptions{Ks: s.Ks, Popularity: d.popularity, Workers: workers})
		if err != nil {
			return fmt.Errorf("evaluating on %s users: %w", set, err)
		}
		mm := map[string]float64{"mrr": rep.MRR}
		for _, k := range s.Ks {
			mm[fmt.Sprintf("recall@%d", k)] = rep.Recall[k]
			mm[fmt.Sprintf("ndcg@%d", k)] = rep.NDCG[k]
			mm[fmt.Sprintf("coverage@%d", k)] = rep.Coverage[k]
			mm[fmt.Sprintf("popularity@%d", k)] = rep.Popularity[k]
		}
		r.Metrics[set] = mm
	}
	return nil
}

func topNHeader(names []string) []string {
	h := []string{"label", "method", "epsilon", "seed", "seconds"}
	for _, set := range topNSets {
		for _, n := range names {
			h = append(h, set+":"+n)
		}
	}
	return append(h, "g_epsilon", "g_delta", "guarantee", "cpu_seconds", "plan")
}

func (r *topNRun) record(names []string) []string {
	rec := []string{r.Label, r.Method, fmtF(r.Epsilon), strconv.Itoa(r.Seed), fmtF(r.Seconds)}
	for _, set := range topNSets {
		for _, n := range names {
			rec = append(rec, fmtF(r.Metrics[set][n]))
		}
	}
	return append(rec, fmtF(r.GEpsilon), fmtF(r.GDelta), r.Guarantee, fmtF(r.CPUSeconds), r.Plan)
}

// appendTopNResult appends one run to results.csv (creating it with its
// header), synced before it returns.
func appendTopNResult(path string, names []string, r *topNRun) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		w.Write(topNHeader(names))
	}
	w.Write(r.record(names))
	w.Flush()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("results: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("results: %w", err)
	}
	return f.Close()
}

// readTopNResults reads the runs recorded in results.csv (none when it
// does not exist); a last line cut short by a crash is dropped.
func readTopNResults(path string, names []string) ([]*topNRun, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, fmt.Errorf("dropping the torn last line of %s: %w", path, err)
		}
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	want := topNHeader(names)
	old := want[:len(want)-2] // before the CPU-seconds and plan columns
	if !slices.Equal(recs[0], want) && !slices.Equal(recs[0], old) {
		return nil, fmt.Errorf("%s: header does not match this reproduction (another version or other cut-offs): move it away to start afresh", path)
	}
	var runs []*topNRun
	for line, rec := range recs[1:] {
		var perr error
		fl := func(s string) float64 {
			v, err := parseF(s)
			if err != nil && perr == nil {
				perr = err
			}
			return v
		}
		r := &topNRun{Label: rec[0], Method: rec[1], Epsilon: fl(rec[2]), Seconds: fl(rec[4]), Metrics: map[string]map[string]float64{}}
		r.Seed, err = strconv.Atoi(rec[3])
		if err != nil && perr == nil {
			perr = err
		}
		i := 5
		for _, set := range topNSets {
			r.Metrics[set] = map[string]float64{}
			for _, n := range names {
				r.Metrics[set][n] = fl(rec[i])
				i++
			}
		}
		r.GEpsilon, r.GDelta, r.Guarantee = fl(rec[i]), fl(rec[i+1]), rec[i+2]
		r.CPUSeconds = math.NaN()
		if len(rec) == len(want) {
			r.CPUSeconds, r.Plan = fl(rec[i+3]), rec[i+4]
		}
		if perr != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line+2, perr)
		}
		runs = append(runs, r)
	}
	if !slices.Equal(recs[0], want) {
		return runs, upgradeTopNResults(path, names, runs)
	}
	return runs, nil
}

// upgradeTopNResults rewrites a results.csv written before the
// CPU-seconds and plan columns in the current layout (unknown CPU-seconds,
// no plan), so that new runs can be appended to it.
func upgradeTopNResults(path string, names []string, runs []*topNRun) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		cw.Write(topNHeader(names))
		for _, r := range runs {
			cw.Write(r.record(names))
		}
		cw.Flush()
		return cw.Error()
	})
}

// topNCell is the mean and sample sd of one metric over a cell's seeds.
type topNCell struct {
	mean, sd float64
	n        int
}

func cellOf(runs []*topNRun, label string, eps float64, set, metric string) (topNCell, bool) {
	var xs []float64
	for _, r := range runs {
		if r.Label == label && sameValue(r.Epsilon, eps) {
			xs = append(xs, r.Metrics[set][metric])
		}
	}
	if len(xs) == 0 {
		return topNCell{}, false
	}
	var c topNCell
	c.n = len(xs)
	for _, x := range xs {
		c.mean += x
	}
	c.mean /= float64(c.n)
	if c.n > 1 {
		for _, x := range xs {
			c.sd += (x - c.mean) * (x - c.mean)
		}
		c.sd = math.Sqrt(c.sd / float64(c.n-1))
	}
	return c, true
}

func (c topNCell) String() string {
	if c.n > 1 {
		return fmt.Sprintf("%.3f ± %.3f", c.mean, c.sd)
	}
	return fmt.Sprintf("%.3f", c.mean)
}

// writeReport writes report.md and the figure from every recorded run.
func (s *TopNSpec) writeReport(out, summary string, ms []TopNMethod, private map[string]bool, skipped []string, runs []*topNRun, took time.Duration) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## %s\n\n", s.Title)
	fmt.Fprintf(&b, "Strong generalisation (Liang et al., WWW 2018): %s; split seed %d, %g %% of each held-out user's interactions as targets. "+
		"Every method trains on the training users' ratings through `methods.Train` (declared scale %g–%g, the catalogue above, population = the training users; "+
		"methods with a `positive` parameter get %g), and each held-out user is scored from her history through the public model (fold-in), ranking every item not in her history. "+
		"Private methods: user-level guarantees at ε ∈ {%s}, δ = %g, %d noise seed(s) each (mean ± sample sd); non-private methods once. "+
		"Settings are the methods' defaults; choose settings on the **validation** table, never on the test table. Regenerate with `privrec reproduce %s --scale paper`.\n\n",
		summary, s.SplitSeed, 100*s.TargetFrac, s.Scale.Min, s.Scale.Max, s.Positive, fmtList(s.Epsilons), s.Delta, s.Seeds, s.Name)
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "Not registered in this build, skipped: %s.\n\n", strings.Join(skipped, ", "))
	}
	for _, set := range []string{"test", "validation"} {
		for _, metric := range []string{"recall@20", "ndcg@100"} {
			fmt.Fprintf(&b, "### %s, %s users\n\n| method | non-private |", strings.Replace(strings.Replace(metric, "recall", "Recall", 1), "ndcg", "NDCG", 1), set)
			for _, e := range s.Epsilons {
				fmt.Fprintf(&b, " ε = %g |", e)
			}
			b.WriteString("\n|---|---|" + strings.Repeat("---|", len(s.Epsilons)) + "\n")
			for _, m := range ms {
				fmt.Fprintf(&b, "| %s |", m.label())
				if !private[m.label()] {
					c, ok := cellOf(runs, m.label(), math.NaN(), set, metric)
					fmt.Fprintf(&b, " %s |%s\n", cellText(c, ok), strings.Repeat(" |", len(s.Epsilons)))
					continue
				}
				b.WriteString(" |")
				for _, e := range s.Epsilons {
					c, ok := cellOf(runs, m.label(), e, set, metric)
					fmt.Fprintf(&b, " %s |", cellText(c, ok))
				}
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
	}
	// Coverage, popularity, seconds and plan of the test lists.
	fmt.Fprintf(&b, "### Test lists: coverage@20, mean popularity@20 (training interactions), MRR, training time, plan\n\n"+
		"Seconds are wall seconds per training (mean over seeds; meaningless on a shared machine); CPU-s the user+system CPU time of the first seed's training, run alone; "+
		"the plan is read from the first seed's model report.\n\n"+
		"| method | ε | coverage@20 | popularity@20 | MRR | seconds | CPU-s | plan |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range ms {
		epss := s.Epsilons
		if !private[m.label()] {
			epss = []float64{math.NaN()}
		}
		for _, e := range epss {
			cv, ok := cellOf(runs, m.label(), e, "test", "coverage@20")
			if !ok {
				continue
			}
			pp, _ := cellOf(runs, m.label(), e, "test", "popularity@20")
			mr, _ := cellOf(runs, m.label(), e, "test", "mrr")
			first := firstSeed(runs, m.label(), e)
			es := "—"
			if !math.IsNaN(e) {
				es = fmtF(e)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s | %.1f | %s | %s |\n", m.label(), es, cv, pp.mean, mr, meanSeconds(runs, m.label(), e), cpuText(first.CPUSeconds), planSummary(first.Plan))
		}
	}
	files, err := s.figure(out, ms, private, runs)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		fmt.Fprintf(&b, "\n![Recall@20 vs ε on %s](%s)\n", s.Name, filepath.Base(files[0]))
	}
	fmt.Fprintf(&b, "\nGuarantees (one per method, at its largest ε):\n\n")
	for _, m := range ms {
		var g string
		for _, r := range runs {
			if r.Label == m.label() {
				g = r.Guarantee
			}
		}
		fmt.Fprintf(&b, "- %s: %s\n", m.label(), g)
	}
	fmt.Fprintf(&b, "\nThis run took %s on %d trained models.\n", took.Round(time.Second), len(runs))
	return atomicfile.Write(filepath.Join(out, "report.md"), 0o644, func(w io.Writer) error {
		_, err := w.Write(b.Bytes())
		return err
	})
}

// firstSeed is the run of the cell's lowest seed (a zero run when none).
func firstSeed(runs []*topNRun, label string, eps float64) *topNRun {
	best := &topNRun{CPUSeconds: math.NaN()}
	for _, r := range runs {
		if r.Label == label && sameValue(r.Epsilon, eps) && (best.Label == "" || r.Seed < best.Seed) {
			best = r
		}
	}
	return best
}

// meanSeconds is the mean wall seconds of the cell's trainings.
func meanSeconds(runs []*topNRun, label string, eps float64) float64 {
	var secs float64
	var n int
	for _, r := range runs {
		if r.Label == label && sameValue(r.Epsilon, eps) {
			secs += r.Seconds
			n++
		}
	}
	return secs / float64(n)
}

func cpuText(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.1f", x)
}

// planKeys are the report entries a plan summary shows, in order.
var planKeys = []struct{ key, name string }{
	{"lambda", "λ"}, {"lambda_coef", "λ/d̄ coefficient"}, {"rank", "rank"}, {"init_rank", "init rank"}, {"kept_eigenvalues", "eigenpairs"},
	{"covered_items", "covered items"}, {"steps", "steps"}, {"epochs", "epochs"}, {"alpha0", "α₀"}, {"sigma", "σ"}, {"sigma_gram", "σ (Gram)"},
}

// planSummary is the model report's plan entries (λ, rank, covered
// items …) as text; "—" when the report has none.
func planSummary(plan string) string {
	var rep map[string]any
	if plan == "" || json.Unmarshal([]byte(plan), &rep) != nil {
		return "—"
	}
	var parts []string
	for _, k := range planKeys {
		if v, ok := rep[k.key].(float64); ok {
			parts = append(parts, fmt.Sprintf("%s %.4g", k.name, v))
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

func cellText(c topNCell, ok bool) string {
	if !ok {
		return "—"
	}
	return c.String()
}

// figure draws Recall@20 on the test users against ε, the non-private
// methods as horizontal lines.
func (s *TopNSpec) figure(out string, ms []TopNMethod, private map[string]bool, runs []*topNRun) ([]string, error) {
	f := s.recallFigure(s.Title+"\nuser-level joint DP, δ = "+fmtF(s.Delta)+"; Recall@20 on the test users", ms, private, runs)
	if len(f.Series) == 0 {
		return nil, nil
	}
	return f.Save(filepath.Join(out, "fig-recall20"))
}

// recallFigure is Recall@20 on the test users against ε (log₂ axis) of
// the methods ms, the non-private ones as horizontal lines.
func (s *TopNSpec) recallFigure(title string, ms []TopNMethod, private map[string]bool, runs []*topNRun) plots.Figure {
	f := plots.Figure{Title: title, XLabel: "privacy parameter ε (log₂ scale)", YLabel: "Recall@20", LogX: true}
	for _, m := range ms {
		ser := plots.Series{Label: m.label()}
		if !private[m.label()] {
			c, ok := cellOf(runs, m.label(), math.NaN(), "test", "recall@20")
			if !ok {
				continue
			}
			ser.Label += " (non-private)"
			ser.Flat, ser.X, ser.Mean, ser.SD = true, []float64{math.NaN()}, []float64{c.mean}, []float64{c.sd}
		} else {
			for _, e := range s.Epsilons {
				if c, ok := cellOf(runs, m.label(), e, "test", "recall@20"); ok {
					ser.X, ser.Mean, ser.SD = append(ser.X, e), append(ser.Mean, c.mean), append(ser.SD, c.sd)
				}
			}
			if len(ser.X) == 0 {
				continue
			}
		}
		f.Series = append(f.Series, ser)
	}
	return f
}

// topNMethods are the lines of issue 22's reproductions; a name the build
// does not register yet is skipped with a note.
var topNMethods = []TopNMethod{
	{Method: "popularity"}, {Method: "ease"}, {Method: "ials"},
	{Method: "dp-popularity"}, {Method: "dp-ease"}, {Method: "dp-ials"},
	{Method: "als"}, {Method: "dpals"},
}

func topNRepro(name, title, path, format, items string, val, test int) *Reproduction {
	return topNReproWith(name, title, path, format, items, val, test, nil)
}

// topNReproWith is topNRepro with adjust applied to the spec (nil: none).
func topNReproWith(name, title, path, format, items string, val, test int, adjust func(*TopNSpec)) *Reproduction {
	spec := func(paper bool) TopNSpec {
		s := TopNSpec{Name: name, Title: title, Path: path, Format: format, Items: items,
			Scale: release.Scale{Min: 1, Max: 5}, Positive: 4, MinPositives: 5, Val: val, Test: test, TargetFrac: 0.2, SplitSeed: 22,
			Methods: topNMethods, Epsilons: pick(paper, []float64{1, 8}, privateRecEps), Seeds: pick(paper, 1, 3), Delta: 1e-6}
		if adjust != nil {
			adjust(&s)
		}
		return s
	}
	topNSpecs[name] = spec
	return topNReproOf(name, spec)
}

// topNSpecs are the top-N reproductions' specs by name (quick or paper).
var topNSpecs = map[string]func(paper bool) TopNSpec{}

// topNReproOf is the reproduction name running spec.
func topNReproOf(name string, spec func(paper bool) TopNSpec) *Reproduction {
	var names []string
	for _, m := range spec(false).Methods {
		names = append(names, m.label())
	}
	s := spec(false)
	path, items, title := s.Path, s.Items, s.Title
	files := []string{path, items}
	for _, f := range []string{s.Features, s.FeatureIDs} {
		if f != "" {
			files = append(files, f)
		}
	}
	return &Reproduction{
		Name: name, Paper: "issue 22 (recommendations, not rating predictions); Liang et al., WWW 2018 (protocol)",
		Summary: title + ": Recall@20 and NDCG@100 of " + strings.Join(names, ", ") + " vs ε (held-out users; validation and test tables)",
		files:   files,
		measure: func(ctx context.Context, paper bool, dataDir, out string, opts MeasureOptions) error {
			s := spec(paper)
			s.Only = opts.Only
			return RunTopN(ctx, s, dataDir, out)
		},
		topN: func(paper bool) []TopNSpec { return []TopNSpec{spec(paper)} },
	}
}

func init() {
	// MovieLens-1M's catalogue is public with its genres and release years
	// (movies.dat): dp-features and dp-ease-features use them, the others do not.
	addRepro(topNReproWith("topn-ml1m", "Top-N on MovieLens-1M (600 + 600 held-out users)", "ml-1m/ratings.tsv", "tsv", "ml-1m/items.tsv", 600, 600, func(s *TopNSpec) {
		s.Features, s.FeatureIDs = "ml-1m/movies.dat", "ml-1m/item_index_to_movieid.tsv"
		s.Methods = append(slices.Clone(topNMethods), TopNMethod{Method: "dp-features"}, TopNMethod{Method: "dp-ease-features"})
	}))
	dataHints["movies.dat"] = "MovieLens 1M's movies.dat (ID::TITLE::GENRES, from ml-1m.zip at https://grouplens.org/datasets/movielens/1m/) as DATA-DIR/ml-1m/movies.dat: the public genres and release years"
	dataHints["item_index_to_movieid.tsv"] = "the map from the ratings' item numbers to MovieLens' MovieIDs as DATA-DIR/ml-1m/item_index_to_movieid.tsv (header item_index<TAB>movie_id; the i-th smallest rated MovieID is item i)"
	addRepro(topNRepro("topn-ml100k", "Top-N on MovieLens-100K (50 + 50 held-out users)", "ml-100k/u.data", "movielens-100k", "ml-100k/u.item", 50, 50))
	// Issue 39: the top-N methods across populations.
	for _, n := range netflixSizes {
		addRepro(netflixTopNRepro(n))
	}
	addRepro(topNReproWith("topn-jester1", "Top-N on Jester-1 (jokes rated ≥ 5; 2 000 + 5 000 held-out users)",
		"jester1/ratings.tsv.gz", "tsv", "jester1/jester1-items.txt", 2000, 5000, func(s *TopNSpec) {
			s.Scale, s.Positive, s.SplitSeed, s.Methods = release.Scale{Min: -10, Max: 10}, 5, 3, topNMethods[:6]
		}))
	dataHints["jester1-items.txt"] = "the Jester catalogue as DATA-DIR/jester1/jester1-items.txt: the joke IDs 1…100, one per line (seq 1 100)"
	dataHints["netflix-items.txt"] = "the Netflix-shaped catalogue as DATA-DIR/netflix-synth/netflix-items.txt: the item IDs 1…17770, one per line (seq 1 17770)"
	dataHints["items.tsv"] = "the MovieLens 1M catalogue as DATA-DIR/ml-1m/items.tsv: one movie per line, ID<TAB>title (from movies.dat: privrec reads movies.dat as it comes too)"
	addPopulationRepros()
	dataHints["u.item"] = "MovieLens 100K from https://grouplens.org/datasets/movielens/100k/ (unzip ml-100k.zip into DATA-DIR/ml-100k/)"
}

// netflixSizes are the populations of the Netflix-shaped top-N sweep
// (the full Netflix Prize shape is 480 189 users).
var netflixSizes = []int{50000, 150000, 480189}

// netflixTopNRepro is the top-N sweep (the six top-N methods) on the
// Netflix-shaped synthetic population of n users written by
// `privrec data synth --setup netflix --seed 5 --users n` with the Netflix
// Prize's ratings per user (100 480 507 × n / 480 189 in all), ratings ≥ 4
// the interactions, 2 000 validation and 5 000 test users held out with
// split seed 3.
func netflixTopNRepro(n int) *Reproduction {
	file := fmt.Sprintf("netflix-seed5-%d.tsv", n)
	inter := int64(math.Round(100480507 * float64(n) / 480189))
	dataHints[file] = fmt.Sprintf("generate it: privrec data synth --setup netflix --seed 5 --users %d --interactions %d --holdout 0 --out DATA-DIR/netflix-synth/%s", n, inter, file)
	return topNReproWith(fmt.Sprintf("topn-netflix-%dk", n/1000), fmt.Sprintf("Top-N on a Netflix-shaped population of %d users (2 000 + 5 000 held-out users)", n),
		"netflix-synth/"+file, "tsv", "netflix-synth/netflix-items.txt", 2000, 5000, func(s *TopNSpec) {
			s.SplitSeed, s.Methods = 3, topNMethods[:6]
		})
}

func fmtList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmtF(x)
	}
	return strings.Join(parts, ", ")
}
