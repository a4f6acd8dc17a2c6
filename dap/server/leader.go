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
	"time"

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
	// Repeated: this report was stored and charged before (a retry after
	// a lost acknowledgement); nothing was charged again.
	Repeated bool `json:"repeated,omitempty"`
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

// enrol admits a new user at EnrolRate per client address (and 4× that
// overall), up to MaxUsers, while there is room to write.
func (s *Server) enrol(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if s.enrolAddr != nil && (!s.enrolAddr.Allow(clientAddr(r), now) || !s.enrolAll.Allow("", now)) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many enrolments; retry later")
		return
	}
	if err := s.roomToWrite(); err != nil {
		s.fail(w, err)
		return
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		s.fail(w, err)
		return
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(tok))
	id := "u-" + base64.RawURLEncoding.EncodeToString(h[:9])
	res, err := s.st.db.ExecContext(r.Context(), `INSERT INTO users (id, token_hash) SELECT ?, ? WHERE ? <= 0 OR (SELECT count(*) FROM users) < ?`,
		id, h[:], s.cfg.MaxUsers, s.cfg.MaxUsers)
	if err != nil {
		s.fail(w, fmt.Errorf("dap store: enrol: %w", err))
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		writeError(w, http.StatusForbidden, fmt.Sprintf("enrolment is closed: this collection has its %d users (--max-users)", s.cfg.MaxUsers))
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
// transaction. The body is bounded by the task's exact report size
// before it is read (413), and the leader opens its own input share
// before anything is stored or charged. The same report sent again (a
// retry after a lost acknowledgement: same ID, same bytes) is
// acknowledged again without a second charge; another report under a
// taken ID, a second report of the user for the task, one beyond her
// budget or one for a task being collected is refused and nothing
// changes.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	uid, _, err := s.user(ctx, r)
	if err != nil {
		s.failAuth(w, err)
		return
	}
	p, collected, err := s.preparer(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	t := &p.Task
	if collected {
		s.fail(w, fmt.Errorf("%w: task %q is already collected", errConflict, t.ID))
		return
	}
	size, err := s.reportSize(t)
	if err != nil {
		s.fail(w, err)
		return
	}
	rep, body, err := decodeUpload(w, r, size)
	if err != nil {
		s.fail(w, err)
		return
	}
	if err := t.CheckReport(&rep); err != nil {
		s.fail(w, err)
		return
	}
	if int64(len(body)) != size {
		s.fail(w, fmt.Errorf("%w: a report of %d bytes; task %q's reports have exactly %d", dap.ErrInvalid, len(body), t.ID, size))
		return
	}
	row, err := prepareUpload(p, &rep)
	if err != nil {
		s.fail(w, err)
		return
	}
	if err := s.roomToWrite(); err != nil {
		s.fail(w, err)
		return
	}
	s.crash("leader-upload-checked")
	hash := sha256.Sum256(body)
	rc, err := s.storeReport(ctx, t, uid, rep.ID, row, hash[:])
	if err != nil {
		s.fail(w, err)
		return
	}
	s.crash("leader-upload-committed")
	code := http.StatusCreated
	if rc.Repeated {
		code = http.StatusOK
	}
	writeJSON(w, code, rc)
}

// prepareUpload opens and prepares the leader's share of an uploaded
// report (a share it cannot decrypt or decode, or whose joint randomness
// does not check, is refused before anyone is charged) and returns the
// row to store: the report less its leader share, with the leader's prep
// share and preparation state (encodePrepared). Preparing at upload
// opens the share once, not at upload to check it and again at
// aggregation, and the row is the output share, not the input share.
func prepareUpload(p *dap.Preparer, rep *dap.Report) ([]byte, error) {
	prep, err := p.Prepare(rep.ID, rep.PublicShare, rep.LeaderShare)
	if err != nil {
		return nil, fmt.Errorf("the leader's share: %w", err)
	}
	state, err := prep.State()
	if err != nil {
		return nil, err
	}
	return encodePrepared(rep, prep.Share, state)
}

// reportSize is the exact size of a report of t in the binary encoding
// (sharded once per task from a zero contribution, then cached).
func (s *Server) reportSize(t *dap.Task) (int64, error) {
	s.mu.Lock()
	n, ok := s.sizes[t.ID]
	s.mu.Unlock()
	if ok {
		return n, nil
	}
	// The contribution closest to zero within the task's range: the size
	// depends on the task only, not on the values.
	q := make([]int64, t.Dimension)
	for j := range q {
		q[j] = max(t.Min, min(0, t.Max()))
	}
	rep, err := t.Shard(q, s.cfg.Key.Public, s.cfg.Key.Public)
	if err != nil {
		return 0, fmt.Errorf("dap: the report size of task %q: %w", t.ID, err)
	}
	b, err := EncodeReport(rep)
	if err != nil {
		return 0, err
	}
	n = int64(len(b))
	s.mu.Lock()
	s.sizes[t.ID] = n
	s.mu.Unlock()
	return n, nil
}

// jsonReportSize bounds a report of size bytes (binary) as JSON: base64
// of each of its seven fields, their names and the framing.
func jsonReportSize(size int64) int64 { return size/3*4 + 7*4 + 512 }

// decodeUpload reads an uploaded report, in the binary encoding
// (ReportMediaType; at most size bytes) or strict JSON, and returns it
// with its binary encoding for the database (a binary body is stored as
// it came). A larger body is refused before it is read (413).
func decodeUpload(w http.ResponseWriter, r *http.Request, size int64) (dap.Report, []byte, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != ReportMediaType {
		var rep dap.Report
		if err := decode(w, r, jsonReportSize(size), &rep); err != nil {
			return rep, nil, err
		}
		body, err := EncodeReport(&rep)
		return rep, body, err
	}
	if err := limitBody(w, r, size); err != nil {
		return dap.Report{}, nil, err
	}
	// Read into a buffer of the report's size (io.ReadAll would grow one
	// and copy a Gram report's 4 MB several times).
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err := buf.ReadFrom(r.Body)
	body := buf.Bytes()
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return dap.Report{}, nil, fmt.Errorf("%w: %s %s: body over %d bytes, the task's report size", errTooLarge, r.Method, r.URL.Path, size)
	}
	if err != nil {
		return dap.Report{}, nil, fmt.Errorf("%w: %s %s: body: %v", dap.ErrInvalid, r.Method, r.URL.Path, err)
	}
	rep, err := DecodeReport(body)
	if err != nil {
		return rep, nil, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err)
	}
	return rep, body, nil
}

