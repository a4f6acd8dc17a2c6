package ratingio

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/privrec/privrec/ratings"
)

// interner maps keys to dense indices in order of first appearance (the
// order ratings.Builder uses), so a file gives the same Matrix whichever
// reader builds it.
type interner struct {
	dense []int32 // integer key → index+1, when the keys are small
	ints  map[key]int32
	strs  map[string]int32
	names []string
}

func newInterner(maxKey key, n int) *interner {
	in := &interner{strs: map[string]int32{}}
	// A direct table costs 4 bytes per possible key; use it when that is
	// at most 16 bytes per rating (IDs 1..n of real datasets), else a map.
	if maxKey < 1<<28 && uint64(maxKey) <= 4*uint64(n)+1<<16 {
		in.dense = make([]int32, maxKey+1)
	} else {
		in.ints = map[key]int32{}
	}
	return in
}

func (in *interner) intKey(k key) int32 {
	if in.dense != nil {
		if g := in.dense[k]; g != 0 {
			return g - 1
		}
		g := int32(len(in.names))
		in.dense[k] = g + 1
		in.names = append(in.names, strconv.FormatUint(uint64(k), 10))
		return g
	}
	if g, ok := in.ints[k]; ok {
		return g
	}
	g := int32(len(in.names))
	in.ints[k] = g
	in.names = append(in.names, strconv.FormatUint(uint64(k), 10))
	return g
}

func (in *interner) strKey(s string) int32 {
	if g, ok := in.strs[s]; ok {
		return g
	}
	g := int32(len(in.names))
	in.strs[s] = g
	in.names = append(in.names, s)
	return g
}

// local translates a chunk's string keys, caching per chunk.
type local struct {
	d   *dict
	tab []int32
}

func (l *local) key(in *interner, k key) int32 {
	if k&strKey == 0 {
		return in.intKey(k)
	}
	j := k &^ strKey
	if l.tab == nil {
		l.tab = make([]int32, len(l.d.names))
		for i := range l.tab {
			l.tab[i] = -1
		}
	}
	if g := l.tab[j]; g >= 0 {
		return g
	}
	g := in.strKey(l.d.names[j])
	l.tab[j] = g
	return g
}

// maxIndex bounds the number of users or items (dense indices are int32).
const maxIndex = 1<<31 - 2

