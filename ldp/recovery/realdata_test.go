package recovery

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
)

// TestCollectedFile is a measurement harness, not a unit test: it runs the
// recovery on a file written by `privrec collect` (real data never enter
// the unit tests). Run it with
//
//	PRIVREC_LDP_COLLECTED=z.tsv [PRIVREC_LDP_DEBIAS=1] [PRIVREC_LDP_RULE=discrepancy] go test ./ldp/recovery -run CollectedFile -v [-cpuprofile cpu.out]
func TestCollectedFile(t *testing.T) {
	path := os.Getenv("PRIVREC_LDP_COLLECTED")
	if path == "" {
		t.Skip("set PRIVREC_LDP_COLLECTED to a collect file")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, z, err := ldp.ReadCollected(f)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProblem(z, h)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	o := Options{Debias: os.Getenv("PRIVREC_LDP_DEBIAS") != "", LambdaRule: LambdaRule(os.Getenv("PRIVREC_LDP_RULE")), Rand: noise.Seeded(1)}
	res, err := Recover(context.Background(), p, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s ε=%g: %d reports, %.2f s, rank %d, λ %.4g, iterations %d, residual %.4g (target %.4g, ‖P_Ω Z‖ %.4g)",
		h.Mechanism, h.Epsilon, len(p.Z), time.Since(start).Seconds(), res.Rank, res.Lambda, res.Iterations, res.Residual, res.Rho, res.ZNorm)
}
