package noise

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"
)

// chiSquareOK tests observed counts against expected probabilities
// (bins must cover the support; expected counts ≥ 5 by construction of the
// callers' bins) at significance 1e-6: false-failure rate 1e-6.
func chiSquareOK(t *testing.T, name string, counts []int, probs []float64, n int) {
	t.Helper()
	var x2 float64
	for i := range counts {
		e := probs[i] * float64(n)
		d := float64(counts[i]) - e
		x2 += d * d / e
	}
	crit := distuv.ChiSquared{K: float64(len(counts) - 1)}.Quantile(1 - 1e-6)
	if x2 > crit {
		t.Errorf("%s: χ² = %.1f > %.1f (df %d)", name, x2, crit, len(counts)-1)
	}
}

// Tier 2: the discrete Laplace matches its pmf (1−q)/(1+q)·q^|z|, q = e^{−1/t}.
func TestDiscreteLaplaceDistribution(t *testing.T) {
	const n = 125000
	for _, c := range []struct{ num, den uint64 }{{1, 1}, {3, 1}, {7, 2}, {1, 3}} {
		s := Seeded(11)
		tt := float64(c.num) / float64(c.den)
		q := math.Exp(-1 / tt)
		pmf := func(z int) float64 { return (1 - q) / (1 + q) * math.Pow(q, math.Abs(float64(z))) }
		// Bins z = −K..K plus the two tails, K chosen so the tails keep ≥ 5 expected.
		K := 0
		for pmf(K+1)/(1-q)*n >= 5 {
			K++
		}
		counts := make([]int, 2*K+3)
		probs := make([]float64, 2*K+3)
		for z := -K; z <= K; z++ {
			probs[z+K+1] = pmf(z)
		}
		tail := pmf(K+1) / (1 - q)
		probs[0], probs[2*K+2] = tail, tail
		for range n {
			z := int(DiscreteLaplace(s, c.num, c.den))
			switch {
			case z < -K:
				counts[0]++
			case z > K:
				counts[2*K+2]++
			default:
				counts[z+K+1]++
			}
		}
		chiSquareOK(t, "discrete Laplace", counts, probs, n)
	}
}

// Tier 2: the discrete Gaussian matches exp(−z²/2σ²)/Σ.
func TestDiscreteGaussianDistribution(t *testing.T) {
	const n = 125000
	for _, sigma := range []uint64{1, 3, 10} {
		s := Seeded(12)
		sg := float64(sigma)
		var norm float64
		for z := -40 * int(sigma); z <= 40*int(sigma); z++ {
			norm += math.Exp(-float64(z*z) / (2 * sg * sg))
		}
		pmf := func(z int) float64 { return math.Exp(-float64(z*z)/(2*sg*sg)) / norm }
		K := 0
		for {
			var tail float64
			for z := K + 1; z < 40*int(sigma); z++ {
				tail += pmf(z)
			}
			if tail*n < 5 {
				break
			}
			K++
		}
		K--
		counts := make([]int, 2*K+3)
		probs := make([]float64, 2*K+3)
		var in float64
		for z := -K; z <= K; z++ {
			probs[z+K+1] = pmf(z)
			in += pmf(z)
		}
		probs[0], probs[2*K+2] = (1-in)/2, (1-in)/2
		for range n {
			z := int(DiscreteGaussian(s, sigma))
			switch {
			case z < -K:
				counts[0]++
			case z > K:
				counts[2*K+2]++
			default:
				counts[z+K+1]++
			}
		}
		chiSquareOK(t, "discrete Gaussian", counts, probs, n)
	}
}

// Tier 2: moments at the lattice scales actually used (t ≈ 2^40, σ ≈ 2^28).
// Tolerance 4.42·sd/√n: false-failure rate ≈ 1e-5 per check.
func TestLatticeScaleMoments(t *testing.T) {
	const n = 125000
	s := Seeded(13)
	// Discrete Laplace with t = 2^40: |Z|/t ≈ Exp(1): mean 1, sd 1.
	var m float64
	for range n {
		m += math.Abs(float64(DiscreteLaplace(s, 1<<40, 1))) / (1 << 40)
	}
	m /= n
	if math.Abs(m-1) > 4.42/math.Sqrt(n) {
		t.Errorf("E|Z|/t = %g, want 1", m)
	}
	// Discrete Gaussian with σ = 2^28: Z²/σ² has mean 1, sd √2.
	var v float64
	for range n {
		z := float64(DiscreteGaussian(s, 1<<28)) / (1 << 28)
		v += z * z
	}
	v /= n
	if math.Abs(v-1) > 4.42*math.Sqrt2/math.Sqrt(n) {
		t.Errorf("E Z²/σ² = %g, want 1", v)
	}
}

