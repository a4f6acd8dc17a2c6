package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"runtime"
	"strings"
	"sync"

	"github.com/privrec/privrec/dap"
)

// Enrolment is a new user's identity at the leader.
type Enrolment struct {
	User  string `json:"user"`
	Token string `json:"token"`
}

// Ledger is a user's account at the leader, in zCDP ρ.
type Ledger struct {
	User      string  `json:"user"`
	SpentRho  float64 `json:"spent_rho"`
	BudgetRho float64 `json:"budget_rho"`
}

// Receipt answers an accepted upload.
type Receipt struct {
	Task       string  `json:"task"`
	ChargedRho float64 `json:"charged_rho"`
	SpentRho   float64 `json:"spent_rho"`
	BudgetRho  float64 `json:"budget_rho"`
}

// Release is a task's published result (dap.Release).
type Release = dap.Release

// AggregateResult counts a run of aggregation jobs.
type AggregateResult struct {
	Accepted int `json:"accepted"`
	Rejected int `json:"rejected"`
}

// nanoRho is the ledger's unit, rounded up so a user is never
// under-charged.
func nanoRho(rho float64) int64 { return int64(math.Ceil(rho*1e9 - 1e-6)) }

func (s *Server) enrol(w http.ResponseWriter, r *http.Request) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		s.fail(w, err)
		return
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(tok))
	id := "u-" + base64.RawURLEncoding.EncodeToString(h[:9])
	if _, err := s.st.db.ExecContext(r.Context(), `INSERT INTO users (id, token_hash) VALUES (?, ?)`, id, h[:]); err != nil {
		s.fail(w, fmt.Errorf("dap store: enrol: %w", err))
		return
	}
	writeJSON(w, http.StatusCreated, Enrolment{User: id, Token: tok})
}

// user authenticates a request's bearer token; the second value is the
// user's spent ρ in nano-ρ.
func (s *Server) user(ctx context.Context, r *http.Request) (string, int64, error) {
	tok := bearer(r)
	if tok == "" {
		return "", 0, fmt.Errorf("%w: no bearer token", errUnauthorized)
	}
	h := sha256.Sum256([]byte(tok))
	var id string
	var spent int64
	err := s.st.db.QueryRowContext(ctx, `SELECT id, spent_rho_nano FROM users WHERE token_hash = ?`, h[:]).Scan(&id, &spent)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("%w: unknown token", errUnauthorized)
	}
	if err != nil {
		return "", 0, fmt.Errorf("dap store: %w", err)
	}
	return id, spent, nil
}

var errUnauthorized = errors.New("unauthorized")

