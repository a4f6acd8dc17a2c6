package model

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// Catalogue is the public item catalogue a user declares (--items FILE):
// the item IDs a model may name, in order, with optional titles.
type Catalogue struct {
	ids, titles []string
	index       map[string]int
}

// NewCatalogue builds a catalogue from IDs (distinct, non-empty) and
// optional titles (nil, or one per ID).
func NewCatalogue(ids, titles []string) (*Catalogue, error) {
	if titles != nil && len(titles) != len(ids) {
		return nil, fmt.Errorf("catalogue: %d titles for %d items", len(titles), len(ids))
	}
	c := &Catalogue{index: make(map[string]int, len(ids))}
	for k, id := range ids {
		if id == "" {
			return nil, fmt.Errorf("catalogue: item %d has an empty ID", k+1)
		}
		if _, dup := c.index[id]; dup {
			return nil, fmt.Errorf("catalogue: item %q appears twice", id)
		}
		c.index[id] = k
		c.ids = append(c.ids, id)
	}
	if titles != nil {
		c.titles = append([]string(nil), titles...)
	}
	return c, nil
}

// ReadCatalogue reads one item per line: an ID, optionally a tab and a
// title; MovieLens' movies.dat and u.item are read as they come. Blank
// lines and lines starting with # (after spaces) are skipped, so an item
// ID cannot start with #. name labels
// errors (file:line: reason).
func ReadCatalogue(r io.Reader, name string) (*Catalogue, error) {
	var ids, titles []string
	any := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	seen := map[string]int{}
	for sc.Scan() {
		line++
		t := strings.TrimRight(sc.Text(), "\r")
		if !utf8.ValidString(t) {
			t = latin1(t) // MovieLens 100K's u.item is Latin-1
		}
		if tt := strings.TrimSpace(t); tt == "" || strings.HasPrefix(tt, "#") {
			continue
		}
		id, title, hasTitle := cutCatalogueLine(t)
		id = strings.TrimSpace(id)
		if id == "" {
			return nil, fmt.Errorf("%s:%d: empty item ID", name, line)
		}
		if prev, dup := seen[id]; dup {
			return nil, fmt.Errorf("%s:%d: item %q already listed on line %d", name, line, id, prev)
		}
		seen[id] = line
		ids = append(ids, id)
		titles = append(titles, strings.TrimSpace(title))
		any = any || hasTitle
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: the catalogue lists no items", name)
	}
	if err := catalogueHeader(ids, titles, any); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, seen[ids[0]], err)
	}
	if !any {
		titles = nil
	}
	return NewCatalogue(ids, titles)
}

// catalogueHeader refuses a first entry that looks like a header line
// (column names) rather than an item: its ID is a known column name, or
// it is the only ID that is not an integer among at least two others. A
// header read as an item would silently become an item named after the
// column (and, in a two-column ID mapping, the second column would become
// the titles). The error says what a catalogue line is.
func catalogueHeader(ids, titles []string, hasTitles bool) error {
	first := ids[0]
	header := false
	switch strings.ToLower(strings.NewReplacer("_", "", " ", "", "-", "").Replace(first)) {
	case "id", "item", "items", "itemid", "itemindex", "movieid", "movie", "placeid", "product", "productid":
		header = true
	}
	if !header && len(ids) >= 3 && !isInteger(first) {
		header = true
		for _, id := range ids[1:] {
			if !isInteger(id) {
				header = false
				break
			}
		}
	}
	if !header {
		return nil
	}
	msg := fmt.Sprintf("%q looks like a header line (column names), not an item: a catalogue has no header; delete the line or start it with '#'", first)
	if hasTitles && len(titles) > 1 {
		numeric := true
		for _, t := range titles[1:] {
			numeric = numeric && isInteger(t)
		}
		if numeric {
			msg += "; each line is ITEM_ID<tab>TITLE, and the second column here holds numbers, not titles: if it holds the item IDs of the ratings, give a file of those IDs, one per line"
		}
	}
	return errors.New(msg)
}

// isInteger reports whether s is a decimal integer (an optional sign, then digits).
func isInteger(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// cutCatalogueLine splits a catalogue line into ID and title: "ID<tab>TITLE",
// or MovieLens' own item files as they come: movies.dat ("ID::TITLE::GENRES")
// and u.item ("ID|TITLE|DATE|…").
func cutCatalogueLine(t string) (id, title string, hasTitle bool) {
	switch {
	case strings.Contains(t, "\t"):
		return strings.Cut(t, "\t")
	case strings.Contains(t, "::"):
		id, rest, _ := strings.Cut(t, "::")
		title, _, _ = strings.Cut(rest, "::")
		return id, title, true
	case strings.Contains(t, "|"):
		id, rest, _ := strings.Cut(t, "|")
		title, _, _ = strings.Cut(rest, "|")
		return id, title, true
	}
	return t, "", false
}

// latin1 decodes ISO-8859-1 bytes (every byte is the code point of the
// same value); the standard library has no decoder for it.
func latin1(s string) string {
	r := make([]rune, len(s))
	for i := range len(s) {
		r[i] = rune(s[i])
	}
	return string(r)
}

// LoadCatalogue reads a catalogue file.
func LoadCatalogue(path string) (*Catalogue, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading catalogue: %w", err)
	}
	defer f.Close()
	return ReadCatalogue(f, path)
}

// Len is the number of items.
func (c *Catalogue) Len() int { return len(c.ids) }

// IDs returns a copy of the item IDs in catalogue order.
func (c *Catalogue) IDs() []string { return append([]string(nil), c.ids...) }

// HasTitles reports whether any title was given.
func (c *Catalogue) HasTitles() bool { return c.titles != nil }

// Titles returns a copy of the titles ("" where none), nil if none given.
func (c *Catalogue) Titles() []string {
	if c.titles == nil {
		return nil
	}
	return append([]string(nil), c.titles...)
}

// Index returns the position of an item ID.
func (c *Catalogue) Index(id string) (int, bool) {
	k, ok := c.index[id]
	return k, ok
}

// Write writes the catalogue in the format ReadCatalogue reads.
func (c *Catalogue) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for k, id := range c.ids {
		if (c.titles != nil && c.titles[k] != "") || strings.Contains(id, "|") || strings.Contains(id, "::") {
			title := ""
			if c.titles != nil {
				title = c.titles[k]
			}
			fmt.Fprintf(bw, "%s\t%s\n", id, title)
		} else {
			fmt.Fprintln(bw, id)
		}
	}
	return bw.Flush()
}