// assemble turns parsed chunks (in file order) into a Matrix: global
// interning, a counting sort into the user-major layout, parallel per-row
// sorting with the duplicate policy, and the item-major view.
func assemble(ctx context.Context, name string, chunks []*chunk, hasTime bool, dups ratings.DupPolicy) (*ratings.Matrix, error) {
	n := 0
	var maxU, maxI key
	for _, c := range chunks {
		n += c.user.len()
		maxU, maxI = max(maxU, c.maxU), max(maxI, c.maxI)
	}
	users, items := newInterner(maxU, n), newInterner(maxI, n)
	// Pass 1 (sequential, in file order): keys → dense indices, in place.
	var carry struct {
		l   *local
		key key
		ok  bool
	}
	for _, c := range chunks {
		lu, li := &local{d: &c.udict}, &local{d: &c.idict}
		c.user.remap(func(k key) key { return key(lu.key(users, k)) })
		for r, k := range c.item {
			if k == unresolvedKey { // netflix: the movie line is in an earlier chunk
				if !carry.ok {
					return nil, &ParseError{File: name, Line: c.firstLine + int64(c.line.at(r)), Reason: "rating line before any \"MovieID:\" line"}
				}
				c.item[r] = key(carry.l.key(items, carry.key))
				continue
			}
			c.item[r] = key(li.key(items, k))
		}
		if c.hasItem {
			carry.l, carry.key, carry.ok = li, c.curItem, true
		}
		if len(users.names) > maxIndex || len(items.names) > maxIndex {
			return nil, &ParseError{File: name, Reason: "more than 2^31-2 distinct users or items"}
		}
	}
	nU, nI := len(users.names), len(items.names)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// Pass 2: counting sort by user, keeping file order within a user.
	rowPtr := make([]int64, nU+1)
	for _, c := range chunks {
		c.user.spans(func(from, to int, u key) { rowPtr[u+1] += int64(to - from) })
	}
	for u := range nU {
		rowPtr[u+1] += rowPtr[u]
	}
	rowCol := make([]int32, n)
	rowVal := make([]float32, n)
	var rowT []int64
	if hasTime {
		rowT = make([]int64, n)
	}
	next := slices.Clone(rowPtr[:nU])
	rel := newReleaser(chunks)
	for _, c := range chunks {
		c.user.spans(func(from, to int, u key) {
			p := next[u]
			next[u] += int64(to - from)
			for r, it := range c.item[from:to] {
				rowCol[p+int64(r)] = int32(it)
			}
			copy(rowVal[p:], c.val[from:to])
			if hasTime {
				copy(rowT[p:], c.t[from:to])
			}
		})
		rel.done(c) // keeps user and line for error positions
	}
	rel.flush()
	next = nil
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// Pass 3: sort each row by item (stable), merge or reject duplicates.
	newLen, dup := sortRows(rowPtr, rowCol, rowVal, rowT, dups)
	if dup.user >= 0 {
		first, second := recordLine(chunks, dup.user, dup.p1), recordLine(chunks, dup.user, dup.p2)
		de := &ratings.DuplicateError{User: users.names[dup.user], Item: items.names[dup.item], First: first, Second: second}
		return nil, &ParseError{File: name, Line: second, Reason: de.Error(), Err: de}
	}
	if newLen != nil { // merged duplicates: close the gaps
		w := int64(0)
		for u := range nU {
			a, l := rowPtr[u], newLen[u]
			copy(rowCol[w:], rowCol[a:a+l])
			copy(rowVal[w:], rowVal[a:a+l])
			if hasTime {
				copy(rowT[w:], rowT[a:a+l])
			}
			rowPtr[u] = w
			w += l
		}
		rowPtr[nU] = w
		rowCol, rowVal = slices.Clip(rowCol[:w]), slices.Clip(rowVal[:w])
		if hasTime {
			rowT = slices.Clip(rowT[:w])
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	uIDs, err := ratings.IDsFrom(users.names)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	iIDs, err := ratings.IDsFrom(items.names)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, err := ratings.FromCSR(uIDs, iIDs, nI, rowPtr, rowCol, rowVal, rowT)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// recordLine finds the line of the p-th rating (0-based, file order) of user u.
func recordLine(chunks []*chunk, u int32, p int64) int64 {
	for _, c := range chunks {
		line := int64(-1)
		c.user.spans(func(from, to int, cu key) {
			if line >= 0 || cu != key(u) {
				return
			}
			if p < int64(to-from) {
				line = c.firstLine + int64(c.line.at(from+int(p)))
			}
			p -= int64(to - from)
		})
		if line >= 0 {
			return line
		}
	}
	return 0
}

type dupAt struct {
	user   int32
	item   int32
	p1, p2 int64 // positions within the user's ratings in file order
}

// sortRows sorts every row by item, keeping file order among equal items,
// using both cores. With DupError it reports the first duplicate (lowest
// user index); otherwise it merges duplicates at the front of each row and
// returns the new row lengths (nil if nothing was merged).
func sortRows(rowPtr []int64, rowCol []int32, rowVal []float32, rowT []int64, dups ratings.DupPolicy) ([]int64, dupAt) {
	nU := len(rowPtr) - 1
	workers := min(runtime.GOMAXPROCS(0), max(1, nU/1024))
	var newLen []int64
	if dups != ratings.DupError {
		newLen = make([]int64, nU)
	}
	found := make([]dupAt, workers)
	merged := make([]bool, workers)
	var wg sync.WaitGroup
	n := rowPtr[nU]
	lo := 0
	for w := range workers {
		// Balance by ratings, not users.
		hi := nU
		if w < workers-1 {
			target := n * int64(w+1) / int64(workers)
			hi, _ = slices.BinarySearch(rowPtr, target)
			hi = max(hi, lo)
		}
		wg.Add(1)
		go func(w, lo, hi int) {
			defer wg.Done()
			found[w] = dupAt{user: -1}
			var keys, tmpKeys []uint64
			var tv []float32
			var tt []int64
			for u := lo; u < hi; u++ {
				a, b := rowPtr[u], rowPtr[u+1]
				cols := rowCol[a:b]
				sorted, distinct := true, true
				for k := 1; k < len(cols); k++ {
					if cols[k] <= cols[k-1] {
						if cols[k] < cols[k-1] {
							sorted = false
							break
						}
						distinct = false
					}
				}
				if sorted && distinct {
					if newLen != nil {
						newLen[u] = b - a
					}
					continue
				}
				if !sorted {
					keys = keys[:0]
					maxItem := int32(0)
					for k, c := range cols {
						keys = append(keys, uint64(c)<<32|uint64(k))
						maxItem = max(maxItem, c)
					}
					if len(keys) >= 64 {
						tmpKeys = slices.Grow(tmpKeys[:0], len(keys))[:len(keys)]
						if out := radixByItem(keys, tmpKeys, maxItem); &out[0] != &keys[0] {
							keys, tmpKeys = out, keys // keep the two buffers distinct
						}
					} else {
						slices.Sort(keys)
					}
					tv = append(tv[:0], rowVal[a:b]...)
					if rowT != nil {
						tt = append(tt[:0], rowT[a:b]...)
					}
					for k, key := range keys {
						cols[k] = int32(key >> 32)
						rowVal[a+int64(k)] = tv[uint32(key)]
						if rowT != nil {
							rowT[a+int64(k)] = tt[uint32(key)]
						}
					}
				}
				// Duplicates are now adjacent, in file order.
				if dups == ratings.DupError {
					for k := 1; k < len(cols); k++ {
						if cols[k] == cols[k-1] {
							if found[w].user < 0 {
								p1, p2 := int64(k-1), int64(k)
								if !sorted {
									p1, p2 = int64(uint32(keys[k-1])), int64(uint32(keys[k]))
								}
								found[w] = dupAt{user: int32(u), item: cols[k], p1: p1, p2: p2}
							}
							return
						}
					}
					continue
				}
				merged[w] = true
				out := a
				for k := a; k < b; {
					e := k + 1
					sum := float64(rowVal[k])
					for e < b && rowCol[e] == rowCol[k] {
						sum += float64(rowVal[e])
						e++
					}
					rowCol[out] = rowCol[k]
					rowVal[out] = rowVal[e-1]
					if dups == ratings.DupMean && e-k > 1 {
						rowVal[out] = float32(sum / float64(e-k))
					}
					if rowT != nil {
						rowT[out] = rowT[e-1]
					}
					out++
					k = e
				}
				newLen[u] = out - a
			}
		}(w, lo, hi)
		lo = hi
	}
	wg.Wait()
	for _, d := range found {
		if d.user >= 0 {
			return nil, d
		}
	}
	if !slices.Contains(merged, true) {
		newLen = nil
	}
	return newLen, dupAt{user: -1}
}

// radixByItem sorts keys (item<<32 | position, positions increasing) by
// item with a stable LSD radix sort over the bytes item values use, so
// equal items keep file order. tmp must have len(keys); the result is keys
// or tmp. For the long rows it is used on it is several times faster than
// a comparison sort, whose branches on random items mispredict.
func radixByItem(keys, tmp []uint64, maxItem int32) []uint64 {
	var count [256]int
	for shift := uint(32); shift < 64 && maxItem>>(shift-32) > 0; shift += 8 {
		clear(count[:])
		for _, k := range keys {
			count[byte(k>>shift)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, k := range keys {
			d := byte(k >> shift)
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}
