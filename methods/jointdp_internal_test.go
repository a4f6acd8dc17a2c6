package methods

import (
	"fmt"
	"slices"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// The ξ cap must be a per-user operation: replacing one user's ratings
// (here: giving user03 many more) must leave every other user's sample
// unchanged, or the Gram sensitivity (which assumes the other rows fixed)
// fails for a known seed. transform.CapPerUser, which the old code used,
// draws every user from one shared stream and fails this. Each user's
// sample has exactly min(ξ, n_u) distinct items of her own.
// Deterministic (fixed seeds).
func TestCapPerUserIsPerUser(t *testing.T) {
	build := func(many int) *ratings.Matrix {
		b := ratings.NewBuilder(ratings.DupError)
		line := int64(0)
		for u := range 8 {
			n := 5 + 3*u
			if u == 3 {
				n = many
			}
			for j := range n {
				line++
				if err := b.Add(fmt.Sprintf("user%02d", u), fmt.Sprintf("item%03d", j), float64(1+j%5), line); err != nil {
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
	const xi = 6
	for _, seed := range []uint64{1, 2, 99} {
		a, err := capPerUser(build(9), xi, seed)
		if err != nil {
			t.Fatal(err)
		}
		b, err := capPerUser(build(40), xi, seed)
		if err != nil {
			t.Fatal(err)
		}
		for u := range 8 {
			id := fmt.Sprintf("user%02d", u)
			names := func(m *ratings.Matrix) []string {
				ui, _ := m.Users.Lookup(id)
				its, _ := m.UserRow(ui)
				out := make([]string, len(its))
				for k, it := range its {
					out[k] = m.Items.Name(it)
				}
				return out
			}
			sa, sb := names(a), names(b)
			want := min(xi, 5+3*u)
			if u == 3 {
				want = xi
			}
			if len(sb) != want || len(slices.Compact(slices.Sorted(slices.Values(sb)))) != want {
				t.Errorf("seed %d %s: sample %v, want %d distinct items", seed, id, sb, want)
			}
			if u != 3 && !slices.Equal(sa, sb) {
				t.Errorf("seed %d: %s's sample changed when user03's ratings were replaced: %v → %v", seed, id, sa, sb)
			}
		}
	}
}
