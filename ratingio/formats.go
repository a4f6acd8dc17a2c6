package ratingio

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// fastPath enables fastTriple (tests turn it off to compare both paths).
var fastPath = true

// Line layouts.
const (
	kindTriples = iota // one rating per line: user, item, rating [, time]
	kindNetflix        // "MovieID:" lines, then "CustomerID,Rating,YYYY-MM-DD"
	kindJester         // one user per line: count; rating of item 1; item 2; …
)

// spec is a resolved format: how to cut a line and which field is what.
// Field indices are 0-based; -1 means absent.
type spec struct {
	format                   string
	kind                     int
	sep                      []byte
	nf                       int // exact number of fields per line (triples, jester)
	user, item, rating, time int
	header                   bool // the first non-blank line is a header
	hasTime                  bool
	dateTime                 bool // the time field is YYYY-MM-DD (netflix)
	hasScale                 bool
	fast                     bool // standard user, item, rating [, time] layout: try fastTriple first
	lo, hi                   float32
}

// fieldName is the role of field f, for error messages.
func (s *spec) fieldName(f int) string {
	switch f {
	case s.user:
		return "user"
	case s.item:
		return "item"
	case s.rating:
		return "rating"
	case s.time:
		return "time"
	}
	return ""
}

var (
	netflixHeader = regexp.MustCompile(`^\s*[^,:\s]+:\s*$`)
	ml100kName    = regexp.MustCompile(`^(u\.data|u[1-5]\.(base|test)|u[ab]\.(base|test))$`)
)

// detect names the format of a text file from its name and first non-blank
// line, when that is unambiguous.
func detect(name string, first []byte) (string, error) {
	base := strings.TrimSuffix(filepath.Base(name), ".gz")
	low := strings.ToLower(strings.TrimSpace(string(first)))
	switch {
	case bytes.Contains(first, []byte("::")):
		return "movielens", nil
	case netflixHeader.Match(first):
		return "netflix", nil
	case strings.HasPrefix(low, "userid,movieid,rating"):
		return "movielens-csv", nil
	case strings.HasPrefix(low, "userid,placeid,rating"):
		return "uci-rc", nil
	case bytes.IndexByte(first, ';') >= 0:
		// Jester rows are wide (101 or 159 fields) and start with a count;
		// a short ';' line is some other layout we do not guess.
		f := split(first, []byte(";"), nil)
		if _, ok := parseInt(trimSpace(f[0])); ok && len(f) >= 10 {
			return "jester-wide", nil
		}
	case bytes.IndexByte(first, '\t') >= 0:
		if ml100kName.MatchString(base) {
			return "movielens-100k", nil
		}
		return "tsv", nil
	case bytes.IndexByte(first, ',') >= 0:
		return "csv", nil
	}
	return "", &ParseError{File: name, Line: 1, Reason: "cannot tell the format from the first line " + quoteField(first) + "; give --format (one of " + strings.Join(Formats, ", ") + ")"}
}

