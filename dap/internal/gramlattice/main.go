// Command gramlattice measures what the lattice does to a Gram sum on a
// real ratings file: the item–item Gram of the m most rated items (unit
// column weights, each user's part of unit norm, every rating an
// interaction), summed exactly and on the lattice of step 2^−s with b
// bits per coordinate (each entry truncated toward zero and capped at
// 2^b − 1 lattice units). It prints, per (s, b), the users whose entries
// the cap lowers, the relative ℓ2 error of the lattice sum and the share
// of the Gram's mass it keeps:
//
//	go run ./dap/internal/gramlattice ml-1m/ratings.tsv
//
// The input is tab-separated user, item, rating lines.
package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gramlattice RATINGS.tsv")
		os.Exit(2)
	}
	if err := run(os.Args[1], 228); err != nil {
		fmt.Fprintln(os.Stderr, "gramlattice:", err)
		os.Exit(1)
	}
}

func run(path string, m int) error {
	users, err := coveredColumns(path, m)
	if err != nil {
		return err
	}
	weight := func(n int) float64 { // a unit-norm part's entries (gram.Gram, unit weights)
		if n == 0 {
			return 0
		}
		return math.Min(1, 1/math.Sqrt(float64(n*(n+1))/2)) * (1 - 1e-12)
	}
	exact := gram(users, m, weight)
	for _, c := range []struct{ s, b int }{{9, 10}, {9, 8}, {9, 7}, {8, 9}, {8, 7}} {
		step, limit := math.Ldexp(1, -c.s), float64(int(1)<<c.b-1)
		capped := 0
		for _, cs := range users {
			if math.Floor(weight(len(cs))/step) > limit {
				capped++
			}
		}
		lat := gram(users, m, func(n int) float64 { return step * math.Min(limit, math.Floor(weight(n)/step)) })
		var d2, e2, sl, se float64
		for i := range exact {
			d2 += (lat[i] - exact[i]) * (lat[i] - exact[i])
			e2 += exact[i] * exact[i]
			sl += lat[i]
			se += exact[i]
		}
		fmt.Printf("step 2^-%d, %d bits: %d of %d users capped; relative l2 error of the Gram sum %.4f; mass kept %.4f\n",
			c.s, c.b, capped, len(users), math.Sqrt(d2/e2), sl/se)
	}
	return nil
}

// coveredColumns reads the ratings and returns each user's columns among
// the m most rated items (ties by item ID).
func coveredColumns(path string, m int) ([][]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byUser := map[string]map[string]bool{}
	count := map[string]int{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fs := strings.Split(sc.Text(), "\t")
		if len(fs) < 3 {
			return nil, fmt.Errorf("%s:%d: want user, item, rating", path, line)
		}
		if byUser[fs[0]] == nil {
			byUser[fs[0]] = map[string]bool{}
		}
		if !byUser[fs[0]][fs[1]] {
			byUser[fs[0]][fs[1]] = true
			count[fs[1]]++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	items := make([]string, 0, len(count))
	for it := range count {
		items = append(items, it)
	}
	sort.Slice(items, func(a, b int) bool {
		if count[items[a]] != count[items[b]] {
			return count[items[a]] > count[items[b]]
		}
		return items[a] < items[b]
	})
	col := map[string]int{}
	for j, it := range items[:min(m, len(items))] {
		col[it] = j
	}
	users := make([][]int, 0, len(byUser))
	for _, its := range byUser {
		var cs []int
		for it := range its {
			if j, ok := col[it]; ok {
				cs = append(cs, j)
			}
		}
		sort.Ints(cs)
		users = append(users, cs)
	}
	return users, nil
}

// gram is Σ_u w(n_u)·x_u x_uᵀ over the upper triangle (row-major m × m).
func gram(users [][]int, m int, w func(n int) float64) []float64 {
	g := make([]float64, m*m)
	for _, cs := range users {
		v := w(len(cs))
		for a, p := range cs {
			for _, q := range cs[a:] {
				g[p*m+q] += v
			}
		}
	}
	return g
}