func (s *Server) failAuth(w http.ResponseWriter, err error) {
	if errors.Is(err, errUnauthorized) {
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	s.fail(w, err)
}

func (s *Server) ledger(w http.ResponseWriter, r *http.Request) {
	id, spent, err := s.user(r.Context(), r)
	if err != nil {
		s.failAuth(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Ledger{User: id, SpentRho: float64(spent) / 1e9, BudgetRho: s.cfg.BudgetRho})
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	ts, err := s.st.tasks(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ts)
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	t, _, err := s.st.task(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// upload stores one report and charges its task's ρ to the user, in one
// transaction: a user who is over budget, or who already uploaded for the
// task, is refused and nothing changes.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	uid, _, err := s.user(ctx, r)
	if err != nil {
		s.failAuth(w, err)
		return
	}
	t, collected, err := s.st.task(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if collected {
		s.fail(w, fmt.Errorf("%w: task %q is already collected", errConflict, t.ID))
		return
	}
	rep, body, err := decodeUpload(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	if err := t.CheckReport(&rep); err != nil {
		s.fail(w, err)
		return
	}
	charge := nanoRho(t.Rho)
	budget := nanoRho(s.cfg.BudgetRho)
	var spent int64
	err = func() error {
		tx, err := s.st.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("dap store: %w", err)
		}
		defer tx.Rollback()
		if err := tx.QueryRowContext(ctx, `SELECT spent_rho_nano FROM users WHERE id = ?`, uid).Scan(&spent); err != nil {
			return fmt.Errorf("dap store: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO reports (task_id, report_id, user_id, body) VALUES (?, ?, ?, ?)`, t.ID, rep.ID, uid, body); err != nil {
			if strings.Contains(err.Error(), "UNIQUE") {
				return fmt.Errorf("%w: user already uploaded a report for task %q (or the report ID is taken)", errConflict, t.ID)
			}
			return fmt.Errorf("dap store: report: %w", err)
		}
		if spent+charge > budget {
			return fmt.Errorf("%w: task %q costs ρ %v; user has spent %v of %v", errBudget, t.ID, t.Rho, float64(spent)/1e9, s.cfg.BudgetRho)
		}
		spent += charge
		if _, err := tx.ExecContext(ctx, `UPDATE users SET spent_rho_nano = ? WHERE id = ?`, spent, uid); err != nil {
			return fmt.Errorf("dap store: ledger: %w", err)
		}
		return tx.Commit()
	}()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, Receipt{Task: t.ID, ChargedRho: float64(charge) / 1e9, SpentRho: float64(spent) / 1e9, BudgetRho: s.cfg.BudgetRho})
}

// decodeUpload reads an uploaded report, in the binary encoding
// (ReportMediaType) or JSON, and returns it with its binary encoding for
// the database (a binary body is stored as it came).
func decodeUpload(r *http.Request) (dap.Report, []byte, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != ReportMediaType {
		var rep dap.Report
		if err := decode(r, &rep); err != nil {
			return rep, nil, err
		}
		body, err := EncodeReport(&rep)
		return rep, body, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return dap.Report{}, nil, fmt.Errorf("%w: %s %s: body: %v", dap.ErrInvalid, r.Method, r.URL.Path, err)
	}
	if len(body) > maxBody {
		return dap.Report{}, nil, fmt.Errorf("%w: %s %s: body over %d bytes", dap.ErrInvalid, r.Method, r.URL.Path, maxBody)
	}
	rep, err := DecodeReport(body)
	if err != nil {
		return rep, nil, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err)
	}
	return rep, body, nil
}

func (s *Server) createTask(w http.ResponseWriter, r *http.Request) {
	var t dap.Task
	if err := decode(r, &t); err != nil {
		s.fail(w, err)
		return
	}
	t, err := dap.NewTask(t)
	if err != nil {
		s.fail(w, err)
		return
	}
	// The helper first: it may refuse the task under its own policy.
	if err := s.callHelper(r.Context(), http.MethodPut, "/dap/v1/tasks/"+t.ID, t, nil); err != nil {
		s.fail(w, err)
		return
	}
	if err := s.st.putTask(r.Context(), t); err != nil {
		s.fail(w, err)
		return
	}
	s.log.Info("task created", "task", t.ID, "dimension", t.Dimension, "rho", t.Rho, "sigma", t.Sigma, "noise", t.Noise)
	writeJSON(w, http.StatusCreated, t)
}

// callHelper sends one authenticated JSON request to the helper.
func (s *Server) callHelper(ctx context.Context, method, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("dap: encoding request to helper: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(s.cfg.HelperURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("dap: request to helper: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.AggregatorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("dap: helper %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e errorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		err := fmt.Errorf("dap: helper %s %s: %s: %s", method, path, resp.Status, e.Error)
		if resp.StatusCode == http.StatusBadRequest {
			err = fmt.Errorf("%w (%v)", dap.ErrInvalid, err)
		}
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("dap: helper %s %s: response: %w", method, path, err)
	}
	return nil
}

// parallel runs f(0..n-1) on GOMAXPROCS goroutines (preparation is the
// CPU-bound step of aggregation).
func parallel(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (s *Server) pending(ctx context.Context, taskID string, limit int) ([]dap.Report, error) {
	rows, err := s.st.db.QueryContext(ctx, `SELECT body FROM reports r WHERE task_id = ? AND NOT EXISTS
		(SELECT 1 FROM verdicts v WHERE v.task_id = r.task_id AND v.report_id = r.report_id) LIMIT ?`, taskID, limit)
	if err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	defer rows.Close()
	var out []dap.Report
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("dap store: %w", err)
		}
		rep, err := decodeStoredReport(b)
		if err != nil {
			return nil, err
		}
		out = append(out, rep)
	}
	return out, rows.Err()
}

// Aggregate verifies and aggregates every pending report of a task in
// jobs of BatchSize: the leader prepares its shares, the helper prepares
// its own and returns its prep shares, and each decides the proof on both;
// a report counts only if both accept.
func (s *Server) Aggregate(ctx context.Context, taskID string) (AggregateResult, error) {
	var res AggregateResult
	p, collected, err := s.preparer(ctx, taskID)
	if err != nil {
		return res, err
	}
	if collected {
		return res, nil
	}
	for {
		reps, err := s.pending(ctx, taskID, s.cfg.BatchSize)
		if err != nil || len(reps) == 0 {
			return res, err
		}
		job := Job{Reports: make([]JobReport, len(reps))}
		preps := make([]*dap.Prepared, len(reps))
		parallel(len(reps), func(i int) {
			rep := &reps[i]
			job.Reports[i] = JobReport{ID: rep.ID, PublicShare: rep.PublicShare, HelperShare: rep.HelperShare}
			prep, err := p.Prepare(rep.ID, rep.PublicShare, rep.LeaderShare)
			if err != nil {
				job.Reports[i].LeaderRejectedAs = err.Error()
				return
			}
			preps[i] = prep
			job.Reports[i].LeaderPrepShare = prep.Share
		})
		var jr JobResponse
		if err := s.callHelper(ctx, http.MethodPost, "/dap/v1/tasks/"+taskID+"/aggregation_jobs", job, &jr); err != nil {
			return res, err
		}
		if len(jr.Results) != len(reps) {
			return res, fmt.Errorf("dap: helper answered %d results for %d reports", len(jr.Results), len(reps))
		}
		vs := make([]verdict, len(reps))
		outs := make([]dap.Vec, len(reps))
		parallel(len(reps), func(i int) {
			hr := &jr.Results[i]
			v := &vs[i]
			v.id = reps[i].ID
			switch {
			case !bytes.Equal(hr.ID, reps[i].ID):
				v.reason = "helper answered for another report"
			case preps[i] == nil:
				v.reason = job.Reports[i].LeaderRejectedAs
			case !hr.Accepted:
				v.reason = "rejected by the helper: " + hr.Reason
			default:
				out, err := p.Finish(preps[i], preps[i].Share, hr.HelperPrepShare)
				if err != nil {
					v.reason = err.Error()
					return
				}
				v.accepted, outs[i] = true, out
			}
		})
		s.mu.Lock()
		_, err = s.st.commitJob(ctx, &p.Task, vs, outs)
		s.mu.Unlock()
		if err != nil {
			return res, err
		}
		for _, v := range vs {
			if v.accepted {
				res.Accepted++
			} else {
				res.Rejected++
				s.log.Warn("report rejected", "task", taskID, "reason", v.reason)
			}
		}
	}
}

func (s *Server) aggregateHandler(w http.ResponseWriter, r *http.Request) {
	res, err := s.Aggregate(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// Collect aggregates what is pending, obtains the helper's noised share,
// noises its own and publishes the release. Collecting again returns the
// same release.
func (s *Server) Collect(ctx context.Context, taskID string) (*Release, error) {
	if rel, err := s.release(ctx, taskID); err == nil {
		return rel, nil
	} else if !errors.Is(err, errNotFound) {
		return nil, err
	}
	if _, err := s.Aggregate(ctx, taskID); err != nil {
		return nil, err
	}
	p, _, err := s.preparer(ctx, taskID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rel, err := s.release(ctx, taskID); err == nil { // a concurrent Collect won
		return rel, nil
	}
	a, err := s.st.aggregate(ctx, s.st.db, &p.Task)
	if err != nil {
		return nil, err
	}
	if a.count < p.Task.MinReports {
		return nil, fmt.Errorf("%w: task %q has %d valid reports, fewer than its minimum %d", dap.ErrInvalid, taskID, a.count, p.Task.MinReports)
	}
	var hs ShareResponse
	if err := s.callHelper(ctx, http.MethodPost, "/dap/v1/tasks/"+taskID+"/aggregate_share", ShareRequest{Count: a.count, Checksum: a.checksum}, &hs); err != nil {
		return nil, err
	}
	helper, err := p.Task.DecodeVec(hs.Share)
	if err != nil {
		return nil, fmt.Errorf("dap: helper's share: %w", err)
	}
	a, err = s.st.collect(ctx, &p.Task, func(v dap.Vec) { p.Task.AddNoise(v, s.noise) })
	if err != nil {
		return nil, err
	}
	leader, err := p.Task.DecodeVec(a.noised)
	if err != nil {
		return nil, err
	}
	_, vals, err := p.Task.Combine(leader, helper, a.count)
	if err != nil {
		return nil, err
	}
	rel := &Release{Task: p.Task, Values: vals, NoiseSD: p.Task.ReleaseSD(), Guarantee: Guarantee(&p.Task)}
	b, err := json.Marshal(rel)
	if err != nil {
		return nil, fmt.Errorf("dap: encoding release: %w", err)
	}
	if _, err := s.st.db.ExecContext(ctx, `INSERT INTO releases (task_id, body) VALUES (?, ?)`, taskID, string(b)); err != nil {
		return nil, fmt.Errorf("dap store: release: %w", err)
	}
	s.log.Info("release published", "task", taskID, "noise_sd", rel.NoiseSD)
	return rel, nil
}

// Guarantee states a task's guarantee in words.
func Guarantee(t *dap.Task) string {
	switch t.Noise {
	case dap.NoiseSplit:
		return fmt.Sprintf("ρ = %g zCDP per contributing user (%s), HONEST-BUT-CURIOUS: holds only if both aggregators add their noise; if one omits it, ρ ≤ %g; nobody sees a contribution unless both operators collude",
			t.Rho, t.Relation, t.Sensitivity*t.Sensitivity/(2*float64(t.Sigma)*float64(t.Sigma)))
	default:
		return fmt.Sprintf("ρ = %g zCDP per contributing user (%s), even if one aggregator is dishonest (each adds the full noise; the release's noise is √2× a trusted curator's); nobody sees a contribution unless both operators collude", t.Rho, t.Relation)
	}
}

func (s *Server) release(ctx context.Context, taskID string) (*Release, error) {
	var b string
	err := s.st.db.QueryRowContext(ctx, `SELECT body FROM releases WHERE task_id = ?`, taskID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("release of task %q: %w", taskID, errNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("dap store: %w", err)
	}
	var rel Release
	if err := json.Unmarshal([]byte(b), &rel); err != nil {
		return nil, fmt.Errorf("dap store: release: %w", err)
	}
	return &rel, nil
}

func (s *Server) collectHandler(w http.ResponseWriter, r *http.Request) {
	rel, err := s.Collect(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rel)
}

func (s *Server) getRelease(w http.ResponseWriter, r *http.Request) {
	rel, err := s.release(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rel)
}
