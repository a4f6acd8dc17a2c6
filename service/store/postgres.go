package store

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

var postgresDDL = []string{
	`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS users (
		id TEXT PRIMARY KEY,
		token_hash BYTEA NOT NULL UNIQUE,
		budget_nano BIGINT NOT NULL,
		spent_nano BIGINT NOT NULL DEFAULT 0,
		reports BIGINT NOT NULL DEFAULT 0,
		created_ms BIGINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS reports (
		seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		user_id TEXT NOT NULL REFERENCES users(id),
		client_id TEXT NOT NULL,
		body_hash BYTEA NOT NULL,
		epsilon_nano BIGINT NOT NULL,
		spent_after_nano BIGINT NOT NULL,
		received_ms BIGINT NOT NULL,
		vals TEXT NOT NULL,
		UNIQUE (user_id, client_id))`,
	`CREATE TABLE IF NOT EXISTS releases (
		id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		created_ms BIGINT NOT NULL,
		method TEXT NOT NULL,
		max_seq BIGINT NOT NULL,
		users_charged BIGINT NOT NULL,
		doc TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS release_charges (
		release_id BIGINT NOT NULL REFERENCES releases(id),
		user_id TEXT NOT NULL REFERENCES users(id),
		epsilon_nano BIGINT NOT NULL,
		PRIMARY KEY (release_id, user_id))`,
	`CREATE INDEX IF NOT EXISTS release_charges_user ON release_charges(user_id)`,
	`CREATE TABLE IF NOT EXISTS user_states (
		release_id BIGINT NOT NULL REFERENCES releases(id),
		user_id TEXT NOT NULL REFERENCES users(id),
		state TEXT NOT NULL,
		PRIMARY KEY (release_id, user_id))`,
}

// OpenPostgres connects to PostgreSQL (pgx through database/sql). Commits
// are durable under PostgreSQL's default synchronous_commit = on; the
// service still groups concurrent submissions into one transaction.
// Parameters such as search_path may be given in the URL. With create the
// tables are made in an empty schema; without, the schema must hold a
// collection.
func OpenPostgres(ctx context.Context, url string, create bool) (Store, error) {
	db, err := ConnectPostgres(ctx, url, 16)
	if err != nil {
		return nil, err
	}
	s, err := newSQLStore(ctx, dialect{kind: "postgres", dollar: true}, db, db, create)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w (%s)", err, redact(url))
	}
	return s, nil
}

// ConnectPostgres connects to PostgreSQL (pgx through database/sql) with
// a pool of up to conns connections, and refuses a server that does not
// make a commit durable before it returns (synchronous_commit = off).
func ConnectPostgres(ctx context.Context, url string, conns int) (*sql.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("store: connecting to %s: %w", redact(url), err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: connecting to %s: %w", redact(url), err)
	}
	var sync string
	if err := db.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&sync); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %s: %w", redact(url), err)
	}
	if sync == "off" {
		db.Close()
		return nil, fmt.Errorf("store: %s has synchronous_commit = off: an acknowledged report could be lost in a crash; turn it on", redact(url))
	}
	return db, nil
}
