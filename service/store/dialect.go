package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Dialect is what differs between SQLite and PostgreSQL, for the other
// stores kept in the same kinds of database (the two aggregators'): they
// write their statements once, with ? placeholders and SQLite's column
// types, and the dialect adapts them.
type Dialect struct{ d dialect }

// The two dialects.
var (
	SQLite   = Dialect{dialect{kind: "sqlite"}}
	Postgres = Dialect{dialect{kind: "postgres", dollar: true}}
)

// IsPostgres reports whether url names a PostgreSQL database
// (postgres:// or postgresql://).
func IsPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// Kind is "sqlite" or "postgres".
func (d Dialect) Kind() string { return d.d.kind }

// Postgres reports whether this is PostgreSQL's dialect.
func (d Dialect) Postgres() bool { return d.d.dollar }

// Rebind turns ? placeholders into PostgreSQL's $1, $2, ….
func (d Dialect) Rebind(q string) string { return d.d.rebind(q) }

// pgTypes maps SQLite's column types to PostgreSQL's (INTEGER is 64 bits
// in SQLite, 32 in PostgreSQL).
var pgTypes = strings.NewReplacer(" BLOB", " BYTEA", " INTEGER", " BIGINT")

// DDL adapts a CREATE TABLE or ALTER TABLE statement written with
// SQLite's types (BLOB, INTEGER) to the dialect.
func (d Dialect) DDL(q string) string {
	if !d.d.dollar {
		return q
	}
	return pgTypes.Replace(q)
}

// LockRow is the row-lock clause of a read in a write transaction that
// the transaction then updates: FOR UPDATE in PostgreSQL, nothing in
// SQLite (whose write transaction is exclusive).
func (d Dialect) LockRow() string {
	if d.d.dollar {
		return " FOR UPDATE"
	}
	return ""
}

// HasTable reports whether the table exists (in PostgreSQL: in the
// current schema, the first of search_path).
func (d Dialect) HasTable(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (bool, error) {
	return hasTable(ctx, q, d.d, name)
}

// Tables lists the tables of the database (PostgreSQL: of the current
// schema).
func (d Dialect) Tables(ctx context.Context, db *sql.DB) ([]string, error) {
	return foreignTables(ctx, db, d.d)
}

// HasColumn reports whether a table has a column.
func (d Dialect) HasColumn(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, table, column string) (bool, error) {
	query := `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`
	if d.d.dollar {
		query = `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	}
	var n int
	if err := q.QueryRowContext(ctx, query, table, column).Scan(&n); err != nil {
		return false, fmt.Errorf("store: reading the schema: %w", err)
	}
	return n > 0, nil
}
