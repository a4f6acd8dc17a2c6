package topn

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
)

func norm2(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func diffNorm(a, b []float64) float64 {
	var s float64
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return math.Sqrt(s)
}

// contribution is one user's x_u as a fresh vector.
func contribution(lay StatsLayout, sc StepScales, cols Columns, f []float64, items []int32, row []float64) []float64 {
	x := make([]float64, lay.Len())
	UserContribution(x, lay, sc, cols, f, items, row)
	return x
}

// The ℓ2 sensitivity of a step's release holds for random and adversarial
// pairs of users, and the adversarial pair reaches it. Deterministic
// (fixed seeds); the bound is a theorem, so a failure is a bug.
func TestStepSensitivityHolds(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   StepScales
		k    int
	}{
		{"defaults", StepScales{Gram: 1, RHS: 1, Global: 0.3}, 3},
		{"no gram", StepScales{Gram: 0, RHS: 1, Global: 0.3}, 4},
		{"large rhs", StepScales{Gram: 0.5, RHS: 3, Global: 0.2}, 2},
		{"large global", StepScales{Gram: 1, RHS: 0.5, Global: 2}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 6
			lay := StatsLayout{K: tc.k, Items: 5, Gram: tc.sc.Gram > 0}
			cols, err := NewColumns(n, []int{4, 0, 1, 2, 3}) // item 5 not covered
			if err != nil {
				t.Fatal(err)
			}
			delta := tc.sc.Sensitivity()
			r := rand.New(rand.NewPCG(1, 2))
			randUser := func() ([]float64, []int32, []float64) {
				f := make([]float64, n)
				for j := range f {
					if r.IntN(4) > 0 {
						f[j] = r.Float64() * 3
					}
				}
				var items []int32
				for j := range n {
					if r.IntN(2) == 0 {
						items = append(items, int32(j))
					}
				}
				row := make([]float64, tc.k)
				for p := range row {
					row[p] = r.NormFloat64() * 2
				}
				ClipRow(row, 0.1+2*r.Float64())
				return f, items, row
			}
			worst := 0.0
			for range 20000 {
				f, a, ra := randUser()
				_, b, rb := randUser() // both users see the same public f
				d := diffNorm(contribution(lay, tc.sc, cols, f, a, ra), contribution(lay, tc.sc, cols, f, b, rb))
				worst = max(worst, d)
				if d > delta*(1+1e-12) {
					t.Fatalf("‖x − x'‖ = %.15g > Δ = %.15g", d, delta)
				}
			}
			// Adversarial: one shared item carrying all the weight, rows at
			// angle t* = argmin_{t∈[−1,1]} (r² + g²)t² + s²t.
			a2 := tc.sc.Gram*tc.sc.Gram + tc.sc.Global*tc.sc.Global
			ts := max(-1, -tc.sc.RHS*tc.sc.RHS/(2*a2))
			f := []float64{1, 0, 0, 0, 0, 0}
			ra := make([]float64, tc.k)
			rb := make([]float64, tc.k)
			ra[0], rb[0], rb[1] = 1, ts, math.Sqrt(1-ts*ts)
			ClipRow(ra, 1)
			ClipRow(rb, 1)
			d := diffNorm(contribution(lay, tc.sc, cols, f, []int32{0}, ra), contribution(lay, tc.sc, cols, f, []int32{0}, rb))
			if d > delta*(1+1e-12) || d < delta*(1-1e-6) {
				t.Errorf("adversarial pair: ‖x − x'‖ = %.12g, Δ = %.12g (want it reached)", d, delta)
			}
			// A user's part alone is within √(r² + s² + g²).
			own := norm2(contribution(lay, tc.sc, cols, f, []int32{0}, ra))
			if bound := math.Sqrt(a2 + tc.sc.RHS*tc.sc.RHS); own > bound*(1+1e-12) {
				t.Errorf("‖x_u‖ = %g > %g", own, bound)
			}
			t.Logf("Δ = %.4f, worst random pair %.4f, adversarial %.4f", delta, worst, d)
		})
	}
}

