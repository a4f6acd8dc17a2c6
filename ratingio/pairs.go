package ratingio

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Pair is one (user, item) question: what would the model predict?
type Pair struct {
	User, Item string
	// Line is the 1-based line of the pair in its file.
	Line int64
}

// ReadPairs reads (user, item) pairs, one per line: the user ID and the
// item ID separated by a tab, a comma, "::" or spaces; further fields (a
// rating, a timestamp) are ignored, so any ratings file in a separated
// format serves. Blank lines and lines starting with '#' are skipped, and
// so is a first line whose two fields are column names (user, item,
// userId, movieId, …). A line with fewer than two fields is a *ParseError
// naming it.
func ReadPairs(r io.Reader, name string) ([]Pair, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Pair
	var line int64
	first := true
	for sc.Scan() {
		line++
		t := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "\ufeff"))
		if t == "" || t[0] == '#' {
			continue
		}
		f := pairFields(t)
		if len(f) < 2 || f[0] == "" || f[1] == "" {
			return nil, &ParseError{File: name, Line: line, Reason: fmt.Sprintf("want a user ID and an item ID separated by a tab, a comma, \"::\" or spaces; found %s", quoteField([]byte(t)))}
		}
		if first && isPairHeader(f[0], f[1]) {
			first = false
			continue
		}
		first = false
		out = append(out, Pair{User: f[0], Item: f[1], Line: line})
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{File: name, Line: line + 1, Reason: err.Error(), Err: err}
	}
	if len(out) == 0 {
		return nil, &ParseError{File: name, Reason: "no (user, item) pairs"}
	}
	return out, nil
}

// pairFields cuts a line at the first separator it holds: tab, "::",
// comma, then spaces.
func pairFields(t string) []string {
	var f []string
	switch {
	case strings.Contains(t, "\t"):
		f = strings.Split(t, "\t")
	case strings.Contains(t, "::"):
		f = strings.Split(t, "::")
	case strings.Contains(t, ","):
		f = strings.Split(t, ",")
	default:
		f = strings.Fields(t)
	}
	for k := range f {
		f[k] = strings.TrimSpace(f[k])
	}
	return f
}

// isPairHeader reports whether a first line's user and item fields are
// column names.
func isPairHeader(user, item string) bool {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	}
	u, i := norm(user), norm(item)
	return (u == "user" || u == "userid" || u == "users") &&
		(i == "item" || i == "itemid" || i == "items" || i == "movieid" || i == "placeid" || i == "movie")
}
