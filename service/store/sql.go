package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// dialect holds what differs between the databases.
type dialect struct {
	kind string
	// dollar: placeholders are $1, $2, … (PostgreSQL) instead of ?.
	dollar bool
}

// rebind turns ? placeholders into $n for PostgreSQL.
func (d dialect) rebind(q string) string {
	if !d.dollar {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// The statements every write transaction uses, prepared once.
const (
	qReport = `SELECT seq, user_id, client_id, body_hash, epsilon_nano, spent_after_nano, received_ms, vals, collection_version, mean_report
		FROM reports WHERE user_id = ? AND client_id = ?`
	qUserCols   = `SELECT id, budget_nano, spent_nano, reports, created_ms, token_expires_ms, token_revoked_ms FROM users`
	qUser       = qUserCols + ` WHERE id = ?`
	qCreateUser = `INSERT INTO users (id, token_hash, budget_nano, spent_nano, reports, created_ms, token_expires_ms) VALUES (?, ?, ?, 0, 0, ?, ?)`
)

// chunkSizes are the sizes of the prepared batch statements: a batch of
// n is run in chunks of these sizes (n's binary digits), so that no
// statement is parsed per batch.
var chunkSizes = []int{256, 128, 64, 32, 16, 8, 4, 2, 1}

// chunks splits n into chunk sizes, largest first.
func chunks(n int) []int {
	var out []int
	for _, c := range chunkSizes {
		for n >= c {
			out = append(out, c)
			n -= c
		}
	}
	return out
}

// paddedChunks splits n for a statement that repeated arguments do not
// change (an IN list): each chunk is the smallest prepared size holding
// what is left, so a batch of up to 256 takes one statement rather than
// one per binary digit; the caller repeats its last argument to fill it.
func paddedChunks(n int) []int {
	var out []int
	for n > 0 {
		c := chunkSizes[0]
		for _, s := range chunkSizes { // descending: the last that holds n is the smallest
			if s >= n {
				c = s
			}
		}
		out = append(out, c)
		n -= min(n, c)
	}
	return out
}

// batchStmts are the set-based statements of SubmitBatch for one chunk
// size.
type batchStmts struct {
	ledgers, lookup, insert, update *sql.Stmt
}

// sqlStore implements Store over database/sql.
type sqlStore struct {
	d dialect
	// w runs write transactions; r serves reads (the same pool for
	// PostgreSQL; a read-only pool for SQLite, whose WAL lets readers run
	// beside the single writer).
	w, r *sql.DB
	// prepared statements on w.
	report, user, createUser *sql.Stmt
	batch                    map[int]*batchStmts
}

func newSQLStore(ctx context.Context, d dialect, w, r *sql.DB, create bool) (*sqlStore, error) {
	s := &sqlStore{d: d, w: w, r: r, batch: map[int]*batchStmts{}}
	v, err := schemaVersion(ctx, w, d)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		other, err := foreignTables(ctx, w, d)
		if err != nil {
			return nil, err
		}
		if len(other) > 0 {
			return nil, fmt.Errorf("%w: the database holds other tables (%s) and none of privrec's; a collection is created only in an empty database or schema", ErrNoCollection, strings.Join(other[:min(len(other), 5)], ", "))
		}
	}
	recorded := false
	if v > 0 {
		if recorded, err = s.hasConfig(ctx); err != nil {
			return nil, err
		}
	}
	switch {
	case create && recorded:
		return nil, fmt.Errorf("%w: the database records a collection already; open it without creating", ErrExists)
	case !create && v == 0:
		return nil, fmt.Errorf("%w: the database has none of privrec's tables", ErrNoCollection)
	case !create && !recorded:
		return nil, fmt.Errorf("%w: the database has privrec's tables but no collection was ever recorded in it", ErrNoCollection)
	}
	if _, err := migrate(ctx, w, d, NowMS()); err != nil {
		return nil, err
	}
	prep := func(q string) (*sql.Stmt, error) {
		st, err := w.PrepareContext(ctx, d.rebind(q))
		if err != nil {
			return nil, fmt.Errorf("store: preparing statements: %w", err)
		}
		return st, nil
	}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{{&s.report, qReport}, {&s.user, qUser}, {&s.createUser, qCreateUser}} {
		if *p.dst, err = prep(p.q); err != nil {
			s.closeStmts()
			return nil, err
		}
	}
	lock := ""
	if d.dollar {
		lock = " ORDER BY id FOR UPDATE"
	}
	// In SQLite a failing row of a multi-row INSERT or UPDATE would undo
	// just that statement, for which SQLite keeps a statement journal: a
	// copy of every page the statement touches. A batch that fails is rolled
	// back whole and retried report by report (service's batcher), so
	// OR ROLLBACK — end the transaction at once — loses nothing and
	// needs no statement journal.
	insertVerb, updateVerb := "INSERT", "UPDATE"
	if !d.dollar {
		insertVerb, updateVerb = "INSERT OR ROLLBACK", "UPDATE OR ROLLBACK"
	}
	for _, n := range chunkSizes {
		b := &batchStmts{}
		s.batch[n] = b
		for _, p := range []struct {
			dst **sql.Stmt
			q   string
		}{
			// A user who left (deleted_ms > 0) is no user: a report
			// racing her deletion is refused.
			{&b.ledgers, "SELECT id, spent_nano, budget_nano, reports FROM users WHERE deleted_ms = 0 AND id IN (" + placeholders(n, 1) + ")" + lock},
			{&b.lookup, `SELECT seq, user_id, client_id, body_hash, epsilon_nano, spent_after_nano, received_ms, vals, collection_version, mean_report
				FROM reports WHERE (user_id, client_id) IN (VALUES ` + placeholders(n, 2) + `)`},
			{&b.insert, insertVerb + ` INTO reports (user_id, client_id, body_hash, epsilon_nano, spent_after_nano, received_ms, vals, collection_version, mean_report)
				VALUES ` + placeholders(n, 9) + ` RETURNING user_id, client_id, seq`},
			{&b.update, updateVerb + ` users SET spent_nano = v.column2, reports = v.column3 FROM (VALUES ` +
				strings.TrimSuffix(strings.Repeat("(?, CAST(? AS BIGINT), CAST(? AS BIGINT)), ", n), ", ") + `) AS v WHERE users.id = v.column1`},
		} {
			if *p.dst, err = prep(p.q); err != nil {
				s.closeStmts()
				return nil, err
			}
		}
	}
	return s, nil
}

func (s *sqlStore) closeStmts() []error {
	var errs []error
	all := []*sql.Stmt{s.report, s.user, s.createUser}
	for _, b := range s.batch {
		all = append(all, b.ledgers, b.lookup, b.insert, b.update)
	}
	for _, st := range all {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errs
}

func (s *sqlStore) Kind() string { return s.d.kind }

func (s *sqlStore) q(q string) string { return s.d.rebind(q) }

func (s *sqlStore) Close() error {
	errs := s.closeStmts()
	errs = append(errs, s.w.Close())
	if s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	return errors.Join(errs...)
}

func (s *sqlStore) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

func (s *sqlStore) Heartbeat(ctx context.Context, nowMS int64) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: heartbeat: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO heartbeat (id, beat_ms, beats) VALUES (1, ?, 1)
		ON CONFLICT (id) DO UPDATE SET beat_ms = excluded.beat_ms, beats = heartbeat.beats + 1`), nowMS); err != nil {
		return fmt.Errorf("store: heartbeat: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: heartbeat: commit: %w", err)
	}
	return nil
}

func (s *sqlStore) Init(ctx context.Context, config []byte) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: init: %w", err)
	}
	defer tx.Rollback()
	var stored string
	err = tx.QueryRowContext(ctx, s.q(`SELECT value FROM meta WHERE key = ?`), "config").Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO meta (key, value) VALUES (?, ?)`), "config", string(config)); err != nil {
			return fmt.Errorf("store: init: %w", err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO collection_versions (version, config, created_ms) VALUES (1, ?, ?)`), string(config), NowMS()); err != nil {
			return fmt.Errorf("store: init: %w", err)
		}
	case err != nil:
		return fmt.Errorf("store: init: %w", err)
	case stored != string(config):
		return ErrConfigMismatch
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: init: %w", err)
	}
	return nil
}

// hasConfig reports whether a collection is recorded.
func (s *sqlStore) hasConfig(ctx context.Context) (bool, error) {
	ok, err := hasTable(ctx, s.w, s.d, "meta")
	if err != nil || !ok {
		return false, err
	}
	var n int
	if err := s.w.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM meta WHERE key = ?`), "config").Scan(&n); err != nil {
		return false, fmt.Errorf("store: reading the configuration: %w", err)
	}
	return n > 0, nil
}

