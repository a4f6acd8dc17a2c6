package transform

import (
	"fmt"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// usersMatrix builds n users; user u rates 2 + u%7 items with ratings 1–5.
func usersMatrix(t *testing.T, n int) *ratings.Matrix {
	t.Helper()
	b := ratings.NewBuilder(ratings.DupError)
	for u := range n {
		for i := range 2 + u%7 {
			if err := b.Add(fmt.Sprint("u", u), fmt.Sprint("i", (u+3*i)%40), float64(1+(u+i)%5), 0); err != nil {
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

func activeUsers(m *ratings.Matrix) map[string]int {
	out := map[string]int{}
	for u := range int32(m.NumUsers()) {
		if c := m.UserCount(u); c > 0 {
			out[m.Users.Name(u)] = c
		}
	}
	return out
}

func TestPositivesAndMinPerUser(t *testing.T) {
	m := usersMatrix(t, 50)
	for _, tc := range []struct {
		thr float64
	}{{1}, {3}, {4}, {5}, {6}} {
		p := Positives(m, tc.thr)
		want := 0
		m.All(func(e ratings.Entry) bool {
			if float64(e.Value) >= tc.thr {
				want++
			}
			return true
		})
		if p.Len() != want || p.NumUsers() != m.NumUsers() || p.NumItems() != m.NumItems() {
			t.Errorf("Positives(%g): %d ratings (want %d), shape %d×%d", tc.thr, p.Len(), want, p.NumUsers(), p.NumItems())
		}
	}
	for _, k := range []int{0, 1, 3, 5, 9} {
		f := MinPerUser(m, k)
		for u := range int32(m.NumUsers()) {
			want := m.UserCount(u)
			if want < k {
				want = 0
			}
			if f.UserCount(u) != want {
				t.Fatalf("MinPerUser(%d): user %d has %d ratings, want %d", k, u, f.UserCount(u), want)
			}
		}
	}
}

func TestSplitUsers(t *testing.T) {
	m := usersMatrix(t, 200)
	for _, tc := range []struct {
		name      string
		val, test int
		frac      float64
	}{
		{"20 %", 30, 40, 0.2},
		{"half", 10, 10, 0.5},
		{"no validation", 0, 25, 0.2},
		{"tiny fraction", 5, 5, 0.01},
		{"large fraction", 5, 5, 0.99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := SplitUsers(m, tc.val, tc.test, tc.frac, 9)
			if err != nil {
				t.Fatal(err)
			}
			train, vh, vt, th, tt := activeUsers(s.Train), activeUsers(s.ValHistory), activeUsers(s.ValTargets), activeUsers(s.TestHistory), activeUsers(s.TestTargets)
			if len(vh) != tc.val || len(vt) != tc.val || len(th) != tc.test || len(tt) != tc.test {
				t.Fatalf("held out %d/%d validation and %d/%d test users, want %d and %d", len(vh), len(vt), len(th), len(tt), tc.val, tc.test)
			}
			for u := range vh {
				if _, ok := vt[u]; !ok {
					t.Fatalf("validation user %s has a history but no targets", u)
				}
				if _, ok := th[u]; ok {
					t.Fatalf("user %s is in validation and test", u)
				}
			}
			for u := range th {
				if _, ok := tt[u]; !ok {
					t.Fatalf("test user %s has a history but no targets", u)
				}
			}
			for u := range train {
				if _, ok := vh[u]; ok {
					t.Fatalf("training user %s is held out for validation", u)
				}
				if _, ok := th[u]; ok {
					t.Fatalf("training user %s is held out for test", u)
				}
			}
			all := activeUsers(m)
			if len(train)+tc.val+tc.test != len(all) {
				t.Fatalf("%d train + %d + %d held-out users ≠ %d users", len(train), tc.val, tc.test, len(all))
			}
			// Per held-out user: targets = round(frac·n) clamped to [1, n−1],
			// the rest history, no rating lost or invented.
			check := func(h, g map[string]int) {
				for u, nh := range h {
					n := all[u]
					want := min(max(int(float64(n)*tc.frac+0.5), 1), n-1)
					if g[u] != want || nh+g[u] != n {
						t.Fatalf("user %s: %d history + %d targets of %d ratings, want %d targets", u, nh, g[u], n, want)
					}
				}
			}
			check(vh, vt)
			check(th, tt)
			if got := s.Train.Len() + s.ValHistory.Len() + s.ValTargets.Len() + s.TestHistory.Len() + s.TestTargets.Len(); got != m.Len() {
				t.Fatalf("the parts hold %d ratings, the input %d", got, m.Len())
			}
			// Every part keeps the input's ID maps and shape.
			for _, p := range []*ratings.Matrix{s.Train, s.ValHistory, s.ValTargets, s.TestHistory, s.TestTargets} {
				if p.NumUsers() != m.NumUsers() || p.NumItems() != m.NumItems() {
					t.Fatalf("a part is %d×%d, the input %d×%d", p.NumUsers(), p.NumItems(), m.NumUsers(), m.NumItems())
				}
			}
			// Deterministic for a seed; another seed holds out other users.
			again, _ := SplitUsers(m, tc.val, tc.test, tc.frac, 9)
			if again.TestTargets.Fingerprint() != s.TestTargets.Fingerprint() || again.ValHistory.Fingerprint() != s.ValHistory.Fingerprint() ||
				again.Train.Fingerprint() != s.Train.Fingerprint() {
				t.Fatal("the same seed gave another split")
			}
			other, _ := SplitUsers(m, tc.val, tc.test, tc.frac, 10)
			if other.TestHistory.Fingerprint() == s.TestHistory.Fingerprint() {
				t.Fatal("seeds 9 and 10 gave the same test users")
			}
		})
	}
}

func TestSplitUsersErrors(t *testing.T) {
	m := usersMatrix(t, 20)
	for _, tc := range []struct {
		name      string
		val, test int
		frac      float64
	}{
		{"negative", -1, 3, 0.2},
		{"all users", 10, 10, 0.2},
		{"frac 0", 2, 2, 0},
		{"frac 1", 2, 2, 1},
		{"frac NaN", 2, 2, nan()},
	} {
		if _, err := SplitUsers(m, tc.val, tc.test, tc.frac, 1); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// Users with a single rating are never held out (no history and target).
	b := ratings.NewBuilder(ratings.DupError)
	for u := range 10 {
		_ = b.Add(fmt.Sprint(u), "a", 5, 0)
	}
	_ = b.Add("0", "b", 4, 0)
	_ = b.Add("1", "b", 4, 0)
	_ = b.Add("2", "b", 4, 0)
	one, _ := b.Build()
	if _, err := SplitUsers(one, 2, 1, 0.5, 1); err == nil {
		t.Error("held out all three users with two ratings")
	}
	s, err := SplitUsers(one, 1, 1, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	for u, n := range activeUsers(s.TestTargets) {
		if n != 1 || one.UserCount(mustLookup(t, one, u)) != 2 {
			t.Fatalf("held out user %s", u)
		}
	}
}

func mustLookup(t *testing.T, m *ratings.Matrix, id string) int32 {
	u, ok := m.Users.Lookup(id)
	if !ok {
		t.Fatalf("no user %s", id)
	}
	return u
}

func nan() float64 { var z float64; return z / z }
