package ratingio

import (
	"bytes"
	"strconv"
)

// chunk is a block of whole lines parsed by one goroutine into keyed
// ratings. Identifier keys are either the identifier's integer value or
// strKey|index into the chunk's own dictionary; they become global dense
// indices when the chunks are assembled in file order.
type chunk struct {
	idx       int
	data      []byte
	firstLine int64 // line number of data's first line
	first     bool  // the file's first block (holds the header, if any)

	user userCol // the user of each record
	item []key
	val  []float32
	t    []int64
	line lineCol // line of each record, relative to firstLine

	udict, idict dict
	maxU, maxI   key // largest integer keys (for the interning tables)

	// netflix: the last "MovieID:" key seen in this chunk
	curItem key
	hasItem bool

	fields [][]byte
	err    *ParseError
}

// dict interns the identifiers of one chunk that are not canonical integers.
type dict struct {
	index map[string]uint32
	names []string
}

func (d *dict) key(b []byte) key {
	if d.index == nil {
		d.index = make(map[string]uint32)
	}
	if k, ok := d.index[string(b)]; ok { // no allocation: map lookup by string(bytes)
		return strKey | k
	}
	k := uint32(len(d.names))
	s := string(b)
	d.names = append(d.names, s)
	d.index[s] = k
	return strKey | k
}

// idKey turns an identifier field into a key.
func (c *chunk) idKey(b []byte, d *dict, max *key, col int, field string) (key, *lineError) {
	b = trimSpace(b)
	if v, ok := canonUint(b); ok && v < uint64(strKey) {
		if key(v) > *max {
			*max = key(v)
		}
		return key(v), nil
	}
	if len(b) == 0 {
		return 0, errField(col, field, "empty identifier")
	}
	if b[0] == '"' {
		return 0, errField(col, field, "quoted fields are not supported: %s", quoteField(b))
	}
	if b[0] == '#' {
		// A line starting with '#' is a comment, so such an identifier could
		// not be written back out as canonical TSV.
		return 0, errField(col, field, "identifier %s starts with '#', which marks a comment", quoteField(b))
	}
	return d.key(b), nil
}

// value parses a rating field and checks the declared scale.
func (s *spec) value(b []byte, col int) (float32, *lineError) {
	v, reason := parseRating(trimSpace(b))
	if reason != "" {
		return 0, errField(col, "rating", "%s", reason)
	}
	if s.hasScale && (v < s.lo || v > s.hi) {
		return 0, errField(col, "rating", "rating %v is outside the declared scale %v:%v", v, s.lo, s.hi)
	}
	return v, nil
}

// parse fills c from c.data, stopping at the first bad line.
func (s *spec) parse(c *chunk) {
	data := c.data
	if c.first && bytes.HasPrefix(data, bom) {
		data = data[len(bom):]
	}
	skip := c.first && s.header
	est := bytes.Count(data, []byte{'\n'}) + 1
	if s.kind == kindJester {
		est *= 16
	}
	c.user = userCol{est: est}
	c.item = make([]key, 0, est)
	c.val = make([]float32, 0, est)
	if s.hasTime {
		c.t = make([]int64, 0, est)
	}
	if c.fields == nil {
		c.fields = make([][]byte, 0, max(s.nf, 4)+1)
	}
	rel := int32(-1)
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		rel++
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 || line[0] == '#' { // blank or comment (e.g. a collect file's header)
			continue
		}
		if skip {
			skip = false
			continue
		}
		var le *lineError
		switch s.kind {
		case kindTriples:
			le = s.triple(c, line, rel)
		case kindNetflix:
			le = s.netflix(c, line, rel)
		case kindJester:
			le = s.jester(c, line, rel)
		}
		if le != nil {
			c.err = &ParseError{Line: c.firstLine + int64(rel), Column: le.column, Field: le.field, Reason: le.reason}
			return
		}
	}
}

var bom = []byte("\xef\xbb\xbf")

// record appends one rating (the caller appends its time, if any).
func (c *chunk) record(u, it key, v float32, rel int32) {
	c.user.add(u)
	c.item = append(c.item, it)
	c.val = append(c.val, v)
	c.line.add(rel)
}