func (s *sqlStore) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.r, s.d)
}

func (s *sqlStore) Evolve(ctx context.Context, old, config []byte, nowMS int64) (int, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: new collection version: %w", err)
	}
	defer tx.Rollback()
	var stored string
	if err := tx.QueryRowContext(ctx, s.q(`SELECT value FROM meta WHERE key = ?`+s.lockRow()), "config").Scan(&stored); err != nil {
		return 0, fmt.Errorf("store: new collection version: %w", err)
	}
	if stored != string(old) {
		return 0, ErrConfigMismatch
	}
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) + 1 FROM collection_versions`).Scan(&v); err != nil {
		return 0, fmt.Errorf("store: new collection version: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO collection_versions (version, config, created_ms) VALUES (?, ?, ?)`), v, string(config), nowMS); err != nil {
		return 0, fmt.Errorf("store: new collection version: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE meta SET value = ? WHERE key = ?`), string(config), "config"); err != nil {
		return 0, fmt.Errorf("store: new collection version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: new collection version: %w", err)
	}
	return v, nil
}

func (s *sqlStore) CollectionVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM collection_versions`).Scan(&v); err != nil {
		return 0, fmt.Errorf("store: reading the collection version: %w", err)
	}
	return v, nil
}

func (s *sqlStore) Config(ctx context.Context) ([]byte, error) {
	var v string
	err := s.r.QueryRowContext(ctx, s.q(`SELECT value FROM meta WHERE key = ?`), "config").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading the configuration: %w", err)
	}
	return []byte(v), nil
}

// Update runs fn in one transaction. The context of the transaction is
// ctx; the service passes one that outlives any single request, so that a
// client hanging up does not abort the others' batch.
func (s *sqlStore) Update(ctx context.Context, fn func(Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	t := &sqlTx{s: s, tx: tx, ctx: ctx}
	if err := fn(t); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("store: rollback: %w", rerr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

type sqlTx struct {
	s   *sqlStore
	tx  *sql.Tx
	ctx context.Context
}

func (t *sqlTx) CreateUser(ctx context.Context, u NewUser) error {
	if _, err := t.tx.StmtContext(ctx, t.s.createUser).ExecContext(ctx, u.ID, u.TokenHash, u.Budget, u.CreatedMS, u.TokenExpiresMS); err != nil {
		return fmt.Errorf("store: creating user: %w", err)
	}
	return nil
}

// Submit is SubmitBatch of one submission.
func (t *sqlTx) Submit(ctx context.Context, sub Submission) (Result, error) {
	res, err := t.SubmitBatch(ctx, []Submission{sub})
	if err != nil {
		return Result{}, err
	}
	return res[0], nil
}

// SubmitBatch charges and stores a batch of reports in a few statements,
// whatever its size: it locks and reads the ledgers of the batch's users
// (SELECT … FOR UPDATE in PostgreSQL; SQLite's write transaction is
// exclusive), reads any stored report with a repeated client ID, decides
// each submission in batch order in Go — a repeat is answered with the
// original, a charge beyond the budget refused — then inserts the
// accepted reports in one multi-row INSERT and writes the new ledgers in
// one UPDATE. Every writer locks the ledger rows first, so concurrent
// transactions (several servers on one PostgreSQL) serialize per user and
// can never overspend.
func (t *sqlTx) SubmitBatch(ctx context.Context, subs []Submission) ([]Result, error) {
	if len(subs) == 0 {
		return []Result{}, nil
	}
	ids := batchUsers(subs)
	users, err := t.lockLedgers(ctx, ids)
	if err != nil {
		return nil, err
	}
	stored, err := t.storedReports(ctx, subs)
	if err != nil {
		return nil, err
	}
	res, accepted, first := decideBatch(subs, users, stored)
	if err := t.insertReports(ctx, res, accepted, first); err != nil {
		return nil, err
	}
	if err := t.writeLedgers(ctx, ids, users); err != nil {
		return nil, err
	}
	answerRepeats(subs, res)
	return res, nil
}

// batchLedger is a user's ledger as a batch changes it.
type batchLedger struct {
	spent, budget, reports int64
	changed                bool
}

// reportKey names a report: its user and client ID.
type reportKey struct{ user, id string }

// batchUsers is the batch's users, each once, in ID order.
func batchUsers(subs []Submission) []string {
	var ids []string
	seen := map[string]bool{}
	for _, s := range subs {
		if !seen[s.User] {
			seen[s.User] = true
			ids = append(ids, s.User)
		}
	}
	slices.Sort(ids)
	return ids
}

// lockLedgers locks and reads the ledgers of the users ids (in ID order);
// a user without one is absent from the map.
func (t *sqlTx) lockLedgers(ctx context.Context, ids []string) (map[string]*batchLedger, error) {
	users := map[string]*batchLedger{}
	var args []any
	off := 0
	for _, n := range paddedChunks(len(ids)) {
		args = args[:0]
		for k := range n {
			args = append(args, ids[min(off+k, len(ids)-1)])
		}
		off += n
		err := t.queryEach(ctx, t.s.batch[n].ledgers, args, "reading ledgers", func(rows *sql.Rows) error {
			var id string
			l := &batchLedger{}
			if err := rows.Scan(&id, &l.spent, &l.budget, &l.reports); err != nil {
				return fmt.Errorf("store: reading ledgers: %w", err)
			}
			users[id] = l
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return users, nil
}

// storedReports reads the reports already stored under the batch's
// client IDs.
func (t *sqlTx) storedReports(ctx context.Context, subs []Submission) (map[reportKey]Report, error) {
	stored := map[reportKey]Report{}
	var args []any
	off := 0
	for _, n := range paddedChunks(len(subs)) {
		args = args[:0]
		for k := range n {
			s := subs[min(off+k, len(subs)-1)]
			args = append(args, s.User, s.ClientID)
		}
		off += n
		err := t.queryEach(ctx, t.s.batch[n].lookup, args, "looking up client IDs", func(rows *sql.Rows) error {
			r, err := scanReport(rows)
			if err != nil {
				return err
			}
			stored[reportKey{r.User, r.ClientID}] = r
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return stored, nil
}

// decideBatch decides each submission in batch order against the users'
// ledgers (charging them) and the reports stored: its result, the batch
// indices of the reports accepted, and for each accepted report 1 + its
// batch index. A repeat of a report accepted in this batch gets the
// negative Outcome −(1 + the index of the first): answerRepeats fills it
// in after the insert.
func decideBatch(subs []Submission, users map[string]*batchLedger, stored map[reportKey]Report) ([]Result, []int, map[reportKey]int) {
	res := make([]Result, len(subs))
	first := map[reportKey]int{}
	var accepted []int
	for k, s := range subs {
		l := users[s.User]
		kk := reportKey{s.User, s.ClientID}
		switch orig, dup := stored[kk]; {
		case l == nil:
			res[k] = Result{Outcome: NoUser}
		case dup:
			res[k] = repeatOf(s, orig)
			res[k].Spent, res[k].Budget = l.spent, l.budget
		case first[kk] != 0:
			res[k] = Result{Outcome: Outcome(-first[kk])}
		case l.spent+s.Charge > l.budget:
			res[k] = Result{Outcome: OverBudget, Spent: l.spent, Budget: l.budget}
		default:
			l.spent += s.Charge
			l.reports++
			l.changed = true
			res[k] = Result{Outcome: Stored, Spent: l.spent, Budget: l.budget, Report: Report{User: s.User, ClientID: s.ClientID,
				BodyHash: s.BodyHash, Charge: s.Charge, SpentAfter: l.spent, Received: s.Received, Values: s.Values, Version: s.Version, Mean: s.Mean}}
			first[kk] = k + 1
			accepted = append(accepted, k)
		}
	}
	return res, accepted, first
}

// insertReports stores the accepted reports (res[k] for k in accepted) in
// multi-row inserts and sets the sequence numbers the database gave them.
func (t *sqlTx) insertReports(ctx context.Context, res []Result, accepted []int, first map[reportKey]int) error {
	var args []any
	off := 0
	for _, n := range chunks(len(accepted)) {
		args = args[:0]
		for _, k := range accepted[off : off+n] {
			r := res[k].Report
			var mean any // NULL: no mean report
			if r.Mean != nil {
				mean = *r.Mean
			}
			args = append(args, r.User, r.ClientID, r.BodyHash, r.Charge, r.SpentAfter, r.Received, string(r.Values), max(r.Version, 1), mean)
		}
		off += n
		got := 0
		err := t.queryEach(ctx, t.s.batch[n].insert, args, "storing reports", func(rows *sql.Rows) error {
			var kk reportKey
			var seq int64
			if err := rows.Scan(&kk.user, &kk.id, &seq); err != nil {
				return fmt.Errorf("store: storing reports: %w", err)
			}
			res[first[kk]-1].Report.Seq = seq
			got++
			return nil
		})
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("store: stored %d of %d reports", got, n)
		}
	}
	return nil
}

// writeLedgers writes the ledgers the batch changed.
func (t *sqlTx) writeLedgers(ctx context.Context, ids []string, users map[string]*batchLedger) error {
	var changed []string
	for _, id := range ids {
		if l := users[id]; l != nil && l.changed {
			changed = append(changed, id)
		}
	}
	// Padded like the reads: a repeated (id, spent, reports) row joins the
	// same user with the same values, and both databases update a row
	// once however many FROM rows match it (and count it once).
	var args []any
	off := 0
	for _, n := range paddedChunks(len(changed)) {
		args = args[:0]
		for k := range n {
			id := changed[min(off+k, len(changed)-1)]
			l := users[id]
			args = append(args, id, l.spent, l.reports)
		}
		want := int64(min(n, len(changed)-off))
		off += n
		r, err := t.tx.StmtContext(ctx, t.s.batch[n].update).ExecContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("store: writing ledgers: %w", err)
		}
		if m, err := r.RowsAffected(); err != nil || m != want {
			return fmt.Errorf("store: wrote %d of %d ledgers (%v)", m, want, err)
		}
	}
	return nil
}

// answerRepeats answers the repeats within the batch with the report
// stored first.
func answerRepeats(subs []Submission, res []Result) {
	for k := range res {
		if o := res[k].Outcome; o < 0 {
			orig := res[-int(o)-1]
			res[k] = repeatOf(subs[k], orig.Report)
			res[k].Spent, res[k].Budget = orig.Spent, orig.Budget
		}
	}
}

// queryEach runs the prepared statement st with args in the transaction
// and calls scan on each row it returns; what names the statement in
// errors.
func (t *sqlTx) queryEach(ctx context.Context, st *sql.Stmt, args []any, what string, scan func(*sql.Rows) error) error {
	rows, err := t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

// placeholders is n groups of k placeholders: "(?, ?), (?, ?)" (k > 1)
// or "?, ?" (k = 1).
func placeholders(n, k int) string {
	one := strings.TrimSuffix(strings.Repeat("?, ", k), ", ")
	if k > 1 {
		one = "(" + one + ")"
	}
	return strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")
}

// repeatOf answers a submission whose client ID is stored already: the
// original when the content is the same, else a conflict.
func repeatOf(sub Submission, orig Report) Result {
	res := Result{Outcome: Duplicate, Report: orig}
	if !bytes.Equal(orig.BodyHash, sub.BodyHash) {
		res.Outcome = Conflict
	}
	return res
}

type scanner interface{ Scan(dst ...any) error }

func scanReport(row scanner) (Report, error) {
	var r Report
	var vals string
	var mean sql.NullFloat64
	err := row.Scan(&r.Seq, &r.User, &r.ClientID, &r.BodyHash, &r.Charge, &r.SpentAfter, &r.Received, &vals, &r.Version, &mean)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("store: reading a report: %w", err)
	}
	r.Values = []byte(vals)
	if mean.Valid {
		r.Mean = &mean.Float64
	}
	return r, nil
}

func scanUser(row scanner) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Budget, &u.Spent, &u.Reports, &u.CreatedMS, &u.TokenExpiresMS, &u.TokenRevokedMS)
	if errors.Is(err, sql.ErrNoRows) {
		return u, ErrNotFound
	}
	if err != nil {
		return u, fmt.Errorf("store: reading a user: %w", err)
	}
	return u, nil
}

func (s *sqlStore) UserByToken(ctx context.Context, h []byte) (User, error) {
	return scanUser(s.r.QueryRowContext(ctx, s.q(qUserCols+` WHERE token_hash = ?`), h))
}

func (s *sqlStore) User(ctx context.Context, id string) (User, error) {
	return scanUser(s.r.QueryRowContext(ctx, s.q(qUser), id))
}

func (s *sqlStore) Report(ctx context.Context, user, clientID string) (Report, error) {
	return scanReport(s.r.QueryRowContext(ctx, s.q(qReport), user, clientID))
}

func (s *sqlStore) Reports(ctx context.Context, user string) ([]Report, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT seq, user_id, client_id, body_hash, epsilon_nano, spent_after_nano, received_ms, vals, collection_version, mean_report
		FROM reports WHERE user_id = ? ORDER BY seq`), user)
	if err != nil {
		return nil, fmt.Errorf("store: listing reports: %w", err)
	}
	defer rows.Close()
	var out []Report
	for rows.Next() {
		r, err := scanReport(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: listing reports: %w", err)
	}
	return out, nil
}