// newSpec resolves the format for a text file whose first non-blank line
// (BOM and CR removed) is first, at line number firstLine.
func newSpec(opt *Options, name string, first []byte, firstLine int64) (*spec, error) {
	format, err := specFormat(opt, name, first)
	if err != nil {
		return nil, err
	}
	s := &spec{format: format, user: 0, item: 1, rating: 2, time: -1, hasScale: opt.HasScale, lo: float32(opt.Min), hi: float32(opt.Max)}
	perr := func(format string, a ...any) error {
		return &ParseError{File: name, Line: firstLine, Reason: fmt.Sprintf(format, a...)}
	}
	switch format {
	case "movielens-100k":
		s.sep, s.nf, s.time = []byte("\t"), 4, 3
	case "movielens":
		s.sep, s.nf, s.time = []byte("::"), 4, 3
	case "movielens-csv":
		err = s.movielensCSV(first, perr)
	case "uci-rc":
		err = s.uciRC(opt.Column, name, first, perr)
	case "netflix":
		s.kind, s.sep, s.nf, s.user, s.item, s.rating, s.time, s.dateTime = kindNetflix, []byte(","), 3, 0, -1, 1, 2, true
	case "jester-wide":
		s.kind, s.sep, s.user, s.item, s.rating = kindJester, []byte(";"), -1, -1, -1
		s.nf = len(split(first, s.sep, nil))
		if s.nf < 2 {
			return nil, perr("jester-wide wants ';'-separated fields (count; rating of item 1; …); found %s", quoteField(first))
		}
	case "tsv", "csv":
		s.sep = []byte("\t")
		if format == "csv" {
			s.sep = []byte(",")
		}
		err = s.columns(opt.Cols, first, perr)
	case "binary":
		return nil, perr("not a privrec binary ratings file (bad magic)")
	default:
		return nil, fmt.Errorf("unknown format %q (want auto or one of %s)", format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return nil, err
	}
	s.hasTime = s.time >= 0
	s.fast = fastPath && s.kind == kindTriples && s.user == 0 && s.item == 1 && s.rating == 2 &&
		((s.nf == 3 && s.time < 0) || (s.nf == 4 && s.time == 3)) && (len(s.sep) == 1 || string(s.sep) == "::")
	return s, nil
}

// specFormat is the format asked for, or detected from the file name and
// first line (with --cols, the generic reader of the same separator).
func specFormat(opt *Options, name string, first []byte) (string, error) {
	format := opt.Format
	if format == "" || format == "auto" {
		f, err := detect(name, first)
		if err != nil {
			return "", err
		}
		format = f
		if opt.Cols != "" { // --cols asks for the generic reader of the same separator
			switch format {
			case "movielens-100k":
				format = "tsv"
			case "movielens-csv", "uci-rc":
				format = "csv"
			}
		}
	}
	if opt.Cols != "" && format != "tsv" && format != "csv" {
		return "", fmt.Errorf("%s: --cols applies to the tsv and csv formats, not %s", name, format)
	}
	return format, nil
}

// movielensCSV places the columns of MovieLens' ratings.csv by its header.
func (s *spec) movielensCSV(first []byte, perr func(string, ...any) error) error {
	s.sep, s.header = []byte(","), true
	h := fieldsOf(first, s.sep)
	var ok bool
	if s.user, ok = h["userId"]; !ok {
		return perr("movielens-csv needs the header line userId,movieId,rating,timestamp; found %s", quoteField(first))
	}
	if s.item, ok = h["movieId"]; !ok {
		return perr("movielens-csv header has no movieId column: %s", quoteField(first))
	}
	if s.rating, ok = h["rating"]; !ok {
		return perr("movielens-csv header has no rating column: %s", quoteField(first))
	}
	if s.time, ok = h["timestamp"]; !ok {
		s.time = -1
	}
	s.nf = len(split(first, s.sep, nil))
	return nil
}

// uciRC places the columns of the UCI restaurant ratings by its header;
// column picks the overall, food or service rating.
func (s *spec) uciRC(column, name string, first []byte, perr func(string, ...any) error) error {
	s.sep, s.header = []byte(","), true
	col := column
	switch col {
	case "", "rating":
		col = "rating"
	case "food", "service":
		col += "_rating"
	default:
		return fmt.Errorf("%s: uci-rc column %q: want rating, food or service", name, column)
	}
	h := fieldsOf(first, s.sep)
	var ok1, ok2, ok3 bool
	s.user, ok1 = h["userID"]
	s.item, ok2 = h["placeID"]
	s.rating, ok3 = h[col]
	if !ok1 || !ok2 || !ok3 {
		return perr("uci-rc needs a header naming userID, placeID and %s (like userID,placeID,rating,food_rating,service_rating); found %s", col, quoteField(first))
	}
	s.nf = len(split(first, s.sep, nil))
	return nil
}

// columns sets up a generic tsv/csv layout from --cols and the first line.
func (s *spec) columns(cols string, first []byte, perr func(string, ...any) error) error {
	fields := split(first, s.sep, nil)
	// The first line is a header iff every field starts with a letter or
	// underscore (a data line starts its user, item or rating with
	// something else in every format we know), or --cols names columns.
	s.header = looksLikeHeader(first, s.sep)
	s.nf = len(fields)
	if cols == "" {
		s.user, s.item, s.rating, s.time = 0, 1, 2, -1
		switch s.nf {
		case 3:
		case 4:
			s.time = 3
		case 1, 2:
			return perr("%s wants user, item and rating separated by %q; the first line has %d field(s)", s.format, s.sep, s.nf)
		default:
			return perr("%s with %d fields: give --cols (e.g. user=0,item=1,rating=2,time=3)", s.format, s.nf)
		}
		return nil
	}
	var names map[string]int
	if s.header {
		names = fieldsOf(first, s.sep)
	}
	s.user, s.item, s.rating, s.time = -1, -1, -1, -1
	for part := range strings.SplitSeq(cols, ",") {
		role, col, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("--cols %q: want role=column pairs like user=0,item=1,rating=2", cols)
		}
		idx, err := strconv.Atoi(col)
		if err != nil {
			if !s.header {
				return perr("--cols names column %q but the first line is not a header: %s", col, quoteField(first))
			}
			var found bool
			if idx, found = names[col]; !found {
				return perr("--cols: no column named %q in the header %s", col, quoteField(first))
			}
		}
		if idx < 0 || idx >= s.nf {
			return perr("--cols %s=%d: the first line has %d fields (columns count from 0)", role, idx, s.nf)
		}
		switch role {
		case "user":
			s.user = idx
		case "item":
			s.item = idx
		case "rating":
			s.rating = idx
		case "time":
			s.time = idx
		default:
			return fmt.Errorf("--cols: unknown role %q (want user, item, rating, time)", role)
		}
	}
	if s.user < 0 || s.item < 0 || s.rating < 0 {
		return fmt.Errorf("--cols %q: user, item and rating are required", cols)
	}
	if s.user == s.item || s.user == s.rating || s.item == s.rating || (s.time >= 0 && (s.time == s.user || s.time == s.item || s.time == s.rating)) {
		return fmt.Errorf("--cols %q: two roles share a column", cols)
	}
	return nil
}

// fieldsOf maps header names to their 0-based index.
func fieldsOf(line, sep []byte) map[string]int {
	m := map[string]int{}
	for i, f := range split(line, sep, nil) {
		name := string(trimSpace(f))
		if _, dup := m[name]; !dup {
			m[name] = i
		}
	}
	return m
}
