package model

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/privrec/privrec/internal/atomicfile"
	"golang.org/x/sync/errgroup"
)

// A state directory (privrec train --user-state DIR) holds one training's
// user states in shards, so that a million users are a few hundred files,
// not a million:
//
//	DIR/states.json             the index: format, method, rank, the model's
//	                            fingerprint, the number of users and shards,
//	                            and the subdirectory holding the shards
//	DIR/states-XXXX/shard-NNNN.jsonl
//	                            one line per user: her state as JSON
//	                            ({"user":…,"row":[…],"bias":…,"seen":[…]})
//
// A user's shard is FNV-1a(user ID) mod the number of shards, so one user's
// state is found by reading one shard. Each line is one user's own state
// (hand her that line, as she would get her own file); the directory is the
// trusted store the states are kept in, never part of the public model.
//
// Save writes all-or-nothing: the shards go into a new subdirectory,
// synced, and only then is the index replaced (written to a temporary file
// and renamed), which is the single step that makes them the directory's
// states. A failure before it leaves the previous states as they were and
// no new files behind; after it, the previous shards (those of a Save that
// crashed too, and any per-user files of the format before shards) are
// removed.

// stateIndexFile is the index of a sharded state directory.
const stateIndexFile = "states.json"

// stateIndexFormat names the format in the index.
const stateIndexFormat = "privrec-user-states/shards-1"

// usersPerShard is the number of users a shard holds on average.
const usersPerShard = 4096

// maxShards bounds the shards an index may declare (2^20 × 4 096 users is
// beyond any population), so a damaged index cannot make a reader
// allocate without limit.
const maxShards = 1 << 20

// stateIndex is the content of states.json.
type stateIndex struct {
	Format string `json:"format"`
	Method string `json:"method"`
	Rank   int    `json:"rank"`
	Model  string `json:"model,omitempty"`
	Users  int    `json:"users"`
	Shards int    `json:"shards"`
	Data   string `json:"data"` // the subdirectory holding the shards
}

// shardOf is the shard of a user among n.
func shardOf(user string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(user))
	return int(h.Sum32() % uint32(n))
}

func shardName(dir string, k int) string {
	return filepath.Join(dir, fmt.Sprintf("shard-%04d.jsonl", k))
}

// Save writes the states into dir (created if needed; 0700, files 0600:
// the states are each user's own) as a sharded state directory, replacing
// the states dir held before, all-or-nothing (see above).
func (s *UserStates) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("writing user states: %w", err)
	}
	old, _ := readStateIndex(dir) // the states to remove once the new ones are in place
	data, err := os.MkdirTemp(dir, "states-")
	if err != nil {
		return fmt.Errorf("writing user states: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(data)
		}
	}()
	nShards := max(1, (len(s.States)+usersPerShard-1)/usersPerShard)
	// Users of each shard, in the order of s.States (a counting sort).
	start := make([]int, nShards+1)
	shard := make([]int32, len(s.States))
	for k := range s.States {
		shard[k] = int32(shardOf(s.States[k].User, nShards))
		start[shard[k]+1]++
	}
	for k := range nShards {
		start[k+1] += start[k]
	}
	order := make([]int32, len(s.States))
	next := append([]int(nil), start[:nShards]...)
	for k, sh := range shard {
		order[next[sh]] = int32(k)
		next[sh]++
	}
	files := make([]atomicfile.File, nShards)
	for k := range nShards {
		users := order[start[k]:start[k+1]]
		files[k] = atomicfile.File{Path: shardName(data, k), Write: func(w io.Writer) error {
			bw := bufio.NewWriterSize(w, 1<<16)
			for _, u := range users {
				st := &s.States[u]
				b, err := json.Marshal(st)
				if err != nil {
					return fmt.Errorf("encoding state of user %q: %w", st.User, err)
				}
				bw.Write(b)
				bw.WriteByte('\n')
			}
			return bw.Flush()
		}}
	}
	if err := atomicfile.WriteAll(0o600, files...); err != nil {
		return fmt.Errorf("writing user states: %w", err)
	}
	idx := stateIndex{Format: stateIndexFormat, Method: s.Method, Rank: s.Rank, Model: s.Model,
		Users: len(s.States), Shards: nShards, Data: filepath.Base(data)}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("writing user states: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, stateIndexFile), 0o600, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("writing user states: %w", err)
	}
	committed = true
	// The new states are in place; what they replace goes.
	var errs []error
	if old != nil && old.Data != idx.Data {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, old.Data)))
	}
	// Shards of a Save that crashed before its index was written.
	stale, _ := filepath.Glob(filepath.Join(dir, "states-*"))
	for _, d := range stale {
		if filepath.Base(d) != idx.Data {
			errs = append(errs, os.RemoveAll(d))
		}
	}
	legacy, _ := filepath.Glob(filepath.Join(dir, "user-*.json"))
	for _, f := range legacy {
		errs = append(errs, os.Remove(f))
	}
	if err := errors.Join(errs...); err != nil {
		slog.Warn("user states written; removing the states they replace failed", "dir", dir, "err", err)
	}
	return nil
}

