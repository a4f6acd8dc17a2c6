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
	users, items, n, err := internKeys(name, chunks)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rs := scatterByUser(chunks, len(users.names), n, hasTime)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	newLen, dup := sortRows(rs, dups)
	if dup.user >= 0 {
		return nil, duplicateError(name, chunks, users, items, dup)
	}
	if newLen != nil { // merged duplicates: close the gaps
		rs.compact(newLen)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rs.matrix(name, users, items)
}

// csrRows is the user-major layout being built: row offsets, item indices,
// values and optional timestamps.
type csrRows struct {
	ptr []int64
	col []int32
	val []float32
	t   []int64 // nil without timestamps
}

// internKeys is pass 1 (sequential, in file order): every chunk's keys
// become dense user and item indices, in place. It returns the interners
// and the number of ratings.
func internKeys(name string, chunks []*chunk) (users, items *interner, n int, err error) {
	var maxU, maxI key
	for _, c := range chunks {
		n += c.user.len()
		maxU, maxI = max(maxU, c.maxU), max(maxI, c.maxI)
	}
	users, items = newInterner(maxU, n), newInterner(maxI, n)
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
					return nil, nil, 0, &ParseError{File: name, Line: c.firstLine + int64(c.line.at(r)), Reason: "rating line before any \"MovieID:\" line"}
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
			return nil, nil, 0, &ParseError{File: name, Reason: "more than 2^31-2 distinct users or items"}
		}
	}
	return users, items, n, nil
}

// scatterByUser is pass 2: a counting sort of the n ratings by user,
// keeping file order within a user; it releases each chunk's columns as
// it goes.
func scatterByUser(chunks []*chunk, nU, n int, hasTime bool) csrRows {
	rs := csrRows{ptr: make([]int64, nU+1), col: make([]int32, n), val: make([]float32, n)}
	for _, c := range chunks {
		c.user.spans(func(from, to int, u key) { rs.ptr[u+1] += int64(to - from) })
	}
	for u := range nU {
		rs.ptr[u+1] += rs.ptr[u]
	}
	if hasTime {
		rs.t = make([]int64, n)
	}
	next := slices.Clone(rs.ptr[:nU])
	rel := newReleaser(chunks)
	for _, c := range chunks {
		c.user.spans(func(from, to int, u key) {
			p := next[u]
			next[u] += int64(to - from)
			for r, it := range c.item[from:to] {
				rs.col[p+int64(r)] = int32(it)
			}
			copy(rs.val[p:], c.val[from:to])
			if hasTime {
				copy(rs.t[p:], c.t[from:to])
			}
		})
		rel.done(c) // keeps user and line for error positions
	}
	rel.flush()
	return rs
}

// duplicateError reports a rejected duplicate at the lines of both ratings.
func duplicateError(name string, chunks []*chunk, users, items *interner, dup dupAt) error {
	first, second := recordLine(chunks, dup.user, dup.p1), recordLine(chunks, dup.user, dup.p2)
	de := &ratings.DuplicateError{User: users.names[dup.user], Item: items.names[dup.item], First: first, Second: second}
	return &ParseError{File: name, Line: second, Reason: de.Error(), Err: de}
}

// compact closes the gaps merged duplicates left: row u keeps its first
// newLen[u] entries.
func (rs *csrRows) compact(newLen []int64) {
	nU := len(rs.ptr) - 1
	w := int64(0)
	for u := range nU {
		a, l := rs.ptr[u], newLen[u]
		copy(rs.col[w:], rs.col[a:a+l])
		copy(rs.val[w:], rs.val[a:a+l])
		if rs.t != nil {
			copy(rs.t[w:], rs.t[a:a+l])
		}
		rs.ptr[u] = w
		w += l
	}
	rs.ptr[nU] = w
	rs.col, rs.val = slices.Clip(rs.col[:w]), slices.Clip(rs.val[:w])
	if rs.t != nil {
		rs.t = slices.Clip(rs.t[:w])
	}
}

