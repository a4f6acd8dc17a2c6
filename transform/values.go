package transform

import (
	"cmp"
	"math"
	"slices"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// TopItems keeps the n most-rated items (ties broken by the smaller item
// index) and re-indexes items to just those, in their original relative
// order, so the result has n item columns named as before. Users keep their
// IDs and indices (a user who rated none of the kept items has an empty
// row). n ≤ 0 or n ≥ NumItems means no restriction and returns m itself,
// matching model.Transform.TopItems = 0.
func TopItems(m *ratings.Matrix, n int) *ratings.Matrix {
	ni := m.NumItems()
	if n <= 0 || n >= ni {
		return m
	}
	order := make([]int32, ni)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(m.ItemCount(b), m.ItemCount(a)); c != 0 {
			return c // more ratings first
		}
		return cmp.Compare(a, b)
	})
	kept := order[:n]
	slices.Sort(kept)
	newIndex := make([]int32, ni)
	for i := range newIndex {
		newIndex[i] = -1
	}
	names := make([]string, n)
	size := 0
	for j, i := range kept {
		newIndex[i] = int32(j)
		names[j] = m.Items.Name(i)
		size += m.ItemCount(i)
	}
	items, err := ratings.IDsFrom(names)
	if err != nil {
		panic("transform: TopItems: item names of a matrix are not distinct: " + err.Error()) // unreachable
	}
	rowPtr, rowCol, rowVal, rowT := m.CSR()
	ptr := make([]int64, m.NumUsers()+1)
	col := make([]int32, 0, size)
	val := make([]float32, 0, size)
	var ts []int64
	if rowT != nil {
		ts = make([]int64, 0, size)
	}
	for u := range m.NumUsers() {
		for k := rowPtr[u]; k < rowPtr[u+1]; k++ {
			if j := newIndex[rowCol[k]]; j >= 0 { // kept items keep their relative order, so rows stay sorted
				col = append(col, j)
				val = append(val, rowVal[k])
				if rowT != nil {
					ts = append(ts, rowT[k])
				}
			}
		}
		ptr[u+1] = int64(len(col))
	}
	out, err := ratings.FromCSR(m.Users, items, n, ptr, col, val, ts)
	if err != nil {
		panic("transform: TopItems produced an inconsistent matrix: " + err.Error()) // unreachable
	}
	return out
}

// Binarise maps every rating v to +1 if v > threshold and to −1 otherwise
// (seed 000 binarises MovieLens against the training mean, ≈ 3.5, and the
// restaurant data with threshold 1 so that 2 → +1 and 0, 1 → −1).
func Binarise(m *ratings.Matrix, threshold float64) *ratings.Matrix {
	return m.MapValues(func(e ratings.Entry) float32 {
		if float64(e.Value) > threshold {
			return 1
		}
		return -1
	})
}

// UserMeans returns the mean rating of every user (0 for a user without
// ratings), accumulated in float64.
func UserMeans(m *ratings.Matrix) []float64 {
	means := make([]float64, m.NumUsers())
	for u := range int32(m.NumUsers()) {
		_, vals := m.UserRow(u)
		if len(vals) == 0 {
			continue
		}
		s := 0.0
		for _, v := range vals {
			s += float64(v)
		}
		means[u] = s / float64(len(vals))
	}
	return means
}

// CentreUsers subtracts each user's mean rating from her ratings and
// returns the centred matrix and the means (0 for users without ratings).
// Seed 001 centres per user before training; it costs no privacy there
// because each user's mean only ever returns to that user (joint DP).
// Uncentre(centred, means) restores m up to float32 rounding.
func CentreUsers(m *ratings.Matrix) (centred *ratings.Matrix, means []float64) {
	means = UserMeans(m)
	centred = m.MapValues(func(e ratings.Entry) float32 {
		return float32(float64(e.Value) - means[e.User])
	})
	return centred, means
}

// Uncentre adds means[u] back to every rating of user u; it inverts
// CentreUsers (and applies as well to predictions laid out on the same
// users). Users beyond len(means) are left unchanged.
func Uncentre(m *ratings.Matrix, means []float64) *ratings.Matrix {
	return m.MapValues(func(e ratings.Entry) float32 {
		if int(e.User) >= len(means) {
			return e.Value
		}
		return float32(float64(e.Value) + means[e.User])
	})
}

// MinMax maps the ratings linearly from their observed range
// [min, max] onto [lo, hi] and returns the scaled matrix and the Scale
// (recorded in model.Transform; Scale.Invert maps predictions back).
// If all ratings are equal, they all map to lo and the Scale's FromMax is
// set to FromMin+1 so that it stays invertible. An empty matrix is returned
// as is with the identity-like Scale [0, 1] → [lo, hi].
func MinMax(m *ratings.Matrix, lo, hi float64) (*ratings.Matrix, model.Scale) {
	dmin, dmax := m.Range()
	if m.Len() == 0 || math.IsNaN(dmin) {
		return m, model.Scale{FromMin: 0, FromMax: 1, ToMin: lo, ToMax: hi}
	}
	if dmax == dmin {
		dmax = dmin + 1
	}
	s := model.Scale{FromMin: dmin, FromMax: dmax, ToMin: lo, ToMax: hi}
	return m.MapValues(func(e ratings.Entry) float32 {
		return float32(s.Apply(float64(e.Value)))
	}), s
}
