package mf

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/ratings"
)

// lowRank is a synthetic problem whose truth is known: ratings μ + b_u +
// b_i + u·v + N(0, noise²) for a fraction obs of the entries, split into
// train and test entries.
type lowRank struct {
	train, test *Problem
	truth       *Factors
}

func newLowRank(t testing.TB, users, items, rank int, obs, noise float64, seed uint64) *lowRank {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	f := &Factors{Rank: rank, Mean: 3, U: make([]float64, users*rank), V: make([]float64, items*rank),
		UserBias: make([]float64, users), ItemBias: make([]float64, items)}
	for i := range f.U {
		f.U[i] = r.NormFloat64() / math.Sqrt(float64(rank))
	}
	for i := range f.V {
		f.V[i] = r.NormFloat64()
	}
	for i := range f.UserBias {
		f.UserBias[i] = 0.3 * r.NormFloat64()
	}
	for i := range f.ItemBias {
		f.ItemBias[i] = 0.3 * r.NormFloat64()
	}
	build := func(keep func() bool) *Problem {
		rowPtr := make([]int64, users+1)
		var cols []int32
		var vals []float32
		for u := range users {
			for i := range items {
				if keep() {
					cols = append(cols, int32(i))
					vals = append(vals, float32(f.Predict(int32(u), int32(i))+noise*r.NormFloat64()))
				}
			}
			rowPtr[u+1] = int64(len(cols))
		}
		m, err := ratings.FromCSR(ratings.Sequential(users), ratings.Sequential(items), items, rowPtr, cols, vals, nil)
		if err != nil {
			t.Fatal(err)
		}
		return FromMatrix(m)
	}
	// Decide each entry once: observed in train, in test, or not at all.
	state := make([]uint8, users*items)
	for e := range state {
		switch x := r.Float64(); {
		case x < obs*0.9:
			state[e] = 1
		case x < obs:
			state[e] = 2
		}
	}
	e := 0
	train := build(func() bool { e++; return state[e-1] == 1 })
	e = 0
	test := build(func() bool { e++; return state[e-1] == 2 })
	return &lowRank{train: train, test: test, truth: f}
}

// Both solvers recover a rank-3 matrix seen at 30 % of its entries with
// noise σ = 0.1: the held-out RMSE is within a few σ of the noise floor.
// Fixed seeds, so the test is deterministic; the measured values (0.107
// for both) are well under the thresholds.
func TestSolversRecoverLowRank(t *testing.T) {
	lr := newLowRank(t, 400, 300, 3, 0.3, 0.1, 1)
	if got := lr.truth.RMSE(lr.test, 0, 0); got > 0.12 {
		t.Fatalf("truth RMSE %.3f: the generator is broken", got)
	}
	cases := []struct {
		name string
		run  func() (*Factors, error)
		max  float64
	}{
		{"als", func() (*Factors, error) {
			r := rand.New(rand.NewPCG(2, 3))
			return ALS(context.Background(), lr.train, ALSOptions{Rank: 5, Lambda: 0.01, BiasLambda: 0.001, Iterations: 15, InitScale: 0.1, Workers: 2, Norm: r.NormFloat64})
		}, 0.15},
		{"sgd", func() (*Factors, error) {
			return SGD(context.Background(), lr.train, SGDOptions{Rank: 5, Lambda: 0.01, BiasLambda: 0.001, LearnRate: 0.1, Iterations: 60, InitScale: 0.1, Workers: 2, Rand: rand.New(rand.NewPCG(2, 3))})
		}, 0.15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.run()
			if err != nil {
				t.Fatal(err)
			}
			got := f.RMSE(lr.test, 0, 0)
			t.Logf("%s: held-out RMSE %.4f (noise 0.1; predicting the mean: %.3f)", tc.name, got, (&Factors{Rank: 0, Mean: lr.train.Mean(), UserBias: make([]float64, 400), ItemBias: make([]float64, 300)}).RMSE(lr.test, 0, 0))
			if got > tc.max {
				t.Errorf("%s: held-out RMSE %.4f > %.2f", tc.name, got, tc.max)
			}
		})
	}
}

