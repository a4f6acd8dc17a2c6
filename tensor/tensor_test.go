package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

func TestDayAxis(t *testing.T) {
	ax := DayAxis{Origin: 1000, Days: 3}
	for _, c := range []struct {
		ts      int64
		day     int
		clamped int
		cl      bool
	}{
		{1000, 0, 0, false},
		{1000 + 86399, 0, 0, false},
		{1000 + 86400, 1, 1, false},
		{1000 + 3*86400, 3, 2, true},
		{999, -1, 0, true},
		{1000 - 86400, -1, 0, true},
		{1000 - 86401, -2, 0, true},
	} {
		if got := ax.Day(c.ts); got != c.day {
			t.Errorf("Day(%d) = %d, want %d", c.ts, got, c.day)
		}
		if got, cl := ax.Clamp(c.ts); got != c.clamped || cl != c.cl {
			t.Errorf("Clamp(%d) = %d, %v, want %d, %v", c.ts, got, cl, c.clamped, c.cl)
		}
	}
}

func timed(t *testing.T, rows [][4]string) *ratings.Matrix {
	t.Helper()
	b := ratings.NewBuilder(ratings.DupError)
	for n, r := range rows {
		var v float64
		var ts int64
		fmt.Sscan(r[2], &v)
		fmt.Sscan(r[3], &ts)
		if err := b.AddTimed(r[0], r[1], v, ts, true, int64(n+1)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFromRatings(t *testing.T) {
	m := timed(t, [][4]string{
		{"u1", "a", "5", "86400"},
		{"u1", "b", "3", "86400"},
		{"u2", "a", "4", "3"}, // the first timestamp: the origin
		{"u2", "c", "1", "259203"},
	})
	tt, ax, err := FromRatings(m)
	if err != nil {
		t.Fatal(err)
	}
	if ax.Origin != 3 || ax.Days != 4 {
		t.Fatalf("axis %+v, want origin 3, 4 days", ax)
	}
	if tt.Dims != [3]int{2, 3, 4} || tt.Len() != 4 {
		t.Fatalf("dims %v len %d", tt.Dims, tt.Len())
	}
	if err := tt.Validate(); err != nil {
		t.Fatal(err)
	}
	days := map[float64]int32{}
	for e := range tt.Len() {
		days[tt.Val[e]] = tt.K[e]
	}
	want := map[float64]int32{5: 0, 3: 0, 4: 0, 1: 3} // 259203 − 3 = 3 days
	for v, d := range want {
		if days[v] != d {
			t.Errorf("rating %v on day %d, want %d", v, days[v], d)
		}
	}
	untimed := ratings.NewBuilder(ratings.DupError)
	untimed.Add("u", "i", 1, 1)
	um, _ := untimed.Build()
	if _, _, err := FromRatings(um); err == nil {
		t.Error("no error for ratings without timestamps")
	}
	// FromUntimed puts them on one day; timed ratings too (their times
	// are ignored).
	for _, x := range []*ratings.Matrix{um, m} {
		ut, uax, err := FromUntimed(x)
		if err != nil {
			t.Fatal(err)
		}
		if uax != (DayAxis{Origin: 0, Days: 1}) || ut.Dims != [3]int{x.NumUsers(), x.NumItems(), 1} || ut.Len() != x.Len() || ut.Validate() != nil {
			t.Errorf("untimed: axis %+v, dims %v, %d entries", uax, ut.Dims, ut.Len())
		}
	}
}

func TestMergeItemDays(t *testing.T) {
	tt := New([3]int{1, 3, 2}, 3)
	tt.Add(0, 0, 0, 1)
	tt.Add(0, 1, 1, 2)
	tt.Add(0, 2, 1, 3)
	out, names, err := MergeItemDays(tt, []string{"7@0", "7@1", "8@1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != "7" || names[1] != "8" || out.Dims[1] != 2 || out.J[1] != 0 || out.J[2] != 1 {
		t.Fatalf("names %v dims %v J %v", names, out.Dims, out.J)
	}
	// the same item twice on one day is an error
	t2 := New([3]int{1, 2, 2}, 2)
	t2.Add(0, 0, 1, 1)
	t2.Add(0, 1, 1, 2)
	if _, _, err := MergeItemDays(t2, []string{"7@a", "7@b"}); err == nil {
		t.Error("duplicate position not reported")
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		add  func(*Tensor)
		ok   bool
	}{
		{"fine", func(x *Tensor) { x.Add(0, 1, 1, 2) }, true},
		{"out of range", func(x *Tensor) { x.Add(0, 2, 0, 1) }, false},
		{"negative", func(x *Tensor) { x.Add(-1, 0, 0, 1) }, false},
		{"NaN", func(x *Tensor) { x.Add(0, 0, 1, math.NaN()) }, false},
		{"duplicate", func(x *Tensor) { x.Add(0, 0, 0, 3) }, false},
	} {
		x := New([3]int{1, 2, 2}, 2)
		x.Add(0, 0, 0, 1)
		c.add(x)
		if err := x.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
}

func TestSynthesize(t *testing.T) {
	for _, kind := range []Kind{CP, Tucker} {
		c := PaperSynth(kind)
		s, err := Synthesize(c, noise.Seeded(7))
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := 1.0, 0.0
		for _, v := range s.Truth {
			lo, hi = min(lo, v), max(hi, v)
		}
		if lo != 0 || hi != 1 {
			t.Errorf("%s: truth range [%v, %v], want min–max scaled [0, 1]", kind, lo, hi)
		}
		// 8000 entries, 50 % missing, 80/20 of 4000
		if s.Train.Len() != 3200 || s.Test.Len() != 800 {
			t.Errorf("%s: %d train, %d test, want 3200, 800", kind, s.Train.Len(), s.Test.Len())
		}
		all := New(c.Dims, 4000)
		for _, x := range []*Tensor{s.Train, s.Test} {
			for e := range x.Len() {
				all.Add(x.I[e], x.J[e], x.K[e], x.Val[e])
			}
		}
		if err := all.Validate(); err != nil {
			t.Errorf("%s: train and test overlap or are invalid: %v", kind, err)
		}
		for e := range s.Test.Len() {
			if s.Test.Val[e] != s.At(int(s.Test.I[e]), int(s.Test.J[e]), int(s.Test.K[e])) {
				t.Fatalf("%s: test value is not the truth", kind)
			}
		}
		// σ = sd(X̃)/SNR
		var m, ss float64
		for _, v := range s.Truth {
			m += v
		}
		m /= float64(len(s.Truth))
		for _, v := range s.Truth {
			ss += (v - m) * (v - m)
		}
		if sd := math.Sqrt(ss / float64(len(s.Truth))); math.Abs(s.Sigma-sd) > 1e-12 {
			t.Errorf("%s: σ = %v, want sd %v", kind, s.Sigma, sd)
		}
		s2, _ := Synthesize(c, noise.Seeded(7))
		if s2.Train.Val[17] != s.Train.Val[17] || s2.Test.I[5] != s.Test.I[5] {
			t.Errorf("%s: not reproducible per seed", kind)
		}
	}
}

func TestOrthonormalColumns(t *testing.T) {
	src := noise.Seeded(3)
	f := make([]float64, 20*3)
	for x := range f {
		f[x] = src.NormFloat64()
	}
	q := orthonormalColumns(f, 20, 3)
	for a := range 3 {
		for b := range 3 {
			var s float64
			for i := range 20 {
				s += q[i*3+a] * q[i*3+b]
			}
			want := 0.0
			if a == b {
				want = 1
			}
			if math.Abs(s-want) > 1e-12 {
				t.Errorf("QᵀQ[%d,%d] = %v", a, b, s)
			}
		}
	}
}

func TestSynthConfigErrors(t *testing.T) {
	for _, c := range []SynthConfig{
		{Kind: "parafac", Dims: [3]int{2, 2, 2}, Rank: 1, TrainFrac: 0.8},
		{Kind: CP, Dims: [3]int{0, 2, 2}, Rank: 1, TrainFrac: 0.8},
		{Kind: Tucker, Dims: [3]int{2, 2, 2}, Rank: 3, TrainFrac: 0.8},
		{Kind: CP, Dims: [3]int{2, 2, 2}, Rank: 1, Missing: 1, TrainFrac: 0.8},
		{Kind: CP, Dims: [3]int{2, 2, 2}, Rank: 1, SNR: math.NaN(), TrainFrac: 0.8},
		{Kind: CP, Dims: [3]int{2, 2, 2}, Rank: 1, TrainFrac: 1},
	} {
		if _, err := Synthesize(c, noise.Seeded(1)); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

func TestBiScaleDays(t *testing.T) {
	s, err := Synthesize(SynthConfig{Kind: CP, Dims: [3]int{30, 25, 4}, Rank: 2, SNR: 1, Missing: 0.3, TrainFrac: 0.8}, noise.Seeded(2))
	if err != nil {
		t.Fatal(err)
	}
	x := s.Train
	for e := range x.Len() {
		x.Val[e] = 1 + 4*x.Val[e]
	}
	z, sc, err := BiScaleDays(x, 20)
	if err != nil {
		t.Fatal(err)
	}
	for e := range x.Len() {
		i, j, k := int(x.I[e]), int(x.J[e]), int(x.K[e])
		if f := sc.Forward(i, j, k, x.Val[e]); math.Abs(f-z.Val[e]) > 1e-9 {
			t.Fatalf("Forward %v ≠ scaled %v", f, z.Val[e])
		}
		if inv := sc.Inverse(i, j, k, z.Val[e]); math.Abs(inv-x.Val[e]) > 1e-9 {
			t.Fatalf("Inverse %v ≠ raw %v", inv, x.Val[e])
		}
	}
	// after 20 rounds, each (column, day) has mean ≈ 0 and rows/columns
	// with enough entries variance ≈ 1 (dense slices: ~13 entries each)
	type key struct{ j, k int32 }
	sum, sq, n := map[key]float64{}, map[key]float64{}, map[key]float64{}
	for e := range z.Len() {
		kk := key{z.J[e], z.K[e]}
		sum[kk] += z.Val[e]
		sq[kk] += z.Val[e] * z.Val[e]
		n[kk]++
	}
	for kk := range n {
		if n[kk] < 5 {
			continue
		}
		if m := sum[kk] / n[kk]; math.Abs(m) > 1e-6 {
			t.Errorf("column %v mean %v", kk, m)
		}
		if v := sq[kk] / n[kk]; math.Abs(v-1) > 0.05 {
			t.Errorf("column %v variance %v", kk, v)
		}
	}
	rk, rv, ck, cv := sc.Flatten()
	back, err := Unflatten(sc.Days, sc.Mean, rk, rv, ck, cv)
	if err != nil {
		t.Fatal(err)
	}
	if back.Forward(3, 4, 1, 2.5) != sc.Forward(3, 4, 1, 2.5) || back.Inverse(0, 0, 3, 0.1) != sc.Inverse(0, 0, 3, 0.1) {
		t.Error("Flatten/Unflatten changed the scaling")
	}
}

func ExampleSynthesize() {
	s, err := Synthesize(PaperSynth(CP), noise.Seeded(1))
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Train.Len(), "training entries,", s.Test.Len(), "test entries")
	// Output: 3200 training entries, 800 test entries
}
