// Package transform prepares rating matrices for training and evaluation:
// random and per-user hold-out splits, a uniform cap of ξ ratings per user,
// restriction to the N most-rated items, binarisation, per-user centring
// and its inverse, min–max scaling, and bi-scaling (rows and columns to mean
// 0, variance 1).
//
// Every random transformation takes a seed and is deterministic for it: the
// same matrix and seed give the same result on any machine. These seeds
// drive data preparation, not privacy noise (see privacy/noise for that).
//
// Splits and caps keep the input's ID maps and shape (they are built on the
// input's user-major arrays, like ratings.Matrix.Filter), so user and item
// indices stay comparable between a matrix and its parts. TopItems is the
// one transformation that re-indexes (items).
package transform

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"

	"github.com/privrec/privrec/ratings"
)

// newRand returns the deterministic stream of a transformation: PCG seeded
// from the caller's seed and a per-transformation stream constant, so that
// e.g. HoldOut and CapPerUser with the same seed draw independent choices.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

// Stream constants (arbitrary, distinct).
const (
	streamHoldOut        = 0x686f6c646f7574 // "holdout"
	streamHoldOutPerUser = 0x706572757365   // "peruse"
	streamCap            = 0x636170         // "cap"
	streamSplitUsers     = 0x7573657273     // "users"
)

// bitset marks positions in a matrix's user-major arrays.
type bitset []uint64

func newBitset(n int) bitset      { return make(bitset, (n+63)/64) }
func (b bitset) set(k int64)      { b[k>>6] |= 1 << (uint(k) & 63) }
func (b bitset) has(k int64) bool { return b[k>>6]&(1<<(uint(k)&63)) != 0 }
func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// selectK marks exactly k of the n positions base, base+1, …, base+n−1,
// uniformly among all k-subsets, by selection sampling (Knuth, TAOCP vol. 2,
// Algorithm 3.4.2S): position t is chosen with probability
// (k − chosen so far)/(n − t). One pass, no extra memory.
func selectK(r *rand.Rand, mark bitset, base int64, n, k int) {
	if k >= n {
		for t := range n {
			mark.set(base + int64(t))
		}
		return
	}
	chosen := 0
	for t := 0; t < n && chosen < k; t++ {
		if r.IntN(n-t) < k-chosen {
			mark.set(base + int64(t))
			chosen++
		}
	}
}

// partition splits m by a mark over its user-major positions: marked
// ratings go to the second matrix, the rest to the first. Both keep m's ID
// maps and shape.
// The two parts are built concurrently.
func partition(m *ratings.Matrix, mark bitset) (unmarked, marked *ratings.Matrix) {
	nm := mark.count()
	var wg sync.WaitGroup
	wg.Go(func() { marked = subset(m, mark, true, nm) })
	unmarked = subset(m, mark, false, m.Len()-nm)
	wg.Wait()
	return unmarked, marked
}

// subset returns the ratings of m whose mark equals want (size of them),
// with m's ID maps and shape.
func subset(m *ratings.Matrix, mark bitset, want bool, size int) *ratings.Matrix {
	rowPtr, rowCol, rowVal, rowT := m.CSR()
	ptr := make([]int64, m.NumUsers()+1)
	col := make([]int32, 0, size)
	val := make([]float32, 0, size)
	var ts []int64
	if rowT != nil {
		ts = make([]int64, 0, size)
	}
	for u := range m.NumUsers() {
		for k := rowPtr[u]; k < rowPtr[u+1]; k++ {
			if mark.has(k) == want {
				col = append(col, rowCol[k])
				val = append(val, rowVal[k])
				if rowT != nil {
					ts = append(ts, rowT[k])
				}
			}
		}
		ptr[u+1] = int64(len(col))
	}
	out, err := ratings.FromCSR(m.Users, m.Items, m.NumItems(), ptr, col, val, ts)
	if err != nil {
		// Unreachable: a subsequence of sorted distinct rows stays sorted and distinct.
		panic("transform: subset produced an inconsistent matrix: " + err.Error())
	}
	return out
}

// HoldOut moves a uniformly random subset of exactly round(frac·Len)
// ratings to test and keeps the rest in train. frac is clamped to [0, 1]
// (NaN counts as 0). Both matrices keep m's ID maps and shape, so a user
// whose ratings all went to test has an empty training row.
func HoldOut(m *ratings.Matrix, frac float64, seed uint64) (train, test *ratings.Matrix) {
	if !(frac > 0) {
		frac = 0
	}
	frac = min(frac, 1)
	n := m.Len()
	k := int(math.Round(frac * float64(n)))
	mark := newBitset(n)
	selectK(newRand(seed, streamHoldOut), mark, 0, n, k)
	return partition(m, mark)
}

// HoldOutPerUser moves k uniformly chosen ratings of every user who has
// more than k ratings to test. A user with at most k ratings keeps all of
// them in train and has none in test: holding out everything would leave
// her without training data, so she could not be evaluated fairly anyway.
// (This matches MovieLens-100K's ua/ub splits, where every user has ≥ 20
// ratings and exactly 10 are held out.) k ≤ 0 gives an empty test set.
func HoldOutPerUser(m *ratings.Matrix, k int, seed uint64) (train, test *ratings.Matrix) {
	mark := newBitset(m.Len())
	if k > 0 {
		r := newRand(seed, streamHoldOutPerUser)
		rowPtr, _, _, _ := m.CSR()
		for u := range m.NumUsers() {
			n := int(rowPtr[u+1] - rowPtr[u])
			if n > k {
				selectK(r, mark, rowPtr[u], n, k)
			}
		}
	}
	return partition(m, mark)
}

// CapPerUser keeps, for every user with more than xi ratings, a uniformly
// random subset of xi of them (every xi-subset equally likely); users with
// at most xi ratings keep all. xi ≤ 0 means no cap and returns m itself.
// The result keeps m's ID maps and shape. This is the ξ of seed 001
// (at most 80 ratings per user), which bounds each user's contribution.
func CapPerUser(m *ratings.Matrix, xi int, seed uint64) *ratings.Matrix {
	if xi <= 0 {
		return m
	}
	mark := newBitset(m.Len())
	r := newRand(seed, streamCap)
	rowPtr, _, _, _ := m.CSR()
	for u := range m.NumUsers() {
		n := int(rowPtr[u+1] - rowPtr[u])
		selectK(r, mark, rowPtr[u], n, xi)
	}
	return subset(m, mark, true, mark.count())
}
