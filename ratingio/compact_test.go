package ratingio

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCompactColumns checks the run-length user column and the jump-coded
// line column against plain arrays, for sorted, grouped, random and mixed
// inputs.
func TestCompactColumns(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		user func(r int) key
		line func(r int) int32
		runs bool // the user column stays run-length coded
	}{
		{"sorted, one a line", func(r int) key { return key(r / 7) }, func(r int) int32 { return int32(r) }, true},
		{"random users, comments", func(int) key { return key(rnd.IntN(50)) }, func(r int) int32 { return int32(r + r/10) }, false},
		{"runs then random, several a line", func(r int) key {
			if r < 500 {
				return key(r / 50)
			}
			return key(rnd.IntN(1000))
		}, func(r int) int32 { return int32(r / 3) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var uc userCol
			var lc lineCol
			var users []key
			var lines []int32
			for r := range 2000 {
				u, l := tc.user(r), tc.line(r)
				users, lines = append(users, u), append(lines, l)
				uc.add(u)
				lc.add(l)
			}
			if (uc.plain == nil) != tc.runs {
				t.Fatalf("run-length coded: %v, want %v", uc.plain == nil, tc.runs)
			}
			var got []key
			uc.spans(func(from, to int, u key) {
				if len(got) != from {
					t.Fatalf("span starts at %d after %d ratings", from, len(got))
				}
				for range to - from {
					got = append(got, u)
				}
			})
			if !slices.Equal(got, users) || uc.len() != len(users) {
				t.Fatalf("users differ")
			}
			for r, l := range lines {
				if g := lc.at(r); g != l {
					t.Fatalf("rating %d: line %d, want %d", r, g, l)
				}
			}
			uc.remap(func(k key) key { return k + 1 })
			got = got[:0]
			uc.spans(func(from, to int, u key) {
				for range to - from {
					got = append(got, u-1)
				}
			})
			if !slices.Equal(got, users) {
				t.Fatalf("remap changed the order")
			}
		})
	}
}