func (s *Server) createTask(w http.ResponseWriter, r *http.Request) {
	var t dap.Task
	if err := decode(w, r, maxJSONBody, &t); err != nil {
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

// callHelper sends one authenticated JSON request to the helper. The
// helper unreachable or failing is errHelper (502 to the admin; 503 when
// the helper said it is unavailable, e.g. out of space); its refusals
// keep their meaning (400, 404, 409).
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
		return fmt.Errorf("%w: %s %s: unreachable: %v", errHelper, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e errorBody
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e)
		err := fmt.Errorf("helper %s %s: %s: %s", method, path, resp.Status, e.Error)
		switch resp.StatusCode {
		case http.StatusBadRequest:
			return fmt.Errorf("%w (%v)", dap.ErrInvalid, err)
		case http.StatusNotFound:
			return fmt.Errorf("%w (%v)", errNotFound, err)
		case http.StatusConflict:
			return fmt.Errorf("%w (%v)", errConflict, err)
		case http.StatusServiceUnavailable:
			return fmt.Errorf("%w: %w: %v", errHelper, errUnavailable, err)
		}
		return fmt.Errorf("%w: %v", errHelper, err)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: %s %s: response: %v", errHelper, method, path, err)
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

// lockTask serialises collection of one task: in this process (one
// goroutine at a time) and across leader processes sharing the database
// (a lease row, renewed while the work runs; the collection's commit
// checks it is still held). Aggregation jobs are claimed one by one
// instead (Aggregate). It waits up to LockWait, then answers errLocked
// (503). The returned context ends if the lease is lost.
func (s *Server) lockTask(ctx context.Context, id string) (context.Context, func(), error) {
	wctx, cancelWait := context.WithTimeout(ctx, s.cfg.LockWait)
	defer cancelWait()
	s.mu.Lock()
	ch := s.locks[id]
	if ch == nil {
		ch = make(chan struct{}, 1)
		s.locks[id] = ch
	}
	s.mu.Unlock()
	busy := fmt.Errorf("%w: task %q: waited %s for the collection in progress", errLocked, id, s.cfg.LockWait)
	select {
	case ch <- struct{}{}:
	case <-wctx.Done():
		return nil, nil, busy
	}
	for {
		ok, err := s.st.lease(wctx, id, s.instance, time.Now(), s.cfg.LockTTL)
		if err != nil {
			<-ch
			return nil, nil, err
		}
		if ok {
			break
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-wctx.Done():
			<-ch
			return nil, nil, busy
		}
	}
	lctx, stop := s.keepLease(ctx, "task "+id, func(ctx context.Context) (bool, error) {
		return s.st.lease(ctx, id, s.instance, time.Now(), s.cfg.LockTTL)
	})
	unlock := func() {
		stop()
		if err := s.st.unlease(context.WithoutCancel(ctx), id, s.instance); err != nil {
			s.log.Warn("giving up a task's lease", "task", id, "err", err)
		}
		<-ch
	}
	return lctx, unlock, nil
}

// keepLease renews a lease (renew) every third of LockTTL until stop is
// called; the returned context ends if the lease is lost, stopping the
// work it covers.
func (s *Server) keepLease(ctx context.Context, what string, renew func(context.Context) (bool, error)) (context.Context, func()) {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(s.cfg.LockTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if ok, err := renew(lctx); err != nil || !ok {
					s.log.Error("lost the lease of "+what+": stopping its work", "err", err)
					cancel()
					return
				}
			}
		}
	}()
	return lctx, func() { close(done); cancel() }
}

