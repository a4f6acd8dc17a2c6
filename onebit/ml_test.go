package onebit

import (
	"bufio"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/privacy/noise"
)

// loadML reads a MovieLens-100K split binarised at thr (measurement only:
// the path comes from PRIVREC_ML100K and the test is skipped without it).
func loadML(t testing.TB, name string, thr float64) *Problem {
	dir := os.Getenv("PRIVREC_ML100K")
	if dir == "" {
		t.Skip("PRIVREC_ML100K not set")
	}
	f, err := os.Open(dir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := &Problem{D1: 943, D2: 1682}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		u, _ := strconv.Atoi(fs[0])
		i, _ := strconv.Atoi(fs[1])
		r, _ := strconv.ParseFloat(fs[2], 64)
		y := -1.0
		if r > thr {
			y = 1
		}
		p.Rows, p.Cols, p.Y = append(p.Rows, int32(u-1)), append(p.Cols, int32(i-1)), append(p.Y, y)
	}
	return p
}

// loadMLSplit reads MovieLens-100K's base and test files (tab-separated
// user, item, rating, time) binarised at thr, indexed as privrec train
// indexes them: users and items in order of first appearance... here in
// increasing ID order over the training file, the items being those the
// training file rates (943 × 1650 for u1.base). Test entries of users or
// items absent from training are dropped (privrec eval skips them too).
// Measurement only: the directory comes from PRIVREC_ML100K and the caller
// is skipped without it.
func loadMLSplit(tb testing.TB, base, test string, thr float64) (train, held *Problem) {
	dir := os.Getenv("PRIVREC_ML100K")
	if dir == "" {
		tb.Skip("PRIVREC_ML100K not set")
	}
	read := func(name string) [][3]float64 {
		f, err := os.Open(dir + "/" + name)
		if err != nil {
			tb.Fatal(err)
		}
		defer f.Close()
		var rows [][3]float64
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 3 {
				continue
			}
			u, _ := strconv.Atoi(fs[0])
			i, _ := strconv.Atoi(fs[1])
			r, _ := strconv.ParseFloat(fs[2], 64)
			rows = append(rows, [3]float64{float64(u), float64(i), r})
		}
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
		return rows
	}
	tr, te := read(base), read(test)
	users, items := map[int]int32{}, map[int]int32{}
	var us, is []int
	for _, r := range tr {
		if _, ok := users[int(r[0])]; !ok {
			users[int(r[0])] = 0
			us = append(us, int(r[0]))
		}
		if _, ok := items[int(r[1])]; !ok {
			items[int(r[1])] = 0
			is = append(is, int(r[1]))
		}
	}
	slices.Sort(us)
	slices.Sort(is)
	for k, u := range us {
		users[u] = int32(k)
	}
	for k, i := range is {
		items[i] = int32(k)
	}
	build := func(rows [][3]float64) *Problem {
		p := &Problem{D1: len(us), D2: len(is)}
		for _, r := range rows {
			u, ok1 := users[int(r[0])]
			i, ok2 := items[int(r[1])]
			if !ok1 || !ok2 {
				continue
			}
			y := -1.0
			if r[2] > thr {
				y = 1
			}
			p.Rows, p.Cols, p.Y = append(p.Rows, u), append(p.Cols, i), append(p.Y, y)
		}
		return p
	}
	return build(tr), build(te)
}

