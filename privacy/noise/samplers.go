package noise

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// The functions below are the sampler contract solvers use. Each adds noise
// in place so that whole vectors and matrices are perturbed without
// allocation.

// Bernoulli returns true with probability p.
func Bernoulli(s *Source, p float64) bool { return s.Float64() < p }

// Laplace returns one Laplace(0, scale) draw.
func Laplace(s *Source, scale float64) float64 {
	e := s.ExpFloat64()
	if s.Uint64()&1 == 0 {
		return -e * scale
	}
	return e * scale
}

// AddLaplace adds i.i.d. Laplace(0, scale) noise to every element of x.
func AddLaplace(s *Source, x []float64, scale float64) {
	for i := range x {
		x[i] += Laplace(s, scale)
	}
}

// AddGaussian adds i.i.d. N(0, sigma²) noise to every element of x.
func AddGaussian(s *Source, x []float64, sigma float64) {
	for i := range x {
		x[i] += sigma * s.NormFloat64()
	}
}

// AddSymGaussian adds a symmetric Gaussian matrix to m: each entry on or
// above the diagonal gets an independent N(0, sigma²) draw, mirrored below.
func AddSymGaussian(s *Source, m *mat.SymDense, sigma float64) {
	n := m.SymmetricDim()
	for i := range n {
		for j := i; j < n; j++ {
			m.SetSym(i, j, m.At(i, j)+sigma*s.NormFloat64())
		}
	}
}

// Gamma returns a Gamma(shape, scale) draw (Marsaglia–Tsang).
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
// ∝ exp(−‖κ‖₂/scale) (scale = Δ/ε): radius ~ Gamma(d, scale), uniform direction.
func AddL2Laplace(s *Source, x []float64, scale float64) {
	d := len(x)
	if d == 0 {
		return
	}
	dir := make([]float64, d)
	Sphere(s, dir)
	r := Gamma(s, float64(d), scale)
	for i := range x {
		x[i] += r * dir[i]
	}
}
