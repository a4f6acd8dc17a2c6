// Command tensorfig measures the seed-004 figures with the seed's settings
// (completion.Paper: per-entry SGD, no biases): RMSE versus ε on the
// synthetic tensors (Figure 2), versus the missing ratio (Figure 3), and on
// MovieLens-100K users × movies × day with the ua/ub splits (Figure 4); and
// the default settings (-fig defaults: ALS with biases, the new DP-SGD) on
// both. It prints Markdown tables (mean ± sd over realisations) for
// docs/tensor.md.
//
//	go run ./tensor/internal/tensorfig -fig 2 -runs 50
//	go run ./tensor/internal/tensorfig -fig 3 -runs 10
//	go run ./tensor/internal/tensorfig -fig 4 -runs 3 -ml DIR
//	go run ./tensor/internal/tensorfig -fig defaults -runs 50 -ml DIR
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/tensor"
	"github.com/privrec/privrec/tensor/completion"
)

var mechs = []completion.Mechanism{completion.NoMechanism, completion.IP, completion.GP, completion.OP, completion.DPSGD}

func mechName(k tensor.Kind, m completion.Mechanism) string {
	if m == completion.NoMechanism {
		return string(k)
	}
	return string(k) + "-" + string(m)
}

// cell is one (method, x) point: a set of RMSEs over runs (NaN: diverged).
type cell struct {
	rmse []float64
}

func (c cell) String() string {
	var s, ss float64
	n, bad := 0, 0
	for _, v := range c.rmse {
		if math.IsNaN(v) {
			bad++
			continue
		}
		s += v
		ss += v * v
		n++
	}
	if n == 0 {
		return "diverged"
	}
	mean := s / float64(n)
	sd := math.Sqrt(math.Max(0, ss/float64(n)-mean*mean))
	out := fmt.Sprintf("%.3f ± %.3f", mean, sd)
	if bad > 0 {
		out += fmt.Sprintf(" (%d div.)", bad)
	}
	return out
}

// config returns the solver configuration of the seed's synthetic setting.
func config(kind tensor.Kind, m completion.Mechanism, eps float64) completion.Config {
	cfg := completion.Paper(kind)
	cfg.Workers = 1 // cells run in parallel instead
	cfg.Mechanism, cfg.Epsilon, cfg.Delta = m, eps, 1e-5
	cfg.ClampNoisy = true
	if m == completion.DPSGD {
		cfg.Clip = 0.3
	}
	return cfg
}

func clampRMSE(m *completion.Model, test *tensor.Tensor, lo, hi float64) float64 {
	var s float64
	for e := range test.Len() {
		p := min(max(m.Predict(int(test.I[e]), int(test.J[e]), int(test.K[e])), lo), hi)
		s += (p - test.Val[e]) * (p - test.Val[e])
	}
	return math.Sqrt(s / float64(test.Len()))
}

type job struct {
	row, col, run int
	do            func() float64
}

func runJobs(jobs []job, res [][]cell) {
	ch := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				v := j.do()
				mu.Lock()
				res[j.row][j.col].rmse[j.run] = v
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
}

// meanRow is a reference row: predict the training mean everywhere.
const meanRow completion.Mechanism = "train-mean"

func synthRun(kind tensor.Kind, m completion.Mechanism, eps, missing float64, run int) float64 {
	sc := tensor.PaperSynth(kind)
	sc.Missing = missing
	s, err := tensor.Synthesize(sc, noise.Seeded(uint64(1000+run)))
	if err != nil {
		log.Fatal(err)
	}
	if m == meanRow {
		mu := s.Train.Mean()
		var ss float64
		for _, v := range s.Test.Val {
			ss += (v - mu) * (v - mu)
		}
		return math.Sqrt(ss / float64(s.Test.Len()))
	}
	model, _, err := completion.Train(context.Background(), s.Train, config(kind, m, eps), noise.Seeded(uint64(2000+run)), noise.Seeded(uint64(3000+run)), nil)
	if err != nil {
		return math.NaN()
	}
	return clampRMSE(model, s.Test, 0, 1)
}

func table(title string, xs []string, rows []string, res [][]cell) {
	fmt.Printf("\n%s\n\n| method | %s |\n|---|%s\n", title, strings.Join(xs, " | "), strings.Repeat("---|", len(xs)))
	for r, name := range rows {
		parts := make([]string, len(xs))
		for c := range xs {
			parts[c] = res[r][c].String()
		}
		fmt.Printf("| %s | %s |\n", name, strings.Join(parts, " | "))
	}
}

