package synth

import (
	"context"
	"math"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/ratings"
)

// singularValues returns the singular values of a dense matrix.
func singularValues(t *testing.T, d *mat.Dense) []float64 {
	t.Helper()
	var svd mat.SVD
	if !svd.Factorize(d, mat.SVDNone) {
		t.Fatal("SVD failed")
	}
	return svd.Values(nil)
}

// numericalRank counts singular values above 1e-9 of the largest.
func numericalRank(t *testing.T, d *mat.Dense) int {
	sv := singularValues(t, d)
	r := 0
	for _, s := range sv {
		if s > 1e-9*sv[0] {
			r++
		}
	}
	return r
}

func TestOneBit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  OneBitConfig
	}{
		{"paper probit", OneBitDefaults()},
		{"paper logistic", func() OneBitConfig { c := OneBitDefaults(); c.Link = Logistic; return c }()},
		{"rank 3 alpha 2", OneBitConfig{Rows: 60, Cols: 80, Rank: 3, Alpha: 2, ObsFrac: 0.4, Link: Probit, Sigma: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := OneBit(tc.cfg, 11)
			if err != nil {
				t.Fatal(err)
			}
			c := tc.cfg
			o := d.Observed
			if o.NumUsers() != c.Rows || o.NumItems() != c.Cols {
				t.Fatalf("shape %v", o)
			}
			if want := int(math.Round(c.ObsFrac * float64(c.Rows*c.Cols))); o.Len() != want {
				t.Fatalf("%d observed, want exactly %d", o.Len(), want)
			}
			o.All(func(e ratings.Entry) bool {
				if e.Value != 1 && e.Value != -1 {
					t.Fatalf("observed value %v is not ±1", e.Value)
				}
				return true
			})
			if mx := d.Truth.MaxAbs(); math.Abs(mx-c.Alpha) > 1e-12 {
				t.Fatalf("‖M‖∞ = %v, want %v", mx, c.Alpha)
			}
			dense := d.Truth.Dense()
			if mx := mat.Norm(dense, math.Inf(1)); mx > c.Alpha*float64(c.Cols) { // sanity of Dense vs factors
				t.Fatalf("dense truth norm %v", mx)
			}
			if r := numericalRank(t, dense); r != c.Rank {
				t.Fatalf("truth has rank %d, want %d", r, c.Rank)
			}
			again, err := OneBit(tc.cfg, 11)
			if err != nil {
				t.Fatal(err)
			}
			if again.Observed.Fingerprint() != o.Fingerprint() || !mat.Equal(again.Truth.Dense(), dense) {
				t.Fatal("same seed gave different data")
			}
			other, _ := OneBit(tc.cfg, 12)
			if other.Observed.Fingerprint() == o.Fingerprint() {
				t.Fatal("different seeds gave the same data")
			}
		})
	}
}

// TestOneBitLink checks that Y = +1 with probability h(M): the number of
// +1s on Ω is a sum of independent Bernoulli(h(M_ij)) given M and Ω, so it
// lies within 5 sd of Σ h(M_ij) except with probability < 6e-7 per link
// (false-failure rate of the test < 1.2e-6).
func TestOneBitLink(t *testing.T) {
	for _, l := range []Link{Probit, Logistic} {
		c := OneBitConfig{Rows: 200, Cols: 200, Rank: 1, Alpha: 1, ObsFrac: 0.5, Link: l, Sigma: 1}
		d, err := OneBit(c, 5)
		if err != nil {
			t.Fatal(err)
		}
		var plus, mean, variance float64
		d.Observed.All(func(e ratings.Entry) bool {
			p := l.Prob(d.Truth.At(int(e.User), int(e.Item)), c.Sigma)
			mean += p
			variance += p * (1 - p)
			if e.Value > 0 {
				plus++
			}
			return true
		})
		if z := (plus - mean) / math.Sqrt(variance); math.Abs(z) > 5 {
			t.Errorf("%s: %v positives, expected %.1f (z = %.2f)", l, plus, mean, z)
		}
	}
}

// TestOneBitUniformΩ checks that Ω is uniform: over 400 seeds each of the
// 100 cells of a 10 × 10 matrix with 15 % observed is observed
// Binomial(400, 0.15) times (mean 60, sd 7.14); the band [27, 93] is 4.6 sd
// on each side, so the false-failure rate is below 100 × 5e-6 = 5e-4.
func TestOneBitUniformΩ(t *testing.T) {
	c := OneBitConfig{Rows: 10, Cols: 10, Rank: 1, Alpha: 1, ObsFrac: 0.15, Link: Probit, Sigma: 1}
	var counts [10][10]int
	for s := range uint64(400) {
		d, err := OneBit(c, s)
		if err != nil {
			t.Fatal(err)
		}
		d.Observed.All(func(e ratings.Entry) bool { counts[e.User][e.Item]++; return true })
	}
	for i := range counts {
		for j, n := range counts[i] {
			if n < 27 || n > 93 {
				t.Errorf("cell (%d, %d) observed %d times in 400, want ≈ 60", i, j, n)
			}
		}
	}
}

