package ratingio

import (
	"fmt"
	"strconv"
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
