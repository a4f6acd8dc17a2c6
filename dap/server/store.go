package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver (pure Go)

	"github.com/privrec/privrec/dap"
	svcstore "github.com/privrec/privrec/service/store"
)

// schema is one aggregator's database. The leader uses every table; the
// helper has no users or reports (it never sees who contributed, only
// report IDs, in "verdicts"). Columns added since the first version are
// in migrations (applied to an older database on opening).
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
	// jobs: an aggregation job, recorded before it is sent (leader) or
	// with its verdicts (helper). ids is the job's report IDs in order;
	// the helper keeps its answer (response), so a repeated job — the
	// leader retrying after a crash or a lost answer — gets the same
	// answer instead of "replayed". done marks a leader's job whose
	// verdicts are committed.
	`CREATE TABLE IF NOT EXISTS jobs (
		task_id TEXT NOT NULL REFERENCES tasks(id),
		job_id TEXT NOT NULL,
		ids BLOB NOT NULL,
		response BLOB,
		done INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (task_id, job_id))`,
	// task_locks: the lease of the process aggregating or collecting a
	// task (several leader processes may share one database).
	`CREATE TABLE IF NOT EXISTS task_locks (
		task_id TEXT PRIMARY KEY,
		holder TEXT NOT NULL,
		expires_ms INTEGER NOT NULL)`,
	// meta: the database's role and settings fingerprints, checked at
	// every start; the readiness heartbeat.
	`CREATE TABLE IF NOT EXISTS meta (
		key TEXT PRIMARY KEY,
		value TEXT NOT NULL)`,
}

// migrations add the columns a database made by an older privrec lacks:
// table, column, definition.
var migrations = [][3]string{
	// The SHA-256 of the stored report's binary encoding (a retried
	// upload of the same report is acknowledged again, not charged).
	{"reports", "body_hash", "BLOB"},
	// The leader's aggregation job holding the report (NULL: pending).
	{"reports", "job_id", "TEXT"},
	// Collection has begun: no more uploads.
	{"tasks", "closing", "INTEGER NOT NULL DEFAULT 0"},
	// The leader process working on a job, and until when (its claim,
	// renewed while it works; an expired claim is taken over).
	{"jobs", "holder", "TEXT"},
	{"jobs", "expires_ms", "INTEGER"},
}

// sqliteMembers is where an SQLite leader keeps each report's job: a
// narrow table of its own, not the report's row. SQLite rewrites a whole
// row on any UPDATE, so marking a report with its job in reports.job_id
// wrote the report again (4.2 MB for a Gram report: a third of the
// leader's database work per report). PostgreSQL keeps reports.job_id:
// its UPDATE leaves a stored report's large value where it is, and the
// claim of pending reports by several leader processes locks their rows
// (FOR UPDATE SKIP LOCKED).
var sqliteMembers = []string{
	`CREATE TABLE IF NOT EXISTS report_jobs (
		task_id TEXT NOT NULL,
		report_id BLOB NOT NULL,
		job_id TEXT,
		PRIMARY KEY (task_id, report_id)) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS report_jobs_pending ON report_jobs (task_id, job_id, report_id)`,
	`DROP INDEX IF EXISTS reports_pending`, // PostgreSQL's (postgresOnly)
}

// schemaVersion is recorded in meta; a database of a later version is
// refused (this privrec does not know its tables). 4: an SQLite leader
// keeps its reports' jobs in report_jobs (an older privrec would not
// record a new upload there).
const schemaVersion = 4

// StoreMode says how New treats the database file.
type StoreMode int

const (
	// OpenOrCreate opens the database, making it if missing (tests and
	// in-process aggregators).
	OpenOrCreate StoreMode = iota
	// OpenExisting requires the aggregator's database to be there: a
	// missing or empty file, or one of another role or made with other
	// keys, is refused (privrec serve --role without --create).
	OpenExisting
	// CreateNew makes a new database; an existing one is refused
	// (privrec serve --role --create).
	CreateNew
)

// Errors of opening a store (privrec serve --role names what to do).
var (
	ErrNoDatabase = svcstore.ErrNoCollection
	ErrDamaged    = svcstore.ErrDamaged
	ErrExists     = errors.New("the aggregator database exists already")
	ErrMismatch   = errors.New("the aggregator database was made with other settings")
)

