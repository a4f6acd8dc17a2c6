package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// manyStates is a training's states for n users with IDs chosen to trip
// up a lookup by prefix ("1" and "12"), JSON escaping and file names.
func manyStates(n int, fp string) *UserStates {
	s := &UserStates{Method: "dpals", Rank: 2, Model: fp}
	for u := range n {
		id := fmt.Sprint(u + 1)
		switch u % 5 {
		case 1:
			id = "../" + id
		case 2:
			id = `q"` + id + `\ü`
		}
		s.States = append(s.States, UserState{User: id, Row: []float64{float64(u), -float64(u) / 3}, Bias: float64(u) / 7, Seen: []string{"i" + id}})
	}
	return s
}

// TestShardedStatesRoundTrip: every state comes back, whole and from its
// own shard, with the training's method, rank and model fingerprint.
func TestShardedStatesRoundTrip(t *testing.T) {
	fp := Fingerprint([]byte("model"))
	for _, n := range []int{0, 1, 3*usersPerShard + 17} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := manyStates(n, fp)
			dir := filepath.Join(t.TempDir(), "states")
			if err := s.Save(dir); err != nil {
				t.Fatal(err)
			}
			idx, err := readStateIndex(dir)
			if err != nil || idx == nil || idx.Users != n || idx.Shards != max(1, (n+usersPerShard-1)/usersPerShard) {
				t.Fatalf("index %+v, %v", idx, err)
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("directory mode %v, want 0700", fi.Mode())
			}
			all, err := LoadUserStates(dir)
			if err != nil {
				t.Fatal(err)
			}
			if all.Method != s.Method || all.Rank != s.Rank || all.Model != fp || len(all.States) != n {
				t.Fatalf("loaded %s rank %d model %s, %d states", all.Method, all.Rank, all.Model, len(all.States))
			}
			for _, st := range s.States {
				got, ok := all.Lookup(st.User)
				if !ok || got.Bias != st.Bias || !slices.Equal(got.Row, st.Row) || !slices.Equal(got.Seen, st.Seen) {
					t.Fatalf("user %q: %+v, want %+v", st.User, got, st)
				}
			}
			for k := 0; k < n; k += max(1, n/50) {
				want := s.States[k]
				one, err := LoadUserState(dir, want.User)
				if err != nil || len(one.States) != 1 || one.Model != fp || one.States[0].User != want.User || one.States[0].Bias != want.Bias {
					t.Fatalf("LoadUserState(%q) = %+v, %v", want.User, one, err)
				}
			}
			if _, err := LoadUserState(dir, "nobody"); err == nil || !strings.Contains(err.Error(), "no state for user") {
				t.Errorf("missing user: %v", err)
			}
		})
	}
}

// TestShardedStatesAllOrNothing: a Save that fails part-way (a state that
// cannot be encoded) leaves the previous training's states readable and
// unchanged and no new file behind; a damaged index or shard is refused.
func TestShardedStatesAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	a := manyStates(2*usersPerShard, Fingerprint([]byte("a")))
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	b := manyStates(2*usersPerShard, Fingerprint([]byte("b")))
	b.States[len(b.States)/2].Row[0] = math.NaN()
	if err := b.Save(dir); err == nil || !strings.Contains(err.Error(), "encoding state of user") {
		t.Fatalf("Save with a NaN: %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	top, _ := filepath.Glob(filepath.Join(dir, "*"))
	hidden, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if !slices.Equal(before, after) || len(top) != 2 || len(hidden) != 0 {
		t.Fatalf("a failed Save left files: %v then %v (top %v, hidden %v)", before, after, top, hidden)
	}
	got, err := LoadUserStates(dir)
	if err != nil || got.Model != a.Model || len(got.States) != len(a.States) {
		t.Fatalf("previous states after a failed Save: %v", err)
	}
	// A second successful Save removes the first one's shards.
	b.States[len(b.States)/2].Row[0] = 1
	if err := b.Save(dir); err != nil {
		t.Fatal(err)
	}
	if top, _ := filepath.Glob(filepath.Join(dir, "*")); len(top) != 2 {
		t.Errorf("old shards kept: %v", top)
	}
	// Damage is reported, not read as fewer users.
	idx, _ := readStateIndex(dir)
	shard := shardName(filepath.Join(dir, idx.Data), 0)
	raw, _ := os.ReadFile(shard)
	if err := os.WriteFile(shard, raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadUserStates(dir); err == nil {
		t.Error("a truncated shard was read")
	}
	for _, bad := range []string{`{"format":"x"}`, `{"format":"` + stateIndexFormat + `","shards":1,"data":"../elsewhere"}`, `not json`} {
		if err := os.WriteFile(filepath.Join(dir, stateIndexFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadUserStates(dir); err == nil {
			t.Errorf("index %s accepted", bad)
		}
		if _, err := LoadUserState(dir, "1"); err == nil {
			t.Errorf("index %s accepted for one user", bad)
		}
	}
}
