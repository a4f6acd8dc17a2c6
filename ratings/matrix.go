package ratings

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Matrix is an immutable sparse users × items rating matrix held in two
// views: user-major (CSR) and item-major (CSC). Within a row, items are in
// increasing index order; within a column, users are in increasing order.
// The item-major arrays (8 bytes a rating) are built on the first ItemCol
// or CSC, so work that reads only rows — SGD, per-user statistics, writing
// a file — never holds them; the column offsets (ItemCount) are always
// there. A Matrix is safe for concurrent use.
type Matrix struct {
	Users, Items *IDs

	rowPtr []int64
	rowCol []int32
	rowVal []float32
	rowT   []int64 // timestamps aligned with the user-major view; nil if absent

	colPtr []int64
	// colRow and colVal are filled by cols (lazily, once); counts are the
	// per-range write offsets buildColumns computed for the scatter.
	cols   sync.Once
	counts [][]int64
	bounds []int
	colRow []int32
	colVal []float32
}

// NumUsers, NumItems and Len give the shape and the number of ratings.
func (m *Matrix) NumUsers() int { return len(m.rowPtr) - 1 }

// NumItems is the number of items (columns).
func (m *Matrix) NumItems() int { return len(m.colPtr) - 1 }

// Len is the number of ratings.
func (m *Matrix) Len() int { return len(m.rowCol) }

// HasTime reports whether ratings carry timestamps.
func (m *Matrix) HasTime() bool { return m.rowT != nil }

// UserRow returns the items and values user u rated, in item order. The
// slices alias the store: do not modify them.
func (m *Matrix) UserRow(u int32) (items []int32, values []float32) {
	a, b := m.rowPtr[u], m.rowPtr[u+1]
	return m.rowCol[a:b:b], m.rowVal[a:b:b]
}

// UserTimes returns the timestamps of user u's ratings, aligned with
// UserRow; nil when the data has no timestamps.
func (m *Matrix) UserTimes(u int32) []int64 {
	if m.rowT == nil {
		return nil
	}
	a, b := m.rowPtr[u], m.rowPtr[u+1]
	return m.rowT[a:b:b]
}

// ItemCol returns the users who rated item i and their values, in user order.
func (m *Matrix) ItemCol(i int32) (users []int32, values []float32) {
	m.cols.Do(m.scatterColumns)
	a, b := m.colPtr[i], m.colPtr[i+1]
	return m.colRow[a:b:b], m.colVal[a:b:b]
}

// UserCount is the number of ratings of user u.
func (m *Matrix) UserCount(u int32) int { return int(m.rowPtr[u+1] - m.rowPtr[u]) }

// ItemCount is the number of ratings of item i.
func (m *Matrix) ItemCount(i int32) int { return int(m.colPtr[i+1] - m.colPtr[i]) }

// Get returns the rating of (u, i) and whether it exists (binary search in the row).
func (m *Matrix) Get(u, i int32) (float32, bool) {
	items, vals := m.UserRow(u)
	k, ok := slices.BinarySearch(items, i)
	if !ok {
		return 0, false
	}
	return vals[k], true
}

// Entry is one rating in dense indices.
type Entry struct {
	User, Item int32
	Value      float32
	Time       int64
}

// All calls f for every rating in user-major order; it stops early if f returns false.
func (m *Matrix) All(f func(Entry) bool) {
	for u := range int32(m.NumUsers()) {
		a, b := m.rowPtr[u], m.rowPtr[u+1]
		for k := a; k < b; k++ {
			e := Entry{User: u, Item: m.rowCol[k], Value: m.rowVal[k]}
			if m.rowT != nil {
				e.Time = m.rowT[k]
			}
			if !f(e) {
				return
			}
		}
	}
}

// Entries returns every rating in user-major order (allocates Len() entries).
func (m *Matrix) Entries() []Entry {
	out := make([]Entry, 0, m.Len())
	m.All(func(e Entry) bool { out = append(out, e); return true })
	return out
}

// Values returns the user-major value array (aliases the store; read only).
func (m *Matrix) Values() []float32 { return m.rowVal }

// Mean is the mean of all ratings (0 for an empty matrix).
func (m *Matrix) Mean() float64 {
	if m.Len() == 0 {
		return 0
	}
	var s float64
	for _, v := range m.rowVal {
		s += float64(v)
	}
	return s / float64(m.Len())
}

