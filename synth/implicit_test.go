package synth

import (
	"context"
	"runtime"
	"slices"
	"testing"
)

// Implicit is deterministic for its seed whatever the number of cores,
// meets the interaction total exactly, gives every user distinct sorted
// items, and its popularity falls with the item's rank.
func TestImplicit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ImplicitConfig
	}{
		{"defaults, smaller", ImplicitConfig{Users: 9000, Items: 400, Interactions: 180000, Rank: 5, PopExponent: 0.9, ActivitySpread: 1, Taste: 0.5}},
		{"flat activity, no taste", ImplicitConfig{Users: 5000, Items: 50, Interactions: 50000, Rank: 1, PopExponent: 1.2, ActivitySpread: 0, Taste: 0}},
		{"heavy users at the cap", ImplicitConfig{Users: 100, Items: 40, Interactions: 1900, Rank: 2, PopExponent: 2, ActivitySpread: 2, Taste: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rows [][]int32
			err := Implicit(context.Background(), tc.cfg, 7, func(u int, items []int32) error {
				if u != len(rows) {
					t.Fatalf("user %d emitted at position %d", u, len(rows))
				}
				rows = append(rows, slices.Clone(items))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			counts := make([]int, tc.cfg.Items)
			for u, r := range rows {
				if len(r) == 0 || len(r) > tc.cfg.Items/2 {
					t.Fatalf("user %d has %d items", u, len(r))
				}
				for i, j := range r {
					if i > 0 && j <= r[i-1] || j < 0 || int(j) >= tc.cfg.Items {
						t.Fatalf("user %d: items %v not distinct, sorted and in range", u, r)
					}
					counts[j]++
				}
				total += int64(len(r))
			}
			if len(rows) != tc.cfg.Users || total != tc.cfg.Interactions {
				t.Fatalf("%d users, %d interactions", len(rows), total)
			}
			if tc.cfg.PopExponent > 0 && tc.cfg.Taste < 1 && counts[0] <= counts[tc.cfg.Items-1] {
				t.Errorf("the most popular item has %d users, the last %d", counts[0], counts[tc.cfg.Items-1])
			}
			m, err := ImplicitMatrix(context.Background(), tc.cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			for u := range rows {
				got, _ := m.UserRow(int32(u))
				if !slices.Equal(got, rows[u]) {
					t.Fatalf("user %d: ImplicitMatrix %v, Implicit %v", u, got, rows[u])
				}
			}
		})
	}
	// The same population on one core and on four.
	cfg := ImplicitConfig{Users: 10000, Items: 300, Interactions: 100000, Rank: 3, PopExponent: 1, ActivitySpread: 1, Taste: 0.5}
	gen := func(procs int) []int32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		var all []int32
		if err := Implicit(context.Background(), cfg, 3, func(_ int, items []int32) error {
			all = append(append(all, items...), -1)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return all
	}
	if !slices.Equal(gen(1), gen(4)) {
		t.Error("the population depends on the number of cores")
	}
	bad := ImplicitDefaults()
	bad.Interactions = 10
	if err := Implicit(context.Background(), bad, 1, func(int, []int32) error { return nil }); err == nil {
		t.Error("fewer interactions than users accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Implicit(ctx, ImplicitDefaults(), 1, func(int, []int32) error { return nil }); err == nil {
		t.Error("a cancelled context was ignored")
	}
}
