package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	// A second successful Save removes the first one's shards, and those
	// of a Save that crashed before writing its index.
	b.States[len(b.States)/2].Row[0] = 1
	if err := os.MkdirAll(filepath.Join(dir, "states-crashed"), 0o700); err != nil {
		t.Fatal(err)
	}
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
	for _, bad := range []string{`{"format":"x"}`, `{"format":"` + stateIndexFormat + `","shards":1,"data":"../elsewhere"}`,
		`{"format":"` + stateIndexFormat + `","shards":1000000000,"users":1,"data":"states-1"}`, `not json`} {
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

// BenchmarkUserStateStore writes, reads one user from and reads whole a
// state directory of Netflix's shape: PRIVREC_BENCH_USERS users (default
// 20 000; the Netflix Prize has 480 189), rank 37, 20–394 rated items each
// (207 on average) among 17 770. It reports CPU seconds per operation
// (getrusage), steadier than wall time on a shared machine.
func BenchmarkUserStateStore(b *testing.B) {
	n := 20000
	if v := os.Getenv("PRIVREC_BENCH_USERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("PRIVREC_BENCH_USERS=%q: want a positive count", v)
		}
	}
	items := make([]string, 17770)
	for i := range items {
		items[i] = strconv.Itoa(i + 1)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	s := &UserStates{Method: "dpals", Rank: 37, Model: Fingerprint([]byte("x")), States: make([]UserState, n)}
	for u := range n {
		row := make([]float64, 37)
		for k := range row {
			row[k] = rnd.NormFloat64() * 0.1
		}
		seen := make([]string, 20+rnd.IntN(375))
		for k := range seen {
			seen[k] = items[rnd.IntN(len(items))]
		}
		s.States[u] = UserState{User: strconv.Itoa(u + 1), Row: row, Bias: rnd.NormFloat64() * 0.3, Seen: seen}
	}
	dir := b.TempDir()
	cpu := func() float64 {
		var r syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r)
		return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6
	}
	var save, one, all float64
	b.ResetTimer()
	for b.Loop() {
		c0 := cpu()
		if err := s.Save(dir); err != nil {
			b.Fatal(err)
		}
		c1 := cpu()
		if _, err := LoadUserState(dir, "4242"); err != nil {
			b.Fatal(err)
		}
		c2 := cpu()
		got, err := LoadUserStates(dir)
		if err != nil || len(got.States) != n {
			b.Fatalf("read %v states: %v", got, err)
		}
		c3 := cpu()
		save, one, all = save+c1-c0, one+c2-c1, all+c3-c2
	}
	b.ReportMetric(save/float64(b.N), "save-cpu-s")
	b.ReportMetric(one/float64(b.N), "one-user-cpu-s")
	b.ReportMetric(all/float64(b.N), "all-cpu-s")
	var size int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	b.ReportMetric(float64(size)/1e6, "MB-on-disk")
}