// Range returns the smallest and largest rating (NaN, NaN for an empty matrix).
func (m *Matrix) Range() (lo, hi float64) {
	if m.Len() == 0 {
		return math.NaN(), math.NaN()
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range m.rowVal {
		lo = math.Min(lo, float64(v))
		hi = math.Max(hi, float64(v))
	}
	return lo, hi
}

// Density is Len / (users × items).
func (m *Matrix) Density() float64 {
	c := float64(m.NumUsers()) * float64(m.NumItems())
	if c == 0 {
		return 0
	}
	return float64(m.Len()) / c
}

// Bytes is the memory held by the store's arrays (not counting ID maps).
func (m *Matrix) Bytes() int64 {
	n := int64(len(m.rowCol))
	b := 8*int64(len(m.rowPtr)+len(m.colPtr)) + 8*n // user-major index + value
	if m.colRow != nil {
		b += 8 * n // item-major, once built
	}
	if m.rowT != nil {
		b += 8 * n
	}
	return b
}

// String summarises the shape.
func (m *Matrix) String() string {
	return fmt.Sprintf("%d users × %d items, %d ratings", m.NumUsers(), m.NumItems(), m.Len())
}

// FromCSR builds a Matrix from a user-major layout it takes ownership of:
// rowPtr has NumUsers+1 offsets, rowCol and rowVal the item indices (sorted
// and distinct within each row) and values, rowT optional timestamps (nil
// or aligned). users and items may be nil, in which case sequential IDs
// 1..n are used. It checks the arrays and counts the items' ratings; the
// item-major view is built with a counting sort when first needed (the
// peak memory is then the two views and nothing more).
func FromCSR(users, items *IDs, nItems int, rowPtr []int64, rowCol []int32, rowVal []float32, rowT []int64) (*Matrix, error) {
	nUsers := len(rowPtr) - 1
	if nUsers < 0 || rowPtr[0] != 0 || rowPtr[nUsers] != int64(len(rowCol)) || len(rowVal) != len(rowCol) {
		return nil, fmt.Errorf("ratings: inconsistent CSR arrays")
	}
	if rowT != nil && len(rowT) != len(rowCol) {
		return nil, fmt.Errorf("ratings: %d timestamps for %d ratings", len(rowT), len(rowCol))
	}
	users, items, err := idMaps(users, items, nUsers, nItems)
	if err != nil {
		return nil, err
	}
	m := &Matrix{Users: users, Items: items, rowPtr: rowPtr, rowCol: rowCol, rowVal: rowVal, rowT: rowT}
	if err := m.buildColumns(nItems); err != nil {
		return nil, err
	}
	return m, nil
}

// buildColumns checks the user-major arrays and plans the item-major view
// of a counting sort, which scatterColumns fills. Large matrices are split
// into user ranges of equal rating counts, one per core: each range counts
// its own items, the counts give every range its own write offsets inside
// each column (ranges in user order, so columns stay sorted by user), and
// the ranges scatter in parallel. The extra memory is one count array per
// range, kept until the scatter.
func (m *Matrix) buildColumns(nItems int) error {
	rowPtr, rowCol := m.rowPtr, m.rowCol
	nUsers := len(rowPtr) - 1
	n := len(rowCol)
	parts := 1
	if n >= 1<<16 && nItems <= n/4 {
		parts = max(1, min(runtime.GOMAXPROCS(0), 8))
	}
	bounds := make([]int, parts+1)
	for p := 1; p < parts; p++ {
		b, _ := slices.BinarySearch(rowPtr, int64(n)*int64(p)/int64(parts))
		bounds[p] = max(bounds[p-1], min(b, nUsers))
	}
	bounds[parts] = nUsers
	counts := make([][]int64, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cnt := make([]int64, nItems)
			counts[p] = cnt
			for u := bounds[p]; u < bounds[p+1]; u++ {
				a, b := rowPtr[u], rowPtr[u+1]
				if a < 0 || a > b || b > int64(n) {
					errs[p] = fmt.Errorf("ratings: row offsets decrease at user %d", u)
					return
				}
				prev := int32(-1)
				for _, c := range rowCol[a:b] {
					if c < 0 || int(c) >= nItems {
						errs[p] = fmt.Errorf("ratings: item index %d out of range at user %d", c, u)
						return
					}
					if c <= prev {
						errs[p] = fmt.Errorf("ratings: items of user %d are not sorted and distinct", u)
						return
					}
					prev = c
					cnt[c]++
				}
			}
		}(p)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	colPtr := make([]int64, nItems+1)
	for i := range nItems {
		off := colPtr[i]
		for p := range parts {
			c := counts[p][i]
			counts[p][i] = off // becomes range p's next write position in column i
			off += c
		}
		colPtr[i+1] = off
	}
	m.colPtr, m.counts, m.bounds = colPtr, counts, bounds
	return nil
}

// scatterColumns fills the item-major view planned by buildColumns (run
// once, by cols).
func (m *Matrix) scatterColumns() {
	rowPtr, rowCol, rowVal := m.rowPtr, m.rowCol, m.rowVal
	counts, bounds := m.counts, m.bounds
	n := len(rowCol)
	m.colRow = make([]int32, n)
	m.colVal = make([]float32, n)
	var wg sync.WaitGroup
	for p := range len(counts) {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			next := counts[p]
			for u := bounds[p]; u < bounds[p+1]; u++ {
				a, b := rowPtr[u], rowPtr[u+1]
				for k, c := range rowCol[a:b] {
					q := next[c]
					m.colRow[q] = int32(u)
					m.colVal[q] = rowVal[a+int64(k)]
					next[c] = q + 1
				}
			}
		}(p)
	}
	wg.Wait()
	m.counts, m.bounds = nil, nil
}

