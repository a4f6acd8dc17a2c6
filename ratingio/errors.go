package ratingio

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ParseError reports bad input: which file, where, and why. Line is the
// 1-based line number (0 when the problem concerns the whole file, e.g. an
// empty file, or a binary file; for a damaged gzip stream, the line the
// decompressed text had reached, and the reason gives the byte offset in
// the compressed stream); Column is the 1-based field number (0 when the
// problem concerns the whole line) and Field its role ("user", "item",
// "rating", "time", "count", or a header name) when known.
type ParseError struct {
	File   string
	Line   int64
	Column int
	Field  string
	Reason string
	// Err is the underlying error, if any (e.g. a *ratings.DuplicateError).
	Err error
}

func (e *ParseError) Error() string {
	s := e.File
	if s == "" {
		s = "<input>"
	}
	if e.Line > 0 {
		s += ":" + strconv.FormatInt(e.Line, 10)
	}
	s += ": "
	if e.Column > 0 {
		s += "column " + strconv.Itoa(e.Column)
		if e.Field != "" {
			s += " (" + e.Field + ")"
		}
		s += ": "
	}
	return s + e.Reason
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// lineError is a parse failure inside one line; the chunk parser adds the
// file name and line number.
type lineError struct {
	column int
	field  string
	reason string
}

func errField(col int, field, format string, a ...any) *lineError {
	return &lineError{column: col, field: field, reason: fmt.Sprintf(format, a...)}
}

// teach adds the likely fix to a parse error of a text file whose first
// non-blank line is first (line number firstNo): when the failing line is
// that first line and it looks like a header (column names), it says so;
// when --format was given and the first line looks like another format, it
// names that format. Other errors are returned unchanged.
func teach(err error, opt *Options, s *spec, name string, first []byte, firstNo int64) error {
	var pe *ParseError
	if !errors.As(err, &pe) {
		return err
	}
	var hints []string
	if s != nil && !s.header && pe.Line == firstNo && len(split(first, s.sep, nil)) > 1 && looksLikeHeader(first, s.sep) {
		hints = append(hints, fmt.Sprintf("line %d looks like a header (column names), which the %s format does not have: delete it or start it with '#' (a comment)", firstNo, s.format))
	}
	if opt.Format != "" && opt.Format != "auto" {
		if f, derr := detect(name, first); derr == nil && f != opt.Format && !(opt.Format == "tsv" && f == "movielens-100k") {
			hints = append(hints, fmt.Sprintf("the file looks like --format %s (or leave --format out to detect it)", f))
		}
	}
	if len(hints) == 0 {
		return err
	}
	cp := *pe
	cp.Reason += "; " + strings.Join(hints, "; ")
	return &cp
}

// looksLikeHeader reports whether every sep-separated field of line starts
// with a letter or '_': a data line starts its user, item or rating with
// something else in every format privrec reads.
func looksLikeHeader(line, sep []byte) bool {
	for _, f := range split(line, sep, nil) {
		f = trimSpace(f)
		if len(f) == 0 || !(f[0] == '_' || (f[0]|0x20 >= 'a' && f[0]|0x20 <= 'z')) {
			return false
		}
	}
	return true
}