func (s *spec) fieldCount(n int) *lineError {
	return errField(0, "", "wrong field count: want %d fields separated by %q, found %d", s.nf, s.sep, n)
}

func (s *spec) triple(c *chunk, line []byte, rel int32) *lineError {
	if s.fast && s.fastTriple(c, line, rel) {
		return nil
	}
	f := split(line, s.sep, c.fields[:0])
	c.fields = f[:0]
	if len(f) != s.nf {
		return s.fieldCount(len(f))
	}
	u, le := c.idKey(f[s.user], &c.udict, &c.maxU, s.user+1, "user")
	if le != nil {
		return le
	}
	it, le := c.idKey(f[s.item], &c.idict, &c.maxI, s.item+1, "item")
	if le != nil {
		return le
	}
	v, le := s.value(f[s.rating], s.rating+1)
	if le != nil {
		return le
	}
	if s.hasTime {
		ts, ok := parseInt(trimSpace(f[s.time]))
		if !ok {
			return errField(s.time+1, "time", "%s is not an integer timestamp", quoteField(f[s.time]))
		}
		c.t = append(c.t, ts)
	}
	c.record(u, it, v, rel)
	return nil
}

func (s *spec) netflix(c *chunk, line []byte, rel int32) *lineError {
	if t := trimSpace(line); len(t) > 0 && t[len(t)-1] == ':' && bytes.IndexByte(t, ',') < 0 {
		k, le := c.idKey(t[:len(t)-1], &c.idict, &c.maxI, 1, "item")
		if le != nil {
			return le
		}
		c.curItem, c.hasItem = k, true
		return nil
	}
	f := split(line, s.sep, c.fields[:0])
	c.fields = f[:0]
	if len(f) != 3 {
		return errField(0, "", "want a \"MovieID:\" line or CustomerID,Rating,YYYY-MM-DD; found %d comma-separated fields", len(f))
	}
	item := unresolvedKey
	if c.hasItem {
		item = c.curItem
	} else if c.first {
		return errField(0, "", "rating line before any \"MovieID:\" line")
	}
	u, le := c.idKey(f[0], &c.udict, &c.maxU, 1, "user")
	if le != nil {
		return le
	}
	v, le := s.value(f[1], 2)
	if le != nil {
		return le
	}
	ts, ok := parseDate(trimSpace(f[2]))
	if !ok {
		return errField(3, "time", "%s is not a date YYYY-MM-DD", quoteField(f[2]))
	}
	c.t = append(c.t, ts)
	c.record(u, item, v, rel)
	return nil
}

// jesterMissing is the Jester code for "not rated".
const jesterMissing = 99

func (s *spec) jester(c *chunk, line []byte, rel int32) *lineError {
	f := split(line, s.sep, c.fields[:0])
	c.fields = f[:0]
	if len(f) != s.nf {
		return s.fieldCount(len(f))
	}
	count, ok := parseInt(trimSpace(f[0]))
	if !ok || count < 0 {
		return errField(1, "count", "%s is not a count of ratings", quoteField(f[0]))
	}
	// The user is the line number: Jester rows carry no user ID.
	no := c.firstLine + int64(rel)
	if no >= int64(strKey) {
		return errField(0, "", "more than 2^31-1 lines")
	}
	u := key(no)
	if u > c.maxU {
		c.maxU = u
	}
	n := int64(0)
	for j := 1; j < len(f); j++ {
		v, reason := parseRating(trimSpace(f[j]))
		if reason != "" {
			return errField(j+1, "rating", "%s", reason)
		}
		if v == jesterMissing {
			continue
		}
		if s.hasScale && (v < s.lo || v > s.hi) {
			return errField(j+1, "rating", "rating %v is outside the declared scale %v:%v", v, s.lo, s.hi)
		}
		it := key(j)
		if it > c.maxI {
			c.maxI = it
		}
		c.record(u, it, v, rel)
		n++
	}
	if n != count {
		return errField(1, "count", "the row says it has %s ratings but has %d (99 = not rated)", strconv.FormatInt(count, 10), n)
	}
	return nil
}

