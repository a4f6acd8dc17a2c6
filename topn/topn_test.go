package topn

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
)

// planted returns users in groups: a user of group g interacts with each
// item of block g with probability pIn and any other with pOut. Items of
// block g are g·per … g·per+per−1.
func planted(users, groups, per int, pIn, pOut float64, seed uint64) *Interactions {
	r := rand.New(rand.NewPCG(seed, 7))
	n := groups * per
	x := &Interactions{NumUsers: users, NumItems: n, Ptr: make([]int64, users+1)}
	for u := range users {
		g := u % groups
		for j := range n {
			p := pOut
			if j/per == g {
				p = pIn
			}
			if r.Float64() < p {
				x.Idx = append(x.Idx, int32(j))
			}
		}
		x.Ptr[u+1] = int64(len(x.Idx))
	}
	return x
}

func allColumns(n int) Columns {
	c := make(Columns, n)
	for j := range c {
		c[j] = int32(j)
	}
	return c
}

func TestGramMatchesDefinition(t *testing.T) {
	x := planted(40, 3, 4, 0.6, 0.2, 1)
	w := func(n int) float64 { return 1 / float64(n) }
	cols, err := NewColumns(x.NumItems, []int{5, 0, 7, 11})
	if err != nil {
		t.Fatal(err)
	}
	g, err := Gram(context.Background(), x, cols, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := mat.NewSymDense(4, nil)
	for u := range x.NumUsers {
		var in []int
		for _, j := range x.Row(u) {
			if cols[j] >= 0 {
				in = append(in, int(cols[j]))
			}
		}
		for _, a := range in {
			for _, b := range in {
				if a <= b {
					want.SetSym(a, b, want.At(a, b)+w(len(in)))
				}
			}
		}
	}
	if !mat.EqualApprox(g, want, 1e-12) {
		t.Errorf("Gram = %v, want %v", mat.Formatted(g), mat.Formatted(want))
	}
	if _, err := NewColumns(3, []int{1, 1}); err == nil {
		t.Error("repeated column accepted")
	}
}

// TestEASEStationarity checks EASE's closed form against its optimality
// conditions, independently of how it is computed: column j of B
// minimises ‖X_j − X b‖² + λ‖b‖² subject to b_j = 0, so
// (G + λI) b − G e_j is zero except in coordinate j (the multiplier).
func TestEASEStationarity(t *testing.T) {
	x := planted(60, 3, 5, 0.5, 0.1, 2)
	g, err := Gram(context.Background(), x, allColumns(x.NumItems), func(int) float64 { return 1 }, 1)
	if err != nil {
		t.Fatal(err)
	}
	const lambda = 3.0
	bt, err := EASE(g, lambda)
	if err != nil {
		t.Fatal(err)
	}
	n := x.NumItems
	for j := range n {
		b := bt.RawRowView(j) // column j of B
		if b[j] != 0 {
			t.Fatalf("B[%d][%d] = %g, want 0", j, j, b[j])
		}
		for i := range n {
			if i == j {
				continue
			}
			s := lambda*b[i] - g.At(i, j)
			for k := range n {
				s += g.At(i, k) * b[k]
			}
			if math.Abs(s) > 1e-8 {
				t.Fatalf("column %d: stationarity residual %g at %d", j, s, i)
			}
		}
	}
	if _, err := EASE(g, 0); err == nil {
		t.Error("λ = 0 accepted")
	}
}

// TestLowRankEASE checks the low-rank solve against the dense EASE on the
// same Gram W Wᵀ, and ZFromV against the Z it inverts.
func TestLowRankEASE(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const m, k, lambda = 15, 3, 2.0
	w := mat.NewDense(m, k, nil)
	for i := range m {
		for c := range k {
			w.Set(i, c, r.NormFloat64())
		}
	}
	g := mat.NewSymDense(m, nil)
	g.SymOuterK(1, w)
	dense, err := EASE(g, lambda)
	if err != nil {
		t.Fatal(err)
	}
	v, err := LowRankEASE(w, lambda)
	if err != nil {
		t.Fatal(err)
	}
	hist := []int{1, 4, 9}
	row := make([]float64, k)
	z := make([]float64, k)
	for _, i := range hist {
		ZFromV(v.RawRowView(i), z)
		for c := range k {
			row[c] += z[c]
		}
	}
	for j := range m {
		if j == 1 || j == 4 || j == 9 {
			continue
		}
		var want float64
		for _, i := range hist {
			want += dense.At(j, i)
		}
		got := 0.0
		for c, x := range v.RawRowView(j) {
			got += row[c] * x
		}
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("item %d: low-rank score %g, dense %g", j, got, want)
		}
	}
}