func newRes(rows, cols, runs int) [][]cell {
	res := make([][]cell, rows)
	for r := range res {
		res[r] = make([]cell, cols)
		for c := range res[r] {
			res[r][c].rmse = make([]float64, runs)
		}
	}
	return res
}

func main() {
	figName := flag.String("fig", "2", "figure: 2 (RMSE vs ε), 3 (RMSE vs missing ratio), 4 (MovieLens-100K), defaults (the default settings on MovieLens-100K ua/ub and the synthetic tensors)")
	mlRuns := flag.Int("ml-runs", 5, "runs per split of the randomised methods (-fig defaults)")
	runs := flag.Int("runs", 50, "realisations per point")
	epsList := flag.String("eps", "0.1,0.5,1,2,5,10", "ε grid")
	figEps := flag.Float64("fig3-eps", 1, "ε for the missing-ratio sweep")
	mlDir := flag.String("ml", "", "MovieLens-100K folder (figure 4, defaults)")
	flag.Parse()
	fig := new(int)
	if *figName != "defaults" {
		if _, err := fmt.Sscan(*figName, fig); err != nil {
			log.Fatalf("-fig %q: %v", *figName, err)
		}
	}
	var eps []float64
	for _, s := range strings.Split(*epsList, ",") {
		var v float64
		fmt.Sscan(s, &v)
		eps = append(eps, v)
	}
	epsCols := make([]string, len(eps))
	for c, e := range eps {
		epsCols[c] = fmt.Sprintf("ε=%g", e)
	}
	switch *fig {
	case 0:
	case 2, 3:
		for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
			var xs []string
			var x []float64
			if *fig == 2 {
				xs, x = epsCols, eps
			} else {
				for mr := 1; mr <= 9; mr++ {
					xs = append(xs, fmt.Sprintf("MR=%.1f", float64(mr)/10))
					x = append(x, float64(mr)/10)
				}
			}
			ms := append([]completion.Mechanism{meanRow}, mechs...)
			res := newRes(len(ms), len(x), *runs)
			var jobs []job
			rows := make([]string, len(ms))
			for r, m := range ms {
				rows[r] = mechName(kind, m)
				if m == meanRow {
					rows[r] = "training mean (reference)"
				}
				for c, xv := range x {
					for run := range *runs {
						e, mr := xv, 0.5
						if *fig == 3 {
							e, mr = *figEps, xv
						}
						jobs = append(jobs, job{r, c, run, func() float64 { return synthRun(kind, m, e, mr, run) }})
					}
				}
			}
			runJobs(jobs, res)
			title := fmt.Sprintf("Figure 2 (%s): test RMSE against the noise-free truth, mean ± sd over %d realisations, 20×20×20, rank 3, SNR 1, 50%% missing, 80/20 split", kind, *runs)
			if *fig == 3 {
				title = fmt.Sprintf("Figure 3 (%s): test RMSE vs missing ratio at ε = %g (non-private row: no noise), mean ± sd over %d realisations", kind, *figEps, *runs)
			}
			table(title, xs, rows, res)
		}
	case 4:
		fig4(*mlDir, eps, epsCols, *runs)
	default:
		if *figName != "defaults" {
			log.Fatalf("unknown -fig %d", *fig)
		}
	}
	if *figName == "defaults" {
		defaultsML(*mlDir, *mlRuns)
		defaultsSynth(eps, *runs)
	}
}

func read(path string) *ratings.Matrix {
	m, err := ratingio.ReadFile(path, ratingio.Options{Format: "movielens-100k"})
	if err != nil {
		log.Fatal(err)
	}
	return m
}

func fig4(dir string, eps []float64, epsCols []string, runs int) {
	if _, err := os.Stat(filepath.Join(dir, "ua.base")); err != nil {
		log.Fatal(err)
	}
	type split struct{ train, test *ratings.Matrix }
	var splits []split
	for _, s := range []string{"ua", "ub"} {
		splits = append(splits, split{read(filepath.Join(dir, s+".base")), read(filepath.Join(dir, s+".test"))})
	}
	var refs [2][]float64
	for _, sp := range splits {
		refs[0] = append(refs[0], meanRMSE(sp.train, sp.test))
		refs[1] = append(refs[1], scalingRMSE(sp.train, sp.test))
	}
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		res := newRes(len(mechs), len(eps), runs*len(splits))
		rows := make([]string, len(mechs))
		var jobs []job
		for r, m := range mechs {
			rows[r] = mechName(kind, m)
			for c, e := range eps {
				if m == completion.NoMechanism && c > 0 {
					continue
				}
				for sp := range splits {
					for run := range runs {
						jobs = append(jobs, job{r, c, sp*runs + run, func() float64 {
							return mlRun(kind, m, e, splits[sp].train, splits[sp].test, run)
						}})
					}
				}
			}
		}
		runJobs(jobs, res)
		for c := 1; c < len(eps); c++ {
			res[0][c] = res[0][0]
		}
		// reference rows: one value per split, the same at every ε
		rows = append([]string{"training mean (reference)", "bi-scaling alone, z = 0 (reference)"}, rows...)
		ref := newRes(2, len(eps), len(splits))
		for r := range 2 {
			for c := range eps {
				copy(ref[r][c].rmse, refs[r])
			}
		}
		res = append(ref, res...)
		table(fmt.Sprintf("Figure 4 (%s): MovieLens-100K users × movies × day, bi-scaled per day, ua and ub, RMSE on the 1–5 scale, mean ± sd over 2 splits × %d runs (reference rows: over the 2 splits)", kind, runs), epsCols, rows, res)
	}
}

