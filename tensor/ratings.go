package tensor

import (
	"fmt"
	"strings"

	"github.com/privrec/privrec/ratings"
)

// SecondsPerDay is the width of one step of the day mode.
const SecondsPerDay = 86400

// DayAxis maps Unix timestamps to the day mode: day = ⌊(ts − Origin)/86400⌋,
// for Days days.
type DayAxis struct {
	Origin int64 `json:"origin"`
	Days   int   `json:"days"`
}

// Day returns the day index of ts, which may fall outside [0, Days).
func (a DayAxis) Day(ts int64) int {
	d := ts - a.Origin
	if d < 0 { // floor division for timestamps before the origin
		return int((d - SecondsPerDay + 1) / SecondsPerDay)
	}
	return int(d / SecondsPerDay)
}

// Clamp returns the day of ts clamped into [0, Days) and whether it had to
// be clamped.
func (a DayAxis) Clamp(ts int64) (day int, clamped bool) {
	d := a.Day(ts)
	switch {
	case d < 0:
		return 0, true
	case d >= a.Days:
		return a.Days - 1, true
	}
	return d, false
}

// FromRatings turns timestamped ratings into a users × items × days tensor
// with the matrix's dense user and item indices; the day axis starts at the
// first timestamp.
func FromRatings(m *ratings.Matrix) (*Tensor, DayAxis, error) {
	ax, err := AxisOf(m)
	if err != nil {
		return nil, ax, err
	}
	t, _, err := FromRatingsAxis(m, ax)
	return t, ax, err
}

// FromUntimed turns ratings without timestamps into a users × items × 1
// tensor: every rating on day 0 of a one-day axis (origin 0). A tensor
// model trained on it is a matrix model (the single row of C scales the
// components); scoring maps every test rating, timed or not, to that day.
func FromUntimed(m *ratings.Matrix) (*Tensor, DayAxis, error) {
	if m.Len() == 0 {
		return nil, DayAxis{}, fmt.Errorf("tensor: no ratings")
	}
	ax := DayAxis{Origin: 0, Days: 1}
	t := New([3]int{m.NumUsers(), m.NumItems(), 1}, m.Len())
	for u := range int32(m.NumUsers()) {
		items, vals := m.UserRow(u)
		for n, it := range items {
			t.Add(u, it, 0, float64(vals[n]))
		}
	}
	return t, ax, nil
}

// AxisOf is the day axis of timestamped ratings: from the day of the first
// timestamp to the day of the last.
func AxisOf(m *ratings.Matrix) (DayAxis, error) {
	if !m.HasTime() {
		return DayAxis{}, fmt.Errorf("tensor: the ratings have no timestamps, so there is no day mode")
	}
	if m.Len() == 0 {
		return DayAxis{}, fmt.Errorf("tensor: no ratings")
	}
	first, last := int64(0), int64(0)
	init := false
	for u := range int32(m.NumUsers()) {
		for _, ts := range m.UserTimes(u) {
			if !init || ts < first {
				first = ts
			}
			if !init || ts > last {
				last = ts
			}
			init = true
		}
	}
	ax := DayAxis{Origin: first}
	ax.Days = ax.Day(last) + 1
	return ax, nil
}

// FromRatingsAxis builds the tensor of m on a given day axis (for instance
// the training data's, to map test ratings); days outside the axis are
// clamped to its ends and counted.
func FromRatingsAxis(m *ratings.Matrix, ax DayAxis) (t *Tensor, clamped int, err error) {
	if !m.HasTime() {
		return nil, 0, fmt.Errorf("tensor: the ratings have no timestamps, so there is no day mode")
	}
	if ax.Days <= 0 {
		return nil, 0, fmt.Errorf("tensor: day axis with %d days", ax.Days)
	}
	t = New([3]int{m.NumUsers(), m.NumItems(), ax.Days}, m.Len())
	for u := range int32(m.NumUsers()) {
		items, vals := m.UserRow(u)
		times := m.UserTimes(u)
		for n, it := range items {
			d, c := ax.Clamp(times[n])
			if c {
				clamped++
			}
			t.Add(u, it, int32(d), float64(vals[n]))
		}
	}
	return t, clamped, nil
}

// ItemDaySep separates an item's name from a day tag in item IDs such as
// "17@3": a rating matrix holds one rating per (user, item), so a tensor
// with several days per (user, item) is written with the day in the item ID
// (privrec data synth-tensor does this); BaseItem strips it.
const ItemDaySep = "@"

// BaseItem returns the item name without its day tag.
func BaseItem(name string) string {
	if b, _, ok := strings.Cut(name, ItemDaySep); ok {
		return b
	}
	return name
}

// MergeItemDays re-indexes the items of a tensor built from ratings whose
// item IDs carry day tags: entries of "j@k" for every k go to item "j". It
// returns the tensor over the merged items and their names.
func MergeItemDays(t *Tensor, itemNames []string) (*Tensor, []string, error) {
	index := map[string]int32{}
	var names []string
	remap := make([]int32, len(itemNames))
	for x, n := range itemNames {
		b := BaseItem(n)
		id, ok := index[b]
		if !ok {
			id = int32(len(names))
			index[b] = id
			names = append(names, b)
		}
		remap[x] = id
	}
	out := t.Clone()
	out.Dims[1] = len(names)
	for e, j := range out.J {
		out.J[e] = remap[j]
	}
	if err := out.Validate(); err != nil {
		return nil, nil, fmt.Errorf("merging day-tagged items: %w", err)
	}
	return out, names, nil
}
