package transform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// randomMatrix builds users × items ratings with each cell present with
// probability p and an integer rating 1..5 that depends on the user and
// the item, with timestamps when timed.
func randomMatrix(t testing.TB, users, items int, p float64, seed uint64, timed bool) *ratings.Matrix {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	b := ratings.NewBuilder(ratings.DupError)
	for u := range users {
		for i := range items {
			if r.Float64() >= p {
				continue
			}
			v := float64(1 + (u*7+i*3+r.IntN(2))%5)
			if err := b.AddTimed(fmt.Sprint("u", u), fmt.Sprint("i", i), v, int64(u*1000+i), timed, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkPartition verifies that train and test have m's shape and IDs and
// together hold exactly m's ratings (values and timestamps), disjointly.
func checkPartition(t *testing.T, m, train, test *ratings.Matrix) {
	t.Helper()
	for _, p := range []*ratings.Matrix{train, test} {
		if p.NumUsers() != m.NumUsers() || p.NumItems() != m.NumItems() || p.Users != m.Users || p.Items != m.Items {
			t.Fatalf("part %v does not keep the shape/IDs of %v", p, m)
		}
		if p.HasTime() != m.HasTime() {
			t.Fatalf("part lost or gained timestamps")
		}
	}
	if train.Len()+test.Len() != m.Len() {
		t.Fatalf("train %d + test %d ≠ %d", train.Len(), test.Len(), m.Len())
	}
	for _, p := range []*ratings.Matrix{train, test} {
		p.All(func(e ratings.Entry) bool {
			v, ok := m.Get(e.User, e.Item)
			if !ok || v != e.Value {
				t.Fatalf("rating %+v not in the input", e)
			}
			return true
		})
	}
	test.All(func(e ratings.Entry) bool {
		if _, ok := train.Get(e.User, e.Item); ok {
			t.Fatalf("rating %+v in both parts", e)
		}
		return true
	})
	if m.HasTime() {
		want := map[[2]int32]int64{}
		for u := range int32(m.NumUsers()) {
			items, _ := m.UserRow(u)
			for k, i := range items {
				want[[2]int32{u, i}] = m.UserTimes(u)[k]
			}
		}
		for _, p := range []*ratings.Matrix{train, test} {
			for u := range int32(p.NumUsers()) {
				items, _ := p.UserRow(u)
				for k, i := range items {
					if got := p.UserTimes(u)[k]; got != want[[2]int32{u, i}] {
						t.Fatalf("timestamp of (%d, %d) is %d, want %d", u, i, got, want[[2]int32{u, i}])
					}
				}
			}
		}
	}
}

func TestHoldOut(t *testing.T) {
	m := randomMatrix(t, 200, 150, 0.1, 1, true)
	for _, tc := range []struct {
		frac float64
		want int
	}{
		{0.2, int(math.Round(0.2 * float64(m.Len())))},
		{0.01, int(math.Round(0.01 * float64(m.Len())))},
		{0, 0},
		{-1, 0},
		{math.NaN(), 0},
		{1, m.Len()},
		{2, m.Len()},
	} {
		t.Run(fmt.Sprint(tc.frac), func(t *testing.T) {
			train, test := HoldOut(m, tc.frac, 42)
			checkPartition(t, m, train, test)
			if test.Len() != tc.want {
				t.Fatalf("test has %d ratings, want exactly %d", test.Len(), tc.want)
			}
			tr2, te2 := HoldOut(m, tc.frac, 42)
			if tr2.Fingerprint() != train.Fingerprint() || te2.Fingerprint() != test.Fingerprint() {
				t.Fatal("same seed gave a different split")
			}
		})
	}
	_, a := HoldOut(m, 0.2, 1)
	_, b := HoldOut(m, 0.2, 2)
	if a.Fingerprint() == b.Fingerprint() {
		t.Fatal("different seeds gave the same split")
	}
}

// TestHoldOutUniform checks that every rating is held out with
// probability frac: over 400 seeds a rating is held out Binomial(400, 0.25)
// times (mean 100, sd 8.66). Each of the 60 ratings is checked against
// [60, 140] (4.6 sd); P(one outside) < 5e-6, so the false-failure rate of
// the test is below 60 × 5e-6 = 3e-4.
func TestHoldOutUniform(t *testing.T) {
	m := randomMatrix(t, 10, 10, 0.6, 3, false)
	n := m.Len()
	counts := make(map[[2]int32]int, n)
	const seeds = 400
	for s := range uint64(seeds) {
		_, test := HoldOut(m, 0.25, s)
		test.All(func(e ratings.Entry) bool { counts[[2]int32{e.User, e.Item}]++; return true })
	}
	m.All(func(e ratings.Entry) bool {
		c := counts[[2]int32{e.User, e.Item}]
		if c < 60 || c > 140 {
			t.Errorf("rating (%d, %d) held out %d times in %d, want ≈ %d", e.User, e.Item, c, seeds, seeds/4)
		}
		return true
	})
}

func TestHoldOutPerUser(t *testing.T) {
	m := randomMatrix(t, 300, 60, 0.15, 5, false)
	for _, k := range []int{0, 1, 3, 10, 1000} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			train, test := HoldOutPerUser(m, k, 9)
			checkPartition(t, m, train, test)
			for u := range int32(m.NumUsers()) {
				n, got := m.UserCount(u), test.UserCount(u)
				want := k
				if n <= k || k <= 0 {
					want = 0 // users with at most k ratings keep them all
				}
				if got != want {
					t.Fatalf("user %d with %d ratings has %d in test, want %d", u, n, got, want)
				}
			}
		})
	}
}

// TestCapUniform checks that CapPerUser samples uniformly within a user:
// one user with 8 ratings capped at 2 over 2000 seeds; each rating is kept
// Binomial(2000, 1/4) times (mean 500, sd 19.4). The band [410, 590] is
// 4.6 sd wide on each side: false-failure rate < 8 × 5e-6 = 4e-5. All 28
// pairs must appear (each has probability 1/28 per seed; P(some pair never
// appears) < 28·(27/28)^2000 ≈ 1e-30).
func TestCapUniform(t *testing.T) {
	b := ratings.NewBuilder(ratings.DupError)
	for i := range 8 {
		if err := b.Add("u", fmt.Sprint(i), float64(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	kept := make([]int, 8)
	pairs := map[[2]int32]bool{}
	for s := range uint64(2000) {
		c := CapPerUser(m, 2, s)
		items, _ := c.UserRow(0)
		if len(items) != 2 {
			t.Fatalf("cap kept %d ratings, want 2", len(items))
		}
		kept[items[0]]++
		kept[items[1]]++
		pairs[[2]int32{items[0], items[1]}] = true
	}
	for i, c := range kept {
		if c < 410 || c > 590 {
			t.Errorf("item %d kept %d times in 2000, want ≈ 500", i, c)
		}
	}
	if len(pairs) != 28 {
		t.Errorf("%d of 28 pairs seen", len(pairs))
	}
}

func TestCapPerUser(t *testing.T) {
	m := randomMatrix(t, 100, 80, 0.3, 7, true)
	for _, xi := range []int{-1, 0, 1, 5, 20, 1000} {
		c := CapPerUser(m, xi, 1)
		if c.NumUsers() != m.NumUsers() || c.NumItems() != m.NumItems() {
			t.Fatalf("cap %d changed the shape", xi)
		}
		for u := range int32(m.NumUsers()) {
			want := m.UserCount(u)
			if xi > 0 {
				want = min(want, xi)
			}
			if got := c.UserCount(u); got != want {
				t.Fatalf("cap %d: user %d has %d ratings, want %d", xi, u, got, want)
			}
		}
		c.All(func(e ratings.Entry) bool {
			if v, ok := m.Get(e.User, e.Item); !ok || v != e.Value {
				t.Fatalf("cap %d invented rating %+v", xi, e)
			}
			return true
		})
	}
}

func TestTopItems(t *testing.T) {
	// Item counts: a 3, b 1, c 3, d 2, e 0 (item e only exists through another matrix's IDs: not here).
	b := ratings.NewBuilder(ratings.DupError)
	for _, r := range []struct {
		u, i string
		v    float64
	}{
		{"1", "a", 1}, {"2", "a", 2}, {"3", "a", 3},
		{"1", "b", 4},
		{"1", "c", 5}, {"2", "c", 1}, {"4", "c", 2},
		{"2", "d", 3}, {"3", "d", 4},
	} {
		if err := b.Add(r.u, r.i, r.v, 0); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n     int
		items []string
		len   int
	}{
		{1, []string{"a"}, 3}, // a and c tie at 3: the smaller index (a) wins
		{2, []string{"a", "c"}, 6},
		{3, []string{"a", "c", "d"}, 8},
		{4, []string{"a", "b", "c", "d"}, 9},
		{0, []string{"a", "b", "c", "d"}, 9},
		{10, []string{"a", "b", "c", "d"}, 9},
	} {
		got := TopItems(m, tc.n)
		if fmt.Sprint(got.Items.Names()) != fmt.Sprint(tc.items) || got.Len() != tc.len {
			t.Errorf("TopItems(%d) = items %v, %d ratings; want %v, %d", tc.n, got.Items.Names(), got.Len(), tc.items, tc.len)
		}
		if got.NumUsers() != m.NumUsers() || got.Users != m.Users {
			t.Errorf("TopItems(%d) changed the users", tc.n)
		}
		got.All(func(e ratings.Entry) bool {
			ou, _ := m.Users.Lookup(got.Users.Name(e.User))
			oi, _ := m.Items.Lookup(got.Items.Name(e.Item))
			if v, ok := m.Get(ou, oi); !ok || v != e.Value {
				t.Errorf("TopItems(%d): rating %+v is not in the input", tc.n, e)
			}
			return true
		})
	}
}

func TestBinarise(t *testing.T) {
	m := randomMatrix(t, 30, 30, 0.5, 11, false)
	for _, thr := range []float64{m.Mean(), 3, 0, 5} {
		bm := Binarise(m, thr)
		bm.All(func(e ratings.Entry) bool {
			v, _ := m.Get(e.User, e.Item)
			want := float32(-1)
			if float64(v) > thr {
				want = 1
			}
			if e.Value != want {
				t.Fatalf("threshold %v: %v → %v, want %v", thr, v, e.Value, want)
			}
			return true
		})
	}
}

func TestCentreUsers(t *testing.T) {
	m := randomMatrix(t, 50, 40, 0.3, 13, true)
	c, means := CentreUsers(m)
	for u := range int32(m.NumUsers()) {
		_, vals := c.UserRow(u)
		s := 0.0
		for _, v := range vals {
			s += float64(v)
		}
		if len(vals) > 0 && math.Abs(s/float64(len(vals))) > 1e-5 {
			t.Fatalf("user %d centred mean %v", u, s/float64(len(vals)))
		}
		if len(vals) == 0 && means[u] != 0 {
			t.Fatalf("user %d without ratings has mean %v", u, means[u])
		}
	}
	back := Uncentre(c, means)
	m.All(func(e ratings.Entry) bool {
		v, _ := back.Get(e.User, e.Item)
		if math.Abs(float64(v-e.Value)) > 1e-5 {
			t.Fatalf("Uncentre(CentreUsers) changed %v to %v", e.Value, v)
		}
		return true
	})
}

func TestMinMax(t *testing.T) {
	m := randomMatrix(t, 40, 40, 0.4, 17, false)
	for _, tc := range []struct{ lo, hi float64 }{{0, 1}, {-1, 1}, {0, 5}, {1, -1}} {
		s, sc := MinMax(m, tc.lo, tc.hi)
		lo, hi := s.Range()
		wantLo, wantHi := min(tc.lo, tc.hi), max(tc.lo, tc.hi)
		if math.Abs(lo-wantLo) > 1e-6 || math.Abs(hi-wantHi) > 1e-6 {
			t.Errorf("MinMax(%v, %v) range [%v, %v]", tc.lo, tc.hi, lo, hi)
		}
		m.All(func(e ratings.Entry) bool {
			v, _ := s.Get(e.User, e.Item)
			if math.Abs(sc.Invert(float64(v))-float64(e.Value)) > 1e-5 {
				t.Fatalf("Invert(%v) = %v, want %v", v, sc.Invert(float64(v)), e.Value)
			}
			return true
		})
	}
	// Constant data maps to lo and stays invertible.
	c := m.MapValues(func(ratings.Entry) float32 { return 3 })
	s, sc := MinMax(c, 0, 1)
	if lo, hi := s.Range(); lo != 0 || hi != 0 || sc.Invert(0) != 3 {
		t.Errorf("constant data: range [%v, %v], Invert(0) = %v", lo, hi, sc.Invert(0))
	}
}

func TestBiScale(t *testing.T) {
	for _, tc := range []struct {
		name           string
		users, items   int
		p              float64
		wantConverged  bool
		maxDevAllowed  float64
		sparseSingleOK bool
	}{
		{"dense", 60, 40, 1, true, 1e-5, false},
		{"sparse", 300, 200, 0.08, true, 1e-5, false},
		{"very sparse", 400, 300, 0.01, false, math.Inf(1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Values with strong row and column effects in location and scale.
			r := rand.New(rand.NewPCG(5, 6))
			base := randomMatrix(t, tc.users, tc.items, tc.p, 19, false)
			m := base.MapValues(func(e ratings.Entry) float32 {
				return float32(float64(e.User%5) + 3*float64(e.Item%3) + (1+float64(e.User%4))*(1+float64(e.Item%2))*r.NormFloat64())
			})
			x, b := BiScale(m, 500)
			if tc.wantConverged && !b.Converged {
				t.Fatalf("did not converge in %d sweeps (deviation %g)", b.Iterations, b.MaxDeviation)
			}
			if b.MaxDeviation > tc.maxDevAllowed {
				t.Fatalf("max deviation %g after %d sweeps", b.MaxDeviation, b.Iterations)
			}
			m.All(func(e ratings.Entry) bool {
				xv, _ := x.Get(e.User, e.Item)
				if got := b.Invert(e.User, e.Item, float64(xv)); math.Abs(got-float64(e.Value)) > 1e-4*(1+math.Abs(float64(e.Value))) {
					t.Fatalf("Invert(Apply(%v)) = %v", e.Value, got)
				}
				if got := b.Apply(e.User, e.Item, float64(e.Value)); math.Abs(got-float64(xv)) > 1e-4*(1+math.Abs(got)) {
					t.Fatalf("Apply(%v) = %v, matrix holds %v", e.Value, got, xv)
				}
				return true
			})
			if tc.wantConverged {
				t.Logf("%s: converged in %d sweeps, max deviation %.2g", tc.name, b.Iterations, b.MaxDeviation)
			}
		})
	}
}

func TestBiScaleDegenerate(t *testing.T) {
	// One user with one rating, one constant row, an empty matrix.
	b := ratings.NewBuilder(ratings.DupError)
	for _, r := range []struct {
		u, i string
		v    float64
	}{{"a", "x", 3}, {"b", "x", 2}, {"b", "y", 2}, {"c", "y", 5}, {"c", "x", 1}} {
		if err := b.Add(r.u, r.i, r.v, 0); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	x, bs := BiScale(m, 0)
	x.All(func(e ratings.Entry) bool {
		if math.IsNaN(float64(e.Value)) || math.IsInf(float64(e.Value), 0) {
			t.Fatalf("non-finite value %v", e.Value)
		}
		return true
	})
	for _, s := range append(append([]float64{}, bs.RowScale...), bs.ColScale...) {
		if !(s > 0) || math.IsInf(s, 0) {
			t.Fatalf("scale %v", s)
		}
	}
	empty := m.Filter(func(ratings.Entry) bool { return false })
	if e, _ := BiScale(empty, 3); e.Len() != 0 {
		t.Fatal("empty matrix gained ratings")
	}
}
