package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/privrec/privrec/ratings"
)

// ImplicitConfig is a Netflix-like implicit-feedback population: who
// interacted with what, no rating values. Item popularity follows a power
// law, users' activity is log-normally spread, and taste is low-rank:
// every item belongs to one of Rank genres and every user has a favourite
// genre from which she draws a Taste share of her items (popularity-
// weighted within the genre), the rest from the whole catalogue by
// popularity. The expected interaction matrix therefore has rank ≤
// Rank + 1 and a model that learns the genres beats "most popular".
type ImplicitConfig struct {
	Users, Items int
	// Interactions is the total number of interactions (met exactly
	// unless users' caps make it impossible).
	Interactions int64
	// Rank is the number of genres (the taste's rank).
	Rank int
	// PopExponent a: item j (by popularity rank) has weight (j + 1)^−a.
	PopExponent float64
	// ActivitySpread is the σ of the log-normal spread of users'
	// activity (0: every user has the same number of interactions).
	ActivitySpread float64
	// Taste is the share of a user's items drawn from her favourite genre.
	Taste float64
}

// ImplicitDefaults is a Netflix-like population at a size that runs in
// seconds: 100 000 users × 5 000 items, 5 M interactions, 16 genres,
// popularity exponent 0.9, activity spread 1, taste 0.5.
func ImplicitDefaults() ImplicitConfig {
	return ImplicitConfig{Users: 100_000, Items: 5_000, Interactions: 5_000_000, Rank: 16, PopExponent: 0.9, ActivitySpread: 1, Taste: 0.5}
}

// Check validates the configuration.
func (c ImplicitConfig) Check() error {
	switch {
	case c.Users < 1 || c.Items < 2:
		return fmt.Errorf("synth: implicit shape %d users × %d items: want ≥ 1 user and ≥ 2 items", c.Users, c.Items)
	case c.Items > math.MaxInt32 || c.Users > math.MaxInt32:
		return fmt.Errorf("synth: implicit shape %d × %d exceeds the 32-bit index range", c.Users, c.Items)
	case c.Interactions < int64(c.Users):
		return fmt.Errorf("synth: %d interactions for %d users: every user needs at least one", c.Interactions, c.Users)
	case c.Interactions > int64(c.Users)*int64(c.maxPerUser()):
		return fmt.Errorf("synth: %d interactions exceed %d users × %d items each (a user takes at most half the catalogue)", c.Interactions, c.Users, c.maxPerUser())
	case c.Rank < 1 || c.Rank > c.Items:
		return fmt.Errorf("synth: rank (genres) %d must be in [1, items]", c.Rank)
	case !(c.PopExponent >= 0 && c.PopExponent <= 3):
		return fmt.Errorf("synth: popularity exponent %g must be in [0, 3]", c.PopExponent)
	case !(c.ActivitySpread >= 0 && c.ActivitySpread <= 3):
		return fmt.Errorf("synth: activity spread %g must be in [0, 3]", c.ActivitySpread)
	case !(c.Taste >= 0 && c.Taste <= 1):
		return fmt.Errorf("synth: taste share %g must be in [0, 1]", c.Taste)
	}
	return nil
}

func (c ImplicitConfig) maxPerUser() int { return max(1, c.Items/2) }

// Genres is each item's genre (0..Rank−1) in the population generated
// from seed: public facts of a synthetic catalogue, for naming its items.
func (c ImplicitConfig) Genres(seed uint64) []int32 { return c.genres(seed) }

// genres is item j's genre in the population generated from seed.
func (c ImplicitConfig) genres(seed uint64) []int32 {
	r := newRand(seed, 1<<62)
	g := make([]int32, c.Items)
	for j := range g {
		g[j] = int32(r.IntN(c.Rank))
	}
	return g
}

// alias is Walker's alias table for sampling an index by weight.
type alias struct {
	prob  []float64
	alias []int32
	index []int32 // the items the table samples (nil: 0..n−1)
}

