package onebit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
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
		clear := make([]float64, draws)
		res := map[Mechanism][][]float64{}
		for _, m := range mechs {
			res[m] = make([][]float64, len(epsilons))
		}
		for draw := range draws {
			M, p := synthetic(uint64(1000+draw), d, d, 1, alpha, 0.15, link)
			rng := rand.New(rand.NewPCG(uint64(draw), 99))
			opt := Options{Link: link, Tau: alpha * d, Alpha: alpha, Rand: rng.Float64}
			r, err := Run(context.Background(), p, Config{Mechanism: Clear, Solver: opt})
			if err != nil {
				t.Fatal(err)
			}
			clear[draw] = are(r.Solution.X, M)
			for ei, eps := range epsilons {
				for _, m := range mechs {
					cfg := Config{Mechanism: m, Epsilon: eps, Noise: noise.Seeded(uint64(draw*1000 + ei)), Solver: opt}
					r, err := Run(context.Background(), p, cfg)
					if err != nil {
						t.Fatal(err)
					}
					x := r.Solution.X
					if r.Dense != nil {
						x = r.Dense
					}
					res[m][ei] = append(res[m][ei], are(x, M))
				}
			}
		}
		mean := func(x []float64) string {
			m, s := stat.MeanStdDev(x, nil)
			return fmt.Sprintf("%.3f ± %.3f", m, s/math.Sqrt(float64(len(x))))
		}
		fmt.Printf("\n%s link, %d draws (%.0f s): mean ARE ± standard error\n\n| ε | Clear | InP | ObjP | GraP | OutP |\n|---|---|---|---|---|---|\n", link.Name(), draws, time.Since(start).Seconds())
		for ei, eps := range epsilons {
			fmt.Printf("| %g | %s | %s | %s | %s | %s |\n", eps, mean(clear), mean(res[InP][ei]), mean(res[ObjP][ei]), mean(res[GraP][ei]), mean(res[OutP][ei]))
		}
	}
}
