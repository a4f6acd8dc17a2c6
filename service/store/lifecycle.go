package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
)

// A user may leave: DeleteUser deletes her reports and her per-release
// states and revokes her token, in one transaction. Her ledger row stays
// — her spent ε (ρ), her budget, and how much of the spent came from the
// reports now erased (erased_nano, erased_reports; schema migration 4) —
// because the releases published before she left were computed with her
// data, and their guarantee is only honest if what she spent stays
// counted. Check accounts for the erased charges.

// Erasure says what DeleteUser removed and what it kept.
type Erasure struct {
	User string
	// DeletedMS is when she was deleted (the first time, for a repeat).
	DeletedMS int64
	// Reports and States are how many rows were deleted now (0 for a
	// repeat).
	Reports, States int64
	// Kept is her ledger as it stays.
	Kept User
	// Repeat: she had been deleted before; nothing changed.
	Repeat bool
}

// ReleaseCharge is one release's debit of a user's ledger.
type ReleaseCharge struct {
	Release int64
	Nano    int64
}

// ReleaseState is a user's own state in one release.
type ReleaseState struct {
	Release int64
	State   []byte
}

// Export is everything the store holds about one user (her token only as
// a hash, which is not exported).
type Export struct {
	User User
	// DeletedMS > 0: she left then; ErasedNano and ErasedReports are the
	// charge and count of her reports deleted with her.
	DeletedMS, ErasedNano, ErasedReports int64
	Reports                              []Report
	States                               []ReleaseState
	Charges                              []ReleaseCharge
}

const qUserLifecycle = `SELECT id, budget_nano, spent_nano, reports, created_ms, deleted_ms, erased_nano, erased_reports FROM users WHERE id = ?`

func scanUserLifecycle(row scanner) (e Export, err error) {
	u := &e.User
	err = row.Scan(&u.ID, &u.Budget, &u.Spent, &u.Reports, &u.CreatedMS, &e.DeletedMS, &e.ErasedNano, &e.ErasedReports)
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	if err != nil {
		return e, fmt.Errorf("store: reading a user: %w", err)
	}
	return e, nil
}

// DeleteUser deletes a user's reports and states and revokes her token
// (her token hash is replaced by random bytes and token_revoked_ms set),
// keeping her ledger; a repeat changes nothing and says so.
// ErrNotFound when there is no such user.
func (s *sqlStore) DeleteUser(ctx context.Context, id string, nowMS int64) (Erasure, error) {
	var er Erasure
	err := s.Update(ctx, func(t Tx) error {
		tx := t.(*sqlTx).tx
		cur, err := scanUserLifecycle(tx.QueryRowContext(ctx, s.q(qUserLifecycle+s.lockRow()), id))
		if err != nil {
			return err
		}
		er = Erasure{User: id, DeletedMS: cur.DeletedMS, Kept: cur.User, Repeat: cur.DeletedMS > 0}
		if er.Repeat {
			return nil
		}
		var sum int64
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*), COALESCE(SUM(epsilon_nano), 0) FROM reports WHERE user_id = ?`), id).Scan(&er.Reports, &sum); err != nil {
			return fmt.Errorf("store: deleting user %s: %w", id, err)
		}
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM user_states WHERE user_id = ?`), id)
		if err != nil {
			return fmt.Errorf("store: deleting user %s's states: %w", id, err)
		}
		if er.States, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("store: deleting user %s's states: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM reports WHERE user_id = ?`), id); err != nil {
			return fmt.Errorf("store: deleting user %s's reports: %w", id, err)
		}
		var tok [32]byte
		rand.Read(tok[:]) // never fails (Go ≥ 1.24); matches no token's SHA-256
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE users SET deleted_ms = ?, token_revoked_ms = ?, token_hash = ?,
			erased_nano = erased_nano + ?, erased_reports = erased_reports + ? WHERE id = ?`),
			nowMS, nowMS, tok[:], sum, er.Reports, id); err != nil {
			return fmt.Errorf("store: deleting user %s: %w", id, err)
		}
		er.DeletedMS = nowMS
		return nil
	})
	return er, err
}

// ExportUser reads everything stored about a user. ErrNotFound when there
// is no such user.
func (s *sqlStore) ExportUser(ctx context.Context, id string) (Export, error) {
	e, err := scanUserLifecycle(s.r.QueryRowContext(ctx, s.q(qUserLifecycle), id))
	if err != nil {
		return e, err
	}
	if e.Reports, err = s.Reports(ctx, id); err != nil {
		return e, err
	}
	if err := s.each(ctx, `SELECT release_id, state FROM user_states WHERE user_id = ? ORDER BY release_id`, id, func(r scanner) error {
		var st ReleaseState
		var v string
		if err := r.Scan(&st.Release, &v); err != nil {
			return err
		}
		st.State = []byte(v)
		e.States = append(e.States, st)
		return nil
	}); err != nil {
		return e, fmt.Errorf("store: exporting user %s's states: %w", id, err)
	}
	if err := s.each(ctx, `SELECT release_id, epsilon_nano FROM release_charges WHERE user_id = ? ORDER BY release_id`, id, func(r scanner) error {
		var c ReleaseCharge
		if err := r.Scan(&c.Release, &c.Nano); err != nil {
			return err
		}
		e.Charges = append(e.Charges, c)
		return nil
	}); err != nil {
		return e, fmt.Errorf("store: exporting user %s's release charges: %w", id, err)
	}
	return e, nil
}

// each runs a query with one argument and calls fn per row.
func (s *sqlStore) each(ctx context.Context, q string, arg any, fn func(scanner) error) error {
	return s.eachArgs(ctx, q, []any{arg}, fn)
}

// ReportsPage lists up to limit of a user's reports with seq > afterSeq,
// in submission order.
func (s *sqlStore) ReportsPage(ctx context.Context, user string, afterSeq int64, limit int) ([]Report, error) {
	var out []Report
	err := s.eachArgs(ctx, `SELECT seq, user_id, client_id, body_hash, epsilon_nano, spent_after_nano, received_ms, vals, collection_version, mean_report
		FROM reports WHERE user_id = ? AND seq > ? ORDER BY seq LIMIT ?`, []any{user, afterSeq, limit}, func(r scanner) error {
		rep, err := scanReport(r)
		if err != nil {
			return err
		}
		out = append(out, rep)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: listing reports: %w", err)
	}
	return out, nil
}

// eachArgs runs a read query and calls fn per row.
func (s *sqlStore) eachArgs(ctx context.Context, q string, args []any, fn func(scanner) error) error {
	rows, err := s.r.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