func TestRankOne(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  RankOneConfig
	}{
		{"dense items (bitset path)", RankOneConfig{Users: 5000, Items: 100, PerUser: 20}},
		{"many items (sort path)", RankOneConfig{Users: 3000, Items: 10000, PerUser: 3}},
		{"all items", RankOneConfig{Users: 50, Items: 7, PerUser: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := RankOne(ctx, tc.cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			c := tc.cfg
			o := d.Observed
			if o.NumUsers() != c.Users || o.NumItems() != c.Items || o.Len() != c.Users*c.PerUser {
				t.Fatalf("got %v, want %d × %d with %d ratings", o, c.Users, c.Items, c.Users*c.PerUser)
			}
			for u := range int32(c.Users) {
				if o.UserCount(u) != c.PerUser {
					t.Fatalf("user %d has %d ratings", u, o.UserCount(u))
				}
			}
			if mx := d.Truth.MaxAbs(); math.Abs(mx-1) > 1e-12 {
				t.Fatalf("‖Y*‖∞ = %v, want 1", mx)
			}
			o.All(func(e ratings.Entry) bool {
				if want := float32(d.Truth.At(int(e.User), int(e.Item))); e.Value != want {
					t.Fatalf("rating %v, truth %v", e.Value, want)
				}
				return true
			})
			if c.Users*c.Items <= 1e6 {
				if r := numericalRank(t, d.Truth.Dense()); r != 1 {
					t.Fatalf("truth rank %d", r)
				}
			}
		})
	}
}

// TestRankOneUniform checks that each user's items are a uniform sample:
// with 5000 users choosing 20 of 100 items, an item's count is
// Binomial(5000, 0.2) (mean 1000, sd 28.3); the band [870, 1130] is 4.6 sd
// each side, so the false-failure rate is below 100 × 5e-6 = 5e-4.
func TestRankOneUniform(t *testing.T) {
	d, err := RankOne(context.Background(), RankOneConfig{Users: 5000, Items: 100, PerUser: 20}, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int32(100) {
		if n := d.Observed.ItemCount(i); n < 870 || n > 1130 {
			t.Errorf("item %d chosen by %d users, want ≈ 1000", i, n)
		}
	}
}

// TestRankOneCores checks the output does not depend on the number of cores.
func TestRankOneCores(t *testing.T) {
	c := RankOneConfig{Users: 3*rankOneChunk + 17, Items: 50, PerUser: 10, Noise: 0.1}
	prev := runtime.GOMAXPROCS(1)
	one, err := RankOne(context.Background(), c, 4)
	runtime.GOMAXPROCS(max(prev, 2))
	if err != nil {
		t.Fatal(err)
	}
	two, err := RankOne(context.Background(), c, 4)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	if one.Observed.Fingerprint() != two.Observed.Fingerprint() {
		t.Fatal("output depends on GOMAXPROCS")
	}
}

// TestRankOneNoise checks the optional noise: residuals of 50 000 ratings
// have sd within 3 % of σ = 0.3 (the sample sd's own sd is σ/√(2n) ≈ 0.3 %,
// so this is a 10-sd band; false-failure rate ≈ 0) and mean within
// 5 sd = 5σ/√n ≈ 0.0067 of 0 (false-failure rate 6e-7).
func TestRankOneNoise(t *testing.T) {
	const sigma = 0.3
	d, err := RankOne(context.Background(), RankOneConfig{Users: 5000, Items: 40, PerUser: 10, Noise: sigma}, 9)
	if err != nil {
		t.Fatal(err)
	}
	var s, ss, n float64
	d.Observed.All(func(e ratings.Entry) bool {
		r := float64(e.Value) - d.Truth.At(int(e.User), int(e.Item))
		s += r
		ss += r * r
		n++
		return true
	})
	mean := s / n
	sd := math.Sqrt(ss/n - mean*mean)
	if math.Abs(mean) > 5*sigma/math.Sqrt(n) || math.Abs(sd/sigma-1) > 0.03 {
		t.Fatalf("residual mean %v sd %v, want 0 and %v", mean, sd, sigma)
	}
}

func TestRankOneCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RankOne(ctx, RankOneConfig{Users: 100000, Items: 50, PerUser: 5}, 1); err == nil {
		t.Fatal("cancelled generation succeeded")
	}
}