// SGD's result depends on the seed only, not on the number of workers
// (the strata make each row's and column's block order a function of the
// seed).
func TestSGDRepeatableAcrossWorkers(t *testing.T) {
	lr := newLowRank(t, 120, 90, 2, 0.3, 0.1, 3)
	run := func(w int) *Factors {
		f, err := SGD(context.Background(), lr.train, SGDOptions{Rank: 4, Lambda: 0.02, LearnRate: 0.1, Iterations: 5, InitScale: 0.1, Workers: w, Bins: 7, Rand: rand.New(rand.NewPCG(9, 9))})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := run(1)
	// Several workers run the blocks in whatever order the dependencies
	// allow (no barrier between strata); the result must not change.
	for _, w := range []int{2, 3, 8} {
		b := run(w)
		for i := range a.V {
			if a.V[i] != b.V[i] {
				t.Fatalf("V[%d] differs: %v (1 worker) vs %v (%d workers)", i, a.V[i], b.V[i], w)
			}
		}
		for i := range a.U {
			if a.U[i] != b.U[i] {
				t.Fatalf("U[%d] differs: %v (1 worker) vs %v (%d workers)", i, a.U[i], b.U[i], w)
			}
		}
	}
}

// gramAdd and cholSolve against gonum on random systems.
func TestKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, k := range []int{1, 3, 4, 7, 33} {
		n := 2*k + 5
		f := make([]float64, n*k)
		for i := range f {
			f[i] = r.NormFloat64()
		}
		idx := make([]int32, n)
		w := make([]float64, n)
		for i := range idx {
			idx[i] = int32(r.IntN(n))
			w[i] = r.Float64()
		}
		lda := k + 2
		a := make([]float64, lda*lda)
		z := make([]float64, n)
		for i := range z {
			z[i] = r.NormFloat64()
		}
		h := make([]float64, k)
		gramAdd(a, lda, k, f, idx, w, z, h, nil)
		want := mat.NewSymDense(k, nil)
		wantH := make([]float64, k)
		for t, j := range idx {
			x := mat.NewVecDense(k, f[int(j)*k:int(j)*k+k])
			want.SymRankOne(want, w[t], x)
			for c := range k {
				wantH[c] += w[t] * z[t] * f[int(j)*k+c]
			}
		}
		for c := range k {
			if d := math.Abs(h[c] - wantH[c]); d > 1e-9*(1+math.Abs(wantH[c])) {
				t.Fatalf("k=%d: h[%d] = %v, want %v", k, c, h[c], wantH[c])
			}
		}
		for p := range k {
			for q := p; q < k; q++ {
				if d := math.Abs(a[p*lda+q] - want.At(p, q)); d > 1e-9*(1+math.Abs(want.At(p, q))) {
					t.Fatalf("k=%d: gram[%d,%d] = %v, want %v", k, p, q, a[p*lda+q], want.At(p, q))
				}
			}
		}
		// A = G + I is positive definite; solve against gonum.
		sys := make([]float64, k*k)
		for p := range k {
			for q := p; q < k; q++ {
				sys[p*k+q] = want.At(p, q)
			}
			sys[p*k+p]++
		}
		spd := mat.NewSymDense(k, nil)
		spd.AddSym(want, eye(k))
		b := make([]float64, k)
		for i := range b {
			b[i] = r.NormFloat64()
		}
		var ch mat.Cholesky
		if !ch.Factorize(spd) {
			t.Fatal("gonum: not positive definite")
		}
		x := mat.NewVecDense(k, nil)
		if err := ch.SolveVecTo(x, mat.NewVecDense(k, append([]float64(nil), b...))); err != nil {
			t.Fatal(err)
		}
		if !cholSolve(sys, k, b) {
			t.Fatalf("k=%d: cholSolve refused a positive definite system", k)
		}
		for i := range b {
			if d := math.Abs(b[i] - x.AtVec(i)); d > 1e-8*(1+math.Abs(x.AtVec(i))) {
				t.Fatalf("k=%d: x[%d] = %v, want %v", k, i, b[i], x.AtVec(i))
			}
		}
	}
	if cholSolve([]float64{1, 2, 0, 1}, 2, []float64{1, 1}) {
		t.Error("cholSolve accepted an indefinite matrix")
	}
}

func eye(k int) *mat.SymDense {
	e := mat.NewSymDense(k, nil)
	for i := range k {
		e.SetSym(i, i, 1)
	}
	return e
}

func TestOptionsRejected(t *testing.T) {
	lr := newLowRank(t, 20, 10, 1, 0.5, 0.1, 5)
	r := rand.New(rand.NewPCG(1, 1))
	if _, err := ALS(context.Background(), lr.train, ALSOptions{Rank: 0, Lambda: 1, Iterations: 1, Norm: r.NormFloat64}); err == nil {
		t.Error("ALS accepted rank 0")
	}
	if _, err := ALS(context.Background(), lr.train, ALSOptions{Rank: 2, Lambda: math.NaN(), Iterations: 1, Norm: r.NormFloat64}); err == nil {
		t.Error("ALS accepted λ = NaN")
	}
	if _, err := SGD(context.Background(), lr.train, SGDOptions{Rank: 2, Lambda: 0.1, LearnRate: 0, Iterations: 1, Rand: r}); err == nil {
		t.Error("SGD accepted a zero learning rate")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SGD(ctx, lr.train, SGDOptions{Rank: 2, Lambda: 0.1, LearnRate: 0.1, Iterations: 3, Rand: r}); err == nil {
		t.Error("SGD ignored a cancelled context")
	}
	if _, err := ALS(ctx, lr.train, ALSOptions{Rank: 2, Lambda: 0.1, Iterations: 3, Norm: r.NormFloat64}); err == nil {
		t.Error("ALS ignored a cancelled context")
	}
}
