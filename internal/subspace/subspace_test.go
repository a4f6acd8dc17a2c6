package subspace

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// On a diagonal matrix and a basis spanning its three largest coordinates
// (rotated within them), Rayleigh–Ritz recovers those eigenpairs exactly,
// largest first; Dense copies both triangles.
func TestRayleighRitzDiagonal(t *testing.T) {
	d := []float64{1, 7, 3, 9, 5}
	sym := mat.NewSymDense(5, nil)
	for i, v := range d {
		sym.SetSym(i, i, v)
	}
	sym.SetSym(0, 2, 0) // an explicit zero off the diagonal stays zero
	full := Dense(sym)
	// q: an orthonormal basis of span{e1, e3, e4} (items with 7, 9, 5), rotated.
	c, s := math.Cos(0.3), math.Sin(0.3)
	q := mat.NewDense(5, 3, nil)
	q.Set(1, 0, c)
	q.Set(3, 0, s)
	q.Set(1, 1, -s)
	q.Set(3, 1, c)
	q.Set(4, 2, 1)
	vals, vecs := RayleighRitz(full, q, 2)
	if len(vals) != 2 || math.Abs(vals[0]-9) > 1e-12 || math.Abs(vals[1]-7) > 1e-12 {
		t.Fatalf("eigenvalues %v, want [9 7]", vals)
	}
	for k, idx := range []int{3, 1} {
		if math.Abs(math.Abs(vecs.At(idx, k))-1) > 1e-12 {
			t.Errorf("eigenvector %d = %v, want ±e%d", k, mat.Col(nil, k, vecs), idx)
		}
	}
	if r, c := full.Dims(); r != 5 || c != 5 || full.At(3, 3) != 9 {
		t.Errorf("Dense: %d×%d, (3,3) = %g", r, c, full.At(3, 3))
	}
}