// meanRMSE is the RMSE of predicting the training mean everywhere.
func meanRMSE(train, test *ratings.Matrix) float64 {
	mu := train.Mean()
	var ss float64
	n := 0
	test.All(func(e ratings.Entry) bool {
		d := float64(e.Value) - mu
		ss += d * d
		n++
		return true
	})
	return math.Sqrt(ss / float64(n))
}

// scalingRMSE is the RMSE of the per-day bi-scaling alone: a zero model in
// the scaled space, un-scaled (day mean plus the user's and item's centres
// in that day), clamped to [1, 5].
func scalingRMSE(train, test *ratings.Matrix) float64 {
	t, ax, err := tensor.FromRatings(train)
	if err != nil {
		log.Fatal(err)
	}
	_, sc, err := tensor.BiScaleDays(t, 10)
	if err != nil {
		log.Fatal(err)
	}
	d := 3
	m := &completion.Model{Kind: tensor.CP, Rank: d, Dims: t.Dims, A: make([]float64, t.Dims[0]*d), B: make([]float64, t.Dims[1]*d), C: make([]float64, t.Dims[2]*d)}
	f := &completion.File{Method: "bi-scaling", Users: train.Users.Names(), Items: train.Items.Names(), Axis: ax, Lo: 1, Hi: 5, Model: m, Scaling: sc}
	rep, err := methods.EvaluateTensor(context.Background(), f, test)
	if err != nil {
		log.Fatal(err)
	}
	return *rep.RMSE
}

// paperParams are the seed's MovieLens settings as method parameters
// (docs/tensor.md, "Reproducing the seed"): the seed's SGD without biases
// or validation, CP λ = 0.01, η = 0.005; Tucker λ_o = 0.01, λ_g = 0.001,
// η = 0.003; 100 passes; and the seed-era DP-SGD (clip 0.3, no biases, no
// preconditioning).
func paperParams(kind tensor.Kind, mech completion.Mechanism) map[string]any {
	params := map[string]any{"lambda": 0.01, "lr": 0.005, "passes": 100}
	if kind == tensor.Tucker {
		params["lambda_g"], params["lr"] = 0.001, 0.003
	}
	switch mech {
	case completion.NoMechanism, completion.IP:
		params["solver"], params["biases"], params["validation"] = "sgd", false, 0
	case completion.DPSGD:
		params["clip"], params["biases"], params["precondition"] = 0.3, false, false
	}
	return params
}

func mlRun(kind tensor.Kind, mech completion.Mechanism, eps float64, train, test *ratings.Matrix, run int) float64 {
	name := mechName(kind, mech)
	params := paperParams(kind, mech)
	params["biscale"] = true
	cfg, err := methods.Configure(name, params)
	if err != nil {
		log.Fatal(err)
	}
	scale := release.Scale{Min: 1, Max: 5}
	in := release.Input{Ratings: train, Declared: release.Declared{Scale: &scale}}
	env := methods.Env{Epsilon: eps, Delta: 1e-5, Seed: uint64(run + 1), Workers: 1,
		Rand: noise.Seeded(uint64(5000 + run)), Noise: noise.Seeded(uint64(6000 + run))}
	r, err := methods.Train(context.Background(), name, cfg, in, env)
	if err != nil {
		return math.NaN()
	}
	// Score the model as privrec eval does: from its file.
	var buf bytes.Buffer
	if err := r.Public.Write(&buf); err != nil {
		log.Fatal(err)
	}
	f, err := completion.ReadFile(&buf)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := methods.EvaluateTensor(context.Background(), f, test)
	if err != nil {
		log.Fatal(err)
	}
	return *rep.RMSE
}
