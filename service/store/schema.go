package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The schema is versioned: schema_migrations holds one row per numbered
// migration applied (version, what it did, when). A database made by the
// first release (tables, no schema_migrations, meta.schema = "1") is
// version 1. Opening a database migrates it forward, one transaction per
// migration, each re-reading the version under the write lock, so two
// servers starting together on one PostgreSQL apply each step once. A
// database of a newer schema than this build knows is refused.

// migration is one numbered schema change.
type migration struct {
	version  int
	what     string
	sqlite   []string
	postgres []string
}

// migrations are applied in order; append, never edit a released one.
var migrations = []migration{
	{1, "users, reports, releases, release charges, user states (the first release)", sqliteDDL, postgresDDL},
	{2, "token expiry and revocation for users; admin tokens",
		[]string{
			`ALTER TABLE users ADD COLUMN token_expires_ms INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE users ADD COLUMN token_revoked_ms INTEGER NOT NULL DEFAULT 0`,
			`CREATE TABLE admin_tokens (
				id TEXT PRIMARY KEY,
				token_hash BLOB NOT NULL UNIQUE,
				label TEXT NOT NULL,
				created_ms INTEGER NOT NULL,
				expires_ms INTEGER NOT NULL DEFAULT 0,
				revoked_ms INTEGER NOT NULL DEFAULT 0)`,
		},
		[]string{
			`ALTER TABLE users ADD COLUMN token_expires_ms BIGINT NOT NULL DEFAULT 0`,
			`ALTER TABLE users ADD COLUMN token_revoked_ms BIGINT NOT NULL DEFAULT 0`,
			`CREATE TABLE admin_tokens (
				id TEXT PRIMARY KEY,
				token_hash BYTEA NOT NULL UNIQUE,
				label TEXT NOT NULL,
				created_ms BIGINT NOT NULL,
				expires_ms BIGINT NOT NULL DEFAULT 0,
				revoked_ms BIGINT NOT NULL DEFAULT 0)`,
		}},
	{3, "a heartbeat row the readiness check writes",
		[]string{`CREATE TABLE heartbeat (id INTEGER PRIMARY KEY, beat_ms INTEGER NOT NULL, beats INTEGER NOT NULL)`},
		[]string{`CREATE TABLE heartbeat (id INTEGER PRIMARY KEY, beat_ms BIGINT NOT NULL, beats BIGINT NOT NULL)`}},
	{4, "collection versions: the catalogue may grow; each report records the version it was made for",
		collectionVersions("INTEGER"), collectionVersions("BIGINT")},
	{5, "users who left: deleted_ms, and the charge and count of their erased reports (the ledger keeps them)",
		[]string{
			`ALTER TABLE users ADD COLUMN deleted_ms INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE users ADD COLUMN erased_nano INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE users ADD COLUMN erased_reports INTEGER NOT NULL DEFAULT 0`,
		},
		[]string{
			`ALTER TABLE users ADD COLUMN deleted_ms BIGINT NOT NULL DEFAULT 0`,
			`ALTER TABLE users ADD COLUMN erased_nano BIGINT NOT NULL DEFAULT 0`,
			`ALTER TABLE users ADD COLUMN erased_reports BIGINT NOT NULL DEFAULT 0`,
		}},
	{6, "the mean report a local-mode report carries (NULL: none; reports stored before have none)",
		[]string{`ALTER TABLE reports ADD COLUMN mean_report REAL`},
		[]string{`ALTER TABLE reports ADD COLUMN mean_report DOUBLE PRECISION`}},
}

// collectionVersions is migration 4 in a dialect's integer type.
func collectionVersions(integer string) []string {
	return []string{
		`ALTER TABLE reports ADD COLUMN collection_version INTEGER NOT NULL DEFAULT 1`,
		`CREATE TABLE collection_versions (version INTEGER PRIMARY KEY, config TEXT NOT NULL, created_ms ` + integer + ` NOT NULL)`,
		`INSERT INTO collection_versions (version, config, created_ms) SELECT 1, value, 0 FROM meta WHERE key = 'config'`,
	}
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// Errors of opening and creating.
var (
	// ErrNoCollection: the database holds no collection (a missing or
	// empty SQLite file, a PostgreSQL schema without privrec's tables, or
	// tables without a recorded collection).
	ErrNoCollection = errors.New("store: no collection here")
	// ErrExists: Create found a collection already recorded.
	ErrExists = errors.New("store: a collection already exists here")
	// ErrDamaged: the database failed its integrity check.
	ErrDamaged = errors.New("store: the database is damaged")
	// ErrNewerSchema: the database was written by a newer privrec.
	ErrNewerSchema = errors.New("store: the database has a newer schema than this build knows")
)

const migrationsDDL = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_ms BIGINT NOT NULL)`

// hasTable reports whether the table exists (in PostgreSQL: in the
// current schema, the first of search_path).
func hasTable(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, d dialect, name string) (bool, error) {
	query := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	if d.dollar {
		query = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`
	}
	var n int
	if err := q.QueryRowContext(ctx, query, name).Scan(&n); err != nil {
		return false, fmt.Errorf("store: reading the schema: %w", err)
	}
	return n > 0, nil
}

