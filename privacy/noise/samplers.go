package noise

import (
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/mat"
)

// The functions below are the sampler contract solvers use. Each adds noise
// in place so that whole vectors and matrices are perturbed without
// allocation.
//
// Laplace and Gaussian noise are released on a lattice (Mironov 2012; the
// approach of Google's DP library): the input is rounded to the nearest
// multiple of a power of two g, and g times an exact integer sample
// (discrete Laplace or discrete Gaussian, see exact.go) is added. The
// output is therefore (k+Z)·g with k, Z integers — the set of reachable
// outputs does not depend on the input, which defeats the floating-point
// attacks on textbook samplers.
//
// Accounting for the rounding. Rounding moves each coordinate by at most
// g/2, so for neighbours x, x′ that differ in at most m coordinates the
// rounded inputs differ by at most ‖x − x′‖₁ + m·g in ℓ1 and by at most
// ‖x − x′‖₂ + √m·g in ℓ2 (integer lattice steps: |round(a/g) − round(b/g)|
// ≤ |a − b|/g + 1). Hence:
//   - AddLaplace with scale b on a query of ℓ1 sensitivity Δ is
//     ε = (Δ + m·g)/b-DP with g = LaplaceGrid(b) ≤ b·2^-39, i.e. at most
//     m·2^-39 above the textbook Δ/b;
//   - AddGaussian with σ on a query of ℓ2 sensitivity Δ is
//     ρ = (Δ + √m·g)²/(2σ²)-zCDP with g = GaussianGrid(σ) ≤ σ·2^-27
//     (CKS 2020: the discrete Gaussian with integer shifts is zCDP with the
//     continuous ρ, and zCDP composes over coordinates).
// The mechanism package does this accounting exactly; solvers should use
// it (or these formulas, through mechanism.LaplaceEpsilon /
// mechanism.GaussianRho) rather than Δ/b.
//
// The actual noise scale is never below the requested one: the integer
// scale is the requested scale divided by g, rounded up.
//
// Non-finite inputs: NaN is rounded to 0 and ±Inf (and anything beyond
// ±2^62·g) saturates; mechanisms reject such inputs before they get here.
// A scale that is not finite or is below 2^-960 releases NaN, never the
// input.

// Bernoulli returns true with probability p. The probability realised is
// RealizedBernoulli(p) = ⌈p·2^53⌉/2^53 exactly (within 2^-53 of p).
func Bernoulli(s *Source, p float64) bool { return s.Float64() < p }

// RealizedBernoulli is the exact probability with which Bernoulli(s, p)
// returns true, for accounting: ⌈p·2^53⌉/2^53 clamped to [0, 1].
func RealizedBernoulli(p float64) float64 {
	if !(p > 0) {
		return 0
	}
	if p >= 1 {
		return 1
	}
	return math.Ceil(p*(1<<53)) / (1 << 53)
}

// LaplaceGrid returns the lattice spacing used for Laplace noise of the
// given scale: the smallest power of two ≥ scale·2^-40.
func LaplaceGrid(scale float64) float64 { return gridAbove(scale, 40) }

// GaussianGrid returns the lattice spacing used for Gaussian noise of
// standard deviation sigma: the smallest power of two ≥ σ·2^-28 (so the
// integer σ stays within MaxDiscreteGaussianSigma).
func GaussianGrid(sigma float64) float64 { return gridAbove(sigma, 28) }

// gridAbove returns the smallest power of two ≥ x·2^-bits (x > 0, finite).
func gridAbove(x float64, bits int) float64 {
	frac, exp := math.Frexp(x) // x = frac·2^exp, frac ∈ [0.5, 1)
	if frac == 0.5 {
		return math.Ldexp(1, exp-1-bits)
	}
	return math.Ldexp(1, exp-bits)
}

// laplaceLattice returns the grid and the integer scale t = ⌈scale/g⌉
// (t ∈ [2^39, 2^40]).
func laplaceLattice(scale float64) (g float64, t uint64) {
	g = LaplaceGrid(scale)
	return g, uint64(math.Ceil(scale / g))
}

