package onebit

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/privrec/privrec/privacy/noise"
)

// TestExperimentSynthetic measures the seed's Figure 1 setup (100 × 100,
// r = 1, α = 1, 15 % observed, τ = α√(d1 d2 r)): mean ARE over draws for
// each mechanism and ε. A measurement, not a test: it runs only with
// PRIVREC_ONEBIT_EXPERIMENT=1 (draws from PRIVREC_ONEBIT_DRAWS, default 40)
// and prints a Markdown table.
func TestExperimentSynthetic(t *testing.T) {
	if os.Getenv("PRIVREC_ONEBIT_EXPERIMENT") == "" {
		t.Skip("measurement; set PRIVREC_ONEBIT_EXPERIMENT=1")
	}
	draws := 40
	if s := os.Getenv("PRIVREC_ONEBIT_DRAWS"); s != "" {
		draws, _ = strconv.Atoi(s)
	}
	const d, alpha = 100, 1.0
	epsilons := []float64{1, 2, 4, 7, 10}
	mechs := []Mechanism{InP, ObjP, GraP, OutP}
	for _, link := range []Link{Probit{Sigma: 1}, Logistic{}} {
		start := time.Now()
		var clear, clearOracle, fTruth, fClear []float64
		res := map[Mechanism][][]float64{}
		for _, m := range mechs {
			res[m] = make([][]float64, len(epsilons))
		}
		mean := func(x []float64) string {
			m, s := stat.MeanStdDev(x, nil)
			return fmt.Sprintf("%.3f ± %.3f", m, s/math.Sqrt(float64(len(x))))
		}
		for draw := range draws {
			M, p := synthetic(uint64(1000+draw), d, d, 1, alpha, 0.15, link)
			rng := rand.New(rand.NewPCG(uint64(draw), 99))
			opt := Options{Link: link, Tau: alpha * d, Alpha: alpha, Rand: rng.Float64}
			r, err := Run(context.Background(), p, Config{Mechanism: Clear, Solver: opt})
			if err != nil {
				t.Fatal(err)
			}
			clear = append(clear, are(r.Solution.X, M))
			// Diagnostics: the objective at the truth (is the fit
			// over-fitting?) and Clear with the oracle τ = ‖M‖_*.
			mo := make([]float64, len(p.Y))
			for k := range p.Y {
				mo[k] = M[int(p.Rows[k])*d+int(p.Cols[k])]
			}
			fTruth = append(fTruth, objective(p, link, nil, mo, nil))
			fClear = append(fClear, r.Solution.Objective)
			oo := opt
			oo.Tau = nuclearNorm(M, d, d)
			ro, err := Run(context.Background(), p, Config{Mechanism: Clear, Solver: oo})
			if err != nil {
				t.Fatal(err)
			}
			clearOracle = append(clearOracle, are(ro.Solution.X, M))
			for ei, eps := range epsilons {
				for _, m := range mechs {
					src := noise.Seeded(uint64(draw*1000 + ei*10 + len(m)))
					var x []float64
					if m == OutP {
						x, _ = PerturbOutput(r.Solution.X, alpha, eps, src)
					} else {
						rm, err := Run(context.Background(), p, Config{Mechanism: m, Epsilon: eps, Noise: src, Solver: opt})
						if err != nil {
							t.Fatal(err)
						}
						x = rm.Solution.X
					}
					res[m][ei] = append(res[m][ei], are(x, M))
				}
			}
			if n := draw + 1; n%10 == 0 || n == draws {
				fmt.Printf("\n%s link, %d draws (%.0f s): mean ARE ± standard error\n\n| ε | Clear | InP | ObjP | GraP | OutP |\n|---|---|---|---|---|---|\n", link.Name(), n, time.Since(start).Seconds())
				for ei, eps := range epsilons {
					fmt.Printf("| %g | %s | %s | %s | %s | %s |\n", eps, mean(clear), mean(res[InP][ei]), mean(res[ObjP][ei]), mean(res[GraP][ei]), mean(res[OutP][ei]))
				}
				fmt.Printf("\nClear: objective at M̂ %s, at the truth M %s; ARE with the oracle τ = ‖M‖_*: %s\n", mean(fClear), mean(fTruth), mean(clearOracle))
			}
		}
	}
}