// addNoise adds the aggregator's noise for t to a share (the noise
// source is shared: one draw at a time).
func (s *Server) addNoise(t *dap.Task) func(dap.Vec) {
	return func(v dap.Vec) {
		s.mu.Lock()
		defer s.mu.Unlock()
		t.AddNoise(v, s.noise)
	}
}

// Aggregate verifies and aggregates the pending reports of a task in
// jobs of BatchSize: the leader prepares its shares, the helper prepares
// its own and returns its prep shares, and each decides the proof on both;
// a report counts only if both accept. Each job is recorded before it is
// sent and sent again as it was after a crash or a failed call (the
// helper answers a repeated job with its stored answer), so every report
// is counted once at both aggregators whatever fails when. Each job is
// claimed by one call (a lease in the database, renewed while it runs):
// concurrent calls, in this process or in other leader processes sharing
// the database, work on different jobs, and a job whose claim runs out
// (its process died or stalled) is taken over. Aggregate returns when no
// job is left to claim; jobs others hold may still be running.
func (s *Server) Aggregate(ctx context.Context, taskID string) (AggregateResult, error) {
	p, collected, err := s.preparer(ctx, taskID)
	if err != nil || collected {
		return AggregateResult{}, err
	}
	return s.aggregateJobs(ctx, p, false)
}