// store is an aggregator's database: an SQLite file (modernc.org/sqlite,
// WAL, synchronous=FULL as the service's store: a committed verdict or
// charge is on disk when Commit returns; writes go through one
// connection) or a PostgreSQL database (pgx; several leader processes
// may share it, rows locked where a transaction reads what it updates).
type store struct {
	db *sqlDB
	d  svcstore.Dialect
	// path is the SQLite file ("" on PostgreSQL: no local file system to
	// watch); name names the database in messages (the URL without its
	// password).
	path, name string
	// seq orders rows by insertion: SQLite's rowid, a seq column on
	// PostgreSQL.
	seq string
	// members is the table holding each report's aggregation job
	// (job_id, NULL while pending) by task_id and report_id: report_jobs
	// on SQLite, reports itself on PostgreSQL (sqliteMembers).
	members string
}

// settings are what a database is bound to: its role and the
// fingerprints of its HPKE key and verification secret (a restart with
// another key could not open the shares it holds; with another secret
// every proof would fail).
type settings map[string]string

// openStore opens the database named by db: a postgres:// or
// postgresql:// URL, else an SQLite file (an optional sqlite: prefix
// dropped).
func openStore(ctx context.Context, db string, mode StoreMode, want settings) (*store, error) {
	if svcstore.IsPostgres(db) {
		return openPostgres(ctx, db, mode, want)
	}
	path := strings.TrimPrefix(db, "sqlite:")
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("dap store: SQLite file name %q may not contain ? or #", path)
	}
	existing, err := svcstore.CheckSQLiteFile(path, mode != OpenExisting)
	if err != nil {
		return nil, err
	}
	if existing && mode == CreateNew {
		return nil, fmt.Errorf("%w: %s", ErrExists, path)
	}
	// mmap_size: reading a stored report (hundreds of kB to MB in
	// overflow pages) is a memory copy, not a pread per page.
	sdb, err := sql.Open("sqlite", path+"?_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate&_pragma=mmap_size(1073741824)")
	if err != nil {
		return nil, fmt.Errorf("dap store: opening %s: %w", path, err)
	}
	sdb.SetMaxOpenConns(1)
	st := &store{db: &sqlDB{db: sdb, d: svcstore.SQLite, stmts: newStmtCache()}, d: svcstore.SQLite, path: path, name: path, seq: "rowid", members: "report_jobs"}
	if existing {
		if err := svcstore.QuickCheck(ctx, sdb, path); err != nil {
			sdb.Close()
			return nil, err
		}
	} else if err := st.pageSize(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := st.init(ctx, mode, want); err != nil {
		sdb.Close()
		return nil, err
	}
	return st, nil
}

// openPostgres opens an aggregator's PostgreSQL database (its tables in
// the URL's search_path schema, else public).
func openPostgres(ctx context.Context, url string, mode StoreMode, want settings) (*store, error) {
	pdb, err := svcstore.ConnectPostgres(ctx, url, 16)
	if err != nil {
		return nil, err
	}
	st := &store{db: &sqlDB{db: pdb, d: svcstore.Postgres}, d: svcstore.Postgres, name: svcstore.Redact(url), seq: "seq", members: "reports"}
	if err := st.init(ctx, mode, want); err != nil {
		pdb.Close()
		return nil, err
	}
	return st, nil
}

// pageSize gives a new SQLite database 16 KiB pages: a leader's row is
// its prepared report (60–420 kB at MovieLens-1M's catalogue), a few to
// a few dozen pages, while the small rows an upload or a job also
// touches (ledger, indexes, report_jobs, verdicts) cost a whole page each
// in the write-ahead log at 64 KiB, the size chosen when rows were the
// 0.5–4 MB reports themselves (CPU profiles of BenchmarkDAPCapacity's
// leader, 241 counts uploads: its upload commits 0.50 s at 64 KiB, 0.40 s
// at 16 KiB). The page size is fixed once the database is in
// WAL mode, so it is set in rollback mode and the file rebuilt (it is
// empty); databases made before keep theirs.
func (s *store) pageSize(ctx context.Context) error {
	for _, q := range []string{`PRAGMA journal_mode = DELETE`, `PRAGMA page_size = 16384`, `VACUUM`, `PRAGMA journal_mode = WAL`} {
		if _, err := s.db.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("dap store: %s: %s: %w", s.name, q, err)
		}
	}
	return nil
}