// CSR exposes the user-major arrays (read only), e.g. for binary encoding.
func (m *Matrix) CSR() (rowPtr []int64, rowCol []int32, rowVal []float32, rowT []int64) {
	return m.rowPtr, m.rowCol, m.rowVal, m.rowT
}

// CSC exposes the item-major arrays (read only), e.g. for binary encoding.
func (m *Matrix) CSC() (colPtr []int64, colRow []int32, colVal []float32) {
	m.cols.Do(m.scatterColumns)
	return m.colPtr, m.colRow, m.colVal
}

// FromViews builds a Matrix from both views, taking ownership of the
// arrays, without recomputing the item-major view (which is most of the
// cost of FromCSR). It checks everything that could make a later access
// fail: offsets, index ranges, order within rows and columns, and that
// every user and item has as many ratings in one view as in the other. It
// does not check that the values agree entry by entry, so use it only with
// views taken from a Matrix (CSR and CSC) and kept intact, e.g. in a
// checksummed file.
func FromViews(users, items *IDs, rowPtr []int64, rowCol []int32, rowVal []float32, rowT []int64, colPtr []int64, colRow []int32, colVal []float32) (*Matrix, error) {
	nUsers, nItems, n := len(rowPtr)-1, len(colPtr)-1, len(rowCol)
	if nUsers < 0 || nItems < 0 || len(rowVal) != n || len(colRow) != n || len(colVal) != n || (rowT != nil && len(rowT) != n) {
		return nil, fmt.Errorf("ratings: inconsistent view lengths")
	}
	users, items, err := idMaps(users, items, nUsers, nItems)
	if err != nil {
		return nil, err
	}
	var perItem, perUser []int64
	var errRows, errCols error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		perItem, errRows = checkView(rowPtr, rowCol, nItems, "user")
	}()
	go func() {
		defer wg.Done()
		perUser, errCols = checkView(colPtr, colRow, nUsers, "item")
	}()
	wg.Wait()
	if errRows != nil {
		return nil, errRows
	}
	if errCols != nil {
		return nil, errCols
	}
	for i := range nItems {
		if perItem[i] != colPtr[i+1]-colPtr[i] {
			return nil, fmt.Errorf("ratings: item %d has %d ratings in the user-major view and %d in the item-major view", i, perItem[i], colPtr[i+1]-colPtr[i])
		}
	}
	for u := range nUsers {
		if perUser[u] != rowPtr[u+1]-rowPtr[u] {
			return nil, fmt.Errorf("ratings: user %d has %d ratings in the user-major view and %d in the item-major view", u, rowPtr[u+1]-rowPtr[u], perUser[u])
		}
	}
	m := &Matrix{Users: users, Items: items, rowPtr: rowPtr, rowCol: rowCol, rowVal: rowVal, rowT: rowT, colPtr: colPtr, colRow: colRow, colVal: colVal}
	m.cols.Do(func() {}) // both views given
	return m, nil
}

// checkView checks one compressed view (offsets, indices of the other side
// in [0, other), strictly increasing within each line) and counts how often
// each index of the other side occurs.
func checkView(ptr []int64, idx []int32, other int, what string) ([]int64, error) {
	n := int64(len(idx))
	if ptr[0] != 0 || ptr[len(ptr)-1] != n {
		return nil, fmt.Errorf("ratings: %s offsets do not span the %d ratings", what, n)
	}
	cnt := make([]int64, other)
	for l := range len(ptr) - 1 {
		a, b := ptr[l], ptr[l+1]
		if a < 0 || a > b || b > n {
			return nil, fmt.Errorf("ratings: %s offsets decrease at %s %d", what, what, l)
		}
		prev := int32(-1)
		for _, c := range idx[a:b] {
			if c < 0 || int(c) >= other {
				return nil, fmt.Errorf("ratings: index %d out of range at %s %d", c, what, l)
			}
			if c <= prev {
				return nil, fmt.Errorf("ratings: indices of %s %d are not sorted and distinct", what, l)
			}
			prev = c
			cnt[c]++
		}
	}
	return cnt, nil
}

// idMaps defaults missing ID maps to sequential IDs 1..n and checks that
// they match the shape.
func idMaps(users, items *IDs, nUsers, nItems int) (*IDs, *IDs, error) {
	if users == nil {
		users = Sequential(nUsers)
	}
	if items == nil {
		items = Sequential(nItems)
	}
	if users.Len() != nUsers || items.Len() != nItems {
		return nil, nil, fmt.Errorf("ratings: ID maps (%d users, %d items) do not match the shape %d × %d", users.Len(), items.Len(), nUsers, nItems)
	}
	return users, items, nil
}

// UserRatings returns user u's ratings as external item IDs and float64
// values (new slices; for code that works in IDs, e.g. folding a user into
// a model on her device).
func (m *Matrix) UserRatings(u int32) (items []string, values []float64) {
	idx, vals := m.UserRow(u)
	items = make([]string, len(idx))
	values = make([]float64, len(idx))
	for k, it := range idx {
		items[k], values[k] = m.Items.Name(it), float64(vals[k])
	}
	return items, values
}