// aggregateJobs claims and runs jobs of a task until none is left to
// claim; with wait, until none is pending at all (the jobs others hold
// finished or taken over: collection needs every report judged).
func (s *Server) aggregateJobs(ctx context.Context, p *dap.Preparer, wait bool) (AggregateResult, error) {
	var res AggregateResult
	holder := fmt.Sprintf("%s.%d", s.instance, s.claims.Add(1))
	for {
		jobID, reps, err := s.st.nextJob(ctx, p.Task.ID, holder, s.cfg.BatchSize, time.Now().Add(s.cfg.LockTTL))
		if err != nil {
			return res, err
		}
		if jobID == "" {
			if !wait {
				return res, nil
			}
			n, err := s.st.pending(ctx, p.Task.ID)
			if err != nil || n == 0 {
				return res, err
			}
			select {
			case <-time.After(100 * time.Millisecond):
				continue
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		vs, err := s.aggregateJob(ctx, p, jobID, holder, reps)
		if err != nil {
			return res, err
		}
		for _, v := range vs {
			if v.accepted {
				res.Accepted++
			} else {
				res.Rejected++
				s.log.Warn("report rejected", "task", p.Task.ID, "reason", v.reason)
			}
		}
	}
}

// aggregateJob runs one claimed job and commits its verdicts, renewing
// the claim meanwhile; a job that fails is given up for the next call.
func (s *Server) aggregateJob(ctx context.Context, p *dap.Preparer, jobID, holder string, reps []storedReport) ([]verdict, error) {
	jctx, stop := s.keepLease(ctx, "job "+jobID, func(ctx context.Context) (bool, error) {
		return s.st.renewJob(ctx, p.Task.ID, jobID, holder, time.Now().Add(s.cfg.LockTTL))
	})
	defer stop()
	s.crash("leader-job-recorded")
	vs, outs, err := s.runJob(jctx, p, jobID, reps)
	if err != nil {
		if rerr := s.st.releaseJob(context.WithoutCancel(ctx), p.Task.ID, jobID, holder); rerr != nil {
			s.log.Warn("giving up a job's claim", "task", p.Task.ID, "job", jobID, "err", rerr)
		}
		return nil, err
	}
	s.crash("leader-job-answered")
	if err := s.st.commitLeaderJob(jctx, &p.Task, jobID, vs, outs); err != nil {
		return nil, err
	}
	s.crash("leader-job-committed")
	return vs, nil
}

// runJob prepares the leader's shares of a job, sends the job to the
// helper and decides each report on both prep shares.
func (s *Server) runJob(ctx context.Context, p *dap.Preparer, jobID string, reps []storedReport) ([]verdict, []dap.Vec, error) {
	job := Job{Reports: make([]JobReport, len(reps))}
	preps := make([]*dap.Prepared, len(reps))
	parallel(len(reps), func(i int) {
		rep := &reps[i]
		job.Reports[i] = JobReport{ID: rep.ID, PublicShare: rep.PublicShare, HelperShare: rep.HelperShare}
		prep, err := leaderPrep(p, rep)
		if err != nil {
			job.Reports[i].LeaderRejectedAs = err.Error()
			return
		}
		preps[i] = prep
		job.Reports[i].LeaderPrepShare = prep.Share
	})
	var jr JobResponse
	if err := s.callHelper(ctx, http.MethodPut, "/dap/v1/tasks/"+p.Task.ID+"/aggregation_jobs/"+jobID, job, &jr); err != nil {
		return nil, nil, err
	}
	if len(jr.Results) != len(reps) {
		return nil, nil, fmt.Errorf("%w: job %s: answered %d results for %d reports", errHelper, jobID, len(jr.Results), len(reps))
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
	return vs, outs, nil
}

// leaderPrep is the leader's preparation of a stored report: restored
// from its row when it was prepared at upload, else (a row stored by an
// earlier privrec) prepared now from its sealed share.
func leaderPrep(p *dap.Preparer, rep *storedReport) (*dap.Prepared, error) {
	if rep.prepState != nil {
		return p.Restore(rep.prepState, rep.prepShare)
	}
	return p.Prepare(rep.ID, rep.PublicShare, rep.LeaderShare)
}

func (s *Server) aggregateHandler(w http.ResponseWriter, r *http.Request) {
	res, err := s.Aggregate(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// Collect closes the task to uploads, aggregates what is pending,
// obtains the helper's noised share, noises its own and publishes the
// release. Each step can be repeated after a crash: the helper and the
// leader each noise their share once and store it, so collecting again
// returns the same release.
func (s *Server) Collect(ctx context.Context, taskID string) (*Release, error) {
	if rel, err := s.release(ctx, taskID); err == nil {
		return rel, nil
	} else if !errors.Is(err, errNotFound) {
		return nil, err
	}
	p, _, err := s.preparer(ctx, taskID)
	if err != nil {
		return nil, err
	}
	ctx, unlock, err := s.lockTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if rel, err := s.release(ctx, taskID); err == nil { // a concurrent Collect won
		return rel, nil
	}
	if _, err := s.aggregateJobs(ctx, p, false); err != nil {
		return nil, err
	}
	if err := s.st.close(ctx, taskID); err != nil {
		return nil, err
	}
	s.crash("leader-collect-closed")
	// Reports acknowledged before the task closed.
	if _, err := s.aggregateJobs(ctx, p, true); err != nil {
		return nil, err
	}
	return s.publish(ctx, p)
}

// publish combines both noised shares into the release (the lock held).
func (s *Server) publish(ctx context.Context, p *dap.Preparer) (*Release, error) {
	taskID := p.Task.ID
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
	s.crash("leader-collect-helper-shared")
	helper, err := p.Task.DecodeVec(hs.Share)
	if err != nil {
		return nil, fmt.Errorf("%w: its share: %v", errHelper, err)
	}
	a, err = s.st.collect(ctx, &p.Task, s.instance, nil, s.addNoise(&p.Task))
	if err != nil {
		return nil, err
	}
	s.crash("leader-collect-noised")
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
	if _, err := s.st.db.ExecContext(ctx, `INSERT INTO releases (task_id, body) VALUES (?, ?) ON CONFLICT (task_id) DO NOTHING`, taskID, string(b)); err != nil {
		return nil, fmt.Errorf("dap store: release: %w", err)
	}
	s.log.Info("release published", "task", taskID, "noise_sd", rel.NoiseSD)
	return s.release(ctx, taskID)
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