// gaussianLattice returns the grid and the integer σ = ⌈σ/g⌉ ≤ 2^28.
func gaussianLattice(sigma float64) (g float64, si uint64) {
	g = GaussianGrid(sigma)
	return g, uint64(math.Ceil(sigma / g))
}

// EffectiveLaplaceScale is the scale of the noise AddLaplace actually adds
// for a requested scale (≥ the request, by at most one lattice step).
func EffectiveLaplaceScale(scale float64) float64 {
	g, t := laplaceLattice(scale)
	return float64(t) * g
}

// EffectiveGaussianSigma is the σ of the noise AddGaussian actually adds.
func EffectiveGaussianSigma(sigma float64) float64 {
	g, si := gaussianLattice(sigma)
	return float64(si) * g
}

const maxLatticeIndex = 1 << 62

// nanValue is what a sampler releases for an invalid scale.
var nanValue = math.NaN()

// latticeIndex rounds x/g to the nearest integer, NaN to 0, saturating at
// ±2^62 (a 1-Lipschitz map, so it never increases sensitivity).
func latticeIndex(x, g float64) int64 {
	v := math.Round(x / g)
	switch {
	case math.IsNaN(v):
		return 0
	case v >= maxLatticeIndex:
		return maxLatticeIndex
	case v <= -maxLatticeIndex:
		return -maxLatticeIndex
	}
	return int64(v)
}

// validScale accepts finite scales ≥ 2^-960 (so that the grid, at least
// scale·2^-40, stays a normal float).
func validScale(scale float64) bool { return scale >= 0x1p-960 && !math.IsInf(scale, 0) }

// Laplace returns one Laplace noise value of the given scale, on the
// lattice LaplaceGrid(scale): g·Z with Z discrete Laplace. To release x
// plus noise securely use SnapLaplace (which also rounds x), not x+Laplace.
// A non-positive or non-finite scale returns 0.
func Laplace(s *Source, scale float64) float64 { return SnapLaplace(s, 0, scale) }

// SnapLaplace returns x rounded to the lattice LaplaceGrid(scale) plus
// lattice Laplace noise of (at least) the given scale. A non-positive or
// non-finite scale returns NaN (no release without noise).
func SnapLaplace(s *Source, x, scale float64) float64 {
	if !validScale(scale) {
		return math.NaN()
	}
	g, t := laplaceLattice(scale)
	return float64(latticeIndex(x, g)+DiscreteLaplace(s, t, 1)) * g
}

// SnapGaussian returns x rounded to the lattice GaussianGrid(sigma) plus
// lattice Gaussian noise of (at least) standard deviation sigma.
func SnapGaussian(s *Source, x, sigma float64) float64 {
	if !validScale(sigma) {
		return math.NaN()
	}
	g, si := gaussianLattice(sigma)
	return float64(latticeIndex(x, g)+DiscreteGaussian(s, si)) * g
}

// AddLaplace replaces every element of x by SnapLaplace(x[i], scale): the
// secure lattice Laplace release (accounting above). Long slices are
// split over GOMAXPROCS goroutines in fixed chunks, each with its own
// stream from s.Split(), so the result for a seeded source does not depend
// on the number of cores.
func AddLaplace(s *Source, x []float64, scale float64) {
	if !validScale(scale) {
		fill(x, math.NaN())
		return
	}
	g, t := laplaceLattice(scale)
	parallel(s, len(x), func(src *Source, lo, hi int) {
		for i := lo; i < hi; i++ {
			x[i] = float64(latticeIndex(x[i], g)+DiscreteLaplace(src, t, 1)) * g
		}
	})
}

// AddGaussian replaces every element of x by SnapGaussian(x[i], sigma):
// the secure lattice Gaussian release (accounting above), in parallel as
// AddLaplace.
func AddGaussian(s *Source, x []float64, sigma float64) {
	if !validScale(sigma) {
		fill(x, math.NaN())
		return
	}
	g, si := gaussianLattice(sigma)
	parallel(s, len(x), func(src *Source, lo, hi int) {
		for i := lo; i < hi; i++ {
			x[i] = float64(latticeIndex(x[i], g)+DiscreteGaussian(src, si)) * g
		}
	})
}

