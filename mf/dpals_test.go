package mf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/statistic"
)

// noNoise is a Releaser that adds nothing (the ε → ∞ limit).
type noNoise struct{}

func (noNoise) Release(*noise.Source, []float64) error        { return nil }
func (noNoise) ReleaseSym(*noise.Source, *mat.SymDense) error { return nil }

// gaussian adds continuous Gaussian noise (tests only; releases go
// through privacy/mechanism).
type gaussian struct{ sigma float64 }

func (g gaussian) Release(src *noise.Source, x []float64) error {
	for i := range x {
		x[i] += g.sigma * src.NormFloat64()
	}
	return nil
}

func (g gaussian) ReleaseSym(src *noise.Source, s *mat.SymDense) error {
	n := s.SymmetricDim()
	for a := range n {
		for b := a; b < n; b++ {
			s.SetSym(a, b, s.At(a, b)+g.sigma*src.NormFloat64())
		}
	}
	return nil
}

// contribution is user i's part of a step's released vector (see
// DPALSSensitivity): per item, the upper triangle of c·ũũᵀ with
// off-diagonals ×√2, then s·c·y·ũ; items not rated are zero.
func contribution(items int, u []float64, c map[int]float64, y map[int]float64, s float64) []float64 {
	d := len(u)
	per := d*(d+1)/2 + d
	x := make([]float64, items*per)
	for j, cj := range c {
		off := j * per
		for a := range d {
			for b := a; b < d; b++ {
				v := cj * u[a] * u[b]
				if a != b {
					v *= math.Sqrt2
				}
				x[off] = v
				off++
			}
		}
		for a := range d {
			x[off+a] = s * cj * y[j] * u[a]
		}
	}
	return x
}

// The sensitivity bound holds for random and adversarial pairs of users,
// for several right-hand-side scales (deterministic: fixed seed).
func TestDPALSSensitivityHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	const items, d = 6, 3
	for _, tc := range []struct{ gamma, clip, s float64 }{{1, 1.5, 1 / 1.5}, {0.3, 1.5, 0.3 / 1.5}, {1, 2, 2}, {1, 1, 0.1}, {0.5, 1, 5}} {
		sens := DPALSSensitivity(tc.gamma, tc.clip, tc.s)
		worst := 0.0
		user := func() ([]float64, map[int]float64, map[int]float64) {
			u := make([]float64, d)
			for a := range u {
				u[a] = r.NormFloat64()
			}
			if r.IntN(2) == 0 || dot(u, u) > tc.gamma*tc.gamma {
				sc := tc.gamma / math.Sqrt(dot(u, u))
				for a := range u {
					u[a] *= sc
				}
			}
			c, y := map[int]float64{}, map[int]float64{}
			m := 1 + r.IntN(items)
			var n2 float64
			for _, j := range r.Perm(items)[:m] {
				c[j] = r.Float64() + 0.1
				n2 += c[j] * c[j]
				y[j] = tc.clip * (2*float64(r.IntN(2)) - 1)
				if r.IntN(3) == 0 {
					y[j] = tc.clip * (2*r.Float64() - 1)
				}
			}
			for j := range c {
				c[j] /= math.Sqrt(n2)
			}
			return u, c, y
		}
		for range 20000 {
			u, c, y := user()
			u2, c2, y2 := user()
			switch r.IntN(4) {
			case 0: // the same items and weights, opposite rows and ratings
				c2, u2 = c, []float64{-u[0], -u[1], -u[2]}
				for j := range y2 {
					delete(y2, j)
				}
				for j := range y {
					y2[j] = y[j]
				}
			case 1: // the same items, rows at the angle that minimises t² − s²R²t
				c2 = c
				for j := range y {
					y2[j] = -y[j]
				}
			}
			for j := range c2 {
				if _, ok := y2[j]; !ok {
					y2[j] = tc.clip
				}
			}
			x, x2 := contribution(items, u, c, y, tc.s), contribution(items, u2, c2, y2, tc.s)
			var dd float64
			for i := range x {
				dd += (x[i] - x2[i]) * (x[i] - x2[i])
			}
			worst = math.Max(worst, math.Sqrt(dd))
		}
		t.Logf("Γ=%g R=%g s=%g: largest ‖Δ‖ %.4f, bound %.4f", tc.gamma, tc.clip, tc.s, worst, sens)
		if worst > sens*(1+1e-12) {
			t.Errorf("Γ=%g R=%g s=%g: ‖Δ‖ = %g exceeds the sensitivity %g", tc.gamma, tc.clip, tc.s, worst, sens)
		}
	}
}

