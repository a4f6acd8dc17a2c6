package recovery

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/synth"
)

// rrProblem randomizes every user of d with randomized response at
// per-cell ε (levels 1…Levels) and wraps the reports as a Problem whose
// indices are the truth's.
func rrProblem(t testing.TB, d *synth.LowRankData, eps float64, src *noise.Source) *Problem {
	t.Helper()
	sc := ldp.Scale{Min: 1, Max: float64(d.Config.Levels), Levels: d.Config.Levels}
	r, err := ldp.New(ldp.RR, eps, sc)
	if err != nil {
		t.Fatal(err)
	}
	z := randomizeAll(t, d, r, src)
	p, err := NewProblem(z, ldp.Header{Mechanism: ldp.RR, Epsilon: eps, Scale: sc, Users: d.Config.Users, Items: d.Config.Items})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// spreadRatings is a rank-2 matrix of ratings 1…5 with a spread like
// MovieLens' (3 + a_i·b_j + noise, rounded and clamped), 30 % of the cells
// rated: synth.LowRank's levels crowd the middle one, too little signal to
// tell a good recovery from the mean.
func spreadRatings(t testing.TB, users, items int, seed uint64) *synth.LowRankData {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	a, b := make([]float64, 2*users), make([]float64, 2*items)
	for k := range a {
		a[k] = rng.NormFloat64()
	}
	for k := range b {
		b[k] = rng.NormFloat64()
	}
	ptr := []int64{0}
	var col []int32
	var val []float32
	for i := range users {
		for j := range items {
			if rng.Float64() < 0.3 {
				v := 3 + 0.9*(a[2*i]*b[2*j]+a[2*i+1]*b[2*j+1]) + 0.4*rng.NormFloat64()
				col = append(col, int32(j))
				val = append(val, float32(math.Max(1, math.Min(5, math.Round(v)))))
			}
		}
		ptr = append(ptr, int64(len(col)))
	}
	m, err := ratings.FromCSR(ratings.Sequential(users), ratings.Sequential(items), items, ptr, col, val, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &synth.LowRankData{Observed: m, Config: synth.LowRankConfig{Users: users, Items: items, Levels: 5}}
}

// TestHeldOutUnbiased checks the estimates of A = Σ_rated g² and
// B = Σ_rated g·(θ − μ) on one fold against their true values, for a fixed
// matrix M (g = M − μ) and 400 independent randomizations of known ratings:
// the mean estimate must lie within 4 standard errors of the truth (a
// false failure has probability ≈ 6·10⁻⁵ per quantity under the normal
// approximation), and the variance bounds must not understate the
// estimates' spread (at least 0.7 × the sample variance, whose own
// relative standard deviation at 400 draws is 0.07: a false failure needs
// a 4-σ deviation).
func TestHeldOutUnbiased(t *testing.T) {
	cfg := synth.LowRankConfig{Users: 80, Items: 50, Rank: 2, ObsFrac: 0.3, Noise: 0.1, Levels: 5}
	d, err := synth.LowRank(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	const mu, fold, draws = 2.9, 1, 400
	m := &Result{Offset: 3.1, Rank: 1, UserBias: make([]float64, cfg.Users), ItemBias: make([]float64, cfg.Items),
		U: make([]float64, cfg.Users), V: make([]float64, cfg.Items)}
	for i := range cfg.Users {
		m.UserBias[i], m.U[i] = 0.3*math.Sin(float64(i)), math.Cos(float64(3*i))
	}
	for j := range cfg.Items {
		m.ItemBias[j], m.V[j] = 0.2*math.Cos(float64(j)), 0.5*math.Sin(float64(2*j))
	}
	// The truth on the fold's rated cells (the folds are functions of the
	// IDs, the same for every randomization).
	p0 := rrProblem(t, d, 1, noise.Seeded(99))
	var wantA, wantB float64
	d.Observed.All(func(e ratings.Entry) bool {
		i, j := int(e.User), int(e.Item)
		if p0.inFold(i, j) == fold {
			g := m.At(i, j) - mu
			wantA += g * g
			wantB += g * (float64(e.Value) - mu)
		}
		return true
	})
	for _, eps := range []float64{0.5, 3} {
		src := noise.Seeded(11)
		var sa, sa2, sb, sb2, sva, svb float64
		for range draws {
			p := rrProblem(t, d, eps, src)
			a, b, va, vb := p.heldOut(fold, m, mu, 2)
			sa, sa2, sb, sb2, sva, svb = sa+a, sa2+a*a, sb+b, sb2+b*b, sva+va, svb+vb
		}
		n := float64(draws)
		meanA, meanB := sa/n, sb/n
		varA, varB := (sa2-n*meanA*meanA)/(n-1), (sb2-n*meanB*meanB)/(n-1)
		t.Logf("ε = %g: A %.1f, estimate %.1f ± %.1f (bound sd %.1f); B %.1f, estimate %.1f ± %.1f (bound sd %.1f)",
			eps, wantA, meanA, math.Sqrt(varA), math.Sqrt(sva/n), wantB, meanB, math.Sqrt(varB), math.Sqrt(svb/n))
		if d := math.Abs(meanA - wantA); d > 4*math.Sqrt(varA/n) {
			t.Errorf("ε = %g: mean Â = %.2f, true A = %.2f: %.1f standard errors apart", eps, meanA, wantA, d/math.Sqrt(varA/n))
		}
		if d := math.Abs(meanB - wantB); d > 4*math.Sqrt(varB/n) {
			t.Errorf("ε = %g: mean B̂ = %.2f, true B = %.2f: %.1f standard errors apart", eps, meanB, wantB, d/math.Sqrt(varB/n))
		}
		if sva/n < 0.7*varA || svb/n < 0.7*varB {
			t.Errorf("ε = %g: variance bounds %.1f, %.1f understate the sample variances %.1f, %.1f", eps, sva/n, svb/n, varA, varB)
		}
	}
}

// ratedRMSE is the RMSE of at over the rated cells of d (the ratings X).
func ratedRMSE(d *synth.LowRankData, at func(i, j int) float64) float64 {
	var s float64
	d.Observed.All(func(e ratings.Entry) bool {
		x := at(int(e.User), int(e.Item)) - float64(e.Value)
		s += x * x
		return true
	})
	return math.Sqrt(s / float64(d.Observed.Len()))
}

// TestShrinkNeverWorseThanMean runs the shrunk recovery on randomized
// response reports of a known rank-2 matrix of ratings 1…5 from per-cell
// ε = 0.02 (no usable signal) to ε = 4 (strong signal), with a target μ
// off the ratings' mean by 0.1 (a private estimate is off too), noise seeds
// 1–3. At every ε and seed its RMSE on the ratings must not exceed μ's;
// where there is no signal both weights must be 0 and every prediction μ
// exactly; at ε = 4 the weights must exceed 0.5 and the RMSE be at most 0.8
// of μ's and within 10 % of the unshrunk recovery's (which at that ε is
// far better than μ: the shrinkage must not throw the signal away). Deterministic for these seeds; the weights' bounds (z = 3) make a
// worse-than-μ fold unlikely (≈ 0.3 % each) where the recovery itself is
// worse than μ.
func TestShrinkNeverWorseThanMean(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	d := spreadRatings(t, 300, 200, 7)
	var mean float64
	d.Observed.All(func(e ratings.Entry) bool { mean += float64(e.Value); return true })
	mu := mean/float64(d.Observed.Len()) + 0.1
	base := ratedRMSE(d, func(int, int) float64 { return mu })
	for _, eps := range []float64{0.02, 0.3, 1, 4} {
		for seed := uint64(1); seed <= 3; seed++ {
			p := rrProblem(t, d, eps, noise.Seeded(seed))
			res, sh, err := Shrink(context.Background(), p, Options{Debias: true, Rand: noise.Seeded(seed)}, mu, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := ratedRMSE(d, res.At)
			plain, err := Recover(context.Background(), p, Options{Debias: true, Rand: noise.Seeded(seed)})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("ε = %g seed %d: weights %.3f, RMSE %.4f (μ %.4f, unshrunk recovery %.4f)", eps, seed, sh.Weights, got, base, ratedRMSE(d, plain.At))
			if got > base+1e-12 {
				t.Errorf("ε = %g seed %d: shrunk RMSE %.4f worse than μ's %.4f", eps, seed, got, base)
			}
			switch eps {
			case 0.02:
				if sh.Weights != [2]float64{} || res.Rank != 0 || res.At(5, 7) != mu {
					t.Errorf("ε = %g seed %d: weights %v, rank %d, prediction %v: want μ = %v", eps, seed, sh.Weights, res.Rank, res.At(5, 7), mu)
				}
			case 4:
				if full := ratedRMSE(d, plain.At); sh.Weights[0] < 0.5 || sh.Weights[1] < 0.5 || got > 0.8*base || got > 1.1*full {
					t.Errorf("ε = %g seed %d: weights %v, RMSE %.4f: want weights > 0.5 and RMSE ≤ 0.8 × %.4f and ≤ 1.1 × %.4f", eps, seed, sh.Weights, got, base, full)
				}
			}
		}
	}
}

// TestFoldCells checks the folds split the population's cells: every
// present report lands in exactly one fold, and the cells per row, per
// column and in total add up to the whole problem's.
func TestFoldCells(t *testing.T) {
	cfg := synth.LowRankConfig{Users: 31, Items: 17, Rank: 1, ObsFrac: 0.3, Noise: 0.1, Levels: 5}
	d, err := synth.LowRank(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := rrProblem(t, d, 1, noise.Seeded(1))
	p.TotalRows, p.TotalCols = 33, 20 // clients and items without any report
	f0, f1 := p.fold(0), p.fold(1)
	if len(f0.Z)+len(f1.Z) != len(p.Z) {
		t.Fatalf("folds hold %d + %d reports, want %d", len(f0.Z), len(f1.Z), len(p.Z))
	}
	r, c, tot := p.cells()
	r0, c0, t0 := f0.cells()
	r1, c1, t1 := f1.cells()
	if t0+t1 != tot || tot != 33*20 {
		t.Errorf("fold cells %v + %v, want %v = 660", t0, t1, tot)
	}
	for i := range r {
		if r0[i]+r1[i] != r[i] {
			t.Errorf("row %d: %v + %v cells, want %v", i, r0[i], r1[i], r[i])
		}
	}
	for j := range c {
		if c0[j]+c1[j] != c[j] {
			t.Errorf("column %d: %v + %v cells, want %v", j, c0[j], c1[j], c[j])
		}
	}
	for i := range f1.Rows {
		for k := f1.Ptr[i]; k < f1.Ptr[i+1]; k++ {
			if p.inFold(i, int(f1.Col[k])) != 1 {
				t.Fatalf("fold 1 holds cell (%d, %d)", i, f1.Col[k])
			}
		}
	}
}
