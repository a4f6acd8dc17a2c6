package store

import (
	"context"
	"database/sql"
	"fmt"
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

// OpenSQLite opens (creating if needed) an SQLite database file. Writes
// go through one connection (the service batches them: group commit) in
// WAL mode with synchronous=FULL, so a committed transaction is on disk
// when Commit returns; reads use a separate read-only pool.
func OpenSQLite(ctx context.Context, path string) (Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("store: SQLite file name %q may not contain ? or #", path)
	}
	common := "_busy_timeout=10000&_foreign_keys=1"
	w, err := sql.Open("sqlite", path+"?"+common+"&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate")
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
	s, err := newSQLStore(ctx, dialect{kind: "sqlite", ddl: sqliteDDL}, w, r)
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return s, nil
}
