package methods_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/synth"
	"github.com/privrec/privrec/transform"
)

// TestTables regenerates the RMSE-versus-ε tables of docs/jointdp.md. It
// is skipped unless JOINTDP_TABLES names a data set:
//
//	JOINTDP_TABLES=synthetic [JOINTDP_USERS=500000] go test -run Tables -v -timeout 3h ./methods
//	JOINTDP_TABLES=jester    JOINTDP_DATA=/work/shared/data go test -run Tables -v ./methods
//	JOINTDP_TABLES=ml1m      JOINTDP_DATA=/work/shared/data go test -run Tables -v ./methods
//
// JOINTDP_RUNS sets the number of runs per cell (default 3), JOINTDP_EPS
// the ε grid (comma-separated), JOINTDP_METHODS the methods
// (comma-separated), JOINTDP_ARGS_<ROW> overrides a row's flags
// (space-separated; ROW is the row label upper-cased with "/" → "_", e.g.
// JOINTDP_ARGS_DPFW_TUNED). Real data are read from JOINTDP_DATA
// and never needed by ordinary tests.
func TestTables(t *testing.T) {
	which := os.Getenv("JOINTDP_TABLES")
	if which == "" {
		t.Skip("set JOINTDP_TABLES=synthetic|jester|ml1m to regenerate the tables")
	}
	ctx := context.Background()
	runs := envInt("JOINTDP_RUNS", 3)
	eps := []float64{0.5, 1, 2, 5, 10, 20}
	if s := os.Getenv("JOINTDP_EPS"); s != "" {
		eps = nil
		for _, f := range strings.Split(s, ",") {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			eps = append(eps, x)
		}
	}
	var data *ratings.Matrix
	var scale release.Scale    // the declared rating scale of the data set
	var args map[string]string // row label → flags; the method is the label up to "/"
	switch which {
	case "synthetic":
		cfg := synth.RankOneDefaults()
		cfg.Users = envInt("JOINTDP_USERS", cfg.Users)
		d, err := synth.RankOne(ctx, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		data = d.Observed
		// k = ‖Y*‖_* of the truth, as the paper does for its synthetic set.
		var nu, nv float64
		for i := range d.Truth.U.RawMatrix().Rows {
			nu += d.Truth.U.At(i, 0) * d.Truth.U.At(i, 0)
		}
		for j := range d.Truth.V.RawMatrix().Rows {
			nv += d.Truth.V.At(j, 0) * d.Truth.V.At(j, 0)
		}
		k := math.Sqrt(nu * nv)
		args = map[string]string{
			"fw":         fmt.Sprintf("--nuclear %g --iterations 40 --center=false", k),
			"dpfw/paper": fmt.Sprintf("--nuclear %g --iterations 10 --clip 3 --center=false", k),
			"dpfw/tuned": fmt.Sprintf("--nuclear %g --iterations 5 --clip 4 --center=false --step 2/(t+1) --bias-scale 0", k),
			"dpsvd":      "--rank 1 --clip 3 --center=false",
			"mm":         "--rank 1",
		}
		scale = release.Scale{Min: -1, Max: 1}
	case "jester":
		m, err := ratingio.ReadFile(filepath.Join(os.Getenv("JOINTDP_DATA"), "jester", "jester5k_ratings.tsv"), ratingio.Options{Format: "tsv"})
		if err != nil {
			t.Fatal(err)
		}
		data = m.MapValues(func(e ratings.Entry) float32 { return (e.Value + 10) / 4 }) // −10..10 → 0..5
		args = map[string]string{
			"fw":         "--nuclear 1500 --iterations 60",
			"dpfw/paper": "--nuclear 1500 --iterations 10 --clip 6 --max-per-user 0",
			"dpfw/tuned": "--nuclear 1500 --iterations 5 --clip 6 --max-per-user 0 --step 2/(t+1) --bias-scale 0",
			"dpsvd":      "--rank 2 --clip 6 --max-per-user 0",
			"mm":         "--rank 2 --max-per-user 0",
		}
		scale = release.Scale{Min: 0, Max: 5}
	case "ml1m":
		m, err := ratingio.ReadFile(filepath.Join(os.Getenv("JOINTDP_DATA"), "ml-1m", "ratings.tsv"), ratingio.Options{Format: "tsv"})
		if err != nil {
			t.Fatal(err)
		}
		data = transform.TopItems(m, 400)
		args = map[string]string{
			"fw":         "--nuclear 3000 --iterations 60",
			"dpfw/paper": "--nuclear 3000 --iterations 10 --clip 5",
			"dpfw/tuned": "--nuclear 3000 --iterations 5 --clip 5 --step 2/(t+1) --bias-scale 0",
			"dpsvd":      "--rank 2 --clip 5",
			"mm":         "--rank 2",
		}
		scale = release.Scale{Min: 1, Max: 5}
	default:
		t.Fatalf("unknown JOINTDP_TABLES %q", which)
	}
	t.Logf("%s: %d users × %d items, %d ratings; %d runs per cell", which, data.NumUsers(), data.NumItems(), data.Len(), runs)
	type cell struct{ sum, sum2 float64 }
	res := map[string]map[float64]*cell{}
	order := []string{"mean", "fw", "dpfw/paper", "dpfw/tuned", "dpsvd", "mm"}
	if s := os.Getenv("JOINTDP_METHODS"); s != "" {
		order = strings.Split(s, ",")
	}
	for _, name := range order {
		key := strings.NewReplacer("/", "_").Replace(strings.ToUpper(name))
		if s := os.Getenv("JOINTDP_ARGS_" + key); s != "" {
			args[name] = s
		}
	}
	// "mean" predicts each user's own mean (of her ξ-capped ratings where
	// the private methods cap): what a private method must beat.
	cap := "--max-per-user 80"
	if which == "jester" {
		cap = "--max-per-user 0"
	}
	if _, ok := args["mean"]; !ok {
		args["mean"] = "--nuclear 1e-9 --iterations 1 " + cap
	}
	for _, name := range order {
		res[name] = map[float64]*cell{}
		t.Logf("%s flags: %s", name, args[name])
	}
	for run := range runs {
		train, test := transform.HoldOut(data, 0.01, uint64(100+run))
		for _, name := range order {
			grid := eps
			if name == "fw" || name == "mean" {
				grid = []float64{math.Inf(1)}
			}
			for _, e := range grid {
				start := time.Now()
				rmse, g, err := trainEval(ctx, name, args[name], train, test, scale, e, uint64(1000*run+7))
				if err != nil {
					t.Fatalf("%s ε=%g: %v", name, e, err)
				}
				c := res[name][e]
				if c == nil {
					c = &cell{}
					res[name][e] = c
				}
				c.sum += rmse
				c.sum2 += rmse * rmse
				t.Logf("run %d %s ε=%g: RMSE %.4f (%.1f s) [proven ε %.4g]", run, name, e, rmse, time.Since(start).Seconds(), g)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| method |")
	for _, e := range eps {
		fmt.Fprintf(&b, " ε = %g |", e)
	}
	fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(eps)))
	for _, name := range order {
		fmt.Fprintf(&b, "| %s |", name)
		for _, e := range eps {
			c := res[name][e]
			if name == "fw" || name == "mean" {
				c = res[name][math.Inf(1)]
			}
			n := float64(runs)
			mean := c.sum / n
			sd := math.Sqrt(math.Max(c.sum2/n-mean*mean, 0))
			fmt.Fprintf(&b, " %.4f ± %.4f |", mean, sd)
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}

// trainEval trains one row's method on train and returns its test RMSE
// and proven ε. The harness declares the data's own item set as the
// catalogue (the seed treats the item set as public) and the data set's
// scale.
func trainEval(ctx context.Context, label, args string, train, test *ratings.Matrix, scale release.Scale, eps float64, seed uint64) (float64, float64, error) {
	name, _, _ := strings.Cut(label, "/")
	if name == "mean" {
		name = "fw"
	}
	cfg, err := methods.Configure(name, flagParams(args))
	if err != nil {
		return 0, 0, err
	}
	if math.IsInf(eps, 1) {
		eps = 1
	}
	cat, err := model.NewCatalogue(train.Items.Names(), nil)
	if err != nil {
		return 0, 0, err
	}
	in := release.Input{Ratings: train, Declared: release.Declared{Scale: &scale, Catalogue: cat}}
	env := methods.Env{Epsilon: eps, Delta: 1e-6, Seed: seed, Workers: 2,
		Rand: noise.Seeded(seed), Noise: noise.Seeded(seed ^ 0x6e6f697365)}
	r, err := methods.Train(ctx, name, cfg, in, env)
	if err != nil {
		return 0, 0, err
	}
	rep, err := methods.EvaluateModel(ctx, r.Model(), test, methods.EvalOptions{States: r.PerUser})
	if err != nil {
		return 0, 0, err
	}
	return *rep.RMSE, r.Guarantee.Epsilon, nil
}

// flagParams reads "--name value", "--name=value" and "--flag" (true) into
// parameters by JSON name.
func flagParams(args string) map[string]any {
	out := map[string]any{}
	f := strings.Fields(args)
	for i := 0; i < len(f); i++ {
		k, ok := strings.CutPrefix(f[i], "--")
		if !ok {
			continue
		}
		if name, v, eq := strings.Cut(k, "="); eq {
			out[strings.ReplaceAll(name, "-", "_")] = v
		} else if i+1 < len(f) && !strings.HasPrefix(f[i+1], "--") {
			out[strings.ReplaceAll(k, "-", "_")] = f[i+1]
			i++
		} else {
			out[strings.ReplaceAll(k, "-", "_")] = "true"
		}
	}
	return out
}

func envInt(key string, def int) int {
	if s := os.Getenv(key); s != "" {
		if v, err := strconv.Atoi(s); err == nil {
			return v
		}
	}
	return def
}

// TestGramSignal measures, for docs/jointdp.md, the signal DPFW's first
// release has to see on MovieLens-1M top 400 (ξ = 80, centred, L = 5): the
// top eigenvalues of Σ_i Π_L(x_i)ᵀΠ_L(x_i), against the spectral norm
// ≈ 2σ√n of the noise the accountant calibrates. Skipped unless
// JOINTDP_TABLES=ml1m-signal (JOINTDP_DATA as for the tables).
func TestGramSignal(t *testing.T) {
	if os.Getenv("JOINTDP_TABLES") != "ml1m-signal" {
		t.Skip("set JOINTDP_TABLES=ml1m-signal")
	}
	m, err := ratingio.ReadFile(filepath.Join(os.Getenv("JOINTDP_DATA"), "ml-1m", "ratings.tsv"), ratingio.Options{Format: "tsv"})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := transform.CentreUsers(transform.CapPerUser(transform.TopItems(m, 400), 80, 1))
	ptr, cols, vals, _ := c.CSR()
	const n, L = 400, 5.0
	W := mat.NewSymDense(n, nil)
	for i := range c.NumUsers() {
		var s float64
		for k := ptr[i]; k < ptr[i+1]; k++ {
			s += float64(vals[k]) * float64(vals[k])
		}
		sc := min(1, L/math.Sqrt(s))
		for a := ptr[i]; a < ptr[i+1]; a++ {
			for b := a; b < ptr[i+1]; b++ {
				W.SetSym(int(cols[a]), int(cols[b]), W.At(int(cols[a]), int(cols[b]))+sc*sc*float64(vals[a])*float64(vals[b]))
			}
		}
	}
	var es mat.EigenSym
	if !es.Factorize(W, false) {
		t.Fatal("eigendecomposition failed")
	}
	v := es.Values(nil)
	t.Logf("top eigenvalues: %.4g %.4g %.4g", v[n-1], v[n-2], v[n-3])
	for _, eps := range []float64{1, 20} {
		sigma, err := accountant.GaussianSigmaForTarget(eps, 1e-6, 10, 4*math.Sqrt2*L*L)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ε = %g, T = 10: σ = %.4g, noise spectral norm ≈ 2σ√n = %.4g", eps, sigma, 2*sigma*math.Sqrt(n))
	}
}