func TestLowRank(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  LowRankConfig
	}{
		{"defaults (continuous)", LowRankDefaults()},
		{"5 levels", LowRankConfig{Users: 300, Items: 200, Rank: 3, ObsFrac: 0.2, Noise: 0.2, Levels: 5}},
		{"no noise", LowRankConfig{Users: 100, Items: 100, Rank: 2, ObsFrac: 0.5, Noise: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			d, err := LowRank(c, 21)
			if err != nil {
				t.Fatal(err)
			}
			o := d.Observed
			if want := int(math.Round(c.ObsFrac * float64(c.Users*c.Items))); o.Len() != want || o.NumUsers() != c.Users || o.NumItems() != c.Items {
				t.Fatalf("got %v, want %d × %d with %d ratings", o, c.Users, c.Items, want)
			}
			dense := d.Truth.Dense()
			wantRank, bound := c.Rank, c.Noise
			lo, hi := -1.0, 1.0
			if c.Levels >= 2 {
				wantRank++ // the affine map adds a constant
				bound = float64(c.Levels-1)*c.Noise/2 + 0.5
				lo, hi = 1, float64(c.Levels)
			} else if mx := d.Truth.MaxAbs(); math.Abs(mx-1) > 1e-12 {
				t.Fatalf("‖Θ‖∞ = %v, want 1", mx)
			}
			if r := numericalRank(t, dense); r != wantRank {
				t.Fatalf("truth rank %d, want %d", r, wantRank)
			}
			if mn, mx := mat.Min(dense), mat.Max(dense); mn < lo-1e-9 || mx > hi+1e-9 {
				t.Fatalf("truth range [%v, %v] outside [%v, %v]", mn, mx, lo, hi)
			}
			o.All(func(e ratings.Entry) bool {
				x, th := float64(e.Value), dense.At(int(e.User), int(e.Item))
				if math.Abs(x-th) > bound+1e-6 || x < lo || x > hi {
					t.Fatalf("X = %v, Θ = %v: outside the bound %v or the scale", x, th, bound)
				}
				if c.Levels >= 2 && x != math.Round(x) {
					t.Fatalf("X = %v is not an integer level", x)
				}
				return true
			})
		})
	}
}

func TestConfigErrors(t *testing.T) {
	ob := OneBitDefaults()
	ro := RankOneConfig{Users: 10, Items: 10, PerUser: 5}
	lr := LowRankDefaults()
	for _, tc := range []struct {
		name string
		gen  func() error
	}{
		{"onebit zero rows", func() error { c := ob; c.Rows = 0; _, err := OneBit(c, 1); return err }},
		{"onebit obs 0", func() error { c := ob; c.ObsFrac = 0; _, err := OneBit(c, 1); return err }},
		{"onebit obs > 1", func() error { c := ob; c.ObsFrac = 1.5; _, err := OneBit(c, 1); return err }},
		{"onebit alpha NaN", func() error { c := ob; c.Alpha = math.NaN(); _, err := OneBit(c, 1); return err }},
		{"onebit sigma 0", func() error { c := ob; c.Sigma = 0; _, err := OneBit(c, 1); return err }},
		{"onebit bad link", func() error { c := ob; c.Link = "tanh"; _, err := OneBit(c, 1); return err }},
		{"rankone per-user > items", func() error { c := ro; c.PerUser = 11; _, err := RankOne(context.Background(), c, 1); return err }},
		{"rankone no users", func() error { c := ro; c.Users = 0; _, err := RankOne(context.Background(), c, 1); return err }},
		{"rankone negative noise", func() error { c := ro; c.Noise = -1; _, err := RankOne(context.Background(), c, 1); return err }},
		{"lowrank levels 1", func() error { c := lr; c.Levels = 1; _, err := LowRank(c, 1); return err }},
		{"lowrank noise NaN", func() error { c := lr; c.Noise = math.NaN(); _, err := LowRank(c, 1); return err }},
		{"lowrank rank 0", func() error { c := lr; c.Rank = 0; _, err := LowRank(c, 1); return err }},
	} {
		if err := tc.gen(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, err := ParseLink("cauchy"); err == nil {
		t.Error("ParseLink accepted cauchy")
	}
}

// BenchmarkRankOnePaper generates seed 001's full synthetic set:
// 500 000 users × 400 items, 80 ratings per user (40 M ratings, both views).
func BenchmarkRankOnePaper(b *testing.B) {
	for b.Loop() {
		if _, err := RankOne(context.Background(), RankOneDefaults(), 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOneBitPaper(b *testing.B) {
	for b.Loop() {
		if _, err := OneBit(OneBitDefaults(), 1); err != nil {
			b.Fatal(err)
		}
	}
}
