// Package release is the privacy boundary of privrec as a type.
//
// A method reads an Input — the private ratings plus the facts the user
// declared public (rating scale, item catalogue, population) — and returns
// a Release: the Public artefact anyone may see (the model file, the train
// report), the PerUser state each user may see of herself only, and the
// Guarantee that covers the whole Public part. Nothing in Public may be
// derived from the private ratings except through an accounted mechanism
// or from a declared fact; the whole-artefact audit (privacy/audit,
// `privrec audit --method`) checks it on neighbouring inputs.
package release

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
)

// Scale is a declared rating scale [Min, Max].
type Scale = model.Range

// ParseScale reads "MIN:MAX" (e.g. "1:5", "-10:10").
func ParseScale(s string) (Scale, error) {
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		return Scale{}, fmt.Errorf("scale %q: want MIN:MAX, e.g. 1:5", s)
	}
	var r Scale
	if _, err := fmt.Sscanf(strings.TrimSpace(lo), "%g", &r.Min); err != nil {
		return Scale{}, fmt.Errorf("scale %q: MIN %q is not a number", s, lo)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(hi), "%g", &r.Max); err != nil {
		return Scale{}, fmt.Errorf("scale %q: MAX %q is not a number", s, hi)
	}
	if err := r.Validate(); err != nil {
		return Scale{}, fmt.Errorf("scale %q: %w", s, err)
	}
	return r, nil
}

// Declared holds the facts the user declared public. A zero field is
// undeclared.
type Declared struct {
	// Scale is the rating scale every rating lies in (--scale).
	Scale *Scale
	// Catalogue is the public item catalogue (--items FILE).
	Catalogue *model.Catalogue
	// ItemFeatures are the catalogue items' public features (--item-features
	// FILE), aligned with Catalogue (nil: none declared).
	ItemFeatures *model.ItemFeatures
	// Population is the number of users, declared public (0: undeclared).
	Population int
}

// Input is what a method trains on.
type Input struct {
	// Ratings are the private ratings.
	Ratings *ratings.Matrix
	// Declared are the public facts.
	Declared Declared
	// Source is the file the ratings came from ("" when built in memory);
	// a method may read a public header from it (a collect file's).
	Source string
}

// NeedScale returns the declared scale or an error naming the flag.
func (in Input) NeedScale(why string) (Scale, error) {
	if in.Declared.Scale == nil {
		return Scale{}, fmt.Errorf("%s needs the rating scale declared: pass --scale MIN:MAX (reading it from the private ratings would not be covered by the guarantee)", why)
	}
	return *in.Declared.Scale, nil
}

// NeedCatalogue returns the declared catalogue or an error naming the flag.
func (in Input) NeedCatalogue(why string) (*model.Catalogue, error) {
	if in.Declared.Catalogue == nil {
		return nil, fmt.Errorf("%s needs the item catalogue declared: pass --items FILE (one item ID per line, an optional title after a tab); the set of items users rated is private", why)
	}
	return in.Declared.Catalogue, nil
}

