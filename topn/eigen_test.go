package topn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// spikedWigner is a planted rank-k PSD matrix (eigenvalues spikes) plus a
// symmetric Gaussian noise matrix of entry standard deviation sigma: the
// shape of dp-ease's noised Gram.
func spikedWigner(m int, spikes []float64, sigma float64, seed uint64) *mat.SymDense {
	r := rand.New(rand.NewPCG(seed, 3))
	u := mat.NewDense(m, len(spikes), nil)
	for i := range m {
		for k := range spikes {
			u.Set(i, k, r.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(u)
	var q mat.Dense
	qr.QTo(&q)
	g := mat.NewSymDense(m, nil)
	for i := range m {
		for j := i; j < m; j++ {
			var s float64
			for k, l := range spikes {
				s += l * q.At(i, k) * q.At(j, k)
			}
			g.SetSym(i, j, s+sigma*r.NormFloat64())
		}
	}
	return g
}

// TestTopEigenMatchesDense compares topEigen's leading eigenpairs with
// gonum's dense EigenSym on a spiked matrix of dp-ease's shape: the
// eigenvalues above the noise's spectral edge to 1e-6 relative, their
// eigenvectors to 1e-4 in angle (deterministic: fixed seeds).
func TestTopEigenMatchesDense(t *testing.T) {
	const m, sigma = 300, 1.0
	edge := 2 * sigma * math.Sqrt(m)
	spikes := []float64{40 * edge, 20 * edge, 10 * edge, 6 * edge, 4 * edge, 3 * edge}
	g := spikedWigner(m, spikes, sigma, 11)
	var eig mat.EigenSym
	if !eig.Factorize(g, true) {
		t.Fatal("dense eigendecomposition failed")
	}
	want := eig.Values(nil)
	var wv mat.Dense
	eig.VectorsTo(&wv)
	for _, r := range []int{4, 6, 16} {
		vals, vecs := topEigen(g, r, rand.New(rand.NewPCG(1, 2)))
		for k := range min(r, len(spikes)) {
			d := want[m-1-k]
			if math.Abs(vals[k]-d) > 1e-6*d {
				t.Errorf("r = %d: eigenvalue %d = %.8g, dense %.8g", r, k, vals[k], d)
			}
			var dot float64
			for i := range m {
				dot += vecs.At(i, k) * wv.At(i, m-1-k)
			}
			if 1-math.Abs(dot) > 1e-4 {
				t.Errorf("r = %d: eigenvector %d: |cos| = %.8f with the dense one", r, k, math.Abs(dot))
			}
		}
	}
}

// TestOrthIllConditioned: CholeskyQR2 returns orthonormal columns for a
// block whose columns span magnitudes 1 … 1e6 (the subspace iteration's
// first products).
func TestOrthIllConditioned(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	y := mat.NewDense(200, 20, nil)
	for i := range 200 {
		for j := range 20 {
			y.Set(i, j, r.NormFloat64()*math.Pow(10, float64(j)*6/19))
		}
	}
	orth(y)
	var yy mat.Dense
	yy.Mul(y.T(), y)
	for i := range 20 {
		for j := range 20 {
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(yy.At(i, j)-want) > 1e-10 {
				t.Fatalf("QᵀQ[%d,%d] = %g, want %g", i, j, yy.At(i, j), want)
			}
		}
	}
}
