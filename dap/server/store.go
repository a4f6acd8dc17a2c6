package server

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver (pure Go)

	"github.com/privrec/privrec/dap"
)

// schema is one aggregator's database. The leader uses every table; the
// helper has no users or reports (it never sees who contributed, only
// report IDs, in "verdicts").
var schema = []string{
	`CREATE TABLE IF NOT EXISTS tasks (
		id TEXT PRIMARY KEY,
		params TEXT NOT NULL,
		collected INTEGER NOT NULL DEFAULT 0)`,
	`CREATE TABLE IF NOT EXISTS users (
		id TEXT PRIMARY KEY,
		token_hash BLOB NOT NULL UNIQUE,
		spent_rho_nano INTEGER NOT NULL DEFAULT 0)`,
	`CREATE TABLE IF NOT EXISTS reports (
		task_id TEXT NOT NULL REFERENCES tasks(id),
		report_id BLOB NOT NULL,
		user_id TEXT NOT NULL REFERENCES users(id),
		body BLOB NOT NULL,
		PRIMARY KEY (task_id, report_id),
		UNIQUE (task_id, user_id))`,
	`CREATE TABLE IF NOT EXISTS verdicts (
		task_id TEXT NOT NULL REFERENCES tasks(id),
		report_id BLOB NOT NULL,
		accepted INTEGER NOT NULL,
		reason TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (task_id, report_id))`,
	`CREATE TABLE IF NOT EXISTS aggregates (
		task_id TEXT PRIMARY KEY REFERENCES tasks(id),
		share BLOB NOT NULL,
		count INTEGER NOT NULL,
		checksum BLOB NOT NULL,
		noised BLOB)`,
	`CREATE TABLE IF NOT EXISTS releases (
		task_id TEXT PRIMARY KEY REFERENCES tasks(id),
		body TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS models (
		name TEXT PRIMARY KEY,
		body TEXT NOT NULL)`,
}

// store is an aggregator's SQLite database (modernc.org/sqlite, WAL,
// synchronous=FULL as the service's store: a committed verdict or charge
// is on disk when Commit returns). Writes go through one connection.
type store struct{ db *sql.DB }

func openStore(ctx context.Context, path string) (*store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("dap store: SQLite file name %q may not contain ? or #", path)
	}
	db, err := sql.Open("sqlite", path+"?_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("dap store: opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range schema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("dap store: %s: schema: %w", path, err)
		}
	}
	return &store{db: db}, nil
}

func (s *store) Close() error { return s.db.Close() }

var errNotFound = errors.New("not found")