// TestDenoiseFindsPlantedRank plants a rank-2 matrix under symmetric
// Gaussian noise (σ = 1, m = 200: spectral edge 2√200 ≈ 28) with
// eigenvalues 300 and 150; Denoise must keep exactly those two. The noise's
// largest eigenvalue exceeds 1.2 × its edge with negligible probability
// (Tracy–Widom tail, fixed seed).
func TestDenoiseFindsPlantedRank(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const m = 200
	u := make([][]float64, 2)
	for c := range u {
		u[c] = make([]float64, m)
		for i := range u[c] {
			u[c][i] = r.NormFloat64()
		}
	}
	// orthonormalise
	norm := func(a []float64) {
		s := math.Sqrt(dot(a, a))
		for i := range a {
			a[i] /= s
		}
	}
	norm(u[0])
	p := dot(u[0], u[1])
	for i := range u[1] {
		u[1][i] -= p * u[0][i]
	}
	norm(u[1])
	g := mat.NewSymDense(m, nil)
	for a := range m {
		for b := a; b < m; b++ {
			g.SetSym(a, b, 300*u[0][a]*u[0][b]+150*u[1][a]*u[1][b]+r.NormFloat64())
		}
	}
	edge := 2 * math.Sqrt(m)
	w, err := Denoise(g, 1.2*edge, edge, rand.New(rand.NewPCG(5, 5)))
	if err != nil {
		t.Fatal(err)
	}
	if _, k := w.Dims(); k != 2 {
		t.Fatalf("kept %d eigenpairs, want 2", k)
	}
}

// TestIALSRecoversGroups: on planted groups, iALS lists for held-out
// users hit their group's block far more than popularity can (each block
// is equally popular, so popularity's expected hit rate is the block's
// share, 1/4) — from random factors, and after a warm start on a quarter
// of the users followed by a single full epoch. Fixed seeds; the margin
// is wide.
func TestIALSRecoversGroups(t *testing.T) {
	x := planted(400, 4, 10, 0.5, 0.02, 5)
	for _, tc := range []struct {
		name         string
		epochs, warm int
		share        float64
	}{{"cold", 8, 0, 0}, {"warm", 1, 6, 0.25}} {
		t.Run(tc.name, func(t *testing.T) {
			var epochs []int
			o := IALSOptions{Rank: 8, Alpha0: 0.2, Lambda: 0.01, Nu: 1, Epochs: tc.epochs, CGSteps: 3, InitScale: 0.1, Rand: rand.New(rand.NewPCG(1, 1)),
				WarmShare: tc.share, WarmEpochs: tc.warm, Progress: func(done, total int) { epochs = append(epochs, done, total) }}
			_, h, err := IALS(context.Background(), x, o)
			if err != nil {
				t.Fatal(err)
			}
			if n := tc.epochs + tc.warm; len(epochs) != 2*n || epochs[2*n-2] != n || epochs[2*n-1] != n {
				t.Errorf("progress %v, want 1…%d of %d", epochs, n, n)
			}
			checkGroups(t, x, h)
		})
	}
}

// checkGroups checks that at least 80 % of the first 100 users' best
// unseen items are in their blocks (groupHits).
func checkGroups(t *testing.T, x *Interactions, h []float64) {
	t.Helper()
	if hits, total := groupHits(x, h); float64(hits) < 0.8*float64(total) {
		t.Errorf("iALS: %d of %d best items in the user's block, want ≥ 80%% (popularity: 25%%)", hits, total)
	}
}

