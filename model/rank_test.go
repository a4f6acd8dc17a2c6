package model

import (
	"math"
	"slices"
	"testing"
)

func TestTopIndices(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name   string
		scores []float64
		k      int
		skip   []int32
		want   []int32
	}{
		{"plain", []float64{0.1, 0.9, 0.5, 0.7}, 2, nil, []int32{1, 3}},
		{"all, best first", []float64{0.1, 0.9, 0.5, 0.7}, 4, nil, []int32{1, 3, 2, 0}},
		{"k > n", []float64{3, 1, 2}, 10, nil, []int32{0, 2, 1}},
		{"ties by lower index", []float64{1, 2, 2, 2, 1}, 3, nil, []int32{1, 2, 3}},
		{"ties at the cut", []float64{5, 1, 1, 1, 1}, 3, nil, []int32{0, 1, 2}},
		{"all tied", []float64{0, 0, 0, 0}, 2, nil, []int32{0, 1}},
		{"skip", []float64{0.1, 0.9, 0.5, 0.7}, 2, []int32{1}, []int32{3, 2}},
		{"skip everything", []float64{1, 2}, 2, []int32{0, 1}, []int32{}},
		{"skip out of range and repeated", []float64{1, 2, 3}, 5, []int32{-1, 7, 2, 2}, []int32{1, 0}},
		{"k = 0", []float64{1, 2}, 0, nil, nil},
		{"negative k", []float64{1, 2}, -3, nil, nil},
		{"no items", nil, 3, nil, []int32{}},
		{"NaN ranks last", []float64{nan, 1, nan, 2, 0}, 5, nil, []int32{3, 1, 4, 0, 2}},
		{"NaN left out of a short list", []float64{nan, 1, nan, 2, 0}, 2, nil, []int32{3, 1}},
		{"infinities", []float64{math.Inf(-1), math.Inf(1), 0}, 3, nil, []int32{1, 2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TopIndices(tc.scores, tc.k, tc.skip)
			if len(got) != len(tc.want) || !slices.Equal(got, tc.want) {
				t.Fatalf("TopIndices(%v, %d, %v) = %v, want %v", tc.scores, tc.k, tc.skip, got, tc.want)
			}
		})
	}
}

// TestTopIndicesMatchesSort compares the heap with a full sort on many
// score vectors with many ties.
func TestTopIndicesMatchesSort(t *testing.T) {
	for n := 1; n < 60; n += 7 {
		s := make([]float64, n)
		for i := range s {
			s[i] = float64((i * 7919) % 5)
		}
		all := make([]int32, n)
		for i := range all {
			all[i] = int32(i)
		}
		slices.SortStableFunc(all, func(a, b int32) int {
			switch {
			case s[a] > s[b]:
				return -1
			case s[a] < s[b]:
				return 1
			}
			return 0
		})
		for k := 1; k <= n+1; k += 3 {
			if got := TopIndices(s, k, nil); !slices.Equal(got, all[:min(k, n)]) {
				t.Fatalf("n %d k %d: %v, want %v", n, k, got, all[:min(k, n)])
			}
		}
	}
}

// TestScoresAndRankFor checks the fast path against ScoreFor and RankFor
// against RecommendFor on a small model (dense and sparse rows).
func TestScoresAndRankFor(t *testing.T) {
	for _, rank := range []int{2, 80} {
		m := &Model{Method: "t", Output: Scores, Items: []string{"a", "b", "c", "d", "e"}, Rank: rank,
			Offset: 0.5, ItemBias: []float64{0, 0.1, -0.2, 0.3, 0}}
		m.V = make([]float64, 5*rank)
		for i := range m.V {
			m.V[i] = math.Sin(float64(i))
		}
		st := &UserState{User: "u", Row: make([]float64, rank), Bias: 0.25, Seen: []string{"b"}}
		st.Row[0], st.Row[1] = 1, -0.5
		out := make([]float64, 5)
		m.Scores(st, out)
		for i := range int32(5) {
			if math.Abs(out[i]-m.ScoreFor(st, i)) > 1e-12 {
				t.Fatalf("rank %d item %d: Scores %g, ScoreFor %g", rank, i, out[i], m.ScoreFor(st, i))
			}
		}
		got := m.RankFor(st, 3, []int32{1}, nil)
		recs := m.RecommendFor(st, 3)
		for j, r := range recs {
			if m.Items[got[j]] != r.Item {
				t.Fatalf("rank %d: RankFor %v, RecommendFor %v", rank, got, recs)
			}
		}
	}
}

// TestScoresBatch: the batch gives exactly Scores' values, for dense and
// sparse rows mixed.
func TestScoresBatch(t *testing.T) {
	for _, rank := range []int{0, 3, 100} {
		items := make([]string, 7)
		for i := range items {
			items[i] = string(rune('a' + i))
		}
		m := &Model{Items: items, Rank: rank, Offset: 0.1, ItemBias: []float64{1, 2, 3, 4, 5, 6, 7}, V: make([]float64, 7*rank)}
		for i := range m.V {
			m.V[i] = math.Cos(float64(i) * 0.7)
		}
		var states []*UserState
		for u := range 5 {
			st := &UserState{Row: make([]float64, rank), Bias: float64(u) / 10}
			for c := range st.Row {
				if u%2 == 0 || c%37 == u {
					st.Row[c] = math.Sin(float64(c + u))
				}
			}
			states = append(states, st)
		}
		out := make([][]float64, len(states))
		for u := range out {
			out[u] = make([]float64, 7)
		}
		want := make([]float64, 7)
		for name, score := range map[string]func(){
			"ScoresBatch": func() { m.ScoresBatch(states, out) },
			"BatchScorer": func() { m.NewBatchScorer().Scores(states, out) },
		} {
			for u := range out {
				clear(out[u])
			}
			score()
			for u, st := range states {
				m.Scores(st, want)
				if !slices.Equal(out[u], want) {
					t.Fatalf("%s, rank %d user %d: %v, Scores %v", name, rank, u, out[u], want)
				}
			}
		}
	}
}

// TestPredictAllIsPredict: the one-loop scores Recommend ranks are
// Predict's, bit for bit (biases, offset, scale and clamp included).
func TestPredictAllIsPredict(t *testing.T) {
	m := publicRank2()
	m.Users = []string{"a", "b"}
	m.U = []float64{0.3, -1.7, 2.2, 0.01}
	m.UserBias = []float64{0.4, -0.2}
	m.index()
	out := make([]float64, m.NumItems())
	for u := range int32(2) {
		m.predictAll(u, out)
		for i := range int32(m.NumItems()) {
			if out[i] != m.Predict(u, i) {
				t.Fatalf("user %d item %d: predictAll %v, Predict %v", u, i, out[i], m.Predict(u, i))
			}
		}
	}
}
