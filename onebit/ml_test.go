package onebit

import (
	"bufio"
	"context"
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

func TestMLClearTrace(t *testing.T) {
	p := loadML(t, "u1.base", 3.5)
	rng := rand.New(rand.NewPCG(1, 1))
	start := time.Now()
	opt := Options{Link: Logistic{}, Tau: 1259.4, Alpha: 1, Rand: rng.Float64, MaxIter: 5}
	opt.Progress = func(d, n int) { t.Logf("it %d %.1fs", d, time.Since(start).Seconds()) }
	sol, err := Solve(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: obj %.2f it %d rank %d proj %d sweeps %d dyk %d fb %d in %.1fs", sol.Stop, sol.Objective, sol.Iterations, sol.Rank(), sol.Projections, sol.Sweeps, sol.DykstraIters, sol.Fallbacks, time.Since(start).Seconds())
}

// BenchmarkMLClear is the speed target: Clear on MovieLens-100K
// u1.base to convergence (PRIVREC_ML100K=/path/to/ml-100k; skipped without).
func BenchmarkMLClear(b *testing.B) {
	p := loadML(b, "u1.base", 3.5)
	for b.Loop() {
		rng := rand.New(rand.NewPCG(1, 1))
		sol, err := Solve(context.Background(), p, Options{Link: Logistic{}, Tau: 1259.4, Alpha: 1, Rand: rng.Float64})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(sol.Iterations), "iterations")
		b.ReportMetric(sol.Objective, "objective")
	}
}