// signAccuracy is the seed's Acc: the fraction of test entries whose sign
// sgn(X_ij) matches the test sign (X_ij = 0 counts as wrong).
func signAccuracy(x []float64, d2 int, test *Problem) float64 {
	var ok int
	for k, y := range test.Y {
		if v := x[int(test.Rows[k])*d2+int(test.Cols[k])]; v*y > 0 {
			ok++
		}
	}
	return float64(ok) / float64(len(test.Y))
}

// accuracyTable runs Clear once and every mechanism at every ε on one
// train/test split; OutP reuses Clear's solution (PerturbOutput, the code
// Run uses). acc[m][ε index] gets one value appended.
func accuracyTable(t *testing.T, train, test *Problem, opt Options, epsilons []float64, seed uint64, clearAcc *[]float64, acc map[Mechanism][][]float64, logf func(string, ...any)) {
	start := time.Now()
	r, err := Run(context.Background(), train, Config{Mechanism: Clear, Solver: opt})
	if err != nil {
		t.Fatal(err)
	}
	*clearAcc = append(*clearAcc, signAccuracy(r.Solution.X, train.D2, test))
	logf("clear: acc %.4f, %d iterations, objective %.2f (%s), %.1f s", (*clearAcc)[len(*clearAcc)-1], r.Solution.Iterations, r.Solution.Objective, r.Solution.Stop, time.Since(start).Seconds())
	for ei, eps := range epsilons {
		for _, m := range []Mechanism{InP, ObjP, GraP, OutP} {
			start := time.Now()
			src := noise.Seeded(seed*1000 + uint64(ei)*10 + uint64(len(m)))
			var x []float64
			if m == OutP {
				x, _ = PerturbOutput(r.Solution.X, opt.Alpha, eps, src)
			} else {
				rm, err := Run(context.Background(), train, Config{Mechanism: m, Epsilon: eps, Noise: src, Solver: opt})
				if err != nil {
					t.Fatal(err)
				}
				x = rm.Solution.X
			}
			acc[m][ei] = append(acc[m][ei], signAccuracy(x, train.D2, test))
			logf("%s ε=%g: acc %.4f, %.1f s", m, eps, acc[m][ei][len(acc[m][ei])-1], time.Since(start).Seconds())
		}
	}
}

func printAccuracy(title string, epsilons []float64, clearAcc []float64, acc map[Mechanism][][]float64) {
	mean := func(x []float64) string {
		if len(x) == 1 {
			return fmt.Sprintf("%.4f", x[0])
		}
		m, s := stat.MeanStdDev(x, nil)
		return fmt.Sprintf("%.4f ± %.4f", m, s/math.Sqrt(float64(len(x))))
	}
	fmt.Printf("\n%s: sign accuracy (mean ± standard error over runs)\n\n| ε | Clear | InP | ObjP | GraP | OutP |\n|---|---|---|---|---|---|\n", title)
	for ei, eps := range epsilons {
		fmt.Printf("| %g | %s | %s | %s | %s | %s |\n", eps, mean(clearAcc), mean(acc[InP][ei]), mean(acc[ObjP][ei]), mean(acc[GraP][ei]), mean(acc[OutP][ei]))
	}
}

// experimentEpsilons is the ε grid {1, 2, 4, 7, 10}, or the
// comma-separated list in PRIVREC_ONEBIT_EPS (to split a long measurement
// over processes).
func experimentEpsilons() []float64 {
	s := os.Getenv("PRIVREC_ONEBIT_EPS")
	if s == "" {
		return []float64{1, 2, 4, 7, 10}
	}
	var eps []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			panic(fmt.Sprintf("PRIVREC_ONEBIT_EPS: %v", err))
		}
		eps = append(eps, v)
	}
	return eps
}

