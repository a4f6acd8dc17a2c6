package server

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	svcstore "github.com/privrec/privrec/service/store"
)

// sqlDB is an aggregator's connection pool in its dialect (SQLite or
// PostgreSQL): the store's statements are written once, with ?
// placeholders, and adapted here; booleans are stored as integers in
// both.
type sqlDB struct {
	db *sql.DB
	d  svcstore.Dialect
}

// boolsAsInts stores booleans as 0 or 1 (PostgreSQL's driver would not
// put a Go bool into a BIGINT column; SQLite does this itself).
func boolsAsInts(a []any) []any {
	for i, v := range a {
		if b, ok := v.(bool); ok {
			if b {
				a[i] = int64(1)
			} else {
				a[i] = int64(0)
			}
		}
	}
	return a
}

func (x *sqlDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return x.db.ExecContext(ctx, x.d.Rebind(q), boolsAsInts(args)...)
}

func (x *sqlDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return x.db.QueryRowContext(ctx, x.d.Rebind(q), boolsAsInts(args)...)
}

func (x *sqlDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return x.db.QueryContext(ctx, x.d.Rebind(q), boolsAsInts(args)...)
}

// Exec and QueryRow are ExecContext and QueryRowContext without a
// context (tests).
func (x *sqlDB) Exec(q string, args ...any) (sql.Result, error) {
	return x.ExecContext(context.Background(), q, args...)
}

func (x *sqlDB) QueryRow(q string, args ...any) *sql.Row {
	return x.QueryRowContext(context.Background(), q, args...)
}

// BeginTx starts a write transaction (SQLite: BEGIN IMMEDIATE, the
// single writer; PostgreSQL: READ COMMITTED, rows locked where read for
// update).
func (x *sqlDB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sqlTx, error) {
	tx, err := x.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &sqlTx{tx: tx, d: x.d}, nil
}

func (x *sqlDB) Close() error { return x.db.Close() }

// sqlTx is a transaction of an sqlDB.
type sqlTx struct {
	tx *sql.Tx
	d  svcstore.Dialect
}

func (x *sqlTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return x.tx.ExecContext(ctx, x.d.Rebind(q), boolsAsInts(args)...)
}

func (x *sqlTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return x.tx.QueryRowContext(ctx, x.d.Rebind(q), boolsAsInts(args)...)
}

func (x *sqlTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return x.tx.QueryContext(ctx, x.d.Rebind(q), boolsAsInts(args)...)
}

func (x *sqlTx) Commit() error   { return x.tx.Commit() }
func (x *sqlTx) Rollback() error { return x.tx.Rollback() }

// isUniqueViolation reports whether err is a unique-constraint violation
// (SQLite's "UNIQUE constraint failed", PostgreSQL's SQLSTATE 23505).
func isUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505"
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint")
}

// pgUnavailable reports whether err is PostgreSQL refusing or failing a
// statement (its SQLSTATE: a full disk is 53100, a lost connection class
// 08) or not answering a connection: the request changed nothing and is
// to be retried (503, as any SQLite error is).
func pgUnavailable(err error) (string, bool) {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return "SQLSTATE " + pg.Code, true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return "no connection", true
	}
	return "", false
}
