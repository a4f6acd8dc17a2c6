package pipeline

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/memfs"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
)

func TestMain(m *testing.M) {
	beam.Init()
	// Beam's loopback runner leaves an empty placeholder file in the
	// temporary directory at each pipeline: give it one of the tests' own.
	dir, err := os.MkdirTemp("", "privrec-beam-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runPrism(ctx context.Context, p *beam.Pipeline) error {
	_, err := prism.Execute(ctx, p)
	return err
}

// synthetic writes a population of users × items ratings on 1..5 (a few
// items outside the catalogue, which both paths drop) and the catalogue.
func synthetic(t *testing.T, dir string, users, items int) (data, cat string) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	for u := range users {
		n := min(1+r.IntN(30), items+5)
		for _, j := range r.Perm(items + 5)[:n] {
			fmt.Fprintf(&b, "u%d\ti%d\t%d\n", u, j, 1+r.IntN(5))
		}
	}
	data = filepath.Join(dir, "ratings.tsv")
	if err := os.WriteFile(data, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var c strings.Builder
	for j := range items {
		fmt.Fprintf(&c, "i%d\n", j)
	}
	cat = filepath.Join(dir, "items.txt")
	if err := os.WriteFile(cat, []byte(c.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return data, cat
}

// train runs method with a seeded noise stream; with inputs set, on
// Beam. It returns the model file's bytes and every release's draw.
func train(t *testing.T, method string, params map[string]any, data, cat string, beamInputs []string) ([]byte, []mechanism.Draw) {
	t.Helper()
	return trainRun(t, method, params, data, cat, beamInputs, nil)
}

// trainRun is train with the pipelines run by run (nil: Prism once); run
// gets the draws made so far.
func trainRun(t *testing.T, method string, params map[string]any, data, cat string, beamInputs []string,
	run func(ctx context.Context, p *beam.Pipeline, draws *[]mechanism.Draw) error) ([]byte, []mechanism.Draw) {
	t.Helper()
	var bc *Config
	if beamInputs != nil {
		bc = &Config{Inputs: beamInputs}
	}
	return trainOn(t, method, params, cat, func() *ratings.Matrix {
		m, err := ratingio.ReadFile(data, ratingio.Options{Format: "tsv", HasScale: true, Min: 1, Max: 5})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, bc, run)
}

// trainOn trains method on the ratings data() in process, or with bc set
// on Beam (bc's inputs or database; the format, work directory and
// runner filled in here).
func trainOn(t *testing.T, method string, params map[string]any, cat string, data func() *ratings.Matrix, bc *Config,
	run func(ctx context.Context, p *beam.Pipeline, draws *[]mechanism.Draw) error) ([]byte, []mechanism.Draw) {
	t.Helper()
	ctx := context.Background()
	scale := release.Scale{Min: 1, Max: 5}
	c, err := model.LoadCatalogue(cat)
	if err != nil {
		t.Fatal(err)
	}
	opt := ratingio.Options{Format: "tsv", HasScale: true, Min: 1, Max: 5}
	in := release.Input{Declared: release.Declared{Scale: &scale, Catalogue: c}}
	var draws []mechanism.Draw
	env := methods.Env{Epsilon: 2, Delta: 1e-6, Seed: 11, Rand: noise.Seeded(11), Noise: noise.Seeded(11 ^ 0x6e6f697365), Workers: 1,
		Tap: func(d mechanism.Draw) error {
			draws = append(draws, mechanism.Draw{Clean: slices.Clone(d.Clean), Noised: slices.Clone(d.Noised), Scale: d.Scale})
			return nil
		}}
	if bc != nil {
		r := runPrism
		if run != nil {
			r = func(ctx context.Context, p *beam.Pipeline) error { return run(ctx, p, &draws) }
		}
		// The work directory privrec-beam uses by default with Prism: in
		// memory, each output removed once read (checked below).
		cfg := *bc
		cfg.Read, cfg.WorkDir, cfg.Run = opt, MemoryWorkDir(), r
		env.Engine = cfg.Factory(nil)
		defer func() {
			if left, _ := memfs.New(ctx).List(ctx, cfg.WorkDir+"/*"); len(left) > 0 {
				t.Errorf("%s: the pipelines left %v in memory", method, left)
			}
		}()
	} else {
		in.Ratings = data()
	}
	meth, err := methods.Lookup(method)
	if err != nil {
		t.Fatal(err)
	}
	cfg := meth.New()
	for k, v := range params {
		if err := methods.SetParam(cfg, k, v); err != nil {
			t.Fatal(err)
		}
	}
	rel, err := methods.Train(ctx, method, cfg, in, env)
	if err != nil {
		t.Fatalf("%s (beam %v): %v", method, bc != nil, err)
	}
	var buf bytes.Buffer
	if err := rel.Public.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), draws
}

// TestBeamMatchesInProcess: the Beam pipelines on Prism and the
// in-process training on the same data with the same noise seed make the
// same releases — every pre-noise sum equal to 1e-9 relative, the same
// noised values — and the same model file, for every method Beam runs.
// (Deterministic: fixed data and seeds; it fails if a contribution,
// the combine or the release differ between the paths.)
func TestBeamMatchesInProcess(t *testing.T) {
	dir := t.TempDir()
	data, cat := synthetic(t, dir, 400, 60)
	// dpals with its three releases: the counts that set the adaptive
	// weights, the bias statistics and the covariance features.
	dpals := map[string]any{"adaptive_from": 0.0, "cov_users_per_item": 0.0, "cov_rank": 4.0}
	// dpals with two ALS steps after those releases: each step one
	// pipeline, the previous step's noised factors its side input; with
	// bias refinement (the item biases change between the steps).
	steps := map[string]any{"adaptive_from": 0.0, "cov_users_per_item": 0.0, "cov_rank": 2.0, "rank": 8.0, "steps": 2.0, "bias_scale": 0.5}
	for _, tc := range []struct {
		name, method string
		params       map[string]any
		releases     int // the releases expected (0: not checked)
	}{{"dp-popularity", "dp-popularity", nil, 1}, {"dp-bias", "dp-bias", nil, 0}, {"dp-ease", "dp-ease", nil, 2}, {"dpals", "dpals", dpals, 0},
		{"dpals-steps-2", "dpals", steps, 0},
		// dp-ials with one step (every item with a non-negative noised
		// count gets factors), and with two steps and no per-item Gram (the
		// global block then spans three keys, the last cut).
		{"dp-ials", "dp-ials", map[string]any{"steps": 1.0, "rank": 4.0, "step_cover": 0.0, "init_denoise": 0.0}, 3},
		{"dp-ials-no-gram", "dp-ials", map[string]any{"steps": 2.0, "rank": 4.0, "step_cover": 0.0, "init_denoise": 0.0, "gram_scale": 0.0}, 4}} {
		method := tc.method
		t.Run(tc.name, func(t *testing.T) {
			want, wantDraws := train(t, method, tc.params, data, cat, nil)
			got, gotDraws := train(t, method, tc.params, data, cat, []string{data})
			sameRelease(t, want, got, wantDraws, gotDraws)
			if tc.releases > 0 && len(wantDraws) != tc.releases {
				t.Errorf("%d releases, want %d (a step did not run?)", len(wantDraws), tc.releases)
			}
		})
	}
}

// TestBeamGzipInput: a gzip file gives the same model as the plain one.
func TestBeamGzipInput(t *testing.T) {
	dir := t.TempDir()
	data, cat := synthetic(t, dir, 200, 40)
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(raw)
	zw.Close()
	gz := filepath.Join(dir, "ratings.tsv.gz")
	if err := os.WriteFile(gz, zb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	plain, _ := train(t, "dp-popularity", nil, data, cat, []string{data})
	zipped, _ := train(t, "dp-popularity", nil, data, cat, []string{gz})
	if !bytes.Equal(plain, zipped) {
		t.Error("the gzip input gave a different model")
	}
}

// TestBeamRefusesBadRows: a malformed line and a repeated (user, item)
// reach the error output with source and position, and the run fails
// before any noise is drawn, its error's first line naming the first
// refused row (file, line, reason) and how many were refused. In a work
// directory the operator named, every refused row is listed; in the
// in-memory one, nothing is left once the run has failed.
func TestBeamRefusesBadRows(t *testing.T) {
	dir := t.TempDir()
	_, cat := synthetic(t, dir, 5, 10)
	var b strings.Builder
	for u := range 300 {
		fmt.Fprintf(&b, "u%d\ti%d\t%d\n", u, u%10, 1+u%5)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	lines[6] = "u6\ti6\tfive"         // line 7: not a number
	lines[250] = "u3\ti3\t4"          // line 251: u3 rated i3 at line 4 already
	lines = append(lines, "u400\ti1") // line 301: a field missing
	bad := filepath.Join(dir, "bad.tsv")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadCatalogue(cat)
	if err != nil {
		t.Fatal(err)
	}
	for _, work := range []string{t.TempDir(), MemoryWorkDir()} {
		drew := false
		env := methods.Env{Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(1),
			Tap:    func(mechanism.Draw) error { drew = true; return nil },
			Engine: Config{Inputs: []string{bad}, Read: ratingio.Options{Format: "tsv"}, WorkDir: work, Run: runPrism}.Factory(nil)}
		meth, _ := methods.Lookup("dp-popularity")
		_, err = methods.Train(context.Background(), "dp-popularity", meth.New(), release.Input{Declared: release.Declared{Catalogue: c}}, env)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Fatalf("%s: want a RefusedError, got %v", work, err)
		}
		if re.N != 3 || drew {
			t.Errorf("%s: refused %d rows (want 3), noise drawn: %v", work, re.N, drew)
		}
		first, _, _ := strings.Cut(err.Error(), "\n")
		if !strings.Contains(first, bad+":7: ") || !strings.Contains(first, "five") || !strings.Contains(first, "3 input row(s) refused") {
			t.Errorf("%s: the error's first line %q does not name the first refused row (line 7, its reason) and the count", work, first)
		}
		if !strings.Contains(err.Error(), bad+":251") || !strings.Contains(err.Error(), bad+":301:") {
			t.Errorf("%s: the error does not name the next refused rows:\n%s", work, err)
		}
		if strings.HasPrefix(work, "memfs://") {
			if re.List != "" {
				t.Errorf("in memory, the error names a list %q", re.List)
			}
			if left, _ := memfs.New(context.Background()).List(context.Background(), work+"/*"); len(left) > 0 {
				t.Errorf("the failed run left %v in memory", left)
			}
			continue
		}
		list, rerr := os.ReadFile(re.List)
		if rerr != nil {
			t.Fatal(rerr)
		}
		for _, want := range []string{bad + ":7:", bad + ":251", bad + ":301:"} {
			if !strings.Contains(string(list), want) {
				t.Errorf("the error output lacks %q:\n%s", want, list)
			}
		}
	}
}

// TestBeamRetriesDrawNoiseOnce: the noise of a statistic is drawn on the
// driver after its pipeline has returned, never while it runs, so a
// runner that re-executes work cannot draw it twice. Here every pipeline
// is executed twice (a runner re-running a job after a failure writes
// the same sums again): no draw happens during either execution, each
// release is drawn once, and the model is byte-identical to the
// in-process one. (Deterministic; dp-ease: two pipelines, the second's
// plan from the first's noised release.)
func TestBeamRetriesDrawNoiseOnce(t *testing.T) {
	dir := t.TempDir()
	data, cat := synthetic(t, dir, 150, 30)
	executions := 0
	twice := func(ctx context.Context, p *beam.Pipeline, draws *[]mechanism.Draw) error {
		before := len(*draws)
		for range 2 {
			if err := runPrism(ctx, p); err != nil {
				return err
			}
			executions++
		}
		if len(*draws) != before {
			t.Errorf("%d noise draw(s) while a pipeline ran", len(*draws)-before)
		}
		return nil
	}
	want, wantDraws := train(t, "dp-ease", nil, data, cat, nil)
	got, gotDraws := trainRun(t, "dp-ease", nil, data, cat, []string{data}, twice)
	if executions != 4 {
		t.Fatalf("%d pipeline executions, want 2 pipelines × 2", executions)
	}
	if len(gotDraws) != len(wantDraws) || len(gotDraws) != 2 {
		t.Fatalf("%d draws with re-executed pipelines, %d in process (want one per release: 2)", len(gotDraws), len(wantDraws))
	}
	if !bytes.Equal(got, want) {
		t.Error("re-executed pipelines gave a different model")
	}
}

// TestCombineIndependentOfBundles: the block sum is the same float64s
// however the parts are split into bundles and in whatever order the
// bundles' accumulators merge (a retried bundle's output replaces its
// failed attempt's, so only the split can change), and equals
// statistic.Sum's. Parts on 64 coordinates keep every accumulator sparse
// and compact its repeats; parts over the whole block make the large
// bundles dense and merge dense with sparse ones. Deterministic seeds.
func TestCombineIndependentOfBundles(t *testing.T) {
	for _, tc := range []struct {
		name         string
		span, maxLen int
		parts, batch int
	}{
		{"sparse", 64, 40, 500, 60},
		{"sparse and dense", statistic.BlockSize, 60, 800, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(tc.span)))
			parts := make([]Part, tc.parts)
			for k := range parts {
				for range 1 + r.IntN(tc.maxLen) {
					parts[k].Idx = append(parts[k].Idx, int32(r.IntN(tc.span)))
					parts[k].Val = append(parts[k].Val, r.NormFloat64()*math.Pow(10, float64(r.IntN(12)-6)))
				}
			}
			var fn blockSumFn
			one := fn.CreateAccumulator()
			for _, p := range parts {
				one = fn.AddInput(one, p)
			}
			want := fn.ExtractOutput(one)
			inProcess, err := statistic.Sum(context.Background(), len(parts), func(u int) statistic.Row { return statistic.Row{Items: []int32{int32(u)}} },
				partsStat{parts})
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if want[i] != inProcess[i] {
					t.Fatalf("coordinate %d: %v in one bundle, %v by statistic.Sum", i, want[i], inProcess[i])
				}
			}
			kinds := map[string]int{}
			for trial := range 20 {
				var accs []Acc
				for lo := 0; lo < len(parts); {
					hi := min(len(parts), lo+1+r.IntN(tc.batch))
					a := fn.CreateAccumulator()
					for _, p := range parts[lo:hi] {
						a = fn.AddInput(a, p)
					}
					kinds[accKind(a)]++
					accs = append(accs, a)
					lo = hi
				}
				r.Shuffle(len(accs), func(i, j int) { accs[i], accs[j] = accs[j], accs[i] })
				for len(accs) > 1 {
					i := r.IntN(len(accs) - 1)
					accs[i] = fn.MergeAccumulators(accs[i], accs[i+1])
					accs = append(accs[:i+1], accs[i+2:]...)
				}
				got := fn.ExtractOutput(accs[0])
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("trial %d, coordinate %d: %v with %d bundles, %v in one", trial, i, got[i], len(accs), want[i])
					}
				}
			}
			if kinds["sparse"] == 0 || (tc.span == statistic.BlockSize && kinds["dense"] == 0) {
				t.Fatalf("bundle accumulators %v: the case does not exercise what it names", kinds)
			}
			if tc.span == 64 && kinds["dense"] > 0 {
				t.Fatalf("bundle accumulators %v: a block with 64 coordinates touched went dense", kinds)
			}
		})
	}
}