// OnCatalogue re-indexes the ratings onto the catalogue: item index j is
// the catalogue's j-th item (every catalogue item is present, rated or
// not), and ratings of items outside the catalogue are dropped. Dropping
// is a per-user operation (it reads one rating at a time), so it keeps
// every neighbouring relation; how many were dropped is private and is
// not returned.
func OnCatalogue(m *ratings.Matrix, c *model.Catalogue) (*ratings.Matrix, error) {
	items, err := ratings.IDsFrom(c.IDs())
	if err != nil {
		return nil, fmt.Errorf("catalogue: %w", err)
	}
	remap := make([]int32, m.NumItems())
	// A row is kept in the data's item order; when the kept items keep
	// their order in the catalogue (the usual case: the catalogue lists
	// the data's items in order), no row needs sorting.
	monotone, last := true, int32(-1)
	for i := range remap {
		j, ok := items.Lookup(m.Items.Name(int32(i)))
		remap[i] = -1
		if ok {
			remap[i] = j
			monotone, last = monotone && j > last, j
		}
	}
	nu := m.NumUsers()
	rowPtr := make([]int64, nu+1)
	rowCol := make([]int32, 0, m.Len())
	rowVal := make([]float32, 0, m.Len())
	var rowT []int64
	if m.HasTime() {
		rowT = make([]int64, 0, m.Len())
	}
	type pair struct {
		j int32
		v float32
		t int64
	}
	var row []pair
	for u := range int32(nu) {
		its, vals := m.UserRow(u)
		var ts []int64
		if m.HasTime() {
			ts = m.UserTimes(u)
		}
		row = row[:0]
		for k, it := range its {
			if j := remap[it]; j >= 0 {
				p := pair{j: j, v: vals[k]}
				if ts != nil {
					p.t = ts[k]
				}
				row = append(row, p)
			}
		}
		if !monotone {
			slices.SortFunc(row, func(a, b pair) int { return cmp.Compare(a.j, b.j) })
		}
		for _, p := range row {
			rowCol = append(rowCol, p.j)
			rowVal = append(rowVal, p.v)
			if rowT != nil {
				rowT = append(rowT, p.t)
			}
		}
		rowPtr[u+1] = int64(len(rowCol))
	}
	return ratings.FromCSR(m.Users, items, items.Len(), rowPtr, rowCol, rowVal, rowT)
}

// ClampToScale returns the ratings clamped to the declared scale, so a
// sensitivity computed from the scale holds for every rating (a NaN is
// rejected by the readers; clamping keeps it out regardless).
func ClampToScale(m *ratings.Matrix, s Scale) *ratings.Matrix {
	lo, hi := float32(s.Min), float32(s.Max)
	return m.MapValues(func(e ratings.Entry) float32 {
		v := e.Value
		if !(v >= lo) { // also NaN
			return lo
		}
		return min(v, hi)
	})
}

// Artefact is a public artefact: something that can be written to a file.
type Artefact interface {
	// Kind names the artefact's format (a model file kind).
	Kind() string
	// Write encodes the artefact.
	Write(w io.Writer) error
}

// Report holds the facts a train report may print: declared, public, or
// noised-and-accounted values only. Solvers' raw diagnostics (training
// loss on the private data, exact counts) do not belong here.
type Report map[string]any

// WriteText writes the report one "  key: value" line per entry, in key
// order (the text form `privrec train` and `privrec-beam` print).
func (r Report) WriteText(w io.Writer) error {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, err := fmt.Fprintf(w, "  %s: %v\n", k, r[k]); err != nil {
			return err
		}
	}
	return nil
}

// Release is what a method returns.
type Release struct {
	// Public is what anyone may see.
	Public Artefact
	// PerUser is each user's own state (nil when the method releases none
	// apart from Public): given to that user only, never written into the
	// public file.
	PerUser *model.UserStates
	// Guarantee covers Public (and, for joint DP, what every other user
	// sees of a user's PerUser-derived outputs).
	Guarantee privacy.Guarantee
	// Report is the public train report.
	Report Report
}

// Model returns the public part as a low-rank model, or nil.
func (r *Release) Model() *model.Model {
	m, _ := r.Public.(*model.Model)
	return m
}

// Validate checks a release is well formed: a public part, a valid
// guarantee, and report values that are plain numbers or strings.
func (r *Release) Validate() error {
	if r.Public == nil {
		return fmt.Errorf("release: no public artefact")
	}
	if err := r.Guarantee.Validate(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if r.Guarantee.Private() && r.Guarantee.Relation == "" {
		return fmt.Errorf("release: a private guarantee must state its neighbouring relation")
	}
	for k, v := range r.Report {
		if f, ok := v.(float64); ok && math.IsNaN(f) {
			return fmt.Errorf("release: report field %s is NaN", k)
		}
	}
	return nil
}