// dpalsInputs are public inputs for DPALS on a problem: the mean, no item
// biases, exact weighted counts, all items active.
func dpalsInputs(p *Problem, k, steps int, rel Releaser) DPALSOptions {
	n := p.NumItems
	cnt := make([]float64, n)
	for u := range p.NumUsers {
		beg, end := p.RowPtr[u], p.RowPtr[u+1]
		for t := beg; t < end; t++ {
			cnt[p.RowCol[t]] += 1 / math.Sqrt(float64(end-beg))
		}
	}
	active := make([]bool, n)
	lam, blam := make([]float64, n), make([]float64, n)
	for j := range n {
		active[j] = true
		lam[j] = 0.05 * (cnt[j] + 1)
		blam[j] = 0.01
	}
	st := make([]Releaser, steps)
	for i := range st {
		st[i] = rel
	}
	return DPALSOptions{Rank: k, Steps: st, Noise: noise.Seeded(3), Mean: p.Mean(), ItemBias: make([]float64, n), Counts: cnt,
		Active: active, UserLambda: 0.5, UserDamping: 2, ItemLambda: lam, BiasLambda: blam, UserClip: 100, ResidualClip: 100,
		RHSScale: 1, BiasScale: 1, InitScale: 1, Rand: rand.New(rand.NewPCG(4, 4)), Workers: 2}
}

// dpalsRMSE scores DPALS's public output on test with every user's row
// and bias computed as her device does (model.FoldInUser on her training
// ratings).
func dpalsRMSE(t *testing.T, train, test *Problem, o DPALSOptions, V, itemBias []float64) float64 {
	t.Helper()
	m := foldModel(train, o, V, itemBias)
	var s float64
	for u := range test.NumUsers {
		st := foldUser(t, m, train, u)
		for q := test.RowPtr[u]; q < test.RowPtr[u+1]; q++ {
			d := m.ScoreFor(st, test.RowCol[q]) - float64(test.RowVal[q])
			s += d * d
		}
	}
	return math.Sqrt(s / float64(test.Len()))
}

func foldModel(p *Problem, o DPALSOptions, V, itemBias []float64) *model.Model {
	ids := make([]string, p.NumItems)
	for j := range ids {
		ids[j] = fmt.Sprint(j)
	}
	cat, _ := model.NewCatalogue(ids, nil)
	m := model.NewPublic("dpals", cat)
	m.Rank, m.V, m.Offset, m.ItemBias = o.Rank, V, o.Mean, itemBias
	m.Transform.UserCentred, m.UserDamping = true, o.UserDamping
	m.FoldIn, m.FoldLambda = model.FoldRidge, o.UserLambda
	return m
}

