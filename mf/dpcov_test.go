package mf

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/statistic"
)

// recorder is a Releaser that keeps what it was asked to release (as the
// mechanism sees it: off-diagonals ×√2) and adds nothing.
type recorder struct{ got []float64 }

func (r *recorder) Release(_ *noise.Source, x []float64) error {
	r.got = append([]float64(nil), x...)
	return nil
}

func (r *recorder) ReleaseSym(_ *noise.Source, s *mat.SymDense) error {
	n := s.SymmetricDim()
	r.got = r.got[:0]
	for a := range n {
		for b := a; b < n; b++ {
			r.got = append(r.got, s.At(a, b))
		}
	}
	return nil
}

// problemFromRows builds a Problem from per-user (item, rating) rows.
func problemFromRows(t *testing.T, items int, rows [][][2]float64) *Problem {
	t.Helper()
	rowPtr := make([]int64, len(rows)+1)
	var cols []int32
	var vals []float32
	for u, row := range rows {
		for _, e := range row {
			cols = append(cols, int32(e[0]))
			vals = append(vals, float32(e[1]))
		}
		rowPtr[u+1] = int64(len(cols))
	}
	m, err := ratings.FromCSR(ratings.Sequential(len(rows)), ratings.Sequential(items), items, rowPtr, cols, vals, nil)
	if err != nil {
		t.Fatal(err)
	}
	return FromMatrix(m)
}