// smallInteractions is a random users × items interaction matrix.
func smallInteractions(r *rand.Rand, users, items int, p float64) *Interactions {
	x := &Interactions{NumUsers: users, NumItems: items, Ptr: make([]int64, 1, users+1)}
	for range users {
		for j := range items {
			if r.Float64() < p {
				x.Idx = append(x.Idx, int32(j))
			}
		}
		x.Ptr = append(x.Ptr, int64(len(x.Idx)))
	}
	return x
}

// StepStats is the sum of the users' contributions, with and without the
// per-item Gram, across worker counts; more than rowBlock users on an item
// exercises the kernel's blocking.
func TestStepStatsMatchesContributions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const users, items, k = 300, 9, 4
	x := smallInteractions(r, users, items, 0.5)
	xt := x.Transpose()
	cols, err := NewColumns(items, []int{3, 1, 0, 7, 5, 2})
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float64, items)
	for j := range f {
		if cols[j] >= 0 {
			f[j] = 0.5 + r.Float64()
		}
	}
	f[2] = 0 // covered, but weighted 0
	wt := make([]float64, users*k)
	for u := range users {
		row := wt[u*k : u*k+k]
		for p := range row {
			row[p] = r.NormFloat64()
		}
		ClipRow(row, 1.5)
	}
	for _, tc := range []struct {
		name    string
		gram    bool
		workers int
	}{{"gram, 1 worker", true, 1}, {"gram, 3 workers", true, 3}, {"rhs only", false, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			sc := StepScales{Gram: 0.7, RHS: 1.3, Global: 0.4}
			if !tc.gram {
				sc.Gram = 0
			}
			lay := StatsLayout{K: k, Items: cols.Covered(), Gram: tc.gram}
			got, err := StepStats(context.Background(), x, xt, lay, sc, cols, f, wt, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float64, lay.Len())
			for u := range users {
				UserContribution(want, lay, sc, cols, f, x.Row(u), wt[u*k:u*k+k])
			}
			if d := diffNorm(got, want); d > 1e-9*norm2(want) {
				t.Fatalf("StepStats differs from the sum of contributions by %g (norm %g)", d, norm2(want))
			}
		})
	}
}

// Each user's row in training is exactly what the "implicit" fold-in
// computes on her side from the public model.
func TestUserRowsMatchFoldIn(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const users, items, k = 40, 12, 5
	x := smallInteractions(r, users, items, 0.3)
	h := make([]float64, items*k)
	for i := range h {
		h[i] = r.NormFloat64() * 0.3
	}
	const alpha0, lambda, nu = 0.3, 0.05, 1
	out := make([]float64, users*k)
	if err := UserRows(context.Background(), x, h, k, alpha0, RegFor(lambda, nu, alpha0, items), 2, out); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, items)
	for j := range ids {
		ids[j] = string(rune('a' + j))
	}
	m := &model.Model{Method: "test", Output: model.Scores, Items: ids, Rank: k, V: h, U: []float64{}}
	SetImplicitFoldIn(m, alpha0, lambda, nu)
	// A second model on the same factors with another α₀, folded into
	// in turn with the first (as models scored side by side are): the
	// cached Gramian α₀·HᵀH must be each model's own.
	const alpha1 = 0.1
	out1 := make([]float64, users*k)
	if err := UserRows(context.Background(), x, h, k, alpha1, RegFor(lambda, nu, alpha1, items), 2, out1); err != nil {
		t.Fatal(err)
	}
	m1 := &model.Model{Method: "test", Output: model.Scores, Items: ids, Rank: k, V: h, U: []float64{}}
	SetImplicitFoldIn(m1, alpha1, lambda, nu)
	for u := range users {
		var names []string
		var vals []float64
		for _, j := range x.Row(u) {
			names = append(names, ids[j])
			vals = append(vals, 1)
		}
		for i, tc := range []struct {
			m    *model.Model
			want []float64
		}{{m, out}, {m1, out1}} {
			st, err := tc.m.FoldInUser("u", names, vals)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffNorm(st.Row, tc.want[u*k:u*k+k]); d > 1e-9 {
				t.Fatalf("model %d, user %d: training row and fold-in differ by %g", i, u, d)
			}
		}
	}
}

