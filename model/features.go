package model

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// ItemFeatures are public item features (a catalogue's genres, release
// years, …): Of[j] lists item j's features as indices into Names. They
// are declared public — they cost no privacy — and a model may store them.
type ItemFeatures struct {
	Names []string
	Of    [][]int32
	// Skipped counts the lines read that named items outside the catalogue.
	Skipped int
}

// Intercept is the feature every item has (feature 0): with no other
// feature the feature models reduce to popularity.
const Intercept = "(every item)"

// ReadItemFeatures reads the features of the catalogue items ids from r,
// one item a line, in either form:
//
//   - ITEM<TAB>FEATURE[,FEATURE…] (a generic table; no features after the
//     tab is allowed);
//   - MovieLens' movies.dat, ID::TITLE::GENRE[|GENRE…]: the genres become
//     features "genre:G" and a release year in the title's trailing
//     "(YYYY)" the 5-year feature "years:1995-1999".
//
// Blank lines and lines starting with # are skipped; items not in the
// catalogue are skipped (Skipped counts them); catalogue items the file
// does not name have the intercept only. name labels errors (file:line:
// reason).
func ReadItemFeatures(r io.Reader, name string, ids []string) (*ItemFeatures, error) {
	index := make(map[string]int, len(ids))
	for k, id := range ids {
		index[id] = k
	}
	f := NoFeatures(len(ids))
	feature := map[string]int32{Intercept: 0}
	seen := make([]bool, len(ids))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimRight(sc.Text(), "\r")
		if s := strings.TrimSpace(t); s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		id, names, err := parseFeatureLine(t)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		j, ok := index[id]
		if !ok {
			f.Skipped++
			continue
		}
		if seen[j] {
			return nil, fmt.Errorf("%s:%d: item %q appears twice", name, line, id)
		}
		seen[j] = true
		for _, n := range names {
			k, ok := feature[n]
			if !ok {
				k = int32(len(f.Names))
				feature[n] = k
				f.Names = append(f.Names, n)
			}
			f.Of[j] = append(f.Of[j], k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return f, nil
}

// parseFeatureLine splits one line into the item ID and its distinct
// feature names.
func parseFeatureLine(t string) (string, []string, error) {
	var id string
	var names []string
	if strings.Contains(t, "::") {
		parts := strings.Split(t, "::")
		if len(parts) != 3 {
			return "", nil, fmt.Errorf("want ID::TITLE::GENRES, got %d fields", len(parts))
		}
		id = strings.TrimSpace(parts[0])
		names = movieFeatures(parts[1], parts[2])
	} else {
		before, after, ok := strings.Cut(t, "\t")
		if !ok {
			return "", nil, fmt.Errorf("want ITEM<TAB>FEATURE[,FEATURE…] or ID::TITLE::GENRES")
		}
		id = strings.TrimSpace(before)
		for _, n := range strings.Split(after, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	if id == "" {
		return "", nil, fmt.Errorf("empty item ID")
	}
	return id, distinct(names), nil
}

// movieFeatures are a movies.dat line's features: each genre
// ("genre:Drama"), the 5-year bin of the release year in the title
// ("years:1995-1999") and each genre within the release decade
// ("genre:Drama|1990s": a drama of the nineties is nearer another one
// than a drama of the fifties is; on MovieLens-1M validation users the
// crosses lift dp-ease-features' feature prior by 0.005 at ε = 8,
// docs/topn.md).
func movieFeatures(title, genres string) []string {
	var gs, names []string
	for _, g := range strings.Split(genres, "|") {
		if g = strings.TrimSpace(g); g != "" && g != "(no genres listed)" {
			gs = append(gs, "genre:"+g)
		}
	}
	names = append(names, gs...)
	y, ok := titleYear(title)
	if !ok {
		return names
	}
	lo := y - y%5
	names = append(names, fmt.Sprintf("years:%d-%d", lo, lo+4))
	for _, g := range gs {
		names = append(names, fmt.Sprintf("%s|%ds", g, y-y%10))
	}
	return names
}

// titleYear is the year in a title's trailing "(YYYY)".
func titleYear(title string) (int, bool) {
	t := strings.TrimSpace(title)
	if len(t) < 6 || t[len(t)-1] != ')' || t[len(t)-6] != '(' {
		return 0, false
	}
	y, err := strconv.Atoi(t[len(t)-5 : len(t)-1])
	return y, err == nil && y > 0
}

func distinct(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Len is the number of features (the intercept included).
func (f *ItemFeatures) Len() int { return len(f.Names) }

// Unit is item j's feature indices, each weighing w = 1/√(their number):
// its feature indicator scaled to unit norm.
func (f *ItemFeatures) Unit(j int) (idx []int32, w float64) {
	idx = f.Of[j]
	return idx, 1 / math.Sqrt(float64(len(idx)))
}

// NoFeatures are the catalogue's features when none are declared: the
// intercept alone.
func NoFeatures(items int) *ItemFeatures {
	f := &ItemFeatures{Names: []string{Intercept}, Of: make([][]int32, items)}
	for j := range f.Of {
		f.Of[j] = []int32{0}
	}
	return f
}

// LoadItemFeatures reads the features of cat's items from the file path
// (ReadItemFeatures).
func LoadItemFeatures(path string, cat *Catalogue) (*ItemFeatures, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading item features: %w", err)
	}
	defer r.Close()
	return ReadItemFeatures(r, path, cat.IDs())
}
