package model

import (
	"container/heap"
	"math"
	"slices"
)

// Scores writes the user's score of every item into out (len NumItems),
// from her own state: the fast path of RankFor and of batch scoring.
func (m *Model) Scores(st *UserState, out []float64) {
	r := m.Rank
	base := m.Offset + st.Bias
	var nzIdx []int
	if r > 64 && nonZeros(st.Row) < r/8 {
		// A sparse row (an item–item model's indicator): visit its
		// non-zeros only.
		for c, x := range st.Row {
			if x != 0 {
				nzIdx = append(nzIdx, c)
			}
		}
	}
	for i := range out {
		s := base
		if m.ItemBias != nil {
			s += m.ItemBias[i]
		}
		v := m.V[i*r : i*r+r]
		if nzIdx != nil {
			for _, c := range nzIdx {
				s += st.Row[c] * v[c]
			}
		} else {
			for c, x := range st.Row {
				s += x * v[c]
			}
		}
		out[i] = s
	}
}

func nonZeros(x []float64) int {
	n := 0
	for _, v := range x {
		if v != 0 {
			n++
		}
	}
	return n
}

// RankFor returns the indices of the user's k best items, best first (ties
// by index), leaving out skip (her own items). buf, when it has NumItems
// room, is used for the scores.
func (m *Model) RankFor(st *UserState, k int, skip []int32, buf []float64) []int32 {
	n := len(m.Items)
	if cap(buf) < n {
		buf = make([]float64, n)
	}
	buf = buf[:n]
	m.Scores(st, buf)
	return TopIndices(buf, k, skip)
}

// TopIndices returns the indices of the k largest scores, best first, ties
// by lower index, NaN last, leaving out skip; it keeps a heap of k, so it costs
// O(n log k).
func TopIndices(scores []float64, k int, skip []int32) []int32 {
	if k <= 0 {
		return nil
	}
	skipped := make(map[int32]struct{}, len(skip))
	for _, i := range skip {
		skipped[i] = struct{}{}
	}
	h := &minHeap{s: scores}
	for i := range int32(len(scores)) {
		if _, ok := skipped[i]; ok {
			continue
		}
		if h.Len() < k {
			heap.Push(h, i)
		} else if h.less(h.idx[0], i) {
			h.idx[0] = i
			heap.Fix(h, 0)
		}
	}
	out := slices.Clone(h.idx)
	slices.SortFunc(out, func(a, b int32) int {
		if h.less(b, a) {
			return -1
		}
		if h.less(a, b) {
			return 1
		}
		return 0
	})
	return out
}

// minHeap keeps the worst of the current top k at the root.
type minHeap struct {
	s   []float64
	idx []int32
}

// less orders a below b: a lower score, or an equal score at a higher
// index (so that lower indices win ties). NaN ranks below every number
// (a model that produced one must not push it to the top, nor break the
// heap's order).
func (h *minHeap) less(a, b int32) bool {
	sa, sb := h.s[a], h.s[b]
	if na, nb := math.IsNaN(sa), math.IsNaN(sb); na || nb {
		if na != nb {
			return na
		}
		return a > b
	}
	if sa != sb {
		return sa < sb
	}
	return a > b
}
func (h *minHeap) Len() int           { return len(h.idx) }
func (h *minHeap) Less(a, b int) bool { return h.less(h.idx[a], h.idx[b]) }
func (h *minHeap) Swap(a, b int)      { h.idx[a], h.idx[b] = h.idx[b], h.idx[a] }
func (h *minHeap) Push(x any)         { h.idx = append(h.idx, x.(int32)) }
func (h *minHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}