// Without noise, SolveItems solves each covered item's weighted iALS
// system exactly, in the unclipped rows' units.
func TestSolveItemsNoiseless(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const users, items, k = 80, 6, 3
	x := smallInteractions(r, users, items, 0.4)
	xt := x.Transpose()
	cols, _ := NewColumns(items, []int{2, 0, 4})
	f := []float64{1, 0, 2, 0, 0.5, 0}
	const gamma = 2.0
	wt := make([]float64, users*k)
	for u := range users {
		row := wt[u*k : u*k+k]
		for p := range row {
			row[p] = r.NormFloat64()
		}
		ClipRow(row, gamma)
	}
	sc := StepScales{Gram: 0.8, RHS: 1.2, Global: 0.3}
	lay := StatsLayout{K: k, Items: 3, Gram: true}
	stats, err := StepStats(context.Background(), x, xt, lay, sc, cols, f, wt, 1)
	if err != nil {
		t.Fatal(err)
	}
	const alpha, ridge = 0.05, 0.7
	h := make([]float64, items*k)
	if err := SolveItems(context.Background(), stats, ItemSolve{Layout: lay, Scales: sc, Alpha: alpha,
		Ridge: func(int) float64 { return ridge }, Gamma: gamma}, cols, h); err != nil {
		t.Fatal(err)
	}
	for j := range items {
		if cols[j] < 0 {
			if norm2(h[j*k:j*k+k]) != 0 {
				t.Errorf("item %d is not covered but got a factor", j)
			}
			continue
		}
		a := make([]float64, k*k)
		b := make([]float64, k)
		for u := range users {
			w := wt[u*k : u*k+k]
			for p := range k {
				for q := range k {
					a[p*k+q] += alpha * w[p] * w[q]
				}
			}
			for _, i := range x.Row(u) {
				if int(i) != j {
					continue
				}
				c := f[j] * StepWeights(f, x.Row(u))
				for p := range k {
					b[p] += c * w[p]
					for q := range k {
						a[p*k+q] += c * w[p] * w[q]
					}
				}
			}
		}
		for p := range k {
			a[p*k+p] += ridge
		}
		if !cholSolve(a, k, b) {
			t.Fatal("reference system not positive definite")
		}
		for p := range b {
			b[p] /= gamma
		}
		if d := diffNorm(b, h[j*k:j*k+k]); d > 1e-9*(1+norm2(b)) {
			t.Errorf("item %d: solve %v, reference %v", j, h[j*k:j*k+k], b)
		}
	}
}

// ProjectPSD zeroes the negative eigenvalues and keeps a PSD matrix.
func TestProjectPSD(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    []float64
		want []float64
	}{
		{"psd unchanged", []float64{2, 1, 1, 2}, []float64{2, 1, 1, 2}},
		{"negative dropped", []float64{1, 0, 0, -3}, []float64{1, 0, 0, 0}},
		{"indefinite", []float64{0, 1, 1, 0}, []float64{0.5, 0.5, 0.5, 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := append([]float64(nil), tc.a...)
			if err := ProjectPSD(a, 2); err != nil {
				t.Fatal(err)
			}
			if d := diffNorm(a, tc.want); d > 1e-12 {
				t.Errorf("got %v, want %v", a, tc.want)
			}
		})
	}
}