// putTask stores a new task, or accepts an identical re-provisioning; a
// different task under the same ID is refused.
func (s *store) putTask(ctx context.Context, t dap.Task) error {
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("dap store: encoding task: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dap store: %w", err)
	}
	defer tx.Rollback()
	var old string
	switch err := tx.QueryRowContext(ctx, `SELECT params FROM tasks WHERE id = ?`, t.ID).Scan(&old); {
	case err == nil:
		if old != string(b) {
			return fmt.Errorf("%w: task %q exists with other parameters", dap.ErrInvalid, t.ID)
		}
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("dap store: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO tasks (id, params) VALUES (?, ?)`, t.ID, string(b)); err != nil {
		return fmt.Errorf("dap store: task: %w", err)
	}
	zero, err := dap.EncodeVec(t.NewVec())
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO aggregates (task_id, share, count, checksum) VALUES (?, ?, 0, ?)`, t.ID, zero, make([]byte, 32)); err != nil {
		return fmt.Errorf("dap store: aggregate: %w", err)
	}
	return tx.Commit()
}

func (s *store) task(ctx context.Context, id string) (dap.Task, bool, error) {
	var params string
	var collected bool
	err := s.db.QueryRowContext(ctx, `SELECT params, collected FROM tasks WHERE id = ?`, id).Scan(&params, &collected)
	if errors.Is(err, sql.ErrNoRows) {
		return dap.Task{}, false, fmt.Errorf("task %q: %w", id, errNotFound)
	}
	if err != nil {
		return dap.Task{}, false, fmt.Errorf("dap store: %w", err)
	}
	var t dap.Task
	if err := json.Unmarshal([]byte(params), &t); err != nil {
		return dap.Task{}, false, fmt.Errorf("dap store: task %q: %w", id, err)
	}
	return t, collected, nil
}

func (s *store) tasks(ctx context.Context) ([]dap.Task, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT params FROM tasks ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	defer rows.Close()
	var out []dap.Task
	for rows.Next() {
		var p string
		var t dap.Task
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("dap store: %w", err)
		}
		if err := json.Unmarshal([]byte(p), &t); err != nil {
			return nil, fmt.Errorf("dap store: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// aggregate is an aggregator's running share of one task.
type aggregate struct {
	share    dap.Vec
	count    int
	checksum []byte // XOR of SHA-256(report ID) over accepted reports (DAP's batch checksum)
	noised   []byte // the noised share, once collected
}

func (s *store) aggregate(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, t *dap.Task) (aggregate, error) {
	var a aggregate
	var share []byte
	if err := q.QueryRowContext(ctx, `SELECT share, count, checksum, noised FROM aggregates WHERE task_id = ?`, t.ID).
		Scan(&share, &a.count, &a.checksum, &a.noised); err != nil {
		return a, fmt.Errorf("dap store: aggregate of %q: %w", t.ID, err)
	}
	v, err := t.DecodeVec(share)
	a.share = v
	return a, err
}

// verdict is one report's outcome at one aggregator.
type verdict struct {
	id       []byte
	accepted bool
	reason   string
}

// commitJob records a job's verdicts and adds its output shares to the
// aggregate in one transaction; a report already judged is skipped (the
// replay check) and reported in the returned set.
func (s *store) commitJob(ctx context.Context, t *dap.Task, vs []verdict, outs []dap.Vec) (dup map[string]bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	defer tx.Rollback()
	var collected bool
	if err := tx.QueryRowContext(ctx, `SELECT collected FROM tasks WHERE id = ?`, t.ID).Scan(&collected); err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	if collected {
		return nil, fmt.Errorf("%w: task %q is collected; no more reports", dap.ErrInvalid, t.ID)
	}
	a, err := s.aggregate(ctx, tx, t)
	if err != nil {
		return nil, err
	}
	dup = map[string]bool{}
	for i, v := range vs {
		res, err := tx.ExecContext(ctx, `INSERT INTO verdicts (task_id, report_id, accepted, reason) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			t.ID, v.id, v.accepted, v.reason)
		if err != nil {
			return nil, fmt.Errorf("dap store: verdict: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			dup[string(v.id)] = true
			continue
		}
		// The leader drops the report's shares once judged (as DAP
		// aggregators do): only the aggregate share remains.
		if _, err := tx.ExecContext(ctx, `UPDATE reports SET body = X'' WHERE task_id = ? AND report_id = ?`, t.ID, v.id); err != nil {
			return nil, fmt.Errorf("dap store: dropping shares: %w", err)
		}
		if v.accepted {
			a.share.AddAssign(outs[i])
			a.count++
			xorChecksum(a.checksum, v.id)
		}
	}
	b, err := dap.EncodeVec(a.share)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE aggregates SET share = ?, count = ?, checksum = ? WHERE task_id = ?`, b, a.count, a.checksum, t.ID); err != nil {
		return nil, fmt.Errorf("dap store: aggregate: %w", err)
	}
	return dup, tx.Commit()
}

// collect closes the task and returns its noised share: noised once (by
// noise) and stored, so asking again returns the same share and never a
// second independent noising of the same sum.
func (s *store) collect(ctx context.Context, t *dap.Task, noise func(dap.Vec)) (aggregate, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return aggregate{}, fmt.Errorf("dap store: %w", err)
	}
	defer tx.Rollback()
	a, err := s.aggregate(ctx, tx, t)
	if err != nil {
		return a, err
	}
	if a.noised != nil {
		return a, nil
	}
	if a.count < t.MinReports {
		return a, fmt.Errorf("%w: task %q has %d valid reports, fewer than its minimum %d", dap.ErrInvalid, t.ID, a.count, t.MinReports)
	}
	noise(a.share)
	if a.noised, err = dap.EncodeVec(a.share); err != nil {
		return a, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE aggregates SET noised = ? WHERE task_id = ?`, a.noised, t.ID); err != nil {
		return a, fmt.Errorf("dap store: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET collected = 1 WHERE id = ?`, t.ID); err != nil {
		return a, fmt.Errorf("dap store: %w", err)
	}
	return a, tx.Commit()
}

func (s *store) verdicts(ctx context.Context, taskID string) ([]verdict, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT report_id, accepted, reason FROM verdicts WHERE task_id = ?`, taskID)
	if err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	defer rows.Close()
	var out []verdict
	for rows.Next() {
		var v verdict
		if err := rows.Scan(&v.id, &v.accepted, &v.reason); err != nil {
			return nil, fmt.Errorf("dap store: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