// Replacing one user's ratings by any others moves the released covariance
// (as the mechanism sees it) by at most CovSensitivity(R) in ℓ2, and the
// bound is nearly reached (one item rated at opposite extremes).
// Deterministic: fixed seeds.
func TestCovSensitivityHolds(t *testing.T) {
	const items, users = 9, 6
	r := rand.New(rand.NewPCG(3, 3))
	randomRow := func() [][2]float64 {
		var row [][2]float64
		for j := range items {
			if r.IntN(2) == 0 {
				v := 1 + 4*r.Float64()
				if r.IntN(2) == 0 {
					v = float64(1 + 4*r.IntN(2))
				}
				row = append(row, [2]float64{float64(j), v})
			}
		}
		return row
	}
	bias := make([]float64, items)
	for j := range bias {
		bias[j] = 0.5 * r.NormFloat64()
	}
	release := func(rows [][][2]float64, clip float64, cover []int) []float64 {
		rec := &recorder{}
		_, _, err := CovFeatures(context.Background(), problemFromRows(t, items, rows), CovOptions{
			Items: cover, Rank: 1, Mean: 3, ItemBias: bias, UserDamping: 1, Clip: clip,
			Release: rec, Noise: noise.Seeded(1), Rand: rand.New(rand.NewPCG(1, 1)), Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		return rec.got
	}
	worst := 0.0
	for trial := range 3000 {
		clip := []float64{0.5, 1, 2}[trial%3]
		cover := r.Perm(items)[:3+r.IntN(items-2)]
		rows := make([][][2]float64, users)
		for u := range rows {
			rows[u] = randomRow()
		}
		other := append([][][2]float64(nil), rows...)
		other[r.IntN(users)] = randomRow()
		if trial%10 == 0 {
			// One covered item, rated at the two extremes of the centring.
			rows[0] = [][2]float64{{float64(cover[0]), 5}}
			other = append([][][2]float64(nil), rows...)
			other[0] = [][2]float64{{float64(cover[0]), 1}}
		}
		a, b := release(rows, clip, cover), release(other, clip, cover)
		var d float64
		for i := range a {
			d += (a[i] - b[i]) * (a[i] - b[i])
		}
		ratio := math.Sqrt(d) / CovSensitivity(clip)
		worst = math.Max(worst, ratio)
		if ratio > 1+1e-12 {
			t.Fatalf("trial %d: ‖ΔC‖ = %g > Δ = %g", trial, math.Sqrt(d), CovSensitivity(clip))
		}
	}
	t.Logf("largest ‖ΔC‖/Δ seen: %.4f", worst)
	if worst < 0.6 {
		t.Errorf("largest ‖ΔC‖/Δ seen %.3f: the test never came near the bound", worst)
	}
}

// Without noise the top eigenvector of the covariance is the planted item
// factor of a rank-one rating matrix (|cos| ≥ 0.98), and with the noise
// of a small budget it is not (the eigenvalue falls under the noise edge):
// fixed seeds, deterministic.
func TestCovFeaturesRecoverPlanted(t *testing.T) {
	const users, items = 3000, 40
	r := rand.New(rand.NewPCG(8, 8))
	v := make([]float64, items)
	for j := range v {
		v[j] = r.NormFloat64()
	}
	rows := make([][][2]float64, users)
	for u := range rows {
		a := r.NormFloat64()
		for j := range items {
			if r.Float64() < 0.5 {
				rows[u] = append(rows[u], [2]float64{float64(j), 3 + 0.5*a*v[j] + 0.2*r.NormFloat64()})
			}
		}
	}
	p := problemFromRows(t, items, rows)
	cover := make([]int, items)
	for j := range cover {
		cover[j] = j
	}
	run := func(rel Releaser) (float64, float64) {
		vals, vecs, err := CovFeatures(context.Background(), p, CovOptions{Items: cover, Rank: 2, Mean: 3,
			ItemBias: make([]float64, items), UserDamping: 0, Clip: 2, Release: rel, Noise: noise.Seeded(5),
			Rand: rand.New(rand.NewPCG(2, 2))})
		if err != nil {
			t.Fatal(err)
		}
		var dot, n1, n2 float64
		for j := range items {
			dot += vecs.At(j, 0) * v[j]
			n1 += vecs.At(j, 0) * vecs.At(j, 0)
			n2 += v[j] * v[j]
		}
		if vals[0] < vals[1] {
			t.Errorf("eigenvalues not in decreasing order: %v", vals)
		}
		return math.Abs(dot) / math.Sqrt(n1*n2), vals[0]
	}
	cos, top := run(noNoise{})
	t.Logf("noiseless: |cos| = %.4f, top eigenvalue %.1f", cos, top)
	if cos < 0.98 {
		t.Errorf("noiseless |cos| = %.4f, want ≥ 0.98", cos)
	}
	const sigma = 100.0
	cos, top = run(gaussian{sigma: sigma})
	edge := math.Sqrt2 * sigma * math.Sqrt(items) // off-diagonal noise σ/√2 after releaseGram
	t.Logf("σ = %g: |cos| = %.4f, top eigenvalue %.1f, noise edge ≈ %.1f", sigma, cos, top, edge)
	if cos > 0.9 {
		t.Errorf("with noise σ = %g the planted vector is still found (|cos| = %.3f): the noise is not applied", sigma, cos)
	}
}

// On sparse ratings with skewed popularity the diagonal hides the shared
// structure: the noiseless top eigenvector of the covariance, divided by
// the items' counts, is far from the planted rank-one factor, and with the
// diagonal dropped (CovOptions.DropDiagonal) it is close (fixed seeds,
// deterministic; measured over the 30 most rated items: |cos| 0.28 kept, 0.88 dropped).
func TestCovDropDiagonalOnSparseRatings(t *testing.T) {
	const users, items = 4000, 60
	r := rand.New(rand.NewPCG(9, 9))
	v := make([]float64, items)
	for j := range v {
		v[j] = r.NormFloat64()
	}
	rows := make([][][2]float64, users)
	count := make([]float64, items)
	for u := range rows {
		a := r.NormFloat64()
		for j := range items {
			// Item j is rated with probability ∝ (j+1)^-0.8: a few items
			// carry most ratings.
			if r.Float64() < 0.9*math.Pow(float64(j+1), -0.8) {
				rows[u] = append(rows[u], [2]float64{float64(j), 3 + 0.4*a*v[j] + 0.8*r.NormFloat64()})
				count[j]++
			}
		}
	}
	p := problemFromRows(t, items, rows)
	cover := make([]int, items)
	for j := range cover {
		cover[j] = j
	}
	cosine := func(drop bool) float64 {
		_, vecs, err := CovFeatures(context.Background(), p, CovOptions{Items: cover, Rank: 1, Mean: 3,
			ItemBias: make([]float64, items), Clip: 3, Release: noNoise{}, Noise: noise.Seeded(5),
			Rand: rand.New(rand.NewPCG(2, 2)), DropDiagonal: drop})
		if err != nil {
			t.Fatal(err)
		}
		var dot, n1, n2 float64
		for j := range 30 { // the 30 most rated: the others' co-ratings are few
			x := vecs.At(j, 0) / math.Max(count[j], 1)
			dot += x * v[j]
			n1 += x * x
			n2 += v[j] * v[j]
		}
		return math.Abs(dot) / math.Sqrt(n1*n2)
	}
	with, without := cosine(true), cosine(false)
	t.Logf("|cos| with the planted factor: diagonal dropped %.3f, kept %.3f", with, without)
	if with < 0.8 || with < without+0.3 {
		t.Errorf("dropping the diagonal: |cos| %.3f, keeping it %.3f", with, without)
	}
}

// The in-process covariance sum (addPairs, positions sorted, no call per
// pair) equals the sum of the users' pairs as Contribute gives them, bit
// for bit (fixed seed).
func TestCovSumMatchesPairs(t *testing.T) {
	lr := newLowRank(t, 300, 50, 2, 0.4, 0.3, 31)
	p := lr.train
	all := make([]int, 45)
	for q := range all {
		all[q] = (q * 7) % 50 // 45 distinct items, not in item order
	}
	// The tiled sum adds each entry's products in double-double form
	// whatever the tiles, batches and workers, so it equals statistic.Sum
	// (privrec-beam's combine) bit for bit.
	for _, tc := range []struct {
		name                 string
		items                []int
		tile, batch, workers int
	}{
		{"one tile", []int{7, 3, 40, 12, 0, 33, 21, 9, 48, 15}, 128, 1 << 14, 1},
		{"tiles and batches, 1 worker", all, 8, 37, 1},
		{"tiles and batches, 3 workers", all, 8, 37, 3},
		{"uneven tiles, 2 workers", all, 7, 300, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(tile, batch int) { covTile, covBatchUsers = tile, batch }(covTile, covBatchUsers)
			covTile, covBatchUsers = tc.tile, tc.batch
			st := &CovStatistic{Items: tc.items, Mean: 3, ItemBias: make([]float64, p.NumItems), UserDamping: 2, Clip: 1.5}
			if err := st.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := st.sum(context.Background(), p, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			m := len(tc.items)
			want, err := statistic.Sum(context.Background(), p.NumUsers, func(u int) statistic.Row {
				beg, end := p.RowPtr[u], p.RowPtr[u+1]
				return statistic.Row{Items: p.RowCol[beg:end], Vals: p.RowVal[beg:end]}
			}, st)
			if err != nil {
				t.Fatal(err)
			}
			for a := range m {
				for b := a; b < m; b++ {
					if got.At(a, b) != want[statistic.UpperIndex(m, a, b)] {
						t.Fatalf("C[%d,%d] = %v, statistic.Sum gives %v", a, b, got.At(a, b), want[statistic.UpperIndex(m, a, b)])
					}
				}
			}
		})
	}
}
