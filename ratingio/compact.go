package ratingio

import "runtime/debug"

// A chunk's per-rating scratch is what bounds the memory of reading a large
// file: the parsed ratings of the whole file are held until the user-major
// store is built from them. Two of its columns are usually runs and are
// kept as such: the user (files sorted or grouped by user) and the line a
// rating came from (one rating a line, save comments and blank lines).

// userCol is the user column of a chunk: runs of equal keys while the runs
// are long (at least two ratings each on average), a plain key per rating
// from the first point where they are not.
type userCol struct {
	plain  []key   // one key per rating, once the column is plain
	runKey []key   // the runs' keys (while run-length coded)
	runEnd []int32 // run r covers ratings [runEnd[r-1], runEnd[r])
	n      int32   // ratings in the column
	est    int     // expected ratings in the chunk (capacity of plain)
}

func (c *userCol) add(u key) {
	switch {
	case c.plain != nil:
		c.plain = append(c.plain, u)
	case len(c.runKey) > 0 && c.runKey[len(c.runKey)-1] == u:
		c.runEnd[len(c.runEnd)-1]++
	case len(c.runKey) >= 16 && 2*len(c.runKey) > int(c.n):
		// Short runs: one key per rating is smaller from here on.
		plain := make([]key, 0, max(c.est, int(c.n)+1))
		c.each(func(_ int, k key) { plain = append(plain, k) })
		c.plain = append(plain, u)
		c.runKey, c.runEnd = nil, nil
	default:
		c.runKey = append(c.runKey, u)
		c.runEnd = append(c.runEnd, c.n+1)
	}
	c.n++
}

// len is the number of ratings.
func (c *userCol) len() int { return int(c.n) }

// each calls f with every rating's index and key, in order.
func (c *userCol) each(f func(r int, u key)) {
	if c.plain != nil {
		for r, u := range c.plain {
			f(r, u)
		}
		return
	}
	r := 0
	for k, u := range c.runKey {
		for ; r < int(c.runEnd[k]); r++ {
			f(r, u)
		}
	}
}

// remap replaces every key by f(key) (each distinct run key once).
func (c *userCol) remap(f func(key) key) {
	keys := c.plain
	if keys == nil {
		keys = c.runKey
	}
	for r, k := range keys {
		keys[r] = f(k)
	}
}

// lineCol maps a chunk's ratings to their lines: a jump is recorded where
// a rating's line is not the line after the previous rating's (a comment
// or blank line between them, or several ratings on one line), so a file
// of one rating a line costs one entry a chunk.
type lineCol struct {
	rec []int32 // the rating at which a jump occurs (increasing)
	rel []int32 // its line, relative to the chunk's first line
	n   int32
}

func (c *lineCol) add(rel int32) {
	if k := len(c.rec) - 1; k < 0 || c.rel[k]+(c.n-c.rec[k]) != rel {
		c.rec = append(c.rec, c.n)
		c.rel = append(c.rel, rel)
	}
	c.n++
}

// at is the line of rating r, relative to the chunk's first line.
func (c *lineCol) at(r int) int32 {
	lo, hi := 0, len(c.rec) // the last jump at or before r
	for hi-lo > 1 {
		m := (lo + hi) / 2
		if int(c.rec[m]) <= r {
			lo = m
		} else {
			hi = m
		}
	}
	return c.rel[lo] + int32(r) - c.rec[lo]
}

// spans calls f for every run of ratings [from, to) of one user, in
// order (one rating at a time once the column is plain).
func (c *userCol) spans(f func(from, to int, u key)) {
	if c.plain != nil {
		for r, u := range c.plain {
			f(r, r+1, u)
		}
		return
	}
	from := 0
	for k, u := range c.runKey {
		f(from, int(c.runEnd[k]), u)
		from = int(c.runEnd[k])
	}
}

// releaser drops the item, value and time columns of the chunks whose
// ratings are in the user-major store, and returns their memory to the
// system every eighth of the way: the store is written while the chunks
// are read, so both are not held at full size (the garbage collector
// would otherwise keep the pages of freed columns until its next cycle,
// which no allocation triggers while the store is filled).
type releaser struct {
	total, step, freed int64
}

// releaseMin is the scratch size below which memory is left to the
// garbage collector.
const releaseMin = 256 << 20

func newReleaser(chunks []*chunk) *releaser {
	var total int64
	for _, c := range chunks {
		total += c.bytes()
	}
	return &releaser{total: total, step: max(total/8, releaseMin)}
}

// done drops c's item, value and time columns.
func (r *releaser) done(c *chunk) {
	r.freed += c.bytes()
	c.item, c.val, c.t = nil, nil, nil
	if r.freed >= r.step {
		r.freed = 0
		debug.FreeOSMemory()
	}
}

// flush returns the rest, once every chunk is done.
func (r *releaser) flush() {
	if r.total >= releaseMin && r.freed > 0 {
		r.freed = 0
		debug.FreeOSMemory()
	}
}

// bytes is the memory of the item, value and time columns.
func (c *chunk) bytes() int64 {
	return 4*int64(cap(c.item)) + 4*int64(cap(c.val)) + 8*int64(cap(c.t))
}
