package noise

import (
	"math"
	"testing"
)

// The bounded-time discrete Laplace has the same law as the exact one
// (χ² at α = 1e-6, false-failure rate 1e-6 per scale).
func TestDiscreteLaplaceFixedTimeDistribution(t *testing.T) {
	const n = 8000
	for _, tt := range []uint64{1, 3} {
		s := Seeded(41)
		q := math.Exp(-1 / float64(tt))
		pmf := func(z int) float64 { return (1 - q) / (1 + q) * math.Pow(q, math.Abs(float64(z))) }
		K := 0
		for pmf(K+1)/(1-q)*n >= 5 {
			K++
		}
		counts := make([]int, 2*K+3)
		probs := make([]float64, 2*K+3)
		for z := -K; z <= K; z++ {
			probs[z+K+1] = pmf(z)
		}
		probs[0], probs[2*K+2] = pmf(K+1)/(1-q), pmf(K+1)/(1-q)
		for range n {
			z := int(DiscreteLaplaceFixedTime(s, tt))
			switch {
			case z < -K:
				counts[0]++
			case z > K:
				counts[2*K+2]++
			default:
				counts[z+K+1]++
			}
		}
		chiSquareOK(t, "bounded-time discrete Laplace", counts, probs, n)
	}
	// Lattice scale: E|Z|/t ≈ 1 with sd 1 (4.42 sd tolerance, ≈1e-5).
	s := Seeded(42)
	var m float64
	const n2 = 8000
	for range n2 {
		m += math.Abs(float64(DiscreteLaplaceFixedTime(s, 1<<40))) / (1 << 40)
	}
	if m /= n2; math.Abs(m-1) > 4.42/math.Sqrt(n2) {
		t.Errorf("E|Z|/t = %g", m)
	}
}

// The number of random draws per sample does not depend on the sample:
// across 2000 samples it varies only by reservoir refills (coin flips are
// taken 64 per draw), while the exact sampler's varies widely.
func TestDiscreteLaplaceFixedTimeDraws(t *testing.T) {
	spread := func(f func(s *Source)) (lo, hi int) {
		s := Secure()
		lo, hi = math.MaxInt, 0
		for range 2000 {
			before := s.left
			f(s)
			d := before - s.left
			if d < 0 { // re-keyed in between
				continue
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		return lo, hi
	}
	lo, hi := spread(func(s *Source) { DiscreteLaplaceFixedTime(s, 1<<40) })
	if hi-lo > 2 {
		t.Errorf("bounded-time sampler: %d to %d draws per sample", lo, hi)
	}
	elo, ehi := spread(func(s *Source) { DiscreteLaplace(s, 1<<40, 1) })
	if ehi-elo < 5 {
		t.Errorf("exact sampler unexpectedly uniform: %d to %d draws", elo, ehi)
	}
	t.Logf("draws per sample: bounded-time %d–%d, exact %d–%d", lo, hi, elo, ehi)
}
