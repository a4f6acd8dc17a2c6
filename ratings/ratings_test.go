package ratings

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// build is a test helper over Builder.
func build(t *testing.T, dups DupPolicy, rows ...[3]string) *Matrix {
	t.Helper()
	b := NewBuilder(dups)
	for k, r := range rows {
		v, _ := strconv.ParseFloat(r[2], 64)
		if err := b.Add(r[0], r[1], v, int64(k+1)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuilderViews(t *testing.T) {
	m := build(t, DupError, [3]string{"a", "x", "1"}, [3]string{"b", "y", "2"}, [3]string{"a", "z", "3"}, [3]string{"b", "x", "4"})
	if m.NumUsers() != 2 || m.NumItems() != 3 || m.Len() != 4 {
		t.Fatal(m)
	}
	items, vals := m.UserRow(0)
	if !slices.Equal(items, []int32{0, 2}) || !slices.Equal(vals, []float32{1, 3}) {
		t.Fatalf("row a = %v %v", items, vals)
	}
	users, vals := m.ItemCol(0)
	if !slices.Equal(users, []int32{0, 1}) || !slices.Equal(vals, []float32{1, 4}) {
		t.Fatalf("col x = %v %v", users, vals)
	}
	if v, ok := m.Get(1, 1); !ok || v != 2 {
		t.Fatal("Get")
	}
	if _, ok := m.Get(1, 2); ok {
		t.Fatal("Get of a missing rating")
	}
}

func TestDuplicatePolicies(t *testing.T) {
	rows := [][3]string{{"a", "x", "1"}, {"a", "y", "5"}, {"a", "x", "4"}}
	tests := []struct {
		p    DupPolicy
		want float32
	}{{DupLast, 4}, {DupMean, 2.5}}
	for _, tc := range tests {
		m := build(t, tc.p, rows...)
		if v, _ := m.Get(0, 0); v != tc.want || m.Len() != 2 {
			t.Errorf("policy %d: got %v (len %d), want %v", tc.p, v, m.Len(), tc.want)
		}
	}
	b := NewBuilder(DupError)
	for k, r := range rows {
		b.Add(r[0], r[1], 1, int64(10*(k+1)))
	}
	_, err := b.Build()
	var de *DuplicateError
	if !errors.As(err, &de) || de.First != 10 || de.Second != 30 {
		t.Fatalf("got %v", err)
	}
}

// TestItemViewMatchesRows checks the parallel item-major construction on
// random matrices large enough to be split, against a direct transpose.
func TestItemViewMatchesRows(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		r := rand.New(rand.NewPCG(seed, 0))
		nU, nI := 3000, 300
		rowPtr := make([]int64, nU+1)
		var cols []int32
		var vals []float32
		for u := range nU {
			k := r.IntN(60)
			row := r.Perm(nI)[:k]
			slices.Sort(row)
			for _, c := range row {
				cols = append(cols, int32(c))
				vals = append(vals, r.Float32())
			}
			rowPtr[u+1] = int64(len(cols))
		}
		m, err := FromCSR(nil, nil, nI, rowPtr, cols, vals, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := make([][]Entry, nI)
		m.All(func(e Entry) bool { want[e.Item] = append(want[e.Item], e); return true })
		for i := range int32(nI) {
			users, vs := m.ItemCol(i)
			if len(users) != len(want[i]) {
				t.Fatalf("seed %d item %d: %d users, want %d", seed, i, len(users), len(want[i]))
			}
			for k, e := range want[i] {
				if users[k] != e.User || vs[k] != e.Value {
					t.Fatalf("seed %d item %d entry %d differs", seed, i, k)
				}
			}
		}
	}
}

func TestFromCSRRejects(t *testing.T) {
	tests := []struct {
		name   string
		rowPtr []int64
		cols   []int32
	}{
		{"unsorted", []int64{0, 2}, []int32{1, 0}},
		{"repeated", []int64{0, 2}, []int32{1, 1}},
		{"out of range", []int64{0, 1}, []int32{5}},
		{"negative", []int64{0, 1}, []int32{-1}},
		{"offsets decrease", []int64{0, 2, 1, 2}, []int32{0, 1}},
		{"offsets past end", []int64{0, 7, 2}, []int32{0, 1}},
	}
	for _, tc := range tests {
		nU := len(tc.rowPtr) - 1
		if _, err := FromCSR(nil, nil, 3, tc.rowPtr, tc.cols, make([]float32, len(tc.cols)), nil); err == nil {
			t.Errorf("%s: accepted (%d users)", tc.name, nU)
		}
	}
}

func TestStats(t *testing.T) {
	m := build(t, DupError, [3]string{"a", "x", "1"}, [3]string{"a", "y", "2"}, [3]string{"a", "z", "2"}, [3]string{"b", "x", "5"})
	s := m.Stats()
	if s.Users != 2 || s.Items != 3 || s.Ratings != 4 || s.RatingMin != 1 || s.RatingMax != 5 || s.Density != 4.0/6 {
		t.Fatalf("%+v", s)
	}
	wantHist := []Bin{{1, 1, 1}, {2, 2, 2}, {5, 5, 1}}
	if !slices.Equal(s.Histogram, wantHist) {
		t.Fatalf("histogram %v, want %v", s.Histogram, wantHist)
	}
	if s.PerUser.Min != 1 || s.PerUser.Max != 3 || s.PerItem.Max != 2 || s.PerItem.Min != 1 {
		t.Fatalf("per user %+v per item %+v", s.PerUser, s.PerItem)
	}
	// Many distinct values: 20 bins covering every rating.
	b := NewBuilder(DupError)
	for k := range 100 {
		b.Add(strconv.Itoa(k), "i", float64(k)/10, int64(k))
	}
	m, _ = b.Build()
	s = m.Stats()
	total := 0
	for _, h := range s.Histogram {
		total += h.Count
	}
	if len(s.Histogram) != HistogramBins || total != 100 || s.Histogram[0].Count != 5 {
		t.Fatalf("binned histogram %v", s.Histogram)
	}
}

func TestRowColumnIterationAllocatesNothing(t *testing.T) {
	m := build(t, DupError, [3]string{"a", "x", "1"}, [3]string{"b", "y", "2"}, [3]string{"a", "z", "3"})
	var sink float32
	allocs := testing.AllocsPerRun(100, func() {
		for u := range int32(m.NumUsers()) {
			_, vals := m.UserRow(u)
			for _, v := range vals {
				sink += v
			}
		}
		for i := range int32(m.NumItems()) {
			_, vals := m.ItemCol(i)
			for _, v := range vals {
				sink += v
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per pass (sink %v)", allocs, sink)
	}
}
