package ratings

import (
	"fmt"
	"math"
	"slices"
)

// DupPolicy says what to do with repeated (user, item) pairs.
type DupPolicy int

const (
	// DupError rejects a repeated pair (the default).
	DupError DupPolicy = iota
	// DupLast keeps the value that came last in input order.
	DupLast
	// DupMean keeps the mean of the repeated values (and the last timestamp).
	DupMean
)

// ParseDupPolicy maps "error", "last" and "mean" to a policy.
func ParseDupPolicy(s string) (DupPolicy, error) {
	switch s {
	case "", "error":
		return DupError, nil
	case "last":
		return DupLast, nil
	case "mean":
		return DupMean, nil
	}
	return DupError, fmt.Errorf("unknown duplicates policy %q (want error, last or mean)", s)
}

// DuplicateError reports a repeated (user, item) pair with the source
// positions (1-based input lines, or entry numbers when no lines were given)
// of its first two occurrences.
type DuplicateError struct {
	User, Item    string
	First, Second int64
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("duplicate rating for user %q item %q (first at line %d, again at line %d; use --duplicates last|mean to merge)", e.User, e.Item, e.First, e.Second)
}

// Builder accumulates ratings by external ID and builds a Matrix.
type Builder struct {
	Users, Items *IDs
	Dups         DupPolicy

	u, i    []int32
	v       []float32
	t       []int64
	line    []int64
	hasTime bool
}

// NewBuilder returns an empty builder with the given duplicate policy.
func NewBuilder(dups DupPolicy) *Builder {
	return &Builder{Users: NewIDs(), Items: NewIDs(), Dups: dups}
}

// Add records one rating; line is its source position for error messages.
// A NaN or infinite value is rejected.
func (b *Builder) Add(user, item string, value float64, line int64) error {
	return b.AddTimed(user, item, value, 0, false, line)
}

// AddTimed records one rating with an optional timestamp (hasTime). Either
// all ratings of a builder carry a timestamp or none does.
func (b *Builder) AddTimed(user, item string, value float64, ts int64, hasTime bool, line int64) error {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return fmt.Errorf("rating %v is not a finite number", value)
	}
	if float64(float32(value)) != value && math.Abs(value) > math.MaxFloat32 {
		return fmt.Errorf("rating %v overflows float32", value)
	}
	if len(b.u) == 0 {
		b.hasTime = hasTime
	} else if hasTime != b.hasTime {
		return fmt.Errorf("some ratings have a timestamp and some do not")
	}
	b.u = append(b.u, b.Users.Intern(user))
	b.i = append(b.i, b.Items.Intern(item))
	b.v = append(b.v, float32(value))
	b.line = append(b.line, line)
	if hasTime {
		b.t = append(b.t, ts)
	}
	return nil
}

// Len is the number of ratings added so far.
func (b *Builder) Len() int { return len(b.u) }

// Build sorts the ratings into a Matrix, applying the duplicate policy. The
// builder must not be used afterwards.
func (b *Builder) Build() (*Matrix, error) {
	nU, nI := b.Users.Len(), b.Items.Len()
	n := len(b.u)
	// Stable counting sort by user keeps input order within a user.
	rowPtr := make([]int64, nU+1)
	for _, u := range b.u {
		rowPtr[u+1]++
	}
	for u := range nU {
		rowPtr[u+1] += rowPtr[u]
	}
	order := make([]int32, n)
	next := slices.Clone(rowPtr[:nU])
	for k, u := range b.u {
		order[next[u]] = int32(k)
		next[u]++
	}
	rowCol := make([]int32, 0, n)
	rowVal := make([]float32, 0, n)
	var rowT []int64
	if b.hasTime {
		rowT = make([]int64, 0, n)
	}
	outPtr := make([]int64, nU+1)
	for u := range nU {
		seg := order[rowPtr[u]:rowPtr[u+1]]
		slices.SortStableFunc(seg, func(x, y int32) int { return int(b.i[x]) - int(b.i[y]) })
		for j := 0; j < len(seg); {
			k := seg[j]
			end := j + 1
			for end < len(seg) && b.i[seg[end]] == b.i[k] {
				end++
			}
			if end-j > 1 && b.Dups == DupError {
				return nil, &DuplicateError{User: b.Users.Name(int32(u)), Item: b.Items.Name(b.i[k]), First: b.line[k], Second: b.line[seg[j+1]]}
			}
			last := seg[end-1]
			val := b.v[last]
			if end-j > 1 && b.Dups == DupMean {
				var s float64
				for _, q := range seg[j:end] {
					s += float64(b.v[q])
				}
				val = float32(s / float64(end-j))
			}
			rowCol = append(rowCol, b.i[k])
			rowVal = append(rowVal, val)
			if b.hasTime {
				rowT = append(rowT, b.t[last])
			}
			j = end
		}
		outPtr[u+1] = int64(len(rowCol))
	}
	b.u, b.i, b.v, b.t, b.line = nil, nil, nil, nil, nil
	return FromCSR(b.Users, b.Items, nI, outPtr, slices.Clip(rowCol), slices.Clip(rowVal), slices.Clip(rowT))
}