// accKind names an accumulator's form.
func accKind(a Acc) string {
	switch {
	case len(a.Fac) > 0:
		return "factors"
	case len(a.Hi) == 0:
		return "empty"
	case a.dense():
		return "dense"
	}
	return "sparse"
}

// partsStat is a statistic whose u-th user's part is parts[u] (her row's
// one item is u).
type partsStat struct{ parts []Part }

func (partsStat) Kind() string { return "test-parts" }
func (partsStat) Spec() statistic.Spec {
	return statistic.Spec{Name: "test parts", Dim: statistic.BlockSize}
}
func (s partsStat) Contribute(r statistic.Row, add func(int, float64)) {
	p := s.parts[r.Items[0]]
	for k, i := range p.Idx {
		add(int(i), p.Val[k])
	}
}

// sameRelease checks that the Beam run (got) made the in-process run's
// releases: as many draws, every pre-noise sum equal to 1e-9 relative,
// every noised value equal, and the same model file.
func sameRelease(t *testing.T, want, got []byte, wantDraws, gotDraws []mechanism.Draw) {
	t.Helper()
	if len(gotDraws) != len(wantDraws) || len(gotDraws) == 0 {
		t.Fatalf("%d releases on Beam, %d in process", len(gotDraws), len(wantDraws))
	}
	overall := 0.0
	for k := range wantDraws {
		w, g := wantDraws[k], gotDraws[k]
		if len(w.Clean) != len(g.Clean) || w.Scale != g.Scale {
			t.Fatalf("release %d: %d coordinates σ %g on Beam, %d σ %g in process", k, len(g.Clean), g.Scale, len(w.Clean), w.Scale)
		}
		worst, differ := 0.0, 0
		for i := range w.Clean {
			d := math.Abs(w.Clean[i]-g.Clean[i]) / math.Max(1e-300, math.Max(math.Abs(w.Clean[i]), 1))
			worst = math.Max(worst, d)
			if w.Noised[i] != g.Noised[i] {
				differ++
			}
		}
		if worst > 1e-9 {
			t.Errorf("release %d: pre-noise sums differ by %g relative", k, worst)
		}
		if differ > 0 {
			t.Errorf("release %d: %d of %d noised values differ", k, differ, len(w.Noised))
		}
		if k < 3 {
			t.Logf("release %d: %d coordinates, largest pre-noise difference %.3g relative", k, len(w.Clean), worst)
		}
		overall = math.Max(overall, worst)
	}
	t.Logf("%d releases, largest pre-noise difference %.3g relative", len(wantDraws), overall)
	if !bytes.Equal(got, want) {
		t.Errorf("the model files differ (%d bytes on Beam, %d in process)", len(got), len(want))
	}
}

