package noise

import (
	"math"
	"math/big"
	"math/bits"
)

// Exact samplers on the integers, after Canonne, Kamath & Steinke, "The
// Discrete Gaussian for Differential Privacy" (NeurIPS 2020). They use only
// uniform integers and integer arithmetic, so their output distribution is
// exactly the stated one (no floating-point artefacts). Their running time
// is random and, for the Gaussian, depends weakly on the output; see
// docs/PRIVACY.md ("timing").

// bernoulliFrac returns true with probability num/den exactly (0 ≤ num ≤ den, den ≥ 1).
func (s *Source) bernoulliFrac(num, den uint64) bool { return s.uniformBelow(den) < num }

// BernoulliExp returns true with probability exp(−num/den) exactly
// (CKS 2020, Algorithm 1, with the integer part of num/den handled by
// repeated Bernoulli(e^−1)). den must be positive; den = 0 returns false.
func BernoulliExp(s *Source, num, den uint64) bool {
	if den == 0 {
		return false
	}
	for num > den {
		if !bernoulliExpFrac(s, 1, 1) {
			return false
		}
		num -= den
	}
	return bernoulliExpFrac(s, num, den)
}

// bernoulliExpFrac is Bernoulli(exp(−γ)) for γ = num/den ∈ [0, 1]: draw
// A_k ~ Bernoulli(γ/k) for k = 1, 2, … until one is 0; return whether that
// k is odd. P(k odd) = 1 − γ + γ²/2! − … = e^−γ. Bernoulli(γ/k) is one
// uniform draw below den·k when that fits in 64 bits, else the product of
// Bernoulli(1/k) and Bernoulli(γ).
func bernoulliExpFrac(s *Source, num, den uint64) bool {
	k := uint64(1)
	for {
		var a bool
		if hi, dk := bits.Mul64(den, k); hi == 0 {
			a = num >= dk || s.uniformBelow(dk) < num // γ/k = 1 needs no draw
		} else {
			a = (k == 1 || s.uniformBelow(k) == 0) && s.bernoulliFrac(num, den)
		}
		if !a {
			return k&1 == 1
		}
		k++
	}
}

// DiscreteLaplace returns an exact sample of the discrete Laplace
// (two-sided geometric) distribution on the integers with scale t = num/den:
// P(z) ∝ exp(−|z|/t) (CKS 2020, Algorithm 2). num and den must be positive
// num above MaxDiscreteLaplaceScale is coarsened toward more noise; num = 0
// returns 0 and den = 0 (an infinite scale) panics, a programming error. The sample is exact except on
// an event of probability below exp(−2^15) (an intermediate that would
// overflow 64 bits, on which the draw restarts).
func DiscreteLaplace(s *Source, num, den uint64) int64 {
	if den == 0 {
		panic("noise: DiscreteLaplace with an infinite scale (den = 0)")
	}
	if num == 0 {
		return 0
	}
	for num > MaxDiscreteLaplaceScale {
		// Halve the ratio's precision toward more noise: num rounded up,
		// den rounded down (never less noise than asked for). Not
		// (num+1)/2, which wraps to 0 for num = 2^64−1 (and then never
		// returns).
		num = num/2 + num&1
		if den > 1 {
			den /= 2
		}
	}
	for {
		u := s.uniformBelow(num)
		if !BernoulliExp(s, u, num) {
			continue
		}
		var v uint64
		for bernoulliExpFrac(s, 1, 1) {
			v++
		}
		hi, x := bits.Mul64(num, v)
		x, c := bits.Add64(x, u, 0)
		if hi != 0 || c != 0 {
			continue // needs v ≥ 2^16: probability below exp(−2^16)
		}
		y := x / den
		if y > math.MaxInt64 {
			continue
		}
		if s.coin() {
			if y == 0 {
				continue
			}
			return -int64(y)
		}
		return int64(y)
	}
}

// MaxDiscreteLaplaceScale is the largest numerator DiscreteLaplace accepts.
const MaxDiscreteLaplaceScale = 1 << 48

// MaxDiscreteGaussianSigma is the largest σ accepted by DiscreteGaussian:
// it keeps the rejection test in 128-bit integer arithmetic.
const MaxDiscreteGaussianSigma = 1 << 28