// Tier 2: Bernoulli(exp(−γ)) frequencies, tolerance 4.42 sd (false failure ≈ 1e-5 each).
func TestBernoulliExp(t *testing.T) {
	const n = 125000
	s := Seeded(14)
	for _, c := range []struct{ num, den uint64 }{{0, 1}, {1, 3}, {1, 1}, {5, 2}, {7, 1}} {
		k := 0
		for range n {
			if BernoulliExp(s, c.num, c.den) {
				k++
			}
		}
		p := math.Exp(-float64(c.num) / float64(c.den))
		if got := float64(k) / n; math.Abs(got-p) > 4.42*math.Sqrt(p*(1-p)/n)+1e-12 {
			t.Errorf("Bernoulli(exp(−%d/%d)) frequency %g, want %g", c.num, c.den, got, p)
		}
	}
	// The 128-bit path: γ = num/den with huge den equals the small-number case.
	k := 0
	for range n {
		if bernoulliExp128(s, u128{1, 0}, u128{3, 0}) { // γ = 1/3
			k++
		}
	}
	p := math.Exp(-1.0 / 3)
	if got := float64(k) / n; math.Abs(got-p) > 4.42*math.Sqrt(p*(1-p)/n) {
		t.Errorf("128-bit Bernoulli(exp(−1/3)) frequency %g, want %g", got, p)
	}
}

// Tier 3: every output is a multiple of the grid, for neighbouring inputs
// 0 and 1 and for awkward inputs.
func TestLatticeOutputs(t *testing.T) {
	s := Seeded(15)
	for _, scale := range []float64{1, 0.37, 1e-6, 1234.5} {
		g := LaplaceGrid(scale)
		if g < scale*0x1p-40 || g >= scale*0x1p-39 {
			t.Errorf("LaplaceGrid(%g) = %g outside [scale·2^-40, scale·2^-39)", scale, g)
		}
		for _, x := range []float64{0, 1, 0.1, -math.Pi, 1e300} {
			for range 1000 {
				y := SnapLaplace(s, x, scale)
				if y/g != math.Trunc(y/g) {
					t.Fatalf("SnapLaplace(%g, %g) = %g is not a multiple of %g", x, scale, y, g)
				}
				y = SnapGaussian(s, x, scale)
				if gg := GaussianGrid(scale); y/gg != math.Trunc(y/gg) {
					t.Fatalf("SnapGaussian(%g, %g) = %g is not a multiple of %g", x, scale, y, gg)
				}
			}
		}
		if b := EffectiveLaplaceScale(scale); b < scale || b > scale+g {
			t.Errorf("effective scale %g for %g", b, scale)
		}
	}
	if !math.IsNaN(SnapLaplace(s, 1, 0)) || !math.IsNaN(SnapGaussian(s, 1, math.Inf(1))) {
		t.Error("invalid scale must not release the input")
	}
	x := []float64{1, 2, 3}
	AddLaplace(s, x, -1)
	for _, v := range x {
		if !math.IsNaN(v) {
			t.Error("AddLaplace with a negative scale released a value")
		}
	}
}

// Reproducibility: seeded streams repeat, and whole-matrix noise does not
// depend on the number of cores.
func TestReproducible(t *testing.T) {
	if Secure().Reproducible() || !Seeded(1).Reproducible() || !Seeded(1).Split().Reproducible() || Secure().Split().Reproducible() {
		t.Fatal("Reproducible flag wrong")
	}
	run := func(procs int) []float64 {
		old := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(old)
		x := make([]float64, 100000)
		AddLaplace(Seeded(7), x, 1)
		AddGaussian(Seeded(8), x, 1)
		return x
	}
	if !slices.Equal(run(1), run(2)) {
		t.Error("parallel noise depends on GOMAXPROCS")
	}
	a, b := make([]float64, 10), make([]float64, 10)
	AddLaplace(Secure(), a, 1)
	AddLaplace(Secure(), b, 1)
	if slices.Equal(a, b) {
		t.Error("two secure sources gave the same noise")
	}
}

func TestAddSymGaussian(t *testing.T) {
	m := mat.NewSymDense(300, nil)
	AddSymGaussian(Seeded(3), m, 2)
	var sum, sum2 float64
	n := 0
	for i := range 300 {
		for j := i; j < 300; j++ {
			v := m.At(i, j)
			if v != m.At(j, i) {
				t.Fatal("not symmetric")
			}
			sum += v
			sum2 += v * v
			n++
		}
	}
	// Var estimate of N(0, 4): relative sd of the sample variance is √(2/n);
	// 4.42 sd tolerance (false failure ≈ 1e-5).
	if v := sum2 / float64(n); math.Abs(v/4-1) > 4.42*math.Sqrt(2/float64(n)) {
		t.Errorf("variance %g, want 4", v)
	}
}

func TestL2Laplace(t *testing.T) {
	// ‖κ‖ ~ Gamma(d, scale): mean d·scale, sd √d·scale; 4.42 sd/√n (≈1e-5).
	const n, d, scale = 20000, 4, 0.5
	s := Seeded(4)
	var m float64
	x := make([]float64, d)
	for range n {
		clear(x)
		AddL2Laplace(s, x, scale)
		m += math.Sqrt(mat.Dot(mat.NewVecDense(d, x), mat.NewVecDense(d, x)))
	}
	m /= n
	if math.Abs(m-d*scale) > 4.42*math.Sqrt(d)*scale/math.Sqrt(n) {
		t.Errorf("mean radius %g, want %g", m, d*scale)
	}
}