// postgresOnly are the schema's additions on PostgreSQL: the insertion
// order SQLite keeps as rowid, and reports stored as they come (their
// shares are random bytes: compressing them is CPU for nothing).
var postgresOnly = []string{
	`ALTER TABLE jobs ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED ALWAYS AS IDENTITY`,
	`ALTER TABLE models ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED ALWAYS AS IDENTITY`,
	`ALTER TABLE reports ALTER COLUMN body SET STORAGE EXTERNAL`,
	// A task's pending reports (no job yet) in report-ID order, read from
	// the index alone: a scan of the reports would read through each
	// large row to reach its job_id.
	`CREATE INDEX IF NOT EXISTS reports_pending ON reports (task_id, job_id, report_id)`,
}

// init checks the database (role, settings, schema version; a missing
// one needs CreateNew or OpenOrCreate, an existing one is refused to
// CreateNew), brings its schema up to date and records the settings, in
// one transaction (on PostgreSQL under an advisory lock, so leader
// processes starting together make the tables once).
func (s *store) init(ctx context.Context, mode StoreMode, want settings) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dap store: %s: %w", s.name, err)
	}
	defer tx.Rollback()
	if s.d.Postgres() {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7250002)`); err != nil {
			return fmt.Errorf("dap store: %s: %w", s.name, err)
		}
	}
	if err := s.checkExisting(ctx, tx, mode); err != nil {
		return err
	}
	if err := s.makeSchema(ctx, tx); err != nil {
		return err
	}
	if err := s.checkSettings(ctx, tx, want); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dap store: %s: %w", s.name, err)
	}
	return nil
}

// checkExisting refuses a database without an aggregator's tables
// unless one is to be made, and one with them when a new one is.
func (s *store) checkExisting(ctx context.Context, tx *sqlTx, mode StoreMode) error {
	has, err := s.d.HasTable(ctx, tx, "tasks")
	if err != nil {
		return err
	}
	switch {
	case has && mode == CreateNew:
		return fmt.Errorf("%w: %s", ErrExists, s.name)
	case !has && mode == OpenExisting && s.d.Postgres():
		return fmt.Errorf("%w: %s has no aggregator's tables in its schema (a mistyped --db, or a missing search_path?)", ErrNoDatabase, s.name)
	case !has && mode == OpenExisting:
		return fmt.Errorf("%w: %s is an SQLite file without an aggregator's tables (a mistyped --db?)", ErrNoDatabase, s.name)
	case !has && s.d.Postgres():
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n); err != nil {
			return fmt.Errorf("dap store: %s: %w", s.name, err)
		}
		if n > 0 {
			return fmt.Errorf("dap store: %s: its schema holds %d other tables and none of an aggregator's; make the aggregator's database in an empty schema of its own (search_path=SCHEMA in the URL)", s.name, n)
		}
	}
	return nil
}

// makeSchema makes the tables and adds the columns a database made by an
// older privrec lacks.
func (s *store) makeSchema(ctx context.Context, tx *sqlTx) error {
	for _, q := range schema {
		if _, err := tx.ExecContext(ctx, s.d.DDL(q)); err != nil {
			return fmt.Errorf("dap store: %s: schema: %w", s.name, err)
		}
	}
	for _, m := range migrations {
		has, err := s.d.HasColumn(ctx, tx, m[0], m[1])
		if err != nil {
			return err
		}
		if has {
			continue
		}
		if _, err := tx.ExecContext(ctx, s.d.DDL(`ALTER TABLE `+m[0]+` ADD COLUMN `+m[1]+` `+m[2])); err != nil {
			return fmt.Errorf("dap store: %s: adding %s.%s: %w", s.name, m[0], m[1], err)
		}
	}
	if s.d.Postgres() {
		for _, q := range postgresOnly {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("dap store: %s: schema: %w", s.name, err)
			}
		}
		return nil
	}
	return s.makeMembers(ctx, tx)
}

// makeMembers makes SQLite's report_jobs; a database made before it has
// its reports' jobs copied over from reports.job_id.
func (s *store) makeMembers(ctx context.Context, tx *sqlTx) error {
	has, err := s.d.HasTable(ctx, tx, "report_jobs")
	if err != nil {
		return err
	}
	for _, q := range sqliteMembers {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("dap store: %s: schema: %w", s.name, err)
		}
	}
	if has {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO report_jobs (task_id, report_id, job_id) SELECT task_id, report_id, job_id FROM reports`); err != nil {
		return fmt.Errorf("dap store: %s: moving the reports' jobs to report_jobs: %w", s.name, err)
	}
	return nil
}