func foldUser(t *testing.T, m *model.Model, p *Problem, u int) *model.UserState {
	t.Helper()
	var ids []string
	var vals []float64
	for q := p.RowPtr[u]; q < p.RowPtr[u+1]; q++ {
		ids = append(ids, fmt.Sprint(p.RowCol[q]))
		vals = append(vals, float64(p.RowVal[q]))
	}
	st, err := m.FoldInUser(fmt.Sprint(u), ids, vals)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The user side of DPALS is fold-in: the row a user's device computes
// from the public model (model.FoldInUser, FoldRidge with FoldLambda = λ_u,
// user-centred with UserDamping) is the row the solver uses, to rounding.
// Deterministic (fixed seeds).
func TestDPALSFoldInReproducesUserRows(t *testing.T) {
	lr := newLowRank(t, 80, 50, 2, 0.4, 0.2, 11)
	o := dpalsInputs(lr.train, 3, 2, gaussian{0.5})
	V, itemBias, err := DPALS(context.Background(), lr.train, o)
	if err != nil {
		t.Fatal(err)
	}
	m := foldModel(lr.train, o, V, itemBias)
	res := make([]float64, lr.train.Len())
	a, b := make([]float64, 9), make([]float64, 3)
	for u := range lr.train.NumUsers {
		beg, end := lr.train.RowPtr[u], lr.train.RowPtr[u+1]
		centre(lr.train.RowCol[beg:end], lr.train.RowVal[beg:end], o.Mean, o.UserDamping, itemBias, res[beg:end])
		if !userSolve(a, b, 3, V, lr.train.RowCol[beg:end], res[beg:end], o.UserLambda, nil) {
			t.Fatal("user system not positive definite")
		}
		st := foldUser(t, m, lr.train, u)
		for c := range 3 {
			if d := math.Abs(st.Row[c] - b[c]); d > 1e-9*(1+math.Abs(b[c])) {
				t.Fatalf("user %d: fold-in row[%d] = %v, solver %v", u, c, st.Row[c], b[c])
			}
		}
	}
}

// Without noise and with loose clips DPALS fits a low-rank matrix nearly
// as well as ALS (deterministic: fixed seeds; measured 0.126 against
// ALS's 0.110 on noise σ = 0.1 — the per-user weights and the constant
// user λ make it a different estimator, and it runs only 8 steps).
func TestDPALSNoiselessApproachesALS(t *testing.T) {
	lr := newLowRank(t, 300, 120, 3, 0.35, 0.1, 12)
	o := dpalsInputs(lr.train, 4, 8, noNoise{})
	V, itemBias, err := DPALS(context.Background(), lr.train, o)
	if err != nil {
		t.Fatal(err)
	}
	got := dpalsRMSE(t, lr.train, lr.test, o, V, itemBias)
	r := rand.New(rand.NewPCG(2, 3))
	f, err := ALS(context.Background(), lr.train, ALSOptions{Rank: 4, Lambda: 0.02, BiasLambda: 0.001, Iterations: 15, InitScale: 0.1, Norm: r.NormFloat64})
	if err != nil {
		t.Fatal(err)
	}
	als := f.RMSE(lr.test, 0, 0)
	mean := (&Factors{Mean: lr.train.Mean(), UserBias: make([]float64, 300), ItemBias: make([]float64, 120)}).RMSE(lr.test, 0, 0)
	t.Logf("held-out RMSE: DPALS without noise %.4f, ALS %.4f, mean %.4f", got, als, mean)
	if got > 0.16 {
		t.Errorf("DPALS without noise: RMSE %.4f (ALS %.4f, mean %.4f)", got, als, mean)
	}
}

// A seeded run gives the same public output on any number of workers.
func TestDPALSRepeatableAcrossWorkers(t *testing.T) {
	lr := newLowRank(t, 60, 40, 2, 0.4, 0.2, 13)
	run := func(w int) []float64 {
		o := dpalsInputs(lr.train, 3, 2, gaussian{0.3})
		o.Workers = w
		V, _, err := DPALS(context.Background(), lr.train, o)
		if err != nil {
			t.Fatal(err)
		}
		return V
	}
	a, b := run(1), run(3)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("V[%d] differs: %v vs %v", i, a[i], b[i])
		}
	}
}

// The item lists taken from the item-major arrays (no sampling) and the
// lists built user by user (the sampling path, here with a cap no user
// reaches) give the same public output, bit for bit (deterministic: fixed
// seeds).
func TestDPALSListsAgree(t *testing.T) {
	lr := newLowRank(t, 60, 40, 2, 0.4, 0.2, 14)
	run := func(maxPerUser int) []float64 {
		o := dpalsInputs(lr.train, 3, 2, gaussian{0.3})
		o.MaxPerUser = maxPerUser
		V, _, err := DPALS(context.Background(), lr.train, o)
		if err != nil {
			t.Fatal(err)
		}
		return V
	}
	a, b := run(0), run(lr.train.NumItems+1)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("V[%d] differs: %v (item-major arrays) vs %v (built lists)", i, a[i], b[i])
		}
	}
}