func (s *sqlStore) ScanReports(ctx context.Context, maxSeq int64, fn func(Report) error) (int64, error) {
	if maxSeq <= 0 {
		maxSeq = math.MaxInt64
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT seq, user_id, client_id, body_hash, epsilon_nano, spent_after_nano, received_ms, vals, collection_version, mean_report
		FROM reports WHERE seq <= ? ORDER BY seq`), maxSeq)
	if err != nil {
		return 0, fmt.Errorf("store: reading reports: %w", err)
	}
	defer rows.Close()
	var last int64
	for rows.Next() {
		r, err := scanReport(rows)
		if err != nil {
			return last, err
		}
		if err := fn(r); err != nil {
			return last, err
		}
		last = r.Seq
	}
	if err := rows.Err(); err != nil {
		return last, fmt.Errorf("store: reading reports: %w", err)
	}
	return last, nil
}

func (s *sqlStore) Publish(ctx context.Context, nr NewRelease) (int64, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: publish: %w", err)
	}
	defer tx.Rollback()
	if nr.PeriodStartMS > 0 && nr.CreatedMS < nr.PeriodStartMS {
		return 0, fmt.Errorf("store: publish: release created at %d ms, before its period starting at %d ms", nr.CreatedMS, nr.PeriodStartMS)
	}
	for _, c := range nr.Charges {
		if c.Nano <= 0 {
			return 0, fmt.Errorf("store: charging user %s: a release charge must be positive, got %d", c.User, c.Nano)
		}
		if nr.PeriodStartMS > 0 {
			// A per-period budget: what she was charged by the releases
			// of this period, plus this charge, must fit her budget; her
			// spent_nano keeps the lifetime sum.
			u, err := scanUser(tx.QueryRowContext(ctx, s.q(qUser+s.lockRow()), c.User))
			if err != nil {
				return 0, fmt.Errorf("store: charging user %s: %w", c.User, err)
			}
			var inPeriod int64
			if err := tx.QueryRowContext(ctx, s.q(qSpentSince+` AND c.user_id = ?`), nr.PeriodStartMS, c.User).Scan(&inPeriod); err != nil {
				return 0, fmt.Errorf("store: charging user %s: %w", c.User, err)
			}
			if inPeriod+c.Nano > u.Budget {
				return 0, &OverBudgetError{User: c.User, Spent: inPeriod, Charge: c.Nano, Budget: u.Budget}
			}
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE users SET spent_nano = spent_nano + ? WHERE id = ?`), c.Nano, c.User); err != nil {
				return 0, fmt.Errorf("store: charging user %s: %w", c.User, err)
			}
			continue
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE users SET spent_nano = spent_nano + ? WHERE id = ? AND spent_nano + ? <= budget_nano`), c.Nano, c.User, c.Nano)
		if err != nil {
			return 0, fmt.Errorf("store: charging user %s: %w", c.User, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, fmt.Errorf("store: charging user %s: %w", c.User, err)
		} else if n == 0 {
			u, err := scanUser(tx.QueryRowContext(ctx, s.q(qUser), c.User))
			if err != nil {
				return 0, fmt.Errorf("store: charging user %s: %w", c.User, err)
			}
			return 0, &OverBudgetError{User: c.User, Spent: u.Spent, Charge: c.Nano, Budget: u.Budget}
		}
	}
	var id int64
	if err := tx.QueryRowContext(ctx, s.q(`INSERT INTO releases (created_ms, method, max_seq, users_charged, doc) VALUES (?, ?, ?, ?, ?) RETURNING id`),
		nr.CreatedMS, nr.Method, nr.MaxSeq, int64(len(nr.Charges)), string(nr.Doc)).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: storing the release: %w", err)
	}
	if len(nr.Charges) > 0 {
		st, err := tx.PrepareContext(ctx, s.q(`INSERT INTO release_charges (release_id, user_id, epsilon_nano) VALUES (?, ?, ?)`))
		if err != nil {
			return 0, fmt.Errorf("store: storing charges: %w", err)
		}
		for _, c := range nr.Charges {
			if _, err := st.ExecContext(ctx, id, c.User, c.Nano); err != nil {
				st.Close()
				return 0, fmt.Errorf("store: storing charges: %w", err)
			}
		}
		st.Close()
	}
	if len(nr.States) > 0 {
		st, err := tx.PrepareContext(ctx, s.q(`INSERT INTO user_states (release_id, user_id, state) VALUES (?, ?, ?)`))
		if err != nil {
			return 0, fmt.Errorf("store: storing user states: %w", err)
		}
		for _, u := range nr.States {
			if _, err := st.ExecContext(ctx, id, u.User, string(u.State)); err != nil {
				st.Close()
				return 0, fmt.Errorf("store: storing user states: %w", err)
			}
		}
		st.Close()
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: publish: commit: %w", err)
	}
	return id, nil
}

func scanRelease(row scanner) (ReleaseRow, error) {
	var r ReleaseRow
	var doc string
	err := row.Scan(&r.ID, &r.CreatedMS, &r.Method, &r.MaxSeq, &r.UsersCharged, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("store: reading a release: %w", err)
	}
	r.Doc = []byte(doc)
	return r, nil
}

func (s *sqlStore) LatestRelease(ctx context.Context) (ReleaseRow, error) {
	return scanRelease(s.r.QueryRowContext(ctx, `SELECT id, created_ms, method, max_seq, users_charged, doc FROM releases ORDER BY id DESC LIMIT 1`))
}

func (s *sqlStore) Release(ctx context.Context, id int64) (ReleaseRow, error) {
	return scanRelease(s.r.QueryRowContext(ctx, s.q(`SELECT id, created_ms, method, max_seq, users_charged, doc FROM releases WHERE id = ?`), id))
}

func (s *sqlStore) UserState(ctx context.Context, release int64, user string) ([]byte, error) {
	var v string
	err := s.r.QueryRowContext(ctx, s.q(`SELECT state FROM user_states WHERE release_id = ? AND user_id = ?`), release, user).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading a user state: %w", err)
	}
	return []byte(v), nil
}

func (s *sqlStore) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.r.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM users), (SELECT COUNT(*) FROM reports), (SELECT COUNT(*) FROM releases),
		(SELECT COALESCE(MAX(spent_nano), 0) FROM users)`).Scan(&st.Users, &st.Reports, &st.Releases, &st.MaxSpent)
	if err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	return st, nil
}