// BenchmarkML100K is the speed target: each mechanism on
// MovieLens-100K u1.base (943 × 1650, ratings > 3.5 → +1, as privrec
// train --scale 1:5 binarises them), logistic link, α = 1, τ = α√(d1·d2),
// the default solver and stopping rule, ε = 4 (PRIVREC_ONEBIT_EPS
// overrides; GraP K = 10, clamp 0.5), solved from scratch in every
// benchmark iteration; clear/alpha=inf is the nuclear ball alone (the 1BMC
// reference's problem). PRIVREC_ML100K=/path/to/ml-100k; skipped without.
// Run with -benchtime=1x -count=K for medians. Metrics: sign accuracy on
// u1.test, CPU seconds per solve (user + system, all threads; the machine
// may be shared), iterations, nuclear projections, and for Clear the
// objective and the certified duality gap.
func BenchmarkML100K(b *testing.B) {
	drDouble = os.Getenv("PRIVREC_ONEBIT_DOUBLE") != ""
	projRho, _ = strconv.ParseFloat(os.Getenv("PRIVREC_ONEBIT_PROJRHO"), 64)
	projIter, _ = strconv.Atoi(os.Getenv("PRIVREC_ONEBIT_PROJITER"))
	eps := 4.0
	if s := os.Getenv("PRIVREC_ONEBIT_EPS"); s != "" {
		eps, _ = strconv.ParseFloat(s, 64)
	}
	for _, tc := range []struct {
		name  string
		mech  Mechanism
		alpha float64
	}{
		{"clear", Clear, 1}, {"inp", InP, 1}, {"objp", ObjP, 1}, {"grap", GraP, 1}, {"outp", OutP, 1},
		{"clear/alpha=inf", Clear, math.Inf(1)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			train, test := loadMLSplit(b, "u1.base", "u1.test", 3.5)
			tau := math.Sqrt(float64(train.D1) * float64(train.D2))
			if !math.IsInf(tc.alpha, 1) {
				tau *= tc.alpha
			}
			opt := Options{Link: Logistic{}, Tau: tau, Alpha: tc.alpha, Solver: os.Getenv("PRIVREC_ONEBIT_SOLVER")}
			opt.Rho, _ = strconv.ParseFloat(os.Getenv("PRIVREC_ONEBIT_RHO"), 64)
			if s := os.Getenv("PRIVREC_ONEBIT_MAXITER"); s != "" {
				opt.MaxIter, _ = strconv.Atoi(s)
			}
			seed := uint64(0)
			for b.Loop() {
				seed++
				rng := rand.New(rand.NewPCG(1, 1))
				opt.Rand = rng.Float64
				cpu0 := cpuSeconds()
				res, err := Run(context.Background(), train, Config{Mechanism: tc.mech, Epsilon: eps, Iterations: 10, Clamp: 0.5,
					Noise: noise.Seeded(seed), Solver: opt})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(cpuSeconds()-cpu0, "cpu-s")
				x := res.Solution.X
				if res.Dense != nil {
					x = res.Dense
				}
				sol := res.Solution
				b.ReportMetric(signAccuracy(x, train.D2, test), "accuracy")
				b.ReportMetric(float64(sol.Iterations), "iterations")
				b.ReportMetric(float64(sol.Projections), "projections")
				if tc.mech == Clear {
					b.ReportMetric(sol.Objective, "objective")
					b.ReportMetric(sol.Gap, "gap")
				}
			}
		})
	}
}

// TestTraceML100K prints the DR solver's iterations on MovieLens-100K
// u1.base, Clear at α = 1 (measurement only: PRIVREC_ML100K and
// PRIVREC_ONEBIT_TRACE must be set; PRIVREC_ONEBIT_RHO, _RELAX, _AA,
// _GAPTOL, _MAXITER and _MARGIN override the solver's settings).
func TestTraceML100K(t *testing.T) {
	if os.Getenv("PRIVREC_ONEBIT_TRACE") == "" {
		t.Skip("PRIVREC_ONEBIT_TRACE not set")
	}
	p, _ := loadMLSplit(t, "u1.base", "u1.test", 3.5)
	debugDR = t.Logf
	defer func() { debugDR = nil }()
	rng := rand.New(rand.NewPCG(1, 1))
	opt := Options{Link: Logistic{}, Tau: math.Sqrt(float64(p.D1) * float64(p.D2)), Alpha: 1, Rand: rng.Float64}
	opt.Rho, _ = strconv.ParseFloat(os.Getenv("PRIVREC_ONEBIT_RHO"), 64)
	opt.Relax, _ = strconv.ParseFloat(os.Getenv("PRIVREC_ONEBIT_RELAX"), 64)
	opt.AAMemory, _ = strconv.Atoi(os.Getenv("PRIVREC_ONEBIT_AA"))
	opt.GapTol, _ = strconv.ParseFloat(os.Getenv("PRIVREC_ONEBIT_GAPTOL"), 64)
	if s := os.Getenv("PRIVREC_ONEBIT_MAXITER"); s != "" {
		opt.MaxIter, _ = strconv.Atoi(s)
	}
	drBlockMargin, _ = strconv.Atoi(os.Getenv("PRIVREC_ONEBIT_MARGIN"))
	start := time.Now()
	sol, err := Solve(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("objective %.8g gap %.3g iterations %d projections %d sweeps %d stop %s rank %d (%.1f s)", sol.Objective, sol.Gap, sol.Iterations, sol.Projections, sol.Sweeps, sol.Stop, sol.Rank(), time.Since(start).Seconds())
}
