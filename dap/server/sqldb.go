package server

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"

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
	// stmts keeps SQLite's statements prepared (the driver would parse
	// and plan each statement at every call: ≈ 0.6–0.9 ms of the leader's
	// CPU per upload). PostgreSQL's driver keeps its own.
	stmts *stmtCache
}

// stmtCache is the statements an SQLite pool has prepared, by query. A
// statement first seen in a transaction is prepared when the transaction
// ends: SQLite's pool has one connection, which the transaction holds.
type stmtCache struct {
	mu     sync.Mutex
	ready  map[string]*sql.Stmt
	wanted map[string]bool
}

func newStmtCache() *stmtCache {
	return &stmtCache{ready: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// get is q's prepared statement, or nil (then, in a transaction, q is
// prepared once the transaction ends).
func (c *stmtCache) get(q string, inTx bool) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.ready[q]
	if st == nil && inTx {
		c.wanted[q] = true
	}
	return st
}

// prepare prepares the statements wanted (the pool's connection is free:
// no transaction is open). A statement that does not prepare is run
// unprepared, as before.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB) {
	if c == nil {
		return
	}
	c.mu.Lock()
	var qs []string
	for q := range c.wanted {
		qs = append(qs, q)
	}
	clear(c.wanted)
	c.mu.Unlock()
	// Without the lock: preparing waits for the connection, which a
	// transaction calling get may hold.
	for _, q := range qs {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.ready[q] == nil {
			c.ready[q], st = st, nil
		}
		c.mu.Unlock()
		if st != nil {
			st.Close() // prepared meanwhile by another caller
		}
	}
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
	q = x.d.Rebind(q)
	if st := x.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, boolsAsInts(args)...)
	}
	return x.db.ExecContext(ctx, q, boolsAsInts(args)...)
}

func (x *sqlDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	q = x.d.Rebind(q)
	if st := x.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, boolsAsInts(args)...)
	}
	return x.db.QueryRowContext(ctx, q, boolsAsInts(args)...)
}

// stmt is q's prepared statement outside a transaction (prepared now if
// need be), or nil.
func (x *sqlDB) stmt(ctx context.Context, q string) *sql.Stmt {
	if x.stmts == nil {
		return nil
	}
	if st := x.stmts.get(q, true); st != nil {
		return st
	}
	x.stmts.prepare(ctx, x.db)
	return x.stmts.get(q, false)
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
	return &sqlTx{tx: tx, d: x.d, db: x}, nil
}

func (x *sqlDB) Close() error { return x.db.Close() }

// sqlTx is a transaction of an sqlDB.
type sqlTx struct {
	tx *sql.Tx
	d  svcstore.Dialect
	db *sqlDB
}

func (x *sqlTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	q = x.d.Rebind(q)
	if st := x.db.stmts.get(q, true); st != nil {
		return x.tx.StmtContext(ctx, st).ExecContext(ctx, boolsAsInts(args)...)
	}
	return x.tx.ExecContext(ctx, q, boolsAsInts(args)...)
}

func (x *sqlTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	q = x.d.Rebind(q)
	if st := x.db.stmts.get(q, true); st != nil {
		return x.tx.StmtContext(ctx, st).QueryRowContext(ctx, boolsAsInts(args)...)
	}
	return x.tx.QueryRowContext(ctx, q, boolsAsInts(args)...)
}

func (x *sqlTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return x.tx.QueryContext(ctx, x.d.Rebind(q), boolsAsInts(args)...)
}

// Commit and Rollback end the transaction, then prepare the statements
// it ran unprepared (SQLite).
func (x *sqlTx) Commit() error {
	err := x.tx.Commit()
	x.db.stmts.prepare(context.Background(), x.db.db)
	return err
}

func (x *sqlTx) Rollback() error {
	err := x.tx.Rollback()
	if !errors.Is(err, sql.ErrTxDone) {
		x.db.stmts.prepare(context.Background(), x.db.db)
	}
	return err
}

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