func newAlias(w []float64, index []int32) alias {
	n := len(w)
	var sum float64
	for _, v := range w {
		sum += v
	}
	a := alias{prob: make([]float64, n), alias: make([]int32, n), index: index}
	scaled := make([]float64, n)
	var small, large []int32
	for i, v := range w {
		scaled[i] = v * float64(n) / sum
		if scaled[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		a.prob[s], a.alias[s] = scaled[s], l
		scaled[l] -= 1 - scaled[s]
		if scaled[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range append(small, large...) {
		a.prob[i], a.alias[i] = 1, i
	}
	return a
}

func (a *alias) draw(r *rand.Rand) int32 {
	i := r.IntN(len(a.prob))
	if r.Float64() >= a.prob[i] {
		i = int(a.alias[i])
	}
	if a.index != nil {
		return a.index[i]
	}
	return int32(i)
}

// implicitChunk is the number of users generated from one random stream
// (so the output does not depend on the number of cores).
const implicitChunk = 4096

// Implicit generates the population of cfg for seed and hands each user's
// items (increasing, distinct) to emit, user by user in order (0, 1, …):
// the caller may stream them to disk, so memory stays bounded by a few
// chunks of users whatever the size. The result is a deterministic
// function of cfg and seed. emit's items slice is reused after it
// returns. It checks ctx between chunks.
func Implicit(ctx context.Context, cfg ImplicitConfig, seed uint64, emit func(user int, items []int32) error) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	counts := implicitActivity(cfg, seed)
	genre := cfg.genres(seed)
	pop := make([]float64, cfg.Items)
	for j := range pop {
		pop[j] = math.Pow(float64(j+1), -cfg.PopExponent)
	}
	global := newAlias(pop, nil)
	byGenre := make([][]int32, cfg.Rank)
	for j, g := range genre {
		byGenre[g] = append(byGenre[g], int32(j))
	}
	tables := make([]alias, cfg.Rank)
	for g, items := range byGenre {
		if len(items) == 0 {
			continue
		}
		w := make([]float64, len(items))
		for t, j := range items {
			w[t] = pop[j]
		}
		tables[g] = newAlias(w, items)
	}
	nChunks := (cfg.Users + implicitChunk - 1) / implicitChunk
	workers := runtime.GOMAXPROCS(0)
	// Chunks are generated ahead by the workers, at most 2·workers at a
	// time, and emitted in order.
	type result struct {
		rows [][]int32
	}
	results := make([]chan result, nChunks)
	for i := range results {
		results[i] = make(chan result, 1)
	}
	sem := make(chan struct{}, 2*workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for ch := range nChunks {
			select {
			case <-stop:
				return
			default:
			}
			select {
			case sem <- struct{}{}:
			case <-stop:
				return
			}
			wg.Go(func() {
				r := newRand(seed, uint64(ch))
				lo, hi := ch*implicitChunk, min(cfg.Users, (ch+1)*implicitChunk)
				rows := make([][]int32, hi-lo)
				seen := make(map[int32]struct{})
				for u := lo; u < hi; u++ {
					fav := r.IntN(cfg.Rank)
					for len(tables[fav].prob) == 0 {
						fav = (fav + 1) % cfg.Rank
					}
					rows[u-lo] = drawItems(r, int(counts[u]), cfg, &global, &tables[fav], seen)
				}
				results[ch] <- result{rows}
			})
		}
	})
	var err error
	for ch := range nChunks {
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			break
		}
		res := <-results[ch]
		<-sem
		for t, row := range res.rows {
			if err = emit(ch*implicitChunk+t, row); err != nil {
				break
			}
		}
	}
	close(stop)
	// Workers in flight never block (their channels are buffered).
	wg.Wait()
	return err
}

// drawItems draws n distinct items: each from her genre's table with
// probability Taste, else from the global one (duplicates redrawn; after
// 20n draws the rest is filled with the most popular items she lacks).
func drawItems(r *rand.Rand, n int, cfg ImplicitConfig, global, genre *alias, seen map[int32]struct{}) []int32 {
	clear(seen)
	out := make([]int32, 0, n)
	for tries := 0; len(out) < n && tries < 20*n; tries++ {
		var j int32
		if r.Float64() < cfg.Taste {
			j = genre.draw(r)
		} else {
			j = global.draw(r)
		}
		if _, ok := seen[j]; ok {
			continue
		}
		seen[j] = struct{}{}
		out = append(out, j)
	}
	for j := int32(0); len(out) < n; j++ {
		if _, ok := seen[j]; !ok {
			seen[j] = struct{}{}
			out = append(out, j)
		}
	}
	slices.Sort(out)
	return out
}

// implicitActivity is each user's number of interactions: log-normal
// weights scaled to the total, each in [1, Items/2], the rounding
// remainder spread one by one so the sum is exact.
func implicitActivity(cfg ImplicitConfig, seed uint64) []int32 {
	r := newRand(seed, 1<<62+1)
	w := make([]float64, cfg.Users)
	var sum float64
	for u := range w {
		w[u] = math.Exp(cfg.ActivitySpread * r.NormFloat64())
		sum += w[u]
	}
	hi := cfg.maxPerUser()
	counts := make([]int32, cfg.Users)
	var total int64
	for u, v := range w {
		n := int(math.Round(float64(cfg.Interactions) * v / sum))
		n = max(1, min(hi, n))
		counts[u] = int32(n)
		total += int64(n)
	}
	// Spread the remainder (±1 per user per pass) until the sum is exact.
	for pass := 0; total != cfg.Interactions && pass < 1000; pass++ {
		for u := range counts {
			switch {
			case total < cfg.Interactions && int(counts[u]) < hi:
				counts[u]++
				total++
			case total > cfg.Interactions && counts[u] > 1:
				counts[u]--
				total--
			}
			if total == cfg.Interactions {
				break
			}
		}
	}
	return counts
}

// ImplicitMatrix generates the population into the sparse store (every
// interaction with value 1; users and items named 1..n).
func ImplicitMatrix(ctx context.Context, cfg ImplicitConfig, seed uint64) (*ratings.Matrix, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	rowPtr := make([]int64, 1, cfg.Users+1)
	rowCol := make([]int32, 0, cfg.Interactions)
	err := Implicit(ctx, cfg, seed, func(_ int, items []int32) error {
		rowCol = append(rowCol, items...)
		rowPtr = append(rowPtr, int64(len(rowCol)))
		return nil
	})
	if err != nil {
		return nil, err
	}
	rowVal := make([]float32, len(rowCol))
	for i := range rowVal {
		rowVal[i] = 1
	}
	m, err := ratings.FromCSR(ratings.Sequential(cfg.Users), ratings.Sequential(cfg.Items), cfg.Items, rowPtr, rowCol, rowVal, nil)
	if err != nil {
		return nil, fmt.Errorf("synth: implicit: %w", err)
	}
	return m, nil
}