// schemaVersion reads the version: 0 for an empty database, 1 for one
// made by the first release (its tables without schema_migrations).
func schemaVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, d dialect) (int, error) {
	ok, err := hasTable(ctx, q, d, "schema_migrations")
	if err != nil {
		return 0, err
	}
	if ok {
		var v sql.NullInt64
		if err := q.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
			return 0, fmt.Errorf("store: reading the schema version: %w", err)
		}
		return int(v.Int64), nil
	}
	// The first release's tables, all of them: a schema holding only
	// some (another application's "users") is not a privrec database.
	for _, name := range v1Tables {
		if ok, err := hasTable(ctx, q, d, name); err != nil || !ok {
			return 0, err
		}
	}
	return 1, nil
}

// v1Tables are the first release's tables.
var v1Tables = []string{"meta", "users", "reports", "releases", "release_charges", "user_states"}

// foreignTables lists the tables of a schema without privrec's: a
// collection is created only in an empty database or schema.
func foreignTables(ctx context.Context, db *sql.DB, d dialect) ([]string, error) {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`
	if d.dollar {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("store: reading the schema: %w", err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("store: reading the schema: %w", err)
		}
		found = append(found, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading the schema: %w", err)
	}
	return found, nil
}

// migrate brings the schema to SchemaVersion, one transaction per
// migration; it returns the version found before.
func migrate(ctx context.Context, db *sql.DB, d dialect, nowMS int64) (int, error) {
	found, err := schemaVersion(ctx, db, d)
	if err != nil {
		return 0, err
	}
	if found > SchemaVersion() {
		return found, fmt.Errorf("%w: schema version %d, this build knows up to %d; run the newer privrec (or restore a backup made by this one)", ErrNewerSchema, found, SchemaVersion())
	}
	for _, m := range migrations {
		if m.version <= found {
			continue
		}
		if err := applyMigration(ctx, db, d, m, nowMS); err != nil {
			return found, err
		}
	}
	return found, nil
}

func applyMigration(ctx context.Context, db *sql.DB, d dialect, m migration, nowMS int64) error {
	wrap := func(err error) error {
		return fmt.Errorf("store: schema migration %d (%s): %w", m.version, m.what, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return wrap(err)
	}
	defer tx.Rollback()
	if d.dollar {
		// Serialize migrating servers (the SQLite write transaction is
		// exclusive already).
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7250001)`); err != nil {
			return wrap(err)
		}
	}
	v, err := schemaVersion(ctx, tx, d)
	if err != nil {
		return wrap(err)
	}
	if v >= m.version {
		return nil // another server applied it
	}
	tracked, err := hasTable(ctx, tx, d, "schema_migrations")
	if err != nil {
		return wrap(err)
	}
	if _, err := tx.ExecContext(ctx, migrationsDDL); err != nil {
		return wrap(err)
	}
	if v == 1 && !tracked {
		// A first-release database: record its version before the step.
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations (version, description, applied_ms) VALUES (?, ?, ?)`),
			1, migrations[0].what+"; adopted", nowMS); err != nil {
			return wrap(err)
		}
	}
	ddl := m.sqlite
	if d.dollar {
		ddl = m.postgres
	}
	for _, q := range ddl {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return wrap(err)
		}
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations (version, description, applied_ms) VALUES (?, ?, ?)`),
		m.version, m.what, nowMS); err != nil {
		return wrap(err)
	}
	if err := tx.Commit(); err != nil {
		return wrap(err)
	}
	return nil
}

// Migration is one applied schema migration.
type Migration struct {
	Version     int
	Description string
	AppliedMS   int64
}

func (s *sqlStore) Migrations(ctx context.Context) ([]Migration, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT version, description, applied_ms FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("store: reading the schema migrations: %w", err)
	}
	defer rows.Close()
	var out []Migration
	for rows.Next() {
		var m Migration
		if err := rows.Scan(&m.Version, &m.Description, &m.AppliedMS); err != nil {
			return nil, fmt.Errorf("store: reading the schema migrations: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading the schema migrations: %w", err)
	}
	return out, nil
}

// noCollection explains an empty database.
func noCollection(where string) error {
	return fmt.Errorf("%w: %s holds no privrec collection", ErrNoCollection, strings.TrimSpace(where))
}
