package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/tensor"
	"github.com/privrec/privrec/tensor/completion"
)

// trainEval trains method name with its default settings through the
// methods registry, as privrec train --method name --scale lo:hi does,
// writes the public artefact and scores it from the file, as privrec eval
// does. It returns the test RMSE and the training wall time.
func trainEval(name string, params map[string]any, train, test *ratings.Matrix, scale release.Scale, eps float64, run, workers int) (float64, time.Duration) {
	cfg, err := methods.Configure(name, params)
	if err != nil {
		log.Fatal(err)
	}
	in := release.Input{Ratings: train, Declared: release.Declared{Scale: &scale}}
	env := methods.Env{Epsilon: eps, Delta: 1e-5, Seed: uint64(run + 1), Workers: workers,
		Rand: noise.Seeded(uint64(5000 + run)), Noise: noise.Seeded(uint64(6000 + run))}
	start := time.Now()
	r, err := methods.Train(context.Background(), name, cfg, in, env)
	if err != nil {
		log.Printf("%s: %v", name, err)
		return math.NaN(), 0
	}
	took := time.Since(start)
	dir, err := os.MkdirTemp("", "tensorfig")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "m")
	if err := model.WriteFileAtomic(path, r.Public.Write); err != nil {
		log.Fatal(err)
	}
	rep, err := methods.EvaluateFile(context.Background(), path, test, methods.EvalOptions{})
	if err != nil {
		log.Fatal(err)
	}
	return *rep.RMSE, took
}

// defaultsML measures the default settings on MovieLens-100K ua and ub
// (scale 1–5 declared): the two baselines, cp and tucker, and the private
// variants at ε = 1 (δ = 10⁻⁵), runs seeds each for the randomised ones.
func defaultsML(dir string, runs int) {
	if dir == "" {
		log.Fatal("-fig defaults needs -ml DIR (MovieLens-100K)")
	}
	type row struct {
		name string
		eps  float64
		runs int
	}
	rows := []row{{"global-mean", 0, 1}, {"bias", 0, 1}, {"cp", 0, runs}, {"tucker", 0, runs},
		{"cp-ip", 1, runs}, {"tucker-ip", 1, runs}, {"cp-dpsgd", 1, runs}, {"tucker-dpsgd", 1, runs}}
	scale := release.Scale{Min: 1, Max: 5}
	fmt.Printf("\nDefault settings on MovieLens-100K (users × movies × day), --scale 1:5, RMSE on the test split, mean ± sd over %d runs (seeds 5000+r for the non-private randomness, 6000+r for the noise); private rows at ε = 1, δ = 1e-5\n\n", runs)
	fmt.Println("| method | ua | ub | median train time (wall) |\n|---|---|---|---|")
	var splits [2][2]*ratings.Matrix
	for s, sp := range []string{"ua", "ub"} {
		splits[s] = [2]*ratings.Matrix{read(filepath.Join(dir, sp+".base")), read(filepath.Join(dir, sp+".test"))}
	}
	for _, r := range rows {
		var cells [2]cell
		var times []time.Duration
		for s := range splits {
			cells[s].rmse = make([]float64, r.runs)
			for run := range r.runs {
				eps := r.eps
				if eps == 0 {
					eps = 1 // unused by the non-private methods
				}
				v, took := trainEval(r.name, nil, splits[s][0], splits[s][1], scale, eps, run, 2)
				cells[s].rmse[run] = v
				times = append(times, took)
			}
		}
		fmt.Printf("| %s | %s | %s | %s |\n", r.name, cells[0], cells[1], median(times).Round(10*time.Millisecond))
	}
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// tensorRatings writes a synthetic tensor as ratings with day-tagged
// items, as privrec data synth-tensor does.
func tensorRatings(t *tensor.Tensor) *ratings.Matrix {
	b := ratings.NewBuilder(ratings.DupError)
	for e := range t.Len() {
		item := strconv.Itoa(int(t.J[e])+1) + tensor.ItemDaySep + strconv.Itoa(int(t.K[e]))
		if err := b.AddTimed(strconv.Itoa(int(t.I[e])+1), item, t.Val[e], int64(t.K[e])*tensor.SecondsPerDay, true, int64(e+1)); err != nil {
			log.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	return m
}

// defaultsSynth measures the default settings on the seed's synthetic
// setup (20 × 20 × 20, rank 3, SNR 1, 50 % missing, 80/20 split; data
// seeds 1000+r as in Figure 2), trained as privrec train --item-day
// --scale 0:1 does, RMSE against the noise-free truth.
func defaultsSynth(eps []float64, runs int) {
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		names := []string{string(kind), string(kind) + "-ip", string(kind) + "-dpsgd"}
		rows := []string{"training mean (reference)", names[0]}
		for _, n := range names[1:] {
			for _, e := range eps {
				rows = append(rows, fmt.Sprintf("%s, ε = %g", n, e))
			}
		}
		res := newRes(len(rows), 1, runs)
		var jobs []job
		for run := range runs {
			s, err := tensor.Synthesize(tensor.PaperSynth(kind), noise.Seeded(uint64(1000+run)))
			if err != nil {
				log.Fatal(err)
			}
			train, test := tensorRatings(s.Train), tensorRatings(s.Test)
			mu := s.Train.Mean()
			var ss float64
			for _, v := range s.Test.Val {
				ss += (v - mu) * (v - mu)
			}
			res[0][0].rmse[run] = math.Sqrt(ss / float64(s.Test.Len()))
			r := 1
			add := func(name string, e float64) {
				jobs = append(jobs, job{r, 0, run, func() float64 {
					v, _ := trainEval(name, map[string]any{"item_day": true}, train, test, release.Scale{Min: 0, Max: 1}, e, run, 1)
					return v
				}})
				r++
			}
			add(names[0], 1)
			for _, n := range names[1:] {
				for _, e := range eps {
					add(n, e)
				}
			}
		}
		runJobs(jobs, res)
		table(fmt.Sprintf("Default settings (%s) on the seed's synthetic tensors: test RMSE against the noise-free truth, mean ± sd over %d realisations, 20×20×20, rank 3, SNR 1, 50%% missing, 80/20 split, --item-day --scale 0:1, DP-SGD δ = 1e-5", kind, runs),
			[]string{"RMSE"}, rows, res)
	}
}

var _ = bytes.NewReader
var _ = completion.Paper