// checkSettings refuses a database of a later schema version or made
// with other settings, and records the settings.
func (s *store) checkSettings(ctx context.Context, tx *sqlTx, want settings) error {
	have, err := s.meta(ctx, tx)
	if err != nil {
		return err
	}
	if v, ok := have["schema_version"]; ok && v > fmt.Sprint(schemaVersion) {
		return fmt.Errorf("%w: %s has schema version %s; this privrec knows %d (upgrade privrec)", ErrMismatch, s.name, v, schemaVersion)
	}
	want = maps.Clone(want)
	if want == nil {
		want = settings{}
	}
	for k, v := range want {
		if old, ok := have[k]; ok && old != v {
			return fmt.Errorf("%w: %s was made with %s %s, this start has %s (the --role, --key-file and --secret-file must be the ones it was made with)", ErrMismatch, s.name, k, old, v)
		}
	}
	want["schema_version"] = fmt.Sprint(schemaVersion)
	for k, v := range want {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, k, v); err != nil {
			return fmt.Errorf("dap store: %s: %w", s.name, err)
		}
	}
	return nil
}

func (s *store) meta(ctx context.Context, tx *sqlTx) (settings, error) {
	rows, err := tx.QueryContext(ctx, `SELECT key, value FROM meta WHERE key != 'heartbeat'`)
	if err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	defer rows.Close()
	out := settings{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("dap store: %w", err)
		}
		out[k] = v
	}
	return out, rows.Err()
}

