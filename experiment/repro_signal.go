package experiment

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/transform"
)

// gramSignal measures the signal private Frank–Wolfe's first release has to
// see on MovieLens-1M top 400 (ξ = 80, per-user centring, row clip L = 5):
// the top eigenvalues of Σ_i Π_L(x_i)ᵀ Π_L(x_i), against the spectral norm
// ≈ 2σ√n of the Gaussian noise the zCDP accountant calibrates for T = 10
// releases of ℓ2 sensitivity 4√2·L² (dpfw's default calibration, δ = 10⁻⁶).
// It writes report.md into out.
func gramSignal(ctx context.Context, paper bool, dataDir, out string, _ MeasureOptions) error {
	const (
		items, xi, L, T = 400, 80, 5.0, 10
		delta           = 1e-6
	)
	start := time.Now()
	m, err := readCached("ML-1M", resolve(dataDir, "ml-1m/ratings.tsv"), "tsv", "")
	if err != nil {
		return err
	}
	c, _ := transform.CentreUsers(transform.CapPerUser(transform.TopItems(m, items), xi, 1))
	ptr, cols, vals, _ := c.CSR()
	n := c.NumItems()
	w := mat.NewSymDense(n, nil)
	for u := range c.NumUsers() {
		if u%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		var ss float64
		for k := ptr[u]; k < ptr[u+1]; k++ {
			ss += float64(vals[k]) * float64(vals[k])
		}
		sc := 1.0
		if ss > 0 {
			sc = math.Min(1, L/math.Sqrt(ss))
		}
		for a := ptr[u]; a < ptr[u+1]; a++ {
			for b := a; b < ptr[u+1]; b++ {
				i, j := int(cols[a]), int(cols[b])
				w.SetSym(i, j, w.At(i, j)+sc*sc*float64(vals[a])*float64(vals[b]))
			}
		}
	}
	var es mat.EigenSym
	if !es.Factorize(w, false) {
		return fmt.Errorf("001-gram-signal: eigendecomposition failed")
	}
	ev := es.Values(nil) // ascending
	top := []float64{ev[n-1], ev[n-2], ev[n-3]}
	epss := pick(paper, []float64{1, 20}, []float64{0.5, 1, 2, 5, 10, 20})
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Seed 001: the signal private Frank–Wolfe has to see on MovieLens-1M top 400\n\n")
	fmt.Fprintf(&b, "MovieLens-1M restricted to its %d most-rated items (%d users), at most ξ = %d ratings per user (seed 1), per-user centring, rows clipped to ℓ2 norm L = %g. "+
		"The signal: the top eigenvalues of Σ_i Π_L(x_i)ᵀ Π_L(x_i) (no noise). The noise: one of dpfw's T = %d Gaussian releases of that matrix, σ per entry from the zCDP accountant "+
		"for ℓ2 sensitivity 4√2·L² and δ = %g (dpfw's default calibration, before its lattice adjustment); its spectral norm is ≈ 2σ√n for n = %d.\n\n",
		items, c.NumUsers(), xi, L, T, delta, n)
	fmt.Fprintf(&b, "Top eigenvalues: %.4g, %.4g, %.4g.\n\n", top[0], top[1], top[2])
	fmt.Fprint(&b, "| ε | σ per entry | noise spectral norm ≈ 2σ√n | noise / top eigenvalue |\n|---|---|---|---|\n")
	for _, eps := range epss {
		sigma, err := accountant.GaussianSigmaForTarget(eps, delta, T, 4*math.Sqrt2*L*L)
		if err != nil {
			return fmt.Errorf("001-gram-signal: calibrating σ at ε = %g: %w", eps, err)
		}
		norm := 2 * sigma * math.Sqrt(float64(n))
		fmt.Fprintf(&b, "| %g | %.4g | %.4g | %.3g |\n", eps, sigma, norm, norm/top[0])
	}
	fmt.Fprintf(&b, "\nWhere the noise's norm exceeds the top eigenvalue the first release cannot find the signal's direction. Measured in %.1f s.\n", time.Since(start).Seconds())
	return atomicfile.Write(filepath.Join(out, "report.md"), 0o644, func(w io.Writer) error {
		_, err := w.Write(b.Bytes())
		return err
	})
}