// fastTriple parses the common line "user SEP item SEP rating [SEP time]"
// in one pass when every field has its plainest form: canonical integer IDs
// below 2^31, a rating of at most 7 significant digits and 10 decimals
// (the exact Clinger case of parseRating), an integer time, no spaces. It
// returns false, having recorded nothing, for anything else, and the
// general path then parses the line (and reports its errors), so both
// paths give identical results.
func (s *spec) fastTriple(c *chunk, line []byte, rel int32) bool {
	sep, wide := s.sep[0], len(s.sep) == 2
	u, p, ok := fastID(line, 0)
	if !ok {
		return false
	}
	if p, ok = fastSep(line, p, sep, wide); !ok {
		return false
	}
	it, p, ok := fastID(line, p)
	if !ok {
		return false
	}
	if p, ok = fastSep(line, p, sep, wide); !ok {
		return false
	}
	v, p, ok := fastRating(line, p)
	if !ok || s.hasScale && (v < s.lo || v > s.hi) {
		return false
	}
	var ts int64
	if s.hasTime {
		if p, ok = fastSep(line, p, sep, wide); !ok {
			return false
		}
		if ts, p, ok = fastTime(line, p); !ok {
			return false
		}
	}
	if p != len(line) {
		return false
	}
	if u > c.maxU {
		c.maxU = u
	}
	if it > c.maxI {
		c.maxI = it
	}
	if s.hasTime {
		c.t = append(c.t, ts)
	}
	// c.record, by hand: the call costs the hot path ≈ 3 % of its work.
	c.user.add(u)
	c.item, c.val = append(c.item, it), append(c.val, v)
	c.line.add(rel)
	return true
}

// fastID reads, from line[p:], a canonical integer identifier below 2^31
// (1 to 10 digits, no leading zero) and returns the position after it.
func fastID(line []byte, p int) (key, int, bool) {
	start := p
	var v uint64
	for p < len(line) && p-start <= 10 {
		d := line[p] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
		p++
	}
	n := p - start
	return key(v), p, n > 0 && n <= 10 && v < uint64(strKey) && (line[start] != '0' || n == 1)
}

// fastSep reads the separator (one byte, or the byte twice when wide) at
// line[p].
func fastSep(line []byte, p int, sep byte, wide bool) (int, bool) {
	if p < len(line) && line[p] == sep {
		p++
		if !wide {
			return p, true
		}
		if p < len(line) && line[p] == sep {
			return p + 1, true
		}
	}
	return p, false
}

// fastRating reads [-]digits[.digits] with at most 7 significant digits
// and 10 decimals, where one float32 division is exact (Clinger's fast
// path).
func fastRating(line []byte, p int) (float32, int, bool) {
	neg := false
	if p < len(line) && line[p] == '-' {
		neg = true
		p++
	}
	var m uint32
	nd, frac := 0, -1
	for p < len(line) {
		ch := line[p]
		if ch >= '0' && ch <= '9' {
			m = m*10 + uint32(ch-'0')
			nd++
			if frac >= 0 {
				frac++
			}
		} else if ch == '.' && frac < 0 {
			frac = 0
		} else {
			break
		}
		p++
		if nd > 7 || frac > 10 {
			return 0, p, false
		}
	}
	if nd == 0 || frac == 0 {
		return 0, p, false
	}
	v := float32(m)
	if frac > 0 {
		v /= pow10f32[frac]
	}
	if neg {
		v = -v
	}
	return v, p, true
}

// fastTime reads [-]digits, at most 18 digits.
func fastTime(line []byte, p int) (int64, int, bool) {
	neg := false
	if p < len(line) && line[p] == '-' {
		neg = true
		p++
	}
	start := p
	var ts int64
	for _, ch := range line[p:min(len(line), p+18)] {
		d := ch - '0'
		if d > 9 {
			break
		}
		ts = ts*10 + int64(d)
		p++
	}
	if p == start {
		return 0, p, false
	}
	if neg {
		ts = -ts
	}
	return ts, p, true
}