// DiscreteGaussian returns an exact sample of the discrete Gaussian
// N_Z(0, σ²) on the integers, P(z) ∝ exp(−z²/(2σ²)), for an integer σ in
// [1, MaxDiscreteGaussianSigma] (CKS 2020, Algorithm 3: discrete Laplace
// proposals of scale t = σ+1 accepted with probability
// exp(−(|y| − σ²/t)²/(2σ²))). σ = 0 is treated as 1; σ above the maximum
// panics (a programming error: lattice samplers pick σ in range, and
// silently using less noise would be a privacy bug).
func DiscreteGaussian(s *Source, sigma uint64) int64 {
	if sigma < 1 {
		sigma = 1
	}
	if sigma > MaxDiscreteGaussianSigma {
		panic("noise: DiscreteGaussian σ above MaxDiscreteGaussianSigma")
	}
	t := sigma + 1
	s2 := sigma * sigma // < 2^56
	// γ = (|y|·t − σ²)² / (2σ²t²); den < 2^115.
	dh, dl := bits.Mul64(2*s2, t*t)
	den := u128{dh, dl}
	for {
		y := DiscreteLaplace(s, t, 1)
		ay := uint64(y)
		if y < 0 {
			ay = uint64(-y)
		}
		// a = |y|·t − σ² as a signed 128-bit magnitude.
		ph, pl := bits.Mul64(ay, t)
		p := u128{ph, pl}
		q := u128{0, s2}
		var a u128
		if p.less(q) {
			a = q.sub(p)
		} else {
			a = p.sub(q)
		}
		if a.hi != 0 {
			// |y| ≥ 2^64/t: γ > 2^40; use exact big arithmetic (never
			// reached in practice, kept for exactness).
			if bernoulliExpBig(s, a, den) {
				return y
			}
			continue
		}
		nh, nl := bits.Mul64(a.lo, a.lo)
		if bernoulliExp128(s, u128{nh, nl}, den) {
			return y
		}
	}
}

type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo) }
func (a u128) sub(b u128) u128 {
	lo, br := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, br)
	return u128{hi, lo}
}

// bernoulliExp128 is Bernoulli(exp(−num/den)) for 128-bit num, den > 0.
func bernoulliExp128(s *Source, num, den u128) bool {
	for den.less(num) {
		if !bernoulliExpFrac(s, 1, 1) {
			return false
		}
		num = num.sub(den)
	}
	// γ = num/den ∈ [0, 1]: Bernoulli(γ/k) = Bernoulli(1/k) ∧ Bernoulli(γ).
	k := uint64(1)
	for {
		if !((k == 1 || s.uniformBelow(k) == 0) && s.bernoulli128(num, den)) {
			return k&1 == 1
		}
		k++
	}
}

// bernoulli128 returns true with probability num/den (num ≤ den, den > 0)
// by drawing r uniform in [0, den) and testing r < num, lazily: the top 64
// bits of r usually decide both the rejection (r ≥ den) and the test, and
// the low bits are drawn only on a tie (probability ≈ 2^-63).
func (s *Source) bernoulli128(num, den u128) bool {
	L := 64 + bits.Len64(den.hi)
	if den.hi == 0 {
		return s.uniformBelow(den.lo) < num.lo
	}
	shift := uint(L - 64) // 1..64
	top := func(x u128) uint64 {
		if shift == 64 {
			return x.hi
		}
		return x.hi<<(64-shift) | x.lo>>shift
	}
	topDen, topNum := top(den), top(num)
	for {
		rh := s.Uint64()
		switch {
		case rh > topDen:
			continue // r ≥ den: reject
		case rh < topNum:
			return true // r < num ≤ den
		case rh > topNum && rh < topDen:
			return false // num ≤ r < den
		}
		// Tie on the top bits: draw the low bits and compare exactly.
		var low uint64
		if shift == 64 {
			low = s.Uint64()
		} else {
			low = s.Uint64() & (1<<shift - 1)
		}
		var r u128
		if shift == 64 {
			r = u128{rh, low}
		} else {
			r = u128{rh >> (64 - shift), rh<<shift | low}
		}
		if !r.less(den) {
			continue
		}
		return r.less(num)
	}
}

// bernoulliExpBig is Bernoulli(exp(−a²/den)) with math/big, for the
// astronomically unlikely proposals whose γ overflows 128 bits.
func bernoulliExpBig(s *Source, a, den u128) bool {
	toBig := func(x u128) *big.Int {
		v := new(big.Int).SetUint64(x.hi)
		v.Lsh(v, 64)
		return v.Or(v, new(big.Int).SetUint64(x.lo))
	}
	num := toBig(a)
	num.Mul(num, num)
	d := toBig(den)
	q, r := new(big.Int).QuoRem(num, d, new(big.Int))
	// exp(−γ) = exp(−1)^q · exp(−r/d). q is huge here; each factor e^−1
	// must succeed, so the loop ends at the first failure (almost surely
	// immediately).
	for i := new(big.Int); i.Cmp(q) < 0; i.Add(i, big.NewInt(1)) {
		if !bernoulliExpFrac(s, 1, 1) {
			return false
		}
	}
	if r.Sign() == 0 {
		return true
	}
	k := int64(1)
	for {
		u := s.uniformBelowBig(d)
		a := s.uniformBelow(uint64(k)) == 0 && u.Cmp(r) < 0
		if !a {
			return k&1 == 1
		}
		k++
	}
}

// uniformBelowBig returns a uniform big integer in [0, d), d > 0, by
// drawing d's bit length of random bits and rejecting (acceptance ≥ 1/2).
func (s *Source) uniformBelowBig(d *big.Int) *big.Int {
	n := d.BitLen()
	words := make([]big.Word, (n+63)/64)
	for {
		for i := range words {
			words[i] = big.Word(s.Uint64())
		}
		if r := n % 64; r != 0 {
			words[len(words)-1] &= big.Word(1)<<r - 1
		}
		u := new(big.Int).SetBits(words)
		if u.Cmp(d) < 0 {
			return u
		}
	}
}
