package onebit

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
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

// BenchmarkClearML100K is the speed target: Clear (logistic, α = 1,
// τ = √(943·1682)) on MovieLens-100K u1.base binarised at 3.5, solved to
// the solver's default stopping rule from scratch in every iteration
// (PRIVREC_ML100K=/path/to/ml-100k; skipped without). Run with
// -benchtime=Nx -count=K for medians; the reported metrics are the SPG
// iterations, the final objective, nuclear projections and sweeps.
//
// The α = ∞ case drops the max-norm bound: the nuclear ball alone, one
// nuclear projection per iteration — the problem the 1BMC reference code
// (projNucnorm) solves on MovieLens and the one the reference
// timing (a full SVD per projection, ~2 s per iteration, 134 s) is for.
func BenchmarkClearML100K(b *testing.B) {
	for _, alpha := range []float64{math.Inf(1), 1} {
		b.Run(fmt.Sprintf("alpha=%g", alpha), func(b *testing.B) { benchClearML100K(b, alpha) })
	}
}

func benchClearML100K(b *testing.B, alpha float64) {
	p := loadML(b, "u1.base", 3.5)
	opt := Options{Link: Logistic{}, Tau: math.Sqrt(943 * 1682), Alpha: alpha}
	if s := os.Getenv("PRIVREC_ONEBIT_MAXITER"); s != "" {
		opt.MaxIter, _ = strconv.Atoi(s)
	}
	for b.Loop() {
		rng := rand.New(rand.NewPCG(1, 1))
		opt.Rand = rng.Float64
		sol, err := Solve(context.Background(), p, opt)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(sol.Iterations), "iterations")
		b.ReportMetric(sol.Objective, "objective")
		b.ReportMetric(float64(sol.Projections), "projections")
		b.ReportMetric(float64(sol.Sweeps), "sweeps")
	}
}

// TestTraceML100K prints the DR solver's iterations on MovieLens-100K
// (measurement only: PRIVREC_ML100K and PRIVREC_ONEBIT_TRACE must be set).
func TestTraceML100K(t *testing.T) {
	if os.Getenv("PRIVREC_ONEBIT_TRACE") == "" {
		t.Skip("PRIVREC_ONEBIT_TRACE not set")
	}
	p := loadML(t, "u1.base", 3.5)
	debugDR = t.Logf
	defer func() { debugDR = nil }()
	rng := rand.New(rand.NewPCG(1, 1))
	opt := Options{Link: Logistic{}, Tau: math.Sqrt(943 * 1682), Alpha: 1, Rand: rng.Float64}
	opt.Rho, _ = strconv.ParseFloat(os.Getenv("PRIVREC_ONEBIT_RHO"), 64)
	opt.Relax, _ = strconv.ParseFloat(os.Getenv("PRIVREC_ONEBIT_RELAX"), 64)
	opt.AAMemory, _ = strconv.Atoi(os.Getenv("PRIVREC_ONEBIT_AA"))
	opt.GapTol, _ = strconv.ParseFloat(os.Getenv("PRIVREC_ONEBIT_GAPTOL"), 64)
	if s := os.Getenv("PRIVREC_ONEBIT_MAXITER"); s != "" {
		opt.MaxIter, _ = strconv.Atoi(s)
	}
	start := time.Now()
	sol, err := Solve(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("objective %.8g gap %.3g iterations %d projections %d sweeps %d stop %s rank %d (%.1f s)", sol.Objective, sol.Gap, sol.Iterations, sol.Projections, sol.Sweeps, sol.Stop, sol.Rank(), time.Since(start).Seconds())
}