func (s *sqlStore) Check(ctx context.Context) error { return s.CheckPeriods(ctx, 0) }

// lockRow is the row-lock clause of a ledger read in a write transaction
// (PostgreSQL; SQLite's write transaction is exclusive).
func (s *sqlStore) lockRow() string {
	if s.d.dollar {
		return " FOR UPDATE"
	}
	return ""
}

// qSpentSince sums the release charges of releases created at or after a
// time (its first placeholder).
const qSpentSince = `SELECT COALESCE(SUM(c.epsilon_nano), 0) FROM release_charges c JOIN releases r ON r.id = c.release_id WHERE r.created_ms >= ?`

func (s *sqlStore) SpentSince(ctx context.Context, sinceMS int64) (map[string]int64, error) {
	q := `SELECT id, spent_nano FROM users`
	args := []any{}
	if sinceMS > 0 {
		q = `SELECT c.user_id, SUM(c.epsilon_nano) FROM release_charges c JOIN releases r ON r.id = c.release_id WHERE r.created_ms >= ? GROUP BY c.user_id`
		args = append(args, sinceMS)
	}
	rows, err := s.r.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading ledgers: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("store: reading ledgers: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading ledgers: %w", err)
	}
	return out, nil
}

func (s *sqlStore) UserSpentSince(ctx context.Context, user string, sinceMS int64) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, s.q(qSpentSince+` AND c.user_id = ?`), sinceMS, user).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: reading user %s's ledger: %w", user, err)
	}
	return n, nil
}