// TestIALSWarmStartRefines: on weaker planted groups (in-block rate 0.3,
// background 0.05), one full epoch from random factors finds far fewer
// users' blocks than eight, and six warm-start epochs on a quarter of the
// users followed by that one full epoch find as many as the eight (within
// 5 of 100): the sample's epochs, not the full one, did the growing.
// Fixed seeds.
func TestIALSWarmStartRefines(t *testing.T) {
	x := planted(400, 4, 10, 0.3, 0.05, 5)
	hits := func(epochs, warm int) int {
		o := IALSOptions{Rank: 8, Alpha0: 0.2, Lambda: 0.01, Nu: 1, Epochs: epochs, CGSteps: 3, InitScale: 0.1, Rand: rand.New(rand.NewPCG(1, 1)), WarmShare: 0.25, WarmEpochs: warm}
		_, h, err := IALS(context.Background(), x, o)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := groupHits(x, h)
		return n
	}
	one, eight, warm := hits(1, 0), hits(8, 0), hits(1, 6)
	if one > eight-10 || warm < eight-5 {
		t.Errorf("users whose best item is in their block: %d after 1 epoch, %d after 8, %d after 6 warm + 1; want 1 ≤ 8 − 10 and warm ≥ 8 − 5", one, eight, warm)
	}
}

// groupHits folds in each of the first 100 users' first three items by
// the exact user step and counts those whose best unseen item is in
// their block, of those with three items.
func groupHits(x *Interactions, h []float64) (hits, total int) {
	k := 8
	h32 := make([]float32, len(h))
	for i, v := range h {
		h32[i] = float32(v)
	}
	g := gramian32(h32, k, 0.2)
	sc := newCGScratch(k)
	for u := range 100 {
		items := x.Row(u)
		if len(items) < 3 {
			continue
		}
		row32 := make([]float32, k)
		cgRow(g, h32, items[:3], k, float32(RegFor(0.01, 1, 0.2, x.NumItems)(3)), row32, 50, &sc)
		row := widen(row32)
		best, bs := -1, math.Inf(-1)
		for j := range x.NumItems {
			if j == int(items[0]) || j == int(items[1]) || j == int(items[2]) {
				continue
			}
			if s := dot(row, h[j*k:j*k+k]); s > bs {
				best, bs = j, s
			}
		}
		total++
		if best/10 == u%4 {
			hits++
		}
	}
	return hits, total
}

// TestSampleUsers: the sample keeps whole rows, in order, about share of
// them; the same seed gives the same sample.
func TestSampleUsers(t *testing.T) {
	x := planted(2000, 4, 10, 0.5, 0.02, 7)
	s := x.SampleUsers(0.25, rand.New(rand.NewPCG(3, 3)))
	if s.NumUsers < 400 || s.NumUsers > 600 || s.NumItems != x.NumItems {
		t.Fatalf("sampled %d of 2000 users (%d items), want ≈ 500 on %d", s.NumUsers, s.NumItems, x.NumItems)
	}
	again := x.SampleUsers(0.25, rand.New(rand.NewPCG(3, 3)))
	if !slices.Equal(s.Ptr, again.Ptr) || !slices.Equal(s.Idx, again.Idx) {
		t.Error("the same seed sampled different users")
	}
	u := 0
	for r := range s.NumUsers {
		for u < x.NumUsers && !slices.Equal(x.Row(u), s.Row(r)) {
			u++
		}
		if u == x.NumUsers {
			t.Fatalf("sampled row %d is no row of x in order", r)
		}
		u++
	}
}

