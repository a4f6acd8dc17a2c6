package synth

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/ratings"
)

// RankOneConfig is the synthetic setup of seed 001 (§5, "Synthetic dataset").
type RankOneConfig struct {
	Users   int     // m (paper: 500 000)
	Items   int     // n (paper: 400)
	PerUser int     // ratings per user, distinct items chosen uniformly (paper: 80)
	Noise   float64 // σ of optional Gaussian noise added to each observed rating (paper: none, 0)
}

// RankOneDefaults returns the paper's parameters: 500 000 users, 400
// items, 80 ratings per user, no noise.
func RankOneDefaults() RankOneConfig {
	return RankOneConfig{Users: 500_000, Items: 400, PerUser: 80}
}

// RankOneData is a generated rank-one problem.
type RankOneData struct {
	// Observed holds Y*_ij (+ noise) for each user's PerUser sampled items.
	Observed *ratings.Matrix
	// Truth is Y* = u vᵀ (Users × Items, ‖Y*‖∞ = 1), held as its factors.
	Truth  *Factors
	Config RankOneConfig
}

// rankOneChunk is the number of users generated from one random stream:
// chunks are handed to the cores in any order, but each chunk's stream
// depends only on (seed, chunk index), so the output does not depend on
// the number of cores.
const rankOneChunk = 4096

// RankOne generates seed 001's synthetic problem: u ∈ ℝ^m and v ∈ ℝ^n with
// i.i.d. U[−1, 1] entries, each divided by its largest |entry| so that
// max|u| = max|v| = 1 and hence ‖u vᵀ‖∞ = 1 (the paper: "a random rank-one
// matrix Y* = u vᵀ with unit ℓ∞-norm"); then, for every user, PerUser
// distinct items chosen uniformly at random, rated Y*_ij (+ N(0, Noise²)
// if Noise > 0). The sparse store is filled directly (rows have a fixed
// length, so every row's place is known in advance) by all cores; the
// default 40 M ratings take about a second and 660 MB. It checks ctx
// between chunks of users.
func RankOne(ctx context.Context, cfg RankOneConfig, seed uint64) (*RankOneData, error) {
	if cfg.Users < 1 || cfg.Items < 1 {
		return nil, fmt.Errorf("synth: rank-one shape %d × %d: both must be ≥ 1", cfg.Users, cfg.Items)
	}
	if cfg.PerUser < 1 || cfg.PerUser > cfg.Items {
		return nil, fmt.Errorf("synth: %d ratings per user: want 1..%d (the number of items)", cfg.PerUser, cfg.Items)
	}
	if cfg.Items > math.MaxInt32 || int64(cfg.Users)*int64(cfg.PerUser) > 1<<40 {
		return nil, fmt.Errorf("synth: rank-one problem too large")
	}
	if cfg.Noise < 0 || math.IsNaN(cfg.Noise) || math.IsInf(cfg.Noise, 0) {
		return nil, fmt.Errorf("synth: noise %v must be ≥ 0 and finite", cfg.Noise)
	}
	r := newRand(seed, 0x72616e6b31) // "rank1"
	u := uniformFactor(r, cfg.Users, 1, -1, 1)
	v := uniformFactor(r, cfg.Items, 1, -1, 1)
	for _, f := range []*mat.Dense{u, v} {
		n, _ := f.Dims()
		if mx := maxAbs(f.RawMatrix().Data, n); mx > 0 {
			f.Scale(1/mx, f)
		}
	}
	uu, vv := u.RawMatrix().Data, v.RawMatrix().Data
	k := cfg.PerUser
	total := int64(cfg.Users) * int64(k)
	rowPtr := make([]int64, cfg.Users+1)
	for i := range rowPtr {
		rowPtr[i] = int64(i) * int64(k)
	}
	rowCol := make([]int32, total)
	rowVal := make([]float32, total)

	nChunks := (cfg.Users + rankOneChunk - 1) / rankOneChunk
	var next atomic.Int64
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), nChunks)
	for range workers {
		wg.Go(func() {
			chosen := make([]int32, 0, k)
			mark := make([]uint64, (cfg.Items+63)/64)
			for {
				c := int(next.Add(1) - 1)
				if c >= nChunks || ctx.Err() != nil {
					return
				}
				cr := rand.New(rand.NewPCG(seed, 0x72316368756e6b00+uint64(c))) // "r1chunk" + c
				for i := c * rankOneChunk; i < min((c+1)*rankOneChunk, cfg.Users); i++ {
					chosen = sampleSorted(cr, cfg.Items, k, mark, chosen[:0])
					base := int64(i) * int64(k)
					for t, j := range chosen {
						y := uu[i] * vv[j]
						if cfg.Noise > 0 {
							y += cfg.Noise * cr.NormFloat64()
						}
						rowCol[base+int64(t)] = j
						rowVal[base+int64(t)] = float32(y)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("synth: rank-one generation: %w", err)
	}
	obs, err := ratings.FromCSR(nil, nil, cfg.Items, rowPtr, rowCol, rowVal, nil)
	if err != nil {
		return nil, fmt.Errorf("synth: building the rank-one matrix: %w", err)
	}
	return &RankOneData{Observed: obs, Truth: &Factors{U: u, V: v}, Config: cfg}, nil
}

// sampleSorted appends to dst k distinct values of [0, n) chosen uniformly
// (every k-subset equally likely; Floyd's algorithm), in increasing order.
// mark is a zeroed bitset of n bits, returned zeroed. When k is a large
// enough share of n, reading the bitset in order is cheaper than sorting.
func sampleSorted(r *rand.Rand, n, k int, mark []uint64, dst []int32) []int32 {
	start := len(dst)
	for j := n - k; j < n; j++ {
		t := r.IntN(j + 1)
		if mark[t>>6]&(1<<(uint(t)&63)) != 0 {
			t = j
		}
		mark[t>>6] |= 1 << (uint(t) & 63)
		dst = append(dst, int32(t))
	}
	if n <= 64*k {
		dst = dst[:start]
		for w, word := range mark[:(n+63)/64] {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				dst = append(dst, int32(w*64+b))
				word &= word - 1
			}
			mark[w] = 0
		}
		return dst
	}
	for _, t := range dst[start:] {
		mark[t>>6] = 0
	}
	slices.Sort(dst[start:])
	return dst
}