// heartbeat commits a write, as a report's is committed (readiness).
func (s *store) heartbeat(ctx context.Context, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('heartbeat', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("dap store: heartbeat: %w", err)
	}
	return nil
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

// collected is whether a task is collected (a task known to exist).
func (s *store) collected(ctx context.Context, id string) (bool, error) {
	var collected bool
	if err := s.db.QueryRowContext(ctx, `SELECT collected FROM tasks WHERE id = ?`, id).Scan(&collected); err != nil {
		return false, fmt.Errorf("dap store: task %q: %w", id, err)
	}
	return collected, nil
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

func (s *store) aggregate(ctx context.Context, q querier, t *dap.Task) (aggregate, error) {
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

// applyVerdicts records a job's verdicts and adds its accepted output
// shares to the aggregate, in tx; a report already judged is skipped (the
// replay check) and reported in the returned set. The leader's report
// shares are dropped once judged (as DAP aggregators do): only the
// aggregate share remains.
func (s *store) applyVerdicts(ctx context.Context, tx *sqlTx, t *dap.Task, vs []verdict, outs []dap.Vec) (dup map[string]bool, err error) {
	var collected bool
	if err := tx.QueryRowContext(ctx, `SELECT collected FROM tasks WHERE id = ?`, t.ID).Scan(&collected); err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	if collected {
		return nil, fmt.Errorf("%w: task %q is collected; no more reports", errConflict, t.ID)
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
		if _, err := tx.ExecContext(ctx, `UPDATE reports SET body = ? WHERE task_id = ? AND report_id = ?`, []byte{}, t.ID, v.id); err != nil {
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
	return dup, nil
}

// storedJob is a job the helper answered already: its report IDs and
// its answer (nil when there is none).
func (s *store) storedJob(ctx context.Context, q querier, taskID, jobID string) (ids, response []byte, err error) {
	err = q.QueryRowContext(ctx, `SELECT ids, response FROM jobs WHERE task_id = ? AND job_id = ?`, taskID, jobID).Scan(&ids, &response)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dap store: job: %w", err)
	}
	if ids == nil {
		ids = []byte{} // a stored job: nil means none (an empty BLOB scans as nil)
	}
	return ids, response, nil
}

// lockAggregate locks a task's aggregate row until tx ends: on
// PostgreSQL the transactions that add to it or noise it take turns
// (from every process sharing the database); SQLite's write transaction
// is exclusive already.
func (s *store) lockAggregate(ctx context.Context, tx *sqlTx, taskID string) error {
	if !s.d.Postgres() {
		return nil
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT count FROM aggregates WHERE task_id = ? FOR UPDATE`, taskID).Scan(&n); err != nil {
		return fmt.Errorf("dap store: aggregate of %q: %w", taskID, err)
	}
	return nil
}

// forShare is the clause of a read that a concurrent update of the row
// must wait for (PostgreSQL; SQLite's write transaction is exclusive).
func (s *store) forShare() string {
	if s.d.Postgres() {
		return " FOR SHARE"
	}
	return ""
}

type querier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// commitHelperJob records the helper's verdicts of job jobID (report IDs
// ids, in order), its aggregate and its answer in one transaction and
// returns the answer: respond builds it from the reports found replayed.
// A job answered before (by a concurrent or earlier request) is not
// applied again: its stored answer is returned.
func (s *store) commitHelperJob(ctx context.Context, t *dap.Task, jobID string, ids []byte, vs []verdict, outs []dap.Vec, respond func(dup map[string]bool) ([]byte, error)) ([]byte, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	defer tx.Rollback()
	if err := s.lockAggregate(ctx, tx, t.ID); err != nil {
		return nil, err
	}
	oldIDs, old, err := s.storedJob(ctx, tx, t.ID, jobID)
	if err != nil {
		return nil, err
	}
	if oldIDs != nil {
		if !bytes.Equal(oldIDs, ids) {
			return nil, fmt.Errorf("%w: aggregation job %s of task %q was sent before with other reports", errConflict, jobID, t.ID)
		}
		return old, nil
	}
	dup, err := s.applyVerdicts(ctx, tx, t, vs, outs)
	if err != nil {
		return nil, err
	}
	resp, err := respond(dup)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (task_id, job_id, ids, response, done) VALUES (?, ?, ?, ?, 1)`, t.ID, jobID, ids, resp); err != nil {
		return nil, fmt.Errorf("dap store: job: %w", err)
	}
	return resp, tx.Commit()
}

// commitLeaderJob records the leader's verdicts of its job jobID and its
// aggregate, and marks the job done, in one transaction. A job done
// already is not applied again: whichever leader process commits a job
// first (one whose claim ran out while it worked, or the one that took
// the job over: both send the same job and get the helper's one answer),
// the other's commit changes nothing.
func (s *store) commitLeaderJob(ctx context.Context, t *dap.Task, jobID string, vs []verdict, outs []dap.Vec) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dap store: %w", err)
	}
	defer tx.Rollback()
	if err := s.lockAggregate(ctx, tx, t.ID); err != nil {
		return err
	}
	var done bool
	if err := tx.QueryRowContext(ctx, `SELECT done FROM jobs WHERE task_id = ? AND job_id = ?`, t.ID, jobID).Scan(&done); err != nil {
		return fmt.Errorf("dap store: job %s: %w", jobID, err)
	}
	if done {
		return nil
	}
	if _, err := s.applyVerdicts(ctx, tx, t, vs, outs); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET done = 1 WHERE task_id = ? AND job_id = ?`, t.ID, jobID); err != nil {
		return fmt.Errorf("dap store: job: %w", err)
	}
	return tx.Commit()
}

// nextJob claims the leader's next aggregation job of a task for holder
// until the given time: the oldest job recorded but not done whose claim
// ran out or was given up (a crash, an unreachable helper or another
// process's stall interrupted it; it is sent again as it was), else a new
// job of up to limit pending reports, recorded before it is sent. Jobs
// claimed by others are skipped, so several leader processes (or calls)
// work on one task at once, each on its own jobs: on PostgreSQL the rows
// another transaction is claiming are skipped (FOR UPDATE SKIP LOCKED);
// SQLite's write transactions take turns. The reports are in report-ID
// order. An empty jobID means nothing is left to claim (jobs others hold
// may still be running: pending counts them).
func (s *store) nextJob(ctx context.Context, taskID, holder string, limit int, until time.Time) (jobID string, reps []storedReport, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", nil, fmt.Errorf("dap store: %w", err)
	}
	defer tx.Rollback()
	err = tx.QueryRowContext(ctx, `SELECT job_id FROM jobs WHERE task_id = ? AND done = 0 AND (expires_ms IS NULL OR expires_ms < ?)
		ORDER BY `+s.seq+` LIMIT 1`+s.skipLocked(), taskID, time.Now().UnixMilli()).Scan(&jobID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if jobID, err = s.newJob(ctx, tx, taskID, limit); err != nil || jobID == "" {
			return "", nil, err
		}
	case err != nil:
		return "", nil, fmt.Errorf("dap store: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET holder = ?, expires_ms = ? WHERE task_id = ? AND job_id = ?`, holder, until.UnixMilli(), taskID, jobID); err != nil {
		return "", nil, fmt.Errorf("dap store: claiming job %s: %w", jobID, err)
	}
	if reps, err = s.jobReports(ctx, tx, taskID, jobID); err != nil {
		return "", nil, err
	}
	return jobID, reps, tx.Commit()
}

// jobReports reads a job's reports by their IDs, in the job's order
// (report-ID order): each a lookup by primary key, not a scan of the
// task's reports (which would read through every large row to its job).
func (s *store) jobReports(ctx context.Context, tx *sqlTx, taskID, jobID string) ([]storedReport, error) {
	var ids []byte
	if err := tx.QueryRowContext(ctx, `SELECT ids FROM jobs WHERE task_id = ? AND job_id = ?`, taskID, jobID).Scan(&ids); err != nil {
		return nil, fmt.Errorf("dap store: job %s: %w", jobID, err)
	}
	if len(ids)%dap.ReportIDSize != 0 {
		return nil, fmt.Errorf("dap store: job %s: its report list has %d bytes, not a multiple of %d", jobID, len(ids), dap.ReportIDSize)
	}
	reps := make([]storedReport, 0, len(ids)/dap.ReportIDSize)
	for i := 0; i < len(ids); i += dap.ReportIDSize {
		var b []byte
		if err := tx.QueryRowContext(ctx, `SELECT body FROM reports WHERE task_id = ? AND report_id = ?`, taskID, ids[i:i+dap.ReportIDSize]).Scan(&b); err != nil {
			return nil, fmt.Errorf("dap store: job %s: report %d: %w", jobID, i/dap.ReportIDSize, err)
		}
		rep, err := decodeStoredReport(b)
		if err != nil {
			return nil, err
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// skipLocked makes a claiming read pass over rows another transaction is
// claiming (PostgreSQL; SQLite's write transaction is exclusive).
func (s *store) skipLocked() string {
	if s.d.Postgres() {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// renewJob extends holder's claim of a job it is working on; false when
// the claim was lost (it ran out and another process took the job, or
// the job is done).
func (s *store) renewJob(ctx context.Context, taskID, jobID, holder string, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE jobs SET expires_ms = ? WHERE task_id = ? AND job_id = ? AND holder = ? AND done = 0`, until.UnixMilli(), taskID, jobID, holder)
	if err != nil {
		return false, fmt.Errorf("dap store: claim of job %s: %w", jobID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// releaseJob gives holder's claim of an unfinished job up (its helper
// call failed): the next aggregation takes it at once.
func (s *store) releaseJob(ctx context.Context, taskID, jobID, holder string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE jobs SET expires_ms = 0 WHERE task_id = ? AND job_id = ? AND holder = ? AND done = 0`, taskID, jobID, holder); err != nil {
		return fmt.Errorf("dap store: claim of job %s: %w", jobID, err)
	}
	return nil
}

// pending counts a task's reports not yet judged: in jobs not done (held
// by some process or not) and in none yet.
func (s *store) pending(ctx context.Context, taskID string) (int64, error) {
	var inJobs, loose int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM `+s.members+` r JOIN jobs j ON j.task_id = r.task_id AND j.job_id = r.job_id WHERE r.task_id = ? AND j.done = 0`, taskID).Scan(&inJobs); err != nil {
		return 0, fmt.Errorf("dap store: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM `+s.members+` r WHERE task_id = ? AND job_id IS NULL AND NOT EXISTS
		(SELECT 1 FROM verdicts v WHERE v.task_id = r.task_id AND v.report_id = r.report_id)`, taskID).Scan(&loose); err != nil {
		return 0, fmt.Errorf("dap store: %w", err)
	}
	return inJobs + loose, nil
}

// addPending records a new report as pending (no job yet), in the
// upload's transaction: a row of report_jobs on SQLite; on PostgreSQL
// the report's own row, its job_id NULL, says so already.
func (s *store) addPending(ctx context.Context, tx *sqlTx, taskID string, id []byte) error {
	if s.members == "reports" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+s.members+` (task_id, report_id) VALUES (?, ?)`, taskID, id); err != nil {
		return fmt.Errorf("dap store: report: %w", err)
	}
	return nil
}

// newJob records a job of up to limit pending reports (none: ""),
// marking each with the job in s.members.
func (s *store) newJob(ctx context.Context, tx *sqlTx, taskID string, limit int) (string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT report_id FROM `+s.members+` r WHERE task_id = ? AND job_id IS NULL AND NOT EXISTS
		(SELECT 1 FROM verdicts v WHERE v.task_id = r.task_id AND v.report_id = r.report_id) ORDER BY report_id LIMIT ?`+s.skipLocked(), taskID, limit)
	if err != nil {
		return "", fmt.Errorf("dap store: %w", err)
	}
	var ids [][]byte
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return "", fmt.Errorf("dap store: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return "", err
	}
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	jobID := base64.RawURLEncoding.EncodeToString(rnd[:])
	if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (task_id, job_id, ids, expires_ms) VALUES (?, ?, ?, 0)`, taskID, jobID, bytes.Join(ids, nil)); err != nil {
		return "", fmt.Errorf("dap store: job: %w", err)
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE `+s.members+` SET job_id = ? WHERE task_id = ? AND report_id = ?`, jobID, taskID, id); err != nil {
			return "", fmt.Errorf("dap store: job: %w", err)
		}
	}
	return jobID, nil
}

// errLocked: another process holds the task's lease.
var errLocked = errors.New("the task is being aggregated or collected by another leader process")

// lease takes (or renews) the lease of a task for holder until
// now + ttl; false when another holder's lease is still running.
func (s *store) lease(ctx context.Context, taskID, holder string, now time.Time, ttl time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO task_locks (task_id, holder, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (task_id) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
		WHERE task_locks.holder = excluded.holder OR task_locks.expires_ms < ?`, taskID, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("dap store: lease of task %q: %w", taskID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// unlease gives the lease up.
func (s *store) unlease(ctx context.Context, taskID, holder string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM task_locks WHERE task_id = ? AND holder = ?`, taskID, holder); err != nil {
		return fmt.Errorf("dap store: lease of task %q: %w", taskID, err)
	}
	return nil
}

// holds fences a write: it fails unless holder's lease of the task is
// still running (a process that lost its lease while stalled must not
// commit beside the one that took it over).
func holds(ctx context.Context, q querier, taskID, holder string) error {
	var exp int64
	err := q.QueryRowContext(ctx, `SELECT expires_ms FROM task_locks WHERE task_id = ? AND holder = ?`, taskID, holder).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && exp < time.Now().UnixMilli()) {
		return fmt.Errorf("%w: this process's lease of task %q ran out", errLocked, taskID)
	}
	if err != nil {
		return fmt.Errorf("dap store: lease: %w", err)
	}
	return nil
}

// close marks a task closing: uploads are refused from now on, so the
// aggregation that follows sees every report the leader acknowledged.
func (s *store) close(ctx context.Context, taskID string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE tasks SET closing = 1 WHERE id = ?`, taskID); err != nil {
		return fmt.Errorf("dap store: closing task %q: %w", taskID, err)
	}
	return nil
}

// collect closes the task and returns its noised share: noised once (by
// noise) and stored, so asking again returns the same share and never a
// second independent noising of the same sum. A leader's collection
// (holder not empty) commits only while it holds the task's lease.
// check, when set, vets the aggregate first (the helper's batch check).
func (s *store) collect(ctx context.Context, t *dap.Task, holder string, check func(aggregate) error, noise func(dap.Vec)) (aggregate, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return aggregate{}, fmt.Errorf("dap store: %w", err)
	}
	defer tx.Rollback()
	if err := s.lockAggregate(ctx, tx, t.ID); err != nil {
		return aggregate{}, err
	}
	if holder != "" {
		if err := holds(ctx, tx, t.ID, holder); err != nil {
			return aggregate{}, err
		}
	}
	a, err := s.aggregate(ctx, tx, t)
	if err != nil {
		return a, err
	}
	if check != nil {
		if err := check(a); err != nil {
			return a, err
		}
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
