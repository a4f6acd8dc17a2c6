package synth

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/ratings"
)

// OneBitConfig is the synthetic setup of seed 000 (§5.1, "Synthetic data").
type OneBitConfig struct {
	Rows, Cols int     // d1 × d2 (paper: 100 × 100)
	Rank       int     // r (paper: 1)
	Alpha      float64 // ‖M‖∞ after scaling (paper: 1)
	ObsFrac    float64 // fraction of entries observed, uniformly (paper: 0.15; sweep 0.2–0.8)
	Link       Link    // Probit or Logistic (the paper runs both)
	Sigma      float64 // probit noise scale σ (paper: 1)
}

// OneBitDefaults returns the paper's parameters: d1 = d2 = 100, r = 1,
// α = 1, 15 % observed, probit link with σ = 1.
func OneBitDefaults() OneBitConfig {
	return OneBitConfig{Rows: 100, Cols: 100, Rank: 1, Alpha: 1, ObsFrac: 0.15, Link: Probit, Sigma: 1}
}

// OneBitData is a generated one-bit problem.
type OneBitData struct {
	// Observed holds Y on Ω: +1 or −1, users and items named 1..d.
	Observed *ratings.Matrix
	// Truth is M (d1 × d2, rank r, ‖M‖∞ = α): the target of ARE.
	Truth  *Factors
	Config OneBitConfig
}

// OneBit generates seed 000's synthetic problem: M1 (d1 × r) and M2
// (d2 × r) with i.i.d. U[−½, ½] entries, M = M1 M2ᵀ scaled by α/‖M‖∞ so that
// ‖M‖∞ = α (the paper writes α·M_ij / max_ij M_ij; dividing by the largest
// |M_ij| is what makes ‖M‖∞ = α hold, which is the stated aim), then a
// uniformly random set Ω of exactly round(ObsFrac·d1·d2) entries, and for
// each (i, j) ∈ Ω, Y_ij = +1 if M_ij + Z_ij ≥ 0 else −1 with Z_ij i.i.d.
// N(0, σ²) (probit) or standard logistic — i.e. +1 with probability
// h(M_ij) (Eq. 1 of the paper). Deterministic for seed.
func OneBit(cfg OneBitConfig, seed uint64) (*OneBitData, error) {
	if err := checkShape("one-bit", cfg.Rows, cfg.Cols, cfg.Rank); err != nil {
		return nil, err
	}
	if !(cfg.Alpha > 0) || math.IsInf(cfg.Alpha, 0) {
		return nil, fmt.Errorf("synth: alpha %v must be positive and finite", cfg.Alpha)
	}
	if cfg.Link != Probit && cfg.Link != Logistic {
		return nil, fmt.Errorf("synth: unknown link %q", cfg.Link)
	}
	if cfg.Link == Probit && (!(cfg.Sigma > 0) || math.IsInf(cfg.Sigma, 0)) {
		return nil, fmt.Errorf("synth: probit sigma %v must be positive and finite", cfg.Sigma)
	}
	s, err := checkFrac("observation fraction", cfg.ObsFrac, cfg.Rows, cfg.Cols)
	if err != nil {
		return nil, err
	}
	r := newRand(seed, 0x6f6e65626974) // "onebit"
	m1 := uniformFactor(r, cfg.Rows, cfg.Rank, -0.5, 0.5)
	m2 := uniformFactor(r, cfg.Cols, cfg.Rank, -0.5, 0.5)
	truth := &Factors{U: m1, V: m2}
	if err := truth.scaleMaxAbs(cfg.Alpha, "M"); err != nil {
		return nil, err
	}
	obs, err := observe(r, cfg.Rows, cfg.Cols, s, func(i, j int) float32 {
		var z float64
		if cfg.Link == Logistic {
			u := r.Float64()
			for u == 0 {
				u = r.Float64()
			}
			z = math.Log(u / (1 - u))
		} else {
			z = cfg.Sigma * r.NormFloat64()
		}
		if truth.At(i, j)+z >= 0 {
			return 1
		}
		return -1
	})
	if err != nil {
		return nil, err
	}
	return &OneBitData{Observed: obs, Truth: truth, Config: cfg}, nil
}

// checkShape refuses a generated problem of rows × cols at rank that is
// empty or too large (kind names the setup in errors).
func checkShape(kind string, rows, cols, rank int) error {
	if rows < 1 || cols < 1 || rank < 1 {
		return fmt.Errorf("synth: %s shape %d × %d rank %d: all must be ≥ 1", kind, rows, cols, rank)
	}
	if rows*cols > maxCells {
		return fmt.Errorf("synth: %s shape %d × %d is too large (at most %d entries)", kind, rows, cols, maxCells)
	}
	return nil
}

// scaleMaxAbs scales U so that the largest |entry| of U·Vᵀ is target; a
// drawn matrix (named name in the error) that is zero cannot be.
func (f *Factors) scaleMaxAbs(target float64, name string) error {
	mx := f.MaxAbs()
	if mx == 0 {
		return fmt.Errorf("synth: the drawn %s is zero", name) // probability 0
	}
	f.U.Scale(target/mx, f.U)
	return nil
}