// The lazy 128-bit Bernoulli(num/den): frequencies for ratios whose top
// bits tie and whose dens span the shift range (4.42 sd, ≈1e-5 each).
func TestBernoulli128(t *testing.T) {
	const n = 125000
	s := Seeded(16)
	for _, c := range []struct{ num, den u128 }{
		{u128{0, 1}, u128{0, 3}},
		{u128{1, 0}, u128{3, 0}},
		{u128{1 << 40, 5}, u128{1<<40 + 1, 0}},     // tie on the top bits
		{u128{1 << 62, 0}, u128{1<<63 + 1<<62, 7}}, // shift 64
		{u128{0, 1 << 63}, u128{1, 0}},             // 1/2 with den = 2^64
	} {
		k := 0
		for range n {
			if s.bernoulli128(c.num, c.den) {
				k++
			}
		}
		p := (float64(c.num.hi)*0x1p64 + float64(c.num.lo)) / (float64(c.den.hi)*0x1p64 + float64(c.den.lo))
		if got := float64(k) / n; math.Abs(got-p) > 4.42*math.Sqrt(p*(1-p)/n)+1e-9 {
			t.Errorf("Bernoulli(%v/%v) frequency %g, want %g", c.num, c.den, got, p)
		}
	}
	// Exhaustive small check of the tie path: num = den means always true.
	for range 1000 {
		if !s.bernoulli128(u128{5, 9}, u128{5, 9}) {
			t.Fatal("Bernoulli(1) returned false")
		}
	}
}

// Large scales are sampled exactly up to MaxDiscreteLaplaceScale (an
// earlier version coarsened scales above 2^48 to 2^48: E|Z|/t was 0.25 at
// t = 2^50). |Z|/t ≈ Exp(1) (mean 1, sd 1); tolerance 4.42·sd/√n, false
// failure ≈ 1e-5 per scale. The bounded-time sampler costs ≈ 10 µs per
// sample, so it gets a smaller n (same tolerance rule).
func TestDiscreteLaplaceLargeScales(t *testing.T) {
	for _, c := range []struct {
		name     string
		num, den uint64
		n        int
		sample   func(s *Source, num, den uint64) int64
	}{
		{"exact 2^50", 1 << 50, 1, 125000, DiscreteLaplace},
		{"exact 2^52 (the maximum)", 1 << 52, 1, 125000, DiscreteLaplace},
		{"exact (2^64−1)/2^13", ^uint64(0), 1 << 13, 125000, DiscreteLaplace},
		{"exact 2^40 (lattice)", 1 << 40, 1, 125000, DiscreteLaplace},
		{"bounded-time 2^50", 1 << 50, 1, 20000, func(s *Source, num, _ uint64) int64 { return DiscreteLaplaceFixedTime(s, num) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Seeded(15)
			scale := float64(c.num) / float64(c.den)
			var m float64
			for range c.n {
				m += math.Abs(float64(c.sample(s, c.num, c.den))) / scale
			}
			m /= float64(c.n)
			if math.Abs(m-1) > 4.42/math.Sqrt(float64(c.n)) {
				t.Errorf("E|Z|/t = %g, want 1", m)
			}
		})
	}
}

// Scales above MaxDiscreteLaplaceScale are refused, never sampled with less
// noise: CheckDiscreteLaplaceScale errs with ErrScaleTooLarge and both
// samplers panic.
func TestDiscreteLaplaceRefusesHugeScales(t *testing.T) {
	for _, c := range []struct {
		num, den uint64
		ok       bool
	}{
		{1 << 52, 1, true},
		{1<<52 + 1, 1, false},
		{1 << 53, 2, true},
		{1<<53 + 1, 2, false},
		{^uint64(0), 1, false},
		{^uint64(0), 1 << 12, true},
		{^uint64(0), 1<<12 - 1, false},
		{1, 0, false},
	} {
		err := CheckDiscreteLaplaceScale(c.num, c.den)
		if (err == nil) != c.ok {
			t.Errorf("CheckDiscreteLaplaceScale(%d, %d) = %v", c.num, c.den, err)
		}
		if !c.ok && c.den != 0 && !errors.Is(err, ErrScaleTooLarge) {
			t.Errorf("CheckDiscreteLaplaceScale(%d, %d) = %v, want ErrScaleTooLarge", c.num, c.den, err)
		}
		if c.ok || c.den == 0 {
			continue
		}
		panics := func(f func()) (p bool) {
			defer func() { p = recover() != nil }()
			f()
			return false
		}
		if !panics(func() { DiscreteLaplace(Seeded(1), c.num, c.den) }) {
			t.Errorf("DiscreteLaplace(%d, %d) sampled a refused scale", c.num, c.den)
		}
		if c.den == 1 && !panics(func() { DiscreteLaplaceFixedTime(Seeded(1), c.num) }) {
			t.Errorf("DiscreteLaplaceFixedTime(%d) sampled a refused scale", c.num)
		}
	}
}
