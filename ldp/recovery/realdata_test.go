package recovery

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratingio"
)

// TestCollectedFile is a measurement harness, not a unit test: it runs the
// recovery on a file written by `privrec collect` (real data never enter
// the unit tests). Run it with
//
//	PRIVREC_LDP_COLLECTED=z.tsv [PRIVREC_LDP_DEBIAS=1] go test ./ldp/recovery -run CollectedFile -v [-cpuprofile cpu.out]
func TestCollectedFile(t *testing.T) {
	path := os.Getenv("PRIVREC_LDP_COLLECTED")
	if path == "" {
		t.Skip("set PRIVREC_LDP_COLLECTED to a collect file")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ldp.ParseHeader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for line := range bytes.Lines(raw) {
		if !bytes.HasPrefix(line, []byte("#")) {
			data = append(data, line...)
		}
	}
	tmp := t.TempDir() + "/d.tsv"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	z, err := ratingio.ReadFile(tmp, ratingio.Options{Format: "tsv"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProblem(z, h)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := Recover(context.Background(), p, Options{Debias: os.Getenv("PRIVREC_LDP_DEBIAS") != "", Rand: noise.Seeded(1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s ε=%g: %d reports, %.2f s, rank %d, λ %.4g, iterations %d, residual %.4g (target %.4g, ‖P_Ω Z‖ %.4g)",
		h.Mechanism, h.Epsilon, len(p.Z), time.Since(start).Seconds(), res.Rank, res.Lambda, res.Iterations, res.Residual, res.Rho, res.ZNorm)
}
