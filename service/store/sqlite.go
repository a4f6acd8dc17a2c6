package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver (pure Go)
)

var sqliteDDL = []string{
	`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS users (
		id TEXT PRIMARY KEY,
		token_hash BLOB NOT NULL UNIQUE,
		budget_nano INTEGER NOT NULL,
		spent_nano INTEGER NOT NULL DEFAULT 0,
		reports INTEGER NOT NULL DEFAULT 0,
		created_ms INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS reports (
		seq INTEGER PRIMARY KEY,
		user_id TEXT NOT NULL REFERENCES users(id),
		client_id TEXT NOT NULL,
		body_hash BLOB NOT NULL,
		epsilon_nano INTEGER NOT NULL,
		spent_after_nano INTEGER NOT NULL,
		received_ms INTEGER NOT NULL,
		vals TEXT NOT NULL,
		UNIQUE (user_id, client_id))`,
	`CREATE TABLE IF NOT EXISTS releases (
		id INTEGER PRIMARY KEY,
		created_ms INTEGER NOT NULL,
		method TEXT NOT NULL,
		max_seq INTEGER NOT NULL,
		users_charged INTEGER NOT NULL,
		doc TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS release_charges (
		release_id INTEGER NOT NULL REFERENCES releases(id),
		user_id TEXT NOT NULL REFERENCES users(id),
		epsilon_nano INTEGER NOT NULL,
		PRIMARY KEY (release_id, user_id))`,
	`CREATE INDEX IF NOT EXISTS release_charges_user ON release_charges(user_id)`,
	`CREATE TABLE IF NOT EXISTS user_states (
		release_id INTEGER NOT NULL REFERENCES releases(id),
		user_id TEXT NOT NULL REFERENCES users(id),
		state TEXT NOT NULL,
		PRIMARY KEY (release_id, user_id))`,
}

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// OpenSQLite opens an SQLite database file: with create, a new one (the
// file is made if missing); without, an existing collection's, which must
// be an SQLite file and pass PRAGMA quick_check. Writes go through one
// connection (the service batches them: group commit) in WAL mode with
// synchronous=FULL, so a committed transaction is on disk when Commit
// returns; reads use a separate read-only pool.
func OpenSQLite(ctx context.Context, path string, create bool) (Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("store: SQLite file name %q may not contain ? or #", path)
	}
	existing, err := sqliteFile(path, create)
	if err != nil {
		return nil, err
	}
	common := "_busy_timeout=10000&_foreign_keys=1"
	// temp_store=memory keeps the statement journal of a multi-row
	// INSERT (SQLite writes one so that a failing row can undo the
	// statement) in memory: spilled to a temporary file it cost a pwrite
	// per page touched. It holds no committed data, so durability is not
	// affected.
	w, err := sql.Open("sqlite", path+"?"+common+"&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate&_pragma=temp_store(memory)")
	if err != nil {
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	if existing {
		if err := quickCheck(ctx, w, path); err != nil {
			w.Close()
			return nil, err
		}
	}
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		w.Close()
		return nil, fmt.Errorf("store: %s: journal mode %q, want WAL (%v)", path, mode, err)
	}
	r, err := sql.Open("sqlite", path+"?"+common+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s, err := newSQLStore(ctx, dialect{kind: "sqlite"}, w, r, create)
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return s, nil
}

// sqliteFile checks the file before SQLite opens it (which would make an
// empty database of a missing or empty file): without create it must
// exist and start with the SQLite header; with create it may be missing
// or empty, or an SQLite file. It reports whether it holds a database.
func sqliteFile(path string, create bool) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if create {
			if _, err := os.Stat(filepath.Dir(path)); err != nil {
				return false, fmt.Errorf("store: cannot create %s: %w", path, err)
			}
			return false, nil
		}
		return false, fmt.Errorf("%w: there is no file %s (a mistyped --db path?)", ErrNoCollection, path)
	}
	if err != nil {
		return false, fmt.Errorf("store: opening %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && create:
		return false, nil
	case n == 0:
		return false, fmt.Errorf("%w: %s is an empty file (0 bytes): not a privrec database — if it was one it has been truncated, so restore it from a backup", ErrNoCollection, path)
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return false, fmt.Errorf("store: reading %s: %w", path, err)
	case string(head[:n]) != sqliteHeader:
		return false, fmt.Errorf("%w: %s is not an SQLite database (it does not start with the SQLite header)", ErrDamaged, path)
	}
	return true, nil
}

// quickCheck runs PRAGMA quick_check (every page and index entry is
// read; O(size), seconds for a GB) and refuses a damaged file.
func quickCheck(ctx context.Context, db *sql.DB, path string) error {
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check(5)")
	if err != nil {
		return fmt.Errorf("%w: %s failed its integrity check: %v; restore it from a backup", ErrDamaged, path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("%w: %s failed its integrity check: %v; restore it from a backup", ErrDamaged, path, err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %s failed its integrity check: %v; restore it from a backup", ErrDamaged, path, err)
	}
	if len(problems) > 0 {
		what := strings.Join(strings.Fields(strings.Join(problems, "; ")), " ")
		if len(what) > 300 {
			what = what[:300] + " …"
		}
		return fmt.Errorf("%w: %s failed its integrity check (PRAGMA quick_check): %s; restore it from a backup", ErrDamaged, path, what)
	}
	return nil
}
