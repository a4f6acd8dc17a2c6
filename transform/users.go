package transform

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/ratings"
)

// Positives keeps the ratings at or above threshold (the interactions of
// a top-N model: "ratings ≥ 4 are positives"); the result keeps m's ID maps
// and shape.
func Positives(m *ratings.Matrix, threshold float64) *ratings.Matrix {
	t := float32(threshold)
	return m.Filter(func(e ratings.Entry) bool { return e.Value >= t })
}

// MinPerUser drops every rating of the users with fewer than k ratings
// (their rows become empty); the result keeps m's ID maps and shape.
func MinPerUser(m *ratings.Matrix, k int) *ratings.Matrix {
	return m.Filter(func(e ratings.Entry) bool { return m.UserCount(e.User) >= k })
}

// UserSplit is a strong-generalisation split: the users held out for
// validation and for test are disjoint from the training users and from
// each other, and each held-out user's ratings are split into a history
// (what her device knows and scores from) and targets (what a good list
// finds).
type UserSplit struct {
	Train                    *ratings.Matrix
	ValHistory, ValTargets   *ratings.Matrix
	TestHistory, TestTargets *ratings.Matrix
}

// SplitUsers holds out val and test users, chosen uniformly among the
// users with at least one rating, and moves round(frac·n) of each held-out
// user's n ratings (at least 1, at most n − 1) to her targets, the rest to
// her history. Every part keeps m's ID maps and shape. This is the protocol
// of Liang et al. (WWW 2018): models are trained on Train only and each
// held-out user is scored from her history.
func SplitUsers(m *ratings.Matrix, val, test int, frac float64, seed uint64) (*UserSplit, error) {
	if val < 0 || test < 0 {
		return nil, fmt.Errorf("held-out user counts must be ≥ 0, got %d and %d", val, test)
	}
	if !(frac > 0 && frac < 1) {
		return nil, fmt.Errorf("target fraction %g must be in (0, 1)", frac)
	}
	var active []int32
	for u := range int32(m.NumUsers()) {
		if m.UserCount(u) >= 2 {
			active = append(active, u)
		}
	}
	if val+test >= len(active) {
		return nil, fmt.Errorf("cannot hold out %d + %d users: only %d users have 2 or more ratings (and some must remain for training)", val, test, len(active))
	}
	r := newRand(seed, streamSplitUsers)
	r.Shuffle(len(active), func(a, b int) { active[a], active[b] = active[b], active[a] })
	role := make([]byte, m.NumUsers()) // 0 train, 1 validation, 2 test
	for q, u := range active[:val+test] {
		role[u] = 1
		if q >= val {
			role[u] = 2
		}
	}
	target := newBitset(m.Len())
	rowPtr, _, _, _ := m.CSR()
	for u := range m.NumUsers() {
		if role[u] == 0 {
			continue
		}
		n := int(rowPtr[u+1] - rowPtr[u])
		k := min(max(int(math.Round(frac*float64(n))), 1), n-1)
		selectK(r, target, rowPtr[u], n, k)
	}
	hist, tgt := partition(m, target)
	pick := func(src *ratings.Matrix, want byte) *ratings.Matrix {
		return src.Filter(func(e ratings.Entry) bool { return role[e.User] == want })
	}
	return &UserSplit{
		Train:      pick(hist, 0),
		ValHistory: pick(hist, 1), ValTargets: pick(tgt, 1),
		TestHistory: pick(hist, 2), TestTargets: pick(tgt, 2),
	}, nil
}