// ClipRow scales by 1/Γ and never leaves the unit ball; T and Unpack are
// inverse and T preserves the Frobenius product.
func TestClipRowAndPacking(t *testing.T) {
	for _, tc := range []struct {
		row   []float64
		gamma float64
		want  float64
	}{{[]float64{3, 4}, 1, 1}, {[]float64{0.3, 0.4}, 1, 0.5}, {[]float64{3, 4}, 10, 0.5}, {[]float64{0, 0}, 1, 0}} {
		r := append([]float64(nil), tc.row...)
		ClipRow(r, tc.gamma)
		if n := norm2(r); n > 1 || math.Abs(n-tc.want) > 1e-8 {
			t.Errorf("ClipRow(%v, %g): norm %g, want %g", tc.row, tc.gamma, n, tc.want)
		}
	}
	// T(2·wwᵀ) as a global piece (mode 1, weight 2, the whole triangle).
	w := []float64{1, 2, 3}
	a := []float64{1, 2, 3, 2, 4, 6, 3, 6, 9}
	p := make([]float64, 6)
	expandStep([]float64{1, 2, 0, 1, 2, 3}, p)
	var fro float64
	for _, v := range a {
		fro += 4 * v * v
	}
	if math.Abs(norm2(p)-math.Sqrt(fro)) > 1e-12 || math.Abs(norm2(p)-2*norm2(w)*norm2(w)) > 1e-12 {
		t.Errorf("‖T(2A)‖ = %g, ‖2A‖_F = %g", norm2(p), math.Sqrt(fro))
	}
	back := make([]float64, 9)
	Unpack(back, p, 3, 2)
	if diffNorm(back, a) > 1e-12 {
		t.Errorf("Unpack(T(A)) = %v", back)
	}
}

// UserRows and StepStats stop when the context is cancelled.
func TestDPIALSCancel(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	x := smallInteractions(r, 5000, 10, 0.3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := make([]float64, 10*2)
	if err := UserRows(ctx, x, h, 2, 0.1, RegFor(0.1, 1, 0.1, 10), 2, make([]float64, 5000*2)); err == nil {
		t.Error("UserRows ignored a cancelled context")
	}
	cols, _ := NewColumns(10, []int{0, 1})
	if _, err := StepStats(ctx, x, x.Transpose(), StatsLayout{K: 2, Items: 2, Gram: true}, StepScales{1, 1, 1}, cols, make([]float64, 10), make([]float64, 5000*2), 2); err == nil {
		t.Error("StepStats ignored a cancelled context")
	}
}

// DenoiseRank keeps Denoise's leading columns (compared as W Wᵀ, which
// does not depend on the eigenvectors' signs). Fixed seeds; the planted
// eigenvalues are well separated, so the subspace iteration converges far
// below the tolerance.
func TestDenoiseRank(t *testing.T) {
	for _, tc := range []struct {
		name string
		m, r int
	}{{"fewer than found", 300, 3}, {"more than found", 300, 12}, {"small matrix", 20, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, uint64(tc.m)))
			g := mat.NewSymDense(tc.m, nil)
			for e := range 6 {
				v := make([]float64, tc.m)
				for i := range v {
					v[i] = r.NormFloat64() / math.Sqrt(float64(tc.m))
				}
				g.SymRankOne(g, 100/float64(e+1), mat.NewVecDense(tc.m, v))
			}
			for i := range tc.m {
				for j := i; j < tc.m; j++ {
					g.SetSym(i, j, g.At(i, j)+0.01*r.NormFloat64())
				}
			}
			full, err := Denoise(g, 10, 5, rand.New(rand.NewPCG(1, 1)))
			if err != nil {
				t.Fatal(err)
			}
			top, err := DenoiseRank(g, 10, 5, tc.r, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			_, nf := full.Dims()
			_, nt := top.Dims()
			if want := min(nf, tc.r); nt != want {
				t.Fatalf("%d columns, want %d (Denoise found %d)", nt, want, nf)
			}
			var a, b mat.Dense
			fs := full.Slice(0, tc.m, 0, nt)
			a.Mul(fs, fs.T())
			b.Mul(top, top.T())
			a.Sub(&a, &b)
			if d := mat.Norm(&a, 2); d > 1e-6 {
				t.Errorf("W Wᵀ differ by %g", d)
			}
		})
	}
}