// TestCheckFormatStopsBeforeThePipeline: when not one row of the first
// batch of an input can be read (a wrong format), the engine refuses on
// the driver before any pipeline runs, naming the first refused row and
// the count of those read, and draws no noise.
func TestCheckFormatStopsBeforeThePipeline(t *testing.T) {
	dir := t.TempDir()
	_, cat := synthetic(t, dir, 5, 10)
	var b strings.Builder
	for u := range 50 {
		fmt.Fprintf(&b, "%d::%d::%d::978300760\n", u+1, u%10, 1+u%5)
	}
	dat := filepath.Join(dir, "ratings.dat")
	if err := os.WriteFile(dat, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadCatalogue(cat)
	if err != nil {
		t.Fatal(err)
	}
	drew := false
	run := func(context.Context, *beam.Pipeline) error { t.Error("a pipeline ran"); return nil }
	env := methods.Env{Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(1),
		Tap:    func(mechanism.Draw) error { drew = true; return nil },
		Engine: Config{Inputs: []string{dat}, Read: ratingio.Options{Format: "tsv"}, WorkDir: MemoryWorkDir(), Run: run}.Factory(nil)}
	meth, _ := methods.Lookup("dp-popularity")
	_, err = methods.Train(context.Background(), "dp-popularity", meth.New(), release.Input{Declared: release.Declared{Catalogue: c}}, env)
	var re *RefusedError
	if !errors.As(err, &re) || re.N != 50 || re.Sample != dat || drew {
		t.Fatalf("err %v (want all 50 rows of %s refused before a pipeline), noise drawn: %v", err, dat, drew)
	}
	if first, _, _ := strings.Cut(err.Error(), "\n"); !strings.Contains(first, dat+":1: ") || !strings.Contains(first, "all 50 rows") {
		t.Errorf("the error's first line %q does not name line 1 and the count", first)
	}
}
