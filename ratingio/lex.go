package ratingio

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"unsafe"
)

// Hand-written scanners: the readers parse tens of millions of fields, and
// strconv needs a string (an allocation per field) and is general-purpose.
// Each fast path falls back to strconv for anything unusual, so the
// accepted syntax is exactly strconv's.

// key is how a chunk records an identifier: the value of a canonical
// integer identifier below 2^31, or strKey | an index into the chunk's
// string dictionary (every other identifier, including larger integers).
// Four bytes per identifier keeps the per-rating scratch memory small.
type key = uint32

// strKey marks a key that is a dictionary index.
const strKey = key(1) << 31

// unresolvedKey is the item key of a Netflix rating whose "MovieID:" line
// lies in an earlier chunk.
const unresolvedKey = ^key(0)

// canonUint parses b as a canonical non-negative decimal integer (digits
// only, no sign, no leading zero unless b is "0", at most 18 digits, so the
// value is below 2^63). Identifiers like this are kept as numbers while
// reading, and their external name is the same digits.
func canonUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v, true
}

// str views b as a string without copying; the result must not outlive b's
// contents and is only passed to functions that do not retain it.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// pow10f32 holds the powers of ten that are exact in float32.
var pow10f32 = [...]float32{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}

// parseRating parses a finite decimal number, correctly rounded to float32.
// reason is empty on success.
func parseRating(b []byte) (float32, string) {
	// Fast path (Clinger): at most 7 significant digits (< 2^24) and at
	// most 10 decimals make both operands of one float32 division exact, so
	// the quotient is the correctly rounded value.
	s := b
	neg := false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var m uint32
	nd, frac := 0, -1
	ok := len(s) > 0 && len(s) <= 12
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + uint32(c-'0')
			nd++
			if frac >= 0 {
				frac++
			}
		case c == '.' && frac < 0:
			frac = 0
		default:
			ok = false
		}
	}
	if ok && nd > 0 && nd <= 7 && frac != 0 {
		v := float32(m)
		if frac > 0 {
			v /= pow10f32[frac]
		}
		if neg {
			v = -v
		}
		return v, ""
	}
	f, err := strconv.ParseFloat(str(b), 32)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, "rating " + strconv.Quote(string(b)) + " is out of the float32 range"
	case err != nil:
		return 0, quoteField(b) + " is not a number"
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, "rating " + strconv.Quote(string(b)) + " is NaN or infinite"
	}
	return float32(f), ""
}

// parseInt parses a decimal integer (optional sign).
func parseInt(b []byte) (int64, bool) {
	s := b
	neg := false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 18 {
		v, err := strconv.ParseInt(str(b), 10, 64)
		return v, err == nil
	}
	var v int64
	for _, c := range s {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + int64(d)
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseDate parses YYYY-MM-DD into Unix seconds at midnight UTC.
func parseDate(b []byte) (int64, bool) {
	if len(b) != 10 || b[4] != '-' || b[7] != '-' {
		return 0, false
	}
	y, ok1 := parseInt(b[:4])
	mo, ok2 := parseInt(b[5:7])
	d, ok3 := parseInt(b[8:10])
	if !ok1 || !ok2 || !ok3 || b[5] == '+' || b[8] == '+' || b[5] == '-' || b[8] == '-' || b[0] == '+' || b[0] == '-' {
		return 0, false
	}
	if mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) {
		return 0, false
	}
	return daysFromCivil(y, mo, d) * 86400, true
}

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (H. Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// trimSpace removes ASCII spaces around a field.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// split appends the sep-separated fields of line to dst.
func split(line, sep []byte, dst [][]byte) [][]byte {
	if len(sep) == 1 {
		c := sep[0]
		for {
			i := bytes.IndexByte(line, c)
			if i < 0 {
				return append(dst, line)
			}
			dst = append(dst, line[:i])
			line = line[i+1:]
		}
	}
	if len(sep) == 2 && sep[0] == sep[1] { // "::": a byte loop beats Index on short fields
		c := sep[0]
		start := 0
		for i := 0; i+1 < len(line); i++ {
			if line[i] == c && line[i+1] == c {
				dst = append(dst, line[start:i])
				i++
				start = i + 1
			}
		}
		return append(dst, line[start:])
	}
	for {
		i := bytes.Index(line, sep)
		if i < 0 {
			return append(dst, line)
		}
		dst = append(dst, line[:i])
		line = line[i+len(sep):]
	}
}

// quoteField quotes at most 40 bytes of a field for an error message.
func quoteField(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "…"
	}
	return strconv.Quote(string(b))
}
