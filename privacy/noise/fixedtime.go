package noise

import "math/bits"

// Bounded-time sampling for clients (local DP). The exact samplers in
// exact.go are rejection samplers whose number of loop iterations grows
// with the magnitude of the noise; a client whose running time is
// observable per value would leak |noise|, and with the output, the input.
// The variants below draw the same number of random words and run the same
// number of loop iterations whatever the sample, except with probability
// below 1e-12 per sample (when a loop needs more iterations than its fixed
// budget, it keeps going, so the distribution stays exact). Data-dependent
// branches remain, so timing differences are at the level of branch
// mispredictions (nanoseconds), not proportional to the noise. They cost
// about 1300 draws per sample (≈ 10 µs of CPU, against ≈ 90 ns for the
// variable-time sampler).

const (
	// fixedK is the minimum number of steps of the Bernoulli(exp(−γ))
	// series: P(more needed) ≤ 1/18! < 1e-15.
	fixedK = 18
	// fixedAttempts is the number of proposals for the truncated
	// exponential part: P(all rejected) ≤ (1 − (1 − 1/e))^36 < 1e-15.
	fixedAttempts = 36
	// fixedV is the number of Bernoulli(1/e) trials for the geometric
	// part: P(more needed) = e^−36 < 1e-15.
	fixedV = 36
)

// bernoulliExpFracFixed is bernoulliExpFrac (γ = num/den ∈ [0, 1]) with at
// least fixedK steps: after the answer is known it keeps drawing.
func bernoulliExpFracFixed(s *Source, num, den uint64) bool {
	var result, done bool
	for k := uint64(1); k <= fixedK || !done; k++ {
		var a bool
		if hi, dk := bits.Mul64(den, k); hi == 0 {
			a = s.uniformBelow(dk) < num
		} else {
			a = s.uniformBelow(k) == 0 && s.bernoulliFrac(num, den)
		}
		if !done && !a {
			result, done = k&1 == 1, true
		}
	}
	return result
}

// DiscreteLaplaceFixedTime is DiscreteLaplace(s, t, 1) — the exact discrete
// Laplace of integer scale t, P(z) ∝ exp(−|z|/t) — with a running time that
// does not depend on the sample (see above). t = 0 returns 0; t above
// MaxDiscreteLaplaceScale panics, as in DiscreteLaplace (never less noise
// than asked; check untrusted scales with CheckDiscreteLaplaceScale(t, 1)).
// The lattice sampler SnapLaplaceFixedTime passes t ≤ 2^40.
func DiscreteLaplaceFixedTime(s *Source, t uint64) int64 {
	if t == 0 {
		return 0
	}
	if err := CheckDiscreteLaplaceScale(t, 1); err != nil {
		panic(err)
	}
	for {
		// U: the first of fixedAttempts proposals accepted with
		// probability exp(−U/t) (all proposals are drawn and tested).
		var u uint64
		found := false
		for i := 0; i < fixedAttempts || !found; i++ {
			c := s.uniformBelow(t)
			acc := bernoulliExpFracFixed(s, c, t)
			if acc && !found {
				u, found = c, true
			}
		}
		// V: the number of Bernoulli(1/e) successes before the first
		// failure, over at least fixedV trials.
		var v uint64
		stopped := false
		for i := 0; i < fixedV || !stopped; i++ {
			a := bernoulliExpFracFixed(s, 1, 1)
			if !stopped {
				if a {
					v++
				} else {
					stopped = true
				}
			}
		}
		hi, x := bits.Mul64(t, v)
		x, c := bits.Add64(x, u, 0)
		neg := s.coin()
		if hi != 0 || c != 0 || x > 1<<62 || (neg && x == 0) {
			// x = 0 with a minus sign (probability 1/(2t) ≤ 2^-40 at lattice
			// scales) restarts, as in CKS; x > 2^62 needs v ≥ 2^62/t ≥ 2^10,
			// probability below exp(−2^10) at t ≤ MaxDiscreteLaplaceScale.
			continue
		}
		if neg {
			return -int64(x)
		}
		return int64(x)
	}
}

// SnapLaplaceFixedTime is SnapLaplace with the bounded-time discrete
// Laplace: the same distribution, with a running time independent of the
// noise.
func SnapLaplaceFixedTime(s *Source, x, scale float64) float64 {
	if !validScale(scale) {
		return nanValue
	}
	g, t := laplaceLattice(scale)
	return float64(latticeIndex(x, g)+DiscreteLaplaceFixedTime(s, t)) * g
}