// The pooled Gram: with a vanishing PoolNoise each item keeps its own
// (PSD-projected) block, so the output is the per-item solve's to
// rounding; with a huge PoolNoise every item's system is W_j·S̄ and
// nothing of its own block, so two items with the same weight and the
// same right-hand side get the same factors. Deterministic (fixed seeds).
func TestDPALSPooledGram(t *testing.T) {
	lr := newLowRank(t, 200, 60, 2, 0.4, 0.2, 21)
	run := func(pool bool, poolNoise float64) []float64 {
		o := dpalsInputs(lr.train, 3, 2, gaussian{0.3})
		o.BiasScale = 0
		if pool {
			o.PoolWeights, o.PoolNoise = o.Counts, poolNoise
		}
		V, _, err := DPALS(context.Background(), lr.train, o)
		if err != nil {
			t.Fatal(err)
		}
		return V
	}
	own, blendOwn := run(false, 0), run(true, 1e-12)
	for i := range own {
		if math.Abs(own[i]-blendOwn[i]) > 1e-9*(1+math.Abs(own[i])) {
			t.Fatalf("V[%d]: per-item %v, pooled with no noise %v", i, own[i], blendOwn[i])
		}
	}
	pooled := run(true, 1e12)
	var diff float64
	for i := range own {
		diff += math.Abs(own[i] - pooled[i])
	}
	if diff < 1e-6 {
		t.Errorf("the pooled Gram changed nothing (Σ|ΔV| = %g)", diff)
	}
	// Noiseless: the pooled output still fits held-out ratings far
	// better than the mean (the pool is the users' second moment).
	o := dpalsInputs(lr.train, 3, 4, noNoise{})
	o.BiasScale, o.PoolWeights, o.PoolNoise = 0, o.Counts, 0
	V, itemBias, err := DPALS(context.Background(), lr.train, o)
	if err != nil {
		t.Fatal(err)
	}
	got := dpalsRMSE(t, lr.train, lr.test, o, V, itemBias)
	mean := (&Factors{Mean: lr.train.Mean(), UserBias: make([]float64, 200), ItemBias: make([]float64, 60)}).RMSE(lr.test, 0, 0)
	t.Logf("pooled, noiseless: held-out RMSE %.4f, mean %.4f", got, mean)
	if got > 0.75*mean {
		t.Errorf("pooled Gram without noise: RMSE %.4f against the mean's %.4f", got, mean)
	}
	// A pool needs a weight per item and the statistics' own weights.
	bad := dpalsInputs(lr.train, 3, 1, noNoise{})
	bad.PoolWeights = []float64{1}
	if _, _, err := DPALS(context.Background(), lr.train, bad); err == nil {
		t.Error("a pool with one weight for 60 items was accepted")
	}
}

// rowsEngine sums a statistic over a Problem's users in user order
// (statistic.Sum), after an Encode/Decode round trip of its plan: what
// an external engine's workers compute.
type rowsEngine struct {
	p    *Problem
	sums [][]float64
}

func (e *rowsEngine) Users() int { return e.p.NumUsers }

func (e *rowsEngine) Sum(ctx context.Context, c statistic.Contribution) ([]float64, error) {
	kind, plan, err := statistic.Encode(c)
	if err != nil {
		return nil, err
	}
	if c, err = statistic.Decode(kind, plan); err != nil {
		return nil, err
	}
	v, err := statistic.Sum(ctx, e.p.NumUsers, func(u int) statistic.Row {
		beg, end := e.p.RowPtr[u], e.p.RowPtr[u+1]
		return statistic.Row{Items: e.p.RowCol[beg:end], Vals: e.p.RowVal[beg:end]}
	}, c)
	e.sums = append(e.sums, v)
	return v, err
}

