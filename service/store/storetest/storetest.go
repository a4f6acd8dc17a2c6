// Package storetest gives tests a fresh database of each kind: an SQLite
// file in a temporary directory, and — when PRIVREC_TEST_POSTGRES holds a
// PostgreSQL URL (.ci/run sets it) — a schema of its own in that
// database, dropped afterwards.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/service/store"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// EnvPostgres names the variable holding the test PostgreSQL URL.
const EnvPostgres = "PRIVREC_TEST_POSTGRES"

// Kinds are the database kinds every store test runs on.
var Kinds = []string{"sqlite", "postgres"}

// URL returns the URL of a fresh, empty database of the kind; a
// PostgreSQL test is skipped, with a message saying why, when
// PRIVREC_TEST_POSTGRES is unset.
func URL(t testing.TB, kind string) string {
	t.Helper()
	switch kind {
	case "sqlite":
		return "sqlite:" + filepath.Join(t.TempDir(), "privrec.db")
	case "postgres":
		base := Postgres(t)
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		schema := "t_" + hex.EncodeToString(b[:])
		db, err := sql.Open("pgx", base)
		if err != nil {
			t.Fatalf("storetest: %v", err)
		}
		if _, err := db.ExecContext(context.Background(), "CREATE SCHEMA "+schema); err != nil {
			db.Close()
			t.Fatalf("storetest: creating schema: %v", err)
		}
		t.Cleanup(func() {
			if _, err := db.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				t.Errorf("storetest: dropping schema %s: %v", schema, err)
			}
			db.Close()
		})
		return WithParam(base, "search_path", schema)
	}
	t.Fatalf("storetest: unknown kind %q", kind)
	return ""
}

// Postgres returns PRIVREC_TEST_POSTGRES or skips the test.
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvPostgres)
	if base == "" {
		t.Skipf("%s is not set: skipping the PostgreSQL run (.ci/run starts PostgreSQL and sets it, e.g. postgres://privrec:privrec@127.0.0.1:5432/privrec_test?sslmode=disable)", EnvPostgres)
	}
	return base
}

// WithParam adds a query parameter to a database URL.
func WithParam(base, key, value string) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
}

// Faulty wraps a store and, while armed, fails every write (Update,
// Publish, Heartbeat) with Err before it reaches the database, as a full
// disk, a read-only file system or an I/O error would. Reads pass
// through. Tests use it where no real faulty file system can be made.
//
// Armed with FailAfter, Update commits and then returns the error: an
// ambiguous commit, as when the connection drops or the disk reports an
// I/O error after the transaction became durable.
//
// Stall makes every Update wait first, as a slow or locked database does.
type Faulty struct {
	store.Store
	mu    sync.Mutex
	err   error
	after bool
	stall time.Duration
}

// Stall makes every Update wait d before it runs (0: no wait).
func (f *Faulty) Stall(d time.Duration) {
	f.mu.Lock()
	f.stall = d
	f.mu.Unlock()
}

// Fail arms the store with err (nil disarms it).
func (f *Faulty) Fail(err error) {
	f.mu.Lock()
	f.err, f.after = err, false
	f.mu.Unlock()
}

// FailAfter makes Update commit, then fail with err.
func (f *Faulty) FailAfter(err error) {
	f.mu.Lock()
	f.err, f.after = err, true
	f.mu.Unlock()
}

func (f *Faulty) armed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.after {
		return nil
	}
	return f.err
}

func (f *Faulty) Update(ctx context.Context, fn func(store.Tx) error) error {
	f.mu.Lock()
	err, after, stall := f.err, f.after, f.stall
	f.mu.Unlock()
	time.Sleep(stall)
	switch {
	case err == nil:
		return f.Store.Update(ctx, fn)
	case after:
		if cerr := f.Store.Update(ctx, fn); cerr != nil {
			return cerr
		}
	}
	return fmt.Errorf("store: commit: %w", err)
}

func (f *Faulty) Publish(ctx context.Context, r store.NewRelease) (int64, error) {
	if err := f.armed(); err != nil {
		return 0, fmt.Errorf("store: publish: %w", err)
	}
	return f.Store.Publish(ctx, r)
}

func (f *Faulty) Heartbeat(ctx context.Context, nowMS int64) error {
	if err := f.armed(); err != nil {
		return fmt.Errorf("store: heartbeat: %w", err)
	}
	return f.Store.Heartbeat(ctx, nowMS)
}

// CorruptPages overwrites n 4 KiB pages of a file, from page first, with
// random bytes (garbage in the middle of an SQLite database).
func CorruptPages(path string, first, n int) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	junk := make([]byte, n*4096)
	rand.Read(junk)
	if _, err := f.WriteAt(junk, int64(first)*4096); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