// readStateIndex reads dir's index; it returns nil, nil when dir has none
// (a directory of per-user files, or no states).
func readStateIndex(dir string) (*stateIndex, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateIndexFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading user states: %w", err)
	}
	var idx stateIndex
	path := filepath.Join(dir, stateIndexFile)
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case idx.Format != stateIndexFormat:
		return nil, fmt.Errorf("%s: format %q, want %q (written by another version of privrec?)", path, idx.Format, stateIndexFormat)
	case idx.Shards < 1 || idx.Shards > maxShards || idx.Users < 0:
		return nil, fmt.Errorf("%s: %d shards for %d users", path, idx.Shards, idx.Users)
	case idx.Data == "" || idx.Data != filepath.Base(idx.Data) || strings.HasPrefix(idx.Data, "."):
		return nil, fmt.Errorf("%s: data directory %q is not a name inside the state directory", path, idx.Data)
	}
	return &idx, nil
}

// header is the UserStates of an index, without states.
func (idx *stateIndex) header() *UserStates {
	return &UserStates{Method: idx.Method, Rank: idx.Rank, Model: idx.Model}
}

// loadSharded reads every state of a sharded directory, its shards in
// parallel (decoding JSON is most of the cost), in shard order.
func loadSharded(dir string, idx *stateIndex) (*UserStates, error) {
	shards := make([][]UserState, idx.Shards)
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for k := range idx.Shards {
		g.Go(func() error {
			var err error
			shards[k], err = loadShard(shardName(filepath.Join(dir, idx.Data), k), k, idx.Shards)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	n := 0
	for _, sh := range shards {
		n += len(sh)
	}
	if n != idx.Users {
		return nil, fmt.Errorf("%s: the shards hold %d users, the index says %d (damaged state directory)", dir, n, idx.Users)
	}
	s := idx.header()
	s.States = make([]UserState, 0, n)
	for k, sh := range shards {
		s.States = append(s.States, sh...)
		shards[k] = nil
	}
	return s, nil
}

// loadShard reads shard k of n.
func loadShard(path string, k, n int) ([]UserState, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading user states: %w", err)
	}
	var out []UserState
	for line := 1; len(b) > 0; line++ {
		l := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		var st UserState
		if err := json.Unmarshal(l, &st); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if sh := shardOf(st.User, n); sh != k {
			return nil, fmt.Errorf("%s:%d: user %q belongs in shard %d", path, line, st.User, sh)
		}
		out = append(out, st)
	}
	return out, nil
}

// loadShardedUser reads one user's state: her shard only, and of its
// lines only the one that starts with her ID.
func loadShardedUser(dir string, idx *stateIndex, user string) (*UserStates, error) {
	path := shardName(filepath.Join(dir, idx.Data), shardOf(user, idx.Shards))
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading user states: %w", err)
	}
	id, err := json.Marshal(user)
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", user, err)
	}
	prefix := append(append([]byte(`{"user":`), id...), ',')
	at := -1
	if bytes.HasPrefix(b, prefix) {
		at = 0
	} else if i := bytes.Index(b, append([]byte{'\n'}, prefix...)); i >= 0 {
		at = i + 1
	}
	if at < 0 {
		return nil, fmt.Errorf("no state for user %q in %s", user, dir)
	}
	l := b[at:]
	if i := bytes.IndexByte(l, '\n'); i >= 0 {
		l = l[:i]
	}
	s := idx.header()
	var st UserState
	if err := json.Unmarshal(l, &st); err != nil || st.User != user {
		return nil, fmt.Errorf("%s: the state of user %q is damaged: %v", path, user, err)
	}
	s.States = []UserState{st}
	return s, nil
}
