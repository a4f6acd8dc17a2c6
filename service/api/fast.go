package api

import (
	"strconv"
)

// fastReport parses the common shape of a report body without
// encoding/json: one object whose keys are among "id", "epsilon",
// "values" and "mean" (each at most once), an id string without escapes,
// an epsilon number, values an array of numbers and nulls, and mean a
// number or null, with optional white space. Anything else — escapes,
// other keys or types, repeated keys, malformed numbers, trailing data —
// returns ok = false
// and the caller decodes with the strict general path, which also words
// the errors. When ok, raw is exactly what the general path would decode
// (FuzzDecodeReport checks it).
func fastReport(b []byte) (f parsed, ok bool) {
	p := parser{b: b}
	p.ws()
	if !p.eat('{') {
		return f, false
	}
	seen := 0
	p.ws()
	if p.eat('}') {
		p.ws()
		return f, p.i == len(p.b)
	}
	for {
		p.ws()
		if !p.reportField(&f, &seen) {
			return f, false
		}
		p.ws()
		if p.eat('}') {
			break
		}
		if !p.eat(',') {
			return f, false
		}
	}
	p.ws()
	return f, p.i == len(p.b)
}

// reportField parses one `"key": value` member of a report into f; seen
// has a bit for each key parsed so far (a repeated or unknown key is
// refused).
func (p *parser) reportField(f *parsed, seen *int) bool {
	key, ok := p.plainString()
	if !ok {
		return false
	}
	p.ws()
	if !p.eat(':') {
		return false
	}
	p.ws()
	var bit int
	switch string(key) {
	case "id":
		bit = 1
	case "epsilon":
		bit = 2
	case "values":
		bit = 4
	case "mean":
		bit = 8
	default:
		return false
	}
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	switch bit {
	case 1:
		s, ok := p.plainString()
		if !ok {
			return false
		}
		id := string(s)
		f.id = &id
	case 2:
		x, ok := p.number()
		if !ok {
			return false
		}
		f.epsilon = &x
	case 4:
		return p.reportValues(f)
	case 8:
		if !p.literal("null") {
			x, ok := p.number()
			if !ok {
				return false
			}
			f.mean = &x
		}
	}
	return true
}

// reportValues parses a report's values, an array of numbers and nulls,
// into f.
func (p *parser) reportValues(f *parsed) bool {
	if !p.eat('[') {
		return false
	}
	f.hasValues = true
	f.values = make([]*float64, 0, 64)
	// The values live in one backing array rather than one allocation
	// each; a full array is replaced by a larger one (the pointers into the
	// old one stay valid).
	var backing []float64
	p.ws()
	if p.eat(']') {
		return true
	}
	for {
		p.ws()
		if p.literal("null") {
			f.values = append(f.values, nil)
		} else {
			x, ok := p.number()
			if !ok {
				return false
			}
			if len(backing) == cap(backing) {
				backing = make([]float64, 0, max(64, 2*cap(backing)))
			}
			backing = append(backing, x)
			f.values = append(f.values, &backing[len(backing)-1])
		}
		p.ws()
		if p.eat(']') {
			return true
		}
		if !p.eat(',') {
			return false
		}
	}
}

type parser struct {
	b []byte
	i int
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) literal(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// plainString reads a string without escapes or control characters and
// of valid UTF-8 only in its ASCII subset (anything else: not handled).
func (p *parser) plainString() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// number reads a JSON number (RFC 8259 grammar) that fits a finite
// float64.
func (p *parser) number() (float64, bool) {
	start := p.i
	neg := p.eat('-')
	// A short integer (the common case: ratings, 0/1 bits) is exact
	// in a float64 and needs no ParseFloat.
	if n, ok := p.smallInt(); ok {
		if neg {
			return -n, true
		}
		return n, true
	}
	switch {
	case p.eat('0'):
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return 0, false
	}
	if p.eat('.') {
		if p.digits() == 0 {
			return 0, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if !p.eat('+') {
			p.eat('-')
		}
		if p.digits() == 0 {
			return 0, false
		}
	}
	x, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	if err != nil {
		return 0, false
	}
	return x, true
}

func (p *parser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// smallInt reads an integer of at most 15 digits without a leading zero
// (or 0 alone) that no fraction or exponent follows; otherwise it reads
// nothing.
func (p *parser) smallInt() (float64, bool) {
	i, n := p.i, int64(0)
	for i < len(p.b) && i-p.i < 16 && p.b[i] >= '0' && p.b[i] <= '9' {
		n = 10*n + int64(p.b[i]-'0')
		i++
	}
	d := i - p.i
	switch {
	case d == 0 || d > 15 || (d > 1 && p.b[p.i] == '0'):
		return 0, false
	case i < len(p.b) && (p.b[i] == '.' || p.b[i] == 'e' || p.b[i] == 'E' || (p.b[i] >= '0' && p.b[i] <= '9')):
		return 0, false
	}
	p.i = i
	return float64(n), true
}