func (s *sqlStore) CheckPeriods(ctx context.Context, periodMS int64) error {
	if err := s.checkLedgers(ctx, periodMS > 0); err != nil {
		return err
	}
	if periodMS <= 0 {
		return nil
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT t.user_id, t.period, SUM(t.n), MAX(t.budget) FROM
		(SELECT c.user_id AS user_id, r.created_ms / CAST(? AS BIGINT) AS period, c.epsilon_nano AS n, u.budget_nano AS budget
		FROM release_charges c JOIN releases r ON r.id = c.release_id JOIN users u ON u.id = c.user_id) t
		GROUP BY t.user_id, t.period ORDER BY t.user_id, t.period`), periodMS)
	if err != nil {
		return fmt.Errorf("store: check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var period, sum, budget int64
		if err := rows.Scan(&id, &period, &sum, &budget); err != nil {
			return fmt.Errorf("store: check: %w", err)
		}
		if sum > budget {
			return fmt.Errorf("store: user %s: period %d charged %d ledger units, over her per-period budget %d", id, period, sum, budget)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: check: %w", err)
	}
	return nil
}

func (s *sqlStore) checkLedgers(ctx context.Context, periods bool) error {
	// A user who left keeps her ledger: her erased reports' charge and
	// count are in erased_nano and erased_reports.
	rows, err := s.r.QueryContext(ctx, `SELECT u.id, u.spent_nano, u.budget_nano, u.reports,
		u.erased_nano + COALESCE((SELECT SUM(r.epsilon_nano) FROM reports r WHERE r.user_id = u.id), 0),
		u.erased_reports + (SELECT COUNT(*) FROM reports r WHERE r.user_id = u.id),
		COALESCE((SELECT SUM(c.epsilon_nano) FROM release_charges c WHERE c.user_id = u.id), 0)
		FROM users u ORDER BY u.id`)
	if err != nil {
		return fmt.Errorf("store: check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var spent, budget, count, reportSum, reportCount, releaseSum int64
		if err := rows.Scan(&id, &spent, &budget, &count, &reportSum, &reportCount, &releaseSum); err != nil {
			return fmt.Errorf("store: check: %w", err)
		}
		switch {
		case spent != reportSum+releaseSum:
			return fmt.Errorf("store: user %s: ledger says %d units spent, her reports and releases charged %d + %d", id, spent, reportSum, releaseSum)
		case count != reportCount:
			return fmt.Errorf("store: user %s: ledger counts %d reports, %d stored", id, count, reportCount)
		case spent > budget && !periods:
			return fmt.Errorf("store: user %s: spent %d ledger units, over her budget %d", id, spent, budget)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: check: %w", err)
	}
	return nil
}
