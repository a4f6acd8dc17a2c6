package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// exec1 runs a write that must change exactly one row (ErrNotFound when
// it changes none).
func (s *sqlStore) exec1(ctx context.Context, what, q string, args ...any) error {
	res, err := s.w.ExecContext(ctx, s.q(q), args...)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

func (s *sqlStore) SetUserToken(ctx context.Context, user string, hash []byte, expiresMS int64) error {
	// A user who left (deleted_ms > 0) gets no new token: she is no
	// user any more (store.DeleteUser).
	return s.exec1(ctx, "replacing a user's token", `UPDATE users SET token_hash = ?, token_expires_ms = ?, token_revoked_ms = 0 WHERE id = ? AND deleted_ms = 0`, hash, expiresMS, user)
}

func (s *sqlStore) RevokeUserToken(ctx context.Context, user string, nowMS int64) error {
	return s.exec1(ctx, "revoking a user's token", `UPDATE users SET token_revoked_ms = ? WHERE id = ?`, max(nowMS, 1), user)
}

func (s *sqlStore) AddAdminToken(ctx context.Context, t AdminToken) error {
	if _, err := s.w.ExecContext(ctx, s.q(`INSERT INTO admin_tokens (id, token_hash, label, created_ms, expires_ms, revoked_ms) VALUES (?, ?, ?, ?, ?, ?)`),
		t.ID, t.Hash, t.Label, t.CreatedMS, t.ExpiresMS, t.RevokedMS); err != nil {
		return fmt.Errorf("store: recording an admin token: %w", err)
	}
	return nil
}

const qAdminTokens = `SELECT id, token_hash, label, created_ms, expires_ms, revoked_ms FROM admin_tokens`

func scanAdminToken(row scanner) (AdminToken, error) {
	var t AdminToken
	err := row.Scan(&t.ID, &t.Hash, &t.Label, &t.CreatedMS, &t.ExpiresMS, &t.RevokedMS)
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("store: reading an admin token: %w", err)
	}
	return t, nil
}

func (s *sqlStore) AdminToken(ctx context.Context, hash []byte) (AdminToken, error) {
	return scanAdminToken(s.r.QueryRowContext(ctx, s.q(qAdminTokens+` WHERE token_hash = ?`), hash))
}

func (s *sqlStore) AdminTokens(ctx context.Context) ([]AdminToken, error) {
	rows, err := s.r.QueryContext(ctx, qAdminTokens+` ORDER BY created_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("store: listing admin tokens: %w", err)
	}
	defer rows.Close()
	var out []AdminToken
	for rows.Next() {
		t, err := scanAdminToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: listing admin tokens: %w", err)
	}
	return out, nil
}

func (s *sqlStore) RevokeAdminToken(ctx context.Context, id string, nowMS int64) error {
	return s.exec1(ctx, "revoking an admin token", `UPDATE admin_tokens SET revoked_ms = CASE WHEN revoked_ms = 0 THEN ? ELSE revoked_ms END WHERE id = ?`, max(nowMS, 1), id)
}