// matrix builds the Matrix with the interned names.
func (rs *csrRows) matrix(name string, users, items *interner) (*ratings.Matrix, error) {
	uIDs, err := ratings.IDsFrom(users.names)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	iIDs, err := ratings.IDsFrom(items.names)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, err := ratings.FromCSR(uIDs, iIDs, len(items.names), rs.ptr, rs.col, rs.val, rs.t)
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
func sortRows(rs csrRows, dups ratings.DupPolicy) ([]int64, dupAt) {
	nU := len(rs.ptr) - 1
	workers := min(runtime.GOMAXPROCS(0), max(1, nU/1024))
	var newLen []int64
	if dups != ratings.DupError {
		newLen = make([]int64, nU)
	}
	sorters := make([]rowSorter, workers)
	var wg sync.WaitGroup
	lo := 0
	for w := range workers {
		hi := rs.split(lo, w, workers)
		sorters[w] = rowSorter{rs: rs, dups: dups, newLen: newLen, found: dupAt{user: -1}}
		wg.Add(1)
		go func(s *rowSorter, lo, hi int) {
			defer wg.Done()
			s.sortRange(lo, hi)
		}(&sorters[w], lo, hi)
		lo = hi
	}
	wg.Wait()
	merged := false
	for _, s := range sorters {
		if s.found.user >= 0 {
			return nil, s.found
		}
		merged = merged || s.merged
	}
	if !merged {
		newLen = nil
	}
	return newLen, dupAt{user: -1}
}

// split returns the end of worker w's rows (of workers, starting at lo),
// balanced by ratings, not users.
func (rs csrRows) split(lo, w, workers int) int {
	nU := len(rs.ptr) - 1
	if w == workers-1 {
		return nU
	}
	target := rs.ptr[nU] * int64(w+1) / int64(workers)
	hi, _ := slices.BinarySearch(rs.ptr, target)
	return max(hi, lo)
}

// rowSorter sorts one worker's rows, with its own scratch buffers.
type rowSorter struct {
	rs      csrRows
	dups    ratings.DupPolicy
	newLen  []int64 // shared; each worker writes its own rows
	found   dupAt   // the first duplicate (DupError), user -1 if none
	merged  bool
	keys    []uint64 // item<<32 | position, the sort keys of a row
	tmpKeys []uint64
	tv      []float32
	tt      []int64
}

// sortRange sorts rows lo..hi-1, stopping at the first duplicate with
// DupError.
func (s *rowSorter) sortRange(lo, hi int) {
	rs := s.rs
	for u := lo; u < hi; u++ {
		a, b := rs.ptr[u], rs.ptr[u+1]
		cols := rs.col[a:b]
		sorted, distinct := scanRow(cols)
		if sorted && distinct {
			if s.newLen != nil {
				s.newLen[u] = b - a
			}
			continue
		}
		if !sorted {
			s.sortRow(a, b)
		}
		// Duplicates are now adjacent, in file order.
		if s.dups == ratings.DupError {
			if s.findDup(u, cols, sorted) {
				return
			}
			continue
		}
		s.merged = true
		s.newLen[u] = s.mergeRow(a, b) - a
	}
}

// scanRow tells whether cols is non-decreasing and whether it is strictly
// increasing.
func scanRow(cols []int32) (sorted, distinct bool) {
	sorted, distinct = true, true
	for k := 1; k < len(cols); k++ {
		if cols[k] <= cols[k-1] {
			if cols[k] < cols[k-1] {
				return false, distinct
			}
			distinct = false
		}
	}
	return sorted, distinct
}

// sortRow sorts the row a..b by item, stably, leaving its sort keys (with
// the file positions) in s.keys.
func (s *rowSorter) sortRow(a, b int64) {
	rs, keys, tmpKeys := s.rs, s.keys[:0], s.tmpKeys
	cols := rs.col[a:b]
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
	tv := append(s.tv[:0], rs.val[a:b]...)
	var tt []int64
	if rs.t != nil {
		tt = append(s.tt[:0], rs.t[a:b]...)
	}
	for k, key := range keys {
		cols[k] = int32(key >> 32)
		rs.val[a+int64(k)] = tv[uint32(key)]
		if rs.t != nil {
			rs.t[a+int64(k)] = tt[uint32(key)]
		}
	}
	s.keys, s.tmpKeys, s.tv = keys, tmpKeys, tv
	if tt != nil {
		s.tt = tt
	}
}

// findDup records the first duplicate of row u (sorted tells whether the
// row was already in order, else s.keys holds its file positions) and
// reports whether there was one.
func (s *rowSorter) findDup(u int, cols []int32, sorted bool) bool {
	for k := 1; k < len(cols); k++ {
		if cols[k] == cols[k-1] {
			if s.found.user < 0 {
				p1, p2 := int64(k-1), int64(k)
				if !sorted {
					p1, p2 = int64(uint32(s.keys[k-1])), int64(uint32(s.keys[k]))
				}
				s.found = dupAt{user: int32(u), item: cols[k], p1: p1, p2: p2}
			}
			return true
		}
	}
	return false
}

// mergeRow merges runs of equal items in the sorted row a..b at its front
// (the last value, or the mean with DupMean; the last timestamp) and
// returns the end of the merged row.
func (s *rowSorter) mergeRow(a, b int64) int64 {
	rs := s.rs
	out := a
	for k := a; k < b; {
		e := k + 1
		sum := float64(rs.val[k])
		for e < b && rs.col[e] == rs.col[k] {
			sum += float64(rs.val[e])
			e++
		}
		rs.col[out] = rs.col[k]
		rs.val[out] = rs.val[e-1]
		if s.dups == ratings.DupMean && e-k > 1 {
			rs.val[out] = float32(sum / float64(e-k))
		}
		if rs.t != nil {
			rs.t[out] = rs.t[e-1]
		}
		out++
		k = e
	}
	return out
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
