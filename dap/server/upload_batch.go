package server

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/service"
)

// maxUploadBatch bounds the uploads committed in one transaction.
const maxUploadBatch = 32

// uploadReq is one upload waiting for the leader's writer.
type uploadReq struct {
	t   *dap.Task
	uid string
	// id is the report's ID, row what is stored of it, hash the SHA-256
	// of the upload's body (a retry is recognised by it).
	id, row, hash []byte
	done          chan uploadRes // buffered: the writer never waits for a gone request
}

type uploadRes struct {
	rc  Receipt
	err error
}

// storeReport stores a report (its row, and the hash of the body that
// was uploaded) and charges its user, durably, before it returns. On SQLite, whose single writer commits one transaction at a
// time, concurrent uploads are committed together (group commit): the
// leader's writer takes every upload waiting, up to maxUploadBatch,
// stores each in a savepoint of one transaction (an upload refused undoes
// only its own writes) and commits once, so a batch costs one flush to
// disk instead of one per report (BenchmarkStoreUpload: 2–3× the uploads
// per second from 8 devices at once). An upload is acknowledged only
// after the commit of its batch; if the commit fails, none is. On
// PostgreSQL each upload is its own transaction, run beside the others
// (the server flushes their commits together itself; one batch at a
// time was slower there).
func (s *Server) storeReport(ctx context.Context, t *dap.Task, uid string, id, row, hash []byte) (Receipt, error) {
	req := &uploadReq{t: t, uid: uid, id: id, row: row, hash: hash, done: make(chan uploadRes, 1)}
	if s.st.d.Postgres() {
		s.commitUploads([]*uploadReq{req})
		res := <-req.done
		return res.rc, res.err
	}
	select {
	case s.uploads <- req:
	case <-ctx.Done():
		return Receipt{}, ctx.Err()
	case <-s.quit:
		return Receipt{}, fmt.Errorf("%w: the leader is shutting down", errUnavailable)
	}
	select {
	case res := <-req.done:
		return res.rc, res.err
	case <-ctx.Done():
		return Receipt{}, ctx.Err()
	}
}

// writeUploads is the leader's upload writer: it commits the waiting
// uploads in batches until the server closes.
func (s *Server) writeUploads() {
	defer close(s.writerDone)
	for {
		select {
		case req := <-s.uploads:
			s.commitUploads(service.FillBatch([]*uploadReq{req}, s.uploads, maxUploadBatch))
		case <-s.quit:
			return
		}
	}
}

// commitUploads stores a batch of uploads in one transaction and answers
// each.
func (s *Server) commitUploads(batch []*uploadReq) {
	ctx := context.Background() // one device leaving does not undo the others' uploads
	res := make([]uploadRes, len(batch))
	err := s.uploadTx(ctx, batch, res)
	for i, req := range batch {
		if err != nil && res[i].err == nil {
			res[i] = uploadRes{err: err}
		}
		req.done <- res[i]
	}
}

// uploadTx runs the batch's transaction: each upload in a savepoint,
// rolled back to if it is refused; its outcome goes to res.
func (s *Server) uploadTx(ctx context.Context, batch []*uploadReq, res []uploadRes) error {
	tx, err := s.st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dap store: %w", err)
	}
	defer tx.Rollback()
	for i, req := range batch {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT upload`); err != nil {
			return fmt.Errorf("dap store: %w", err)
		}
		res[i].rc, res[i].err = s.storeReportTx(ctx, tx, req)
		end := []string{`RELEASE SAVEPOINT upload`}
		if res[i].err != nil {
			end = []string{`ROLLBACK TO SAVEPOINT upload`, `RELEASE SAVEPOINT upload`}
		}
		for _, q := range end {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("dap store: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dap store: commit: %w", err)
	}
	return nil
}

// storeReportTx stores a report and charges its user in tx (upload
// documents the rules); on an error the caller undoes what it wrote.
func (s *Server) storeReportTx(ctx context.Context, tx *sqlTx, req *uploadReq) (Receipt, error) {
	t, uid, id := req.t, req.uid, req.id
	charge := nanoRho(t.Rho)
	budget := nanoRho(s.cfg.BudgetRho)
	rc := Receipt{Task: t.ID, ChargedRho: float64(charge) / 1e9, BudgetRho: s.cfg.BudgetRho}
	var spent int64
	if err := tx.QueryRowContext(ctx, `SELECT spent_rho_nano FROM users WHERE id = ?`+s.st.d.LockRow(), uid).Scan(&spent); err != nil {
		return rc, fmt.Errorf("dap store: %w", err)
	}
	rc.SpentRho = float64(spent) / 1e9
	var owner string
	var oldHash []byte
	switch err := tx.QueryRowContext(ctx, `SELECT user_id, body_hash FROM reports WHERE task_id = ? AND report_id = ?`, t.ID, id).Scan(&owner, &oldHash); {
	case err == nil:
		if owner == uid && bytes.Equal(oldHash, req.hash) {
			rc.Repeated = true
			return rc, nil
		}
		return rc, fmt.Errorf("%w: report ID taken by another report of task %q", errConflict, t.ID)
	case !errors.Is(err, sql.ErrNoRows):
		return rc, fmt.Errorf("dap store: %w", err)
	}
	var closing, collected bool
	if err := tx.QueryRowContext(ctx, `SELECT closing, collected FROM tasks WHERE id = ?`+s.st.forShare(), t.ID).Scan(&closing, &collected); err != nil {
		return rc, fmt.Errorf("dap store: %w", err)
	}
	if closing || collected {
		return rc, fmt.Errorf("%w: task %q is being collected; it takes no more reports", errConflict, t.ID)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO reports (task_id, report_id, user_id, body, body_hash) VALUES (?, ?, ?, ?, ?)`, t.ID, id, uid, req.row, req.hash); err != nil {
		if isUniqueViolation(err) {
			return rc, fmt.Errorf("%w: user already uploaded another report for task %q", errConflict, t.ID)
		}
		return rc, fmt.Errorf("dap store: report: %w", err)
	}
	if err := s.st.addPending(ctx, tx, t.ID, id); err != nil {
		return rc, err
	}
	if spent+charge > budget {
		return rc, fmt.Errorf("%w: task %q costs ρ %v; user has spent %v of %v", errBudget, t.ID, t.Rho, float64(spent)/1e9, s.cfg.BudgetRho)
	}
	spent += charge
	if _, err := tx.ExecContext(ctx, `UPDATE users SET spent_rho_nano = ? WHERE id = ?`, spent, uid); err != nil {
		return rc, fmt.Errorf("dap store: ledger: %w", err)
	}
	rc.SpentRho = float64(spent) / 1e9
	return rc, nil
}
