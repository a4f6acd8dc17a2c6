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
	skipped := make([]bool, len(scores)) // a slice, not a map: this loop runs once per item and user
	for _, i := range skip {
		if i >= 0 && int(i) < len(skipped) {
			skipped[i] = true
		}
	}
	h := &minHeap{s: scores, idx: make([]int32, 0, min(k, len(scores)))}
	for i := range int32(len(scores)) {
		if skipped[i] {
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

// ScoresBatch is Scores for several users at once (out[u] has NumItems
// room for states[u]): it visits each item's factor row once for all of
// them, so a large item–item model (rank = the number of items) is read
// from memory once per batch rather than once per user. Every score is
// summed in the same order as Scores, so the values are identical.
func (m *Model) ScoresBatch(states []*UserState, out [][]float64) {
	r := m.Rank
	type row struct {
		base  float64
		nzIdx []int // nil: dense
		x     []float64
		out   []float64
	}
	rows := make([]row, len(states))
	for u, st := range states {
		rows[u] = row{base: m.Offset + st.Bias, x: st.Row, out: out[u]}
		if r > 64 && nonZeros(st.Row) < r/8 {
			for c, x := range st.Row {
				if x != 0 {
					rows[u].nzIdx = append(rows[u].nzIdx, c)
				}
			}
		}
	}
	for i := range len(m.Items) {
		v := m.V[i*r : i*r+r]
		for u := range rows {
			w := &rows[u]
			s := w.base
			if m.ItemBias != nil {
				s += m.ItemBias[i]
			}
			if w.nzIdx != nil {
				for _, c := range w.nzIdx {
					s += w.x[c] * v[c]
				}
			} else {
				for c, x := range w.x {
					s += x * v[c]
				}
			}
			w.out[i] = s
		}
	}
}

// maxTransposed bounds the transposed copy of V a BatchScorer keeps
// (entries; 512 MB of float64).
const maxTransposed = 64 << 20

// BatchScorer scores many users against one model (batch lists,
// evaluation). For a model of rank > 64 it keeps V transposed (rank ×
// items, when that fits in maxTransposed entries), so a sparse row — an
// item–item model's indicator of her items — costs one contiguous pass
// over the catalogue per item she has, instead of a scattered read of
// every item's factor row. Scores are summed in Scores' order for every
// item, so the values are identical. Safe for concurrent use.
type BatchScorer struct {
	m  *Model
	vt []float64
}

// NewBatchScorer prepares m for Scores of many users. It also builds
// m's ID index, so that goroutines may then call ItemIndex, UserIndex and
// FoldInUser at once (the index is otherwise built lazily by the first
// caller, which is not safe for concurrent use).
func (m *Model) NewBatchScorer() *BatchScorer {
	m.index()
	b := &BatchScorer{m: m}
	r, n := m.Rank, len(m.Items)
	if r > 64 && r*n <= maxTransposed && len(m.V) == r*n {
		b.vt = make([]float64, r*n)
		for i := range n {
			row := m.V[i*r : i*r+r]
			for c, x := range row {
				b.vt[c*n+i] = x
			}
		}
	}
	return b
}

// Scores writes each user's score of every item into out[u] (NumItems
// room), exactly as Model.Scores would.
func (b *BatchScorer) Scores(states []*UserState, out [][]float64) {
	m := b.m
	r, n := m.Rank, len(m.Items)
	var dense []*UserState
	var denseOut [][]float64
	for u, st := range states {
		if b.vt == nil || nonZeros(st.Row) >= r/8 {
			dense, denseOut = append(dense, st), append(denseOut, out[u])
			continue
		}
		o := out[u][:n]
		base := m.Offset + st.Bias
		for i := range o {
			s := base
			if m.ItemBias != nil {
				s += m.ItemBias[i]
			}
			o[i] = s
		}
		for c, x := range st.Row {
			if x == 0 {
				continue
			}
			col := b.vt[c*n : c*n+n]
			for i, v := range col {
				o[i] += x * v
			}
		}
	}
	if len(dense) > 0 {
		m.ScoresBatch(dense, denseOut)
	}
}

// Indices returns the model indices of the item IDs it knows, in order
// (unknown IDs are left out): a user's own items, to leave out of her list.
func (m *Model) Indices(ids []string) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if i, ok := m.ItemIndex(id); ok {
			out = append(out, i)
		}
	}
	return out
}
