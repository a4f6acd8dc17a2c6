// Package tensor holds sparse 3-way tensors of observed entries — the input
// of DP tensor completion (seed 004): built from rating data with a day mode
// (users × items × days since the first timestamp) or from the seed's
// synthetic CP and Tucker generators, split into training and test
// entries, and bi-scaled per day slice.
package tensor

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy/noise"
)

// Tensor is a sparse n1 × n2 × n3 tensor in coordinate form: entry e is at
// (I[e], J[e], K[e]) with value Val[e]. Positions are unique.
type Tensor struct {
	Dims    [3]int
	I, J, K []int32
	Val     []float64
}

// New returns an empty tensor of the given shape with room for n entries.
func New(dims [3]int, n int) *Tensor {
	return &Tensor{Dims: dims, I: make([]int32, 0, n), J: make([]int32, 0, n), K: make([]int32, 0, n), Val: make([]float64, 0, n)}
}

// Add appends an entry (no check; see Validate).
func (t *Tensor) Add(i, j, k int32, v float64) {
	t.I = append(t.I, i)
	t.J = append(t.J, j)
	t.K = append(t.K, k)
	t.Val = append(t.Val, v)
}

// Len is the number of observed entries.
func (t *Tensor) Len() int { return len(t.Val) }

// Size is n1·n2·n3.
func (t *Tensor) Size() int { return t.Dims[0] * t.Dims[1] * t.Dims[2] }

// Validate checks shapes, index ranges, finiteness and that no position
// repeats.
func (t *Tensor) Validate() error {
	n := len(t.Val)
	if len(t.I) != n || len(t.J) != n || len(t.K) != n {
		return fmt.Errorf("tensor: coordinate slices of unequal length (%d, %d, %d, %d)", len(t.I), len(t.J), len(t.K), n)
	}
	for m, d := range t.Dims {
		if d <= 0 {
			return fmt.Errorf("tensor: dimension %d is %d, want > 0", m+1, d)
		}
	}
	seen := make(map[[3]int32]struct{}, n)
	for e := range n {
		i, j, k := t.I[e], t.J[e], t.K[e]
		if i < 0 || int(i) >= t.Dims[0] || j < 0 || int(j) >= t.Dims[1] || k < 0 || int(k) >= t.Dims[2] {
			return fmt.Errorf("tensor: entry %d at (%d, %d, %d) outside %v", e, i, j, k, t.Dims)
		}
		if v := t.Val[e]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("tensor: entry %d at (%d, %d, %d) has non-finite value %v", e, i, j, k, v)
		}
		key := [3]int32{i, j, k}
		if _, dup := seen[key]; dup {
			return fmt.Errorf("tensor: position (%d, %d, %d) appears twice", i, j, k)
		}
		seen[key] = struct{}{}
	}
	return nil
}

// Range returns the smallest and largest value (0, 0 when empty).
func (t *Tensor) Range() (lo, hi float64) {
	if len(t.Val) == 0 {
		return 0, 0
	}
	lo, hi = t.Val[0], t.Val[0]
	for _, v := range t.Val {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// Mean is the mean value (0 when empty).
func (t *Tensor) Mean() float64 {
	if len(t.Val) == 0 {
		return 0
	}
	var s float64
	for _, v := range t.Val {
		s += v
	}
	return s / float64(len(t.Val))
}

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{Dims: t.Dims, I: append([]int32(nil), t.I...), J: append([]int32(nil), t.J...),
		K: append([]int32(nil), t.K...), Val: append([]float64(nil), t.Val...)}
}

// Subset returns the entries at the given positions of t, in that order.
func (t *Tensor) Subset(idx []int) *Tensor {
	s := New(t.Dims, len(idx))
	for _, e := range idx {
		s.Add(t.I[e], t.J[e], t.K[e], t.Val[e])
	}
	return s
}

// Split puts a random trainFrac of the entries (rounded) in train and the
// rest in test, using src for the permutation.
func (t *Tensor) Split(trainFrac float64, src *noise.Source) (train, test *Tensor, err error) {
	if !(trainFrac > 0 && trainFrac < 1) {
		return nil, nil, fmt.Errorf("tensor: train fraction %v not in (0, 1)", trainFrac)
	}
	perm := src.Perm(t.Len())
	nTrain := int(math.Round(trainFrac * float64(t.Len())))
	return t.Subset(perm[:nTrain]), t.Subset(perm[nTrain:]), nil
}