// AddSymGaussian adds a symmetric lattice Gaussian matrix to m: each entry
// on or above the diagonal is released with SnapGaussian (independent
// draws) and mirrored below. For accounting, m counts n(n+1)/2
// coordinates.
func AddSymGaussian(s *Source, m *mat.SymDense, sigma float64) {
	n := m.SymmetricDim()
	if n == 0 {
		return
	}
	raw := m.RawSymmetric()
	if !validScale(sigma) {
		for i := range n {
			fill(raw.Data[i*raw.Stride+i:i*raw.Stride+n], math.NaN())
		}
		return
	}
	g, si := gaussianLattice(sigma)
	// Rows of the upper triangle, balanced by element count in chunks.
	parallel(s, n, func(src *Source, lo, hi int) {
		for i := lo; i < hi; i++ {
			row := raw.Data[i*raw.Stride+i : i*raw.Stride+n]
			for j := range row {
				row[j] = float64(latticeIndex(row[j], g)+DiscreteGaussian(src, si)) * g
			}
		}
	}, chunkRows(n))
}

func fill(x []float64, v float64) {
	for i := range x {
		x[i] = v
	}
}

// chunkElems is the number of elements each parallel chunk handles.
const chunkElems = 1 << 14

// chunkRows returns a row chunk size for an n×n upper triangle that gives
// chunks of roughly chunkElems elements.
func chunkRows(n int) int {
	r := chunkElems / (n/2 + 1)
	if r < 1 {
		r = 1
	}
	return r
}

// parallel runs f over [0, n) in fixed chunks (chunkElems, or the given
// size), each with its own stream split from s in chunk order, on up to
// GOMAXPROCS goroutines. A single chunk runs on s itself.
func parallel(s *Source, n int, f func(src *Source, lo, hi int), chunk ...int) {
	size := chunkElems
	if len(chunk) > 0 {
		size = chunk[0]
	}
	if n <= size {
		f(s, 0, n)
		return
	}
	nc := (n + size - 1) / size
	srcs := make([]*Source, nc)
	for c := range srcs {
		srcs[c] = s.Split()
	}
	workers := min(runtime.GOMAXPROCS(0), nc)
	var wg sync.WaitGroup
	next := make(chan int, nc)
	for c := range nc {
		next <- c
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for c := range next {
				f(srcs[c], c*size, min(n, (c+1)*size))
			}
		})
	}
	wg.Wait()
}

// Gamma returns a Gamma(shape, scale) draw (Marsaglia–Tsang). It is a
// floating-point sampler: use it for the ℓ2 Laplace radius and
// non-privacy purposes; it has no lattice protection.
func Gamma(s *Source, shape, scale float64) float64 {
	if shape < 1 {
		u := s.Float64()
		return Gamma(s, shape+1, scale) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := s.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := s.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v * scale
		}
	}
}

// Sphere fills dst with a uniform direction on the unit sphere.
func Sphere(s *Source, dst []float64) {
	for {
		var n2 float64
		for i := range dst {
			dst[i] = s.NormFloat64()
			n2 += dst[i] * dst[i]
		}
		if n2 > 0 {
			n := math.Sqrt(n2)
			for i := range dst {
				dst[i] /= n
			}
			return
		}
	}
}

// AddL2Laplace adds the ℓ2 "vector Laplace" noise with density
// ∝ exp(−‖κ‖₂/scale) (scale = Δ₂/ε): radius ~ Gamma(d, scale), uniform
// direction. The result is rounded to the lattice LaplaceGrid(scale) so
// that low-order float bits of x are not released, but unlike AddLaplace
// this sampler is continuous (Gamma and normal draws in floating point):
// its guarantee is the textbook one for exact real arithmetic, and
// docs/PRIVACY.md lists it as not hardened against floating-point attacks.
func AddL2Laplace(s *Source, x []float64, scale float64) {
	d := len(x)
	if d == 0 {
		return
	}
	if !validScale(scale) {
		fill(x, math.NaN())
		return
	}
	dir := make([]float64, d)
	Sphere(s, dir)
	r := Gamma(s, float64(d), scale)
	g := LaplaceGrid(scale)
	for i := range x {
		x[i] = float64(latticeIndex(x[i]+r*dir[i], g)) * g
	}
}