func TestTranspose(t *testing.T) {
	x := planted(30, 2, 5, 0.5, 0.2, 6)
	tt := x.Transpose().Transpose()
	if len(tt.Idx) != len(x.Idx) {
		t.Fatal("lengths differ")
	}
	for i := range x.Idx {
		if tt.Idx[i] != x.Idx[i] {
			t.Fatal("transpose twice is not the identity")
		}
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// TestCGRowFloat32MatchesExactSolve: the float32 conjugate-gradient row
// solve, run to convergence, agrees with the exact float64 Cholesky solve
// of the implicit fold-in to 1e-4 relative, both for a row short enough
// to gather and for one read in place (more than gatherRows rows).
func TestCGRowFloat32MatchesExactSolve(t *testing.T) {
	const k, items = 16, 6000
	rnd := rand.New(rand.NewPCG(3, 4))
	h := make([]float64, items*k)
	for i := range h {
		h[i] = rnd.NormFloat64() / 4
	}
	m := &model.Model{Rank: k, V: h, Items: make([]string, items), Params: map[string]any{"fold_alpha0": 0.2, "fold_nu": 1.0}, FoldLambda: 0.01}
	h32 := make([]float32, len(h))
	for i, v := range h {
		h32[i] = float32(v)
	}
	g := gramian32(h32, k, 0.2)
	sc := newCGScratch(k)
	for _, n := range []int{5, 300, gatherRows + 500} {
		row := make([]int32, n)
		for i := range row {
			row[i] = int32(i)
		}
		want, err := foldImplicit(m, row, nil)
		if err != nil {
			t.Fatal(err)
		}
		got32 := make([]float32, k)
		cgRow(g, h32, row, k, float32(RegFor(0.01, 1, 0.2, items)(n)), got32, 60, &sc)
		got := widen(got32)
		var d, w float64
		for q := range k {
			d += (got[q] - want[q]) * (got[q] - want[q])
			w += want[q] * want[q]
		}
		if math.Sqrt(d/w) > 1e-4 {
			t.Errorf("n = %d: relative error %.2g of the float32 CG solve, want ≤ 1e-4", n, math.Sqrt(d/w))
		}
	}
}

// TestIALSLambdaFollowsDensity: the planned λ thresholds X's singular
// values at kappa·‖X‖_F; a population grown s-fold at the same density
// (users and interactions ×s) keeps the same λ, so the threshold grows
// like √N with X's spectrum. A denser population gets a larger λ.
func TestIALSLambdaFollowsDensity(t *testing.T) {
	const kappa, alpha0 = 0.014, 0.2
	base := IALSLambda(42_582, 17_770, 4_759_913, alpha0, kappa)
	if tau := IALSThreshold(42_582, 17_770, 4_759_913, alpha0, base); math.Abs(tau-kappa*math.Sqrt(4_759_913)) > 1e-9*tau {
		t.Errorf("threshold %g at the planned λ, want kappa·√interactions = %g", tau, kappa*math.Sqrt(4_759_913))
	}
	for _, s := range []int{2, 11, 100} {
		if l := IALSLambda(42_582*s, 17_770, 4_759_913*s, alpha0, kappa); math.Abs(l-base) > 1e-9*base {
			t.Errorf("×%d users and interactions: λ = %g, want %g (the same density)", s, l, base)
		}
	}
	if dense := IALSLambda(42_582, 17_770, 4*4_759_913, alpha0, kappa); !(dense > base) {
		t.Errorf("4× the density: λ = %g, want > %g", dense, base)
	}
}

// TestIALSEpochsFitTheBudget: the planned epochs fall as the population
// grows, stay within their bounds and, above the lower bound, fit the
// budget.
func TestIALSEpochsFitTheBudget(t *testing.T) {
	const budget, lo, hi = 900e9, 2, 16
	prev := hi
	for _, users := range []int{4_834, 42_582, 141_783, 469_255, 2_000_000, 20_000_000} {
		nnz := users * 112
		e := IALSEpochs(users, 17_770, nnz, 128, 3, budget, lo, hi)
		if e < lo || e > hi || e > prev {
			t.Errorf("%d users: %d epochs, want within [%d, %d] and ≤ %d (fewer users)", users, e, lo, hi, prev)
		}
		if e > lo && float64(e)*IALSEpochWork(users, 17_770, nnz, 128, 3) > budget {
			t.Errorf("%d users: %d epochs exceed the budget", users, e)
		}
		prev = e
	}
	if e := IALSEpochs(20_000_000, 17_770, 20_000_000*112, 128, 3, budget, lo, hi); e != lo {
		t.Errorf("20 M users: %d epochs, want the lower bound %d", e, lo)
	}
}
