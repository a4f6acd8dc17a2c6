package recovery

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"gonum.org/v1/gonum/mat"
)

// TestOrth: the thin QR basis is orthonormal and spans the input columns.
func TestOrth(t *testing.T) {
	src := noise.Seeded(4)
	for _, dims := range [][2]int{{5, 1}, {40, 7}, {300, 20}, {9, 9}} {
		r, c := dims[0], dims[1]
		X := mat.NewDense(r, c, nil)
		for i := range r {
			for j := range c {
				X.Set(i, j, src.NormFloat64())
			}
		}
		Q := orth(X)
		if qr, qc := Q.Dims(); qr != r || qc != c {
			t.Fatalf("%v: Q is %d × %d", dims, qr, qc)
		}
		var I mat.Dense
		I.Mul(Q.T(), Q)
		for i := range c {
			for j := range c {
				want := 0.0
				if i == j {
					want = 1
				}
				if math.Abs(I.At(i, j)-want) > 1e-10 {
					t.Fatalf("%v: QᵀQ[%d,%d] = %v", dims, i, j, I.At(i, j))
				}
			}
		}
		// X = Q·(QᵀX): the projection reproduces X.
		var C, P mat.Dense
		C.Mul(Q.T(), X)
		P.Mul(Q, &C)
		if !mat.EqualApprox(&P, X, 1e-9) {
			t.Errorf("%v: Q does not span X", dims)
		}
	}
}

func TestRecoverBadInput(t *testing.T) {
	m, err := ratings.FromCSR(ratings.Sequential(2), ratings.Sequential(2), 2, []int64{0, 1, 2}, []int32{0, 1}, []float32{1, 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCleanProblem(m, ldp.Scale{Min: 5, Max: 1}); err == nil {
		t.Error("NewCleanProblem accepted min > max")
	}
	p, err := NewCleanProblem(m, ldp.Scale{Min: 1, Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Recover(context.Background(), p, Options{Debias: true, LambdaRule: "guess"}); err == nil {
		t.Error("Recover accepted an unknown λ rule")
	}
	if _, err := ParseLambdaRule("noise-norm"); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Recover(ctx, p, Options{Debias: true, Lambda: 1e-6}); err == nil {
		t.Error("Recover ignored a cancelled context")
	}
}