// TestExperimentML measures sign accuracy on MovieLens-100K u1.base →
// u1.test binarised at 3.5 (PRIVREC_ML100K=dir; PRIVREC_ONEBIT_MAXITER
// caps SPG iterations, default 500). A measurement, not a test.
func TestExperimentML(t *testing.T) {
	if os.Getenv("PRIVREC_ONEBIT_EXPERIMENT") == "" {
		t.Skip("measurement; set PRIVREC_ONEBIT_EXPERIMENT=1")
	}
	train := loadML(t, "u1.base", 3.5)
	test := loadML(t, "u1.test", 3.5)
	maxIter := 500
	if s := os.Getenv("PRIVREC_ONEBIT_MAXITER"); s != "" {
		maxIter, _ = strconv.Atoi(s)
	}
	epsilons := experimentEpsilons()
	rng := rand.New(rand.NewPCG(1, 1))
	opt := Options{Link: Logistic{}, Tau: math.Sqrt(943 * 1682), Alpha: 1, Rand: rng.Float64, MaxIter: maxIter}
	var clearAcc []float64
	acc := map[Mechanism][][]float64{}
	for _, m := range []Mechanism{InP, ObjP, GraP, OutP} {
		acc[m] = make([][]float64, len(epsilons))
	}
	start := time.Now()
	logf := func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "%6.1fs "+f+"\n", append([]any{time.Since(start).Seconds()}, a...)...)
	}
	accuracyTable(t, train, test, opt, epsilons, 1, &clearAcc, acc, logf)
	printAccuracy(fmt.Sprintf("MovieLens-100K u1.base → u1.test, logistic, α = 1, τ = √(943·1682), max-iter %d, one run (%.0f s)", maxIter, time.Since(start).Seconds()), epsilons, clearAcc, acc)
}

// TestExperimentRC measures sign accuracy on the restaurant–consumer data
// (PRIVREC_RC=path/to/rating_final.csv): rating 2 → +1, else −1, random
// 80/20 splits (PRIVREC_ONEBIT_RUNS, default 10). A measurement, not a test.
func TestExperimentRC(t *testing.T) {
	path := os.Getenv("PRIVREC_RC")
	if path == "" || os.Getenv("PRIVREC_ONEBIT_EXPERIMENT") == "" {
		t.Skip("measurement; set PRIVREC_ONEBIT_EXPERIMENT=1 and PRIVREC_RC")
	}
	runs := 10
	if s := os.Getenv("PRIVREC_ONEBIT_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	users, items := map[string]int32{}, map[string]int32{}
	id := func(m map[string]int32, k string) int32 {
		if v, ok := m[k]; ok {
			return v
		}
		m[k] = int32(len(m))
		return m[k]
	}
	var all Problem
	for _, r := range recs[1:] {
		y := -1.0
		if r[2] == "2" {
			y = 1
		}
		all.Rows, all.Cols, all.Y = append(all.Rows, id(users, r[0])), append(all.Cols, id(items, r[1])), append(all.Y, y)
	}
	d1, d2 := len(users), len(items)
	epsilons := experimentEpsilons()
	var clearAcc []float64
	acc := map[Mechanism][][]float64{}
	for _, m := range []Mechanism{InP, ObjP, GraP, OutP} {
		acc[m] = make([][]float64, len(epsilons))
	}
	start := time.Now()
	for run := range runs {
		rng := rand.New(rand.NewPCG(uint64(run), 77))
		train, test := &Problem{D1: d1, D2: d2}, &Problem{D1: d1, D2: d2}
		for _, k := range rng.Perm(len(all.Y)) {
			dst := train
			if len(test.Y) < len(all.Y)/5 {
				dst = test
			}
			dst.Rows, dst.Cols, dst.Y = append(dst.Rows, all.Rows[k]), append(dst.Cols, all.Cols[k]), append(dst.Y, all.Y[k])
		}
		opt := Options{Link: Logistic{}, Tau: math.Sqrt(float64(d1 * d2)), Alpha: 1, Rand: rng.Float64}
		logf := func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, "%6.1fs run %d: "+f+"\n", append([]any{time.Since(start).Seconds(), run}, a...)...)
		}
		accuracyTable(t, train, test, opt, epsilons, uint64(run+1), &clearAcc, acc, logf)
	}
	printAccuracy(fmt.Sprintf("RC %d × %d, %d ratings, logistic, α = 1, τ = √(d1·d2), %d random 80/20 splits (%.0f s)", d1, d2, len(all.Y), runs, time.Since(start).Seconds()), epsilons, clearAcc, acc)
}