// stepRecorder keeps what each release receives (the pre-noise statistics,
// as released: off-diagonals ×√2, right-hand sides ×s) before adding
// rel's noise.
type stepRecorder struct {
	rel  Releaser
	mu   sync.Mutex // the item steps release from several workers
	seen [][]float64
}

func (r *stepRecorder) record(x []float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, append([]float64(nil), x...))
}

func (r *stepRecorder) Release(src *noise.Source, x []float64) error {
	r.record(x)
	return r.rel.Release(src, x)
}

func (r *stepRecorder) ReleaseSym(src *noise.Source, s *mat.SymDense) error {
	r.record(s.RawSymmetric().Data)
	return r.rel.ReleaseSym(src, s)
}

// The ALS steps summed by an engine from ALSStepStatistic's contributions
// (each user's row computed from the plan's public factors) release the
// same pre-noise statistics as the in-process item-major sums, bit for
// bit (both sum the same expansions in double-double form), and so the
// same factors — with and without bias refinement, with and without
// inactive items, the in-process sum on one worker and on three.
// Deterministic (fixed seeds).
func TestDPALSEngineMatchesInProcess(t *testing.T) {
	lr := newLowRank(t, 90, 45, 2, 0.4, 0.2, 15)
	for _, tc := range []struct {
		name      string
		biasScale float64
		inactive  bool
	}{{"bias refinement", 1, false}, {"fixed biases", 0, false}, {"inactive items", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(eng statistic.Engine, workers int) ([]float64, []float64, *stepRecorder) {
				rec := &stepRecorder{rel: gaussian{0.3}}
				o := dpalsInputs(lr.train, 3, 2, rec)
				o.BiasScale, o.Workers, o.Engine = tc.biasScale, workers, eng
				if tc.inactive {
					for j := 0; j < lr.train.NumItems; j += 4 {
						o.Active[j] = false
					}
				}
				p := lr.train
				if eng != nil {
					p = nil
				}
				V, b, err := DPALS(context.Background(), p, o)
				if err != nil {
					t.Fatal(err)
				}
				return V, b, rec
			}
			eng := &rowsEngine{p: lr.train}
			V1, b1, rec1 := run(eng, 1)
			if len(eng.sums) != 2 {
				t.Fatalf("%d engine sums, want one per step (2)", len(eng.sums))
			}
			for _, workers := range []int{1, 3} {
				V0, b0, rec0 := run(nil, workers)
				if len(rec0.seen) != len(rec1.seen) || len(rec0.seen) == 0 {
					t.Fatalf("%d releases in process, %d through the engine", len(rec0.seen), len(rec1.seen))
				}
				// The recorder sees the items' releases in the order the
				// workers make them: compared one by one on one worker,
				// through the factors (each chunk's own noise stream) on three.
				for i := range rec0.seen {
					if workers > 1 {
						break
					}
					for c, x := range rec0.seen[i] {
						if y := rec1.seen[i][c]; x != y {
							t.Fatalf("%d workers, release %d, value %d: %v in process, %v through the engine", workers, i, c, x, y)
						}
					}
				}
				for _, pair := range [][2][]float64{{V0, V1}, {b0, b1}} {
					for i, x := range pair[0] {
						if y := pair[1][i]; x != y {
							t.Fatalf("%d workers, value %d: %v in process, %v through the engine", workers, i, x, y)
						}
					}
				}
			}
		})
	}
}

// An engine cannot draw --max-per-user's per-user sample: refused.
func TestDPALSEngineRefusesSampling(t *testing.T) {
	lr := newLowRank(t, 20, 10, 2, 0.4, 0.2, 16)
	o := dpalsInputs(lr.train, 2, 1, noNoise{})
	o.MaxPerUser, o.Engine = 3, &rowsEngine{p: lr.train}
	if _, _, err := DPALS(context.Background(), nil, o); err == nil || !strings.Contains(err.Error(), "max-per-user") {
		t.Fatalf("err = %v, want the sampling refused", err)
	}
}
