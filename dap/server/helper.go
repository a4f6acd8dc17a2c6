package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	"github.com/privrec/privrec/dap"
)

// JobReport is one report in an aggregation job: what the helper needs of
// it, and the leader's prep share (absent when the leader already
// rejected the report; the helper then rejects it too).
type JobReport struct {
	ID               []byte     `json:"id"`
	PublicShare      []byte     `json:"public_share"`
	HelperShare      dap.Sealed `json:"helper_share"`
	LeaderPrepShare  []byte     `json:"leader_prep_share,omitempty"`
	LeaderRejectedAs string     `json:"leader_rejected_as,omitempty"`
}

// Job is a batch of reports the leader asks the helper to prepare (PUT
// tasks/{id}/aggregation_jobs/{job}). The job ID is the leader's: the
// helper keeps each job's answer, so the same job sent again (the
// leader retrying after a crash or a lost answer) gets the same answer,
// and its reports are counted once.
type Job struct {
	Reports []JobReport `json:"reports"`
}

// JobResult is the helper's verdict on one report, with its prep share so
// the leader decides the proof itself.
type JobResult struct {
	ID              []byte `json:"id"`
	HelperPrepShare []byte `json:"helper_prep_share,omitempty"`
	Accepted        bool   `json:"accepted"`
	Reason          string `json:"reason,omitempty"`
}

// JobResponse answers a Job, one result per report in order.
type JobResponse struct {
	Results []JobResult `json:"results"`
}

// ShareRequest asks for the helper's aggregate share; the leader states
// the number of reports it aggregated and their checksum, and the helper
// refuses unless its own agree (DAP's batch check).
type ShareRequest struct {
	Count    int    `json:"count"`
	Checksum []byte `json:"checksum"`
}

// ShareResponse is the helper's noised aggregate share.
type ShareResponse struct {
	Share []byte `json:"share"`
}

// xorChecksum folds SHA-256(id) into sum.
func xorChecksum(sum, id []byte) {
	h := sha256.Sum256(id)
	for i := range sum {
		sum[i] ^= h[i]
	}
}

func (s *Server) provision(w http.ResponseWriter, r *http.Request) {
	var t dap.Task
	if err := decode(w, r, maxJSONBody, &t); err != nil {
		s.fail(w, err)
		return
	}
	if t.ID != r.PathValue("id") {
		s.fail(w, fmt.Errorf("%w: task id %q in the body, %q in the path", dap.ErrInvalid, t.ID, r.PathValue("id")))
		return
	}
	d, err := s.policy(&t)
	if err != nil {
		s.fail(w, err)
		return
	}
	if err := s.st.putTask(r.Context(), t); err != nil {
		s.fail(w, err)
		return
	}
	s.log.Info("task provisioned", "task", t.ID, "dimension", t.Dimension, "rho", t.Rho, "noise", t.Noise,
		"derived_sensitivity", d.Sensitivity, "derived_rho_alone", d.RhoAlone)
	writeJSON(w, http.StatusCreated, t)
}

// policy is the helper's check of a task: it derives the task's privacy
// parameters from its plan itself (dap.Derive) and applies its ρ policy
// to what it derived. It runs at provisioning and again before a share
// is released (a task stored by an older helper is checked too).
func (s *Server) policy(t *dap.Task) (dap.Derived, error) {
	d, err := dap.Derive(*t)
	if err != nil {
		return d, err
	}
	if s.cfg.MaxTaskRho > 0 && d.ChargeRho > s.cfg.MaxTaskRho {
		return d, fmt.Errorf("%w: task %q costs each user ρ %v (stated %v; %v if one aggregator omits its noise, derived from its plan); this helper's policy allows at most %v",
			dap.ErrInvalid, t.ID, d.ChargeRho, t.Rho, d.RhoAlone, s.cfg.MaxTaskRho)
	}
	return d, nil
}

// jobIDRE is the shape of an aggregation job ID.
var jobIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{8,64}$`)

func (s *Server) aggregationJob(w http.ResponseWriter, r *http.Request) {
	jobID := r.PathValue("job")
	if !jobIDRE.MatchString(jobID) {
		s.fail(w, fmt.Errorf("%w: aggregation job id %q: want 8–64 of [A-Za-z0-9_-]", dap.ErrInvalid, jobID))
		return
	}
	p, collected, err := s.preparer(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	var job Job
	if err := decode(w, r, maxJSONBody, &job); err != nil {
		s.fail(w, err)
		return
	}
	// A job names each report once by a well-formed ID (the leader sends
	// only such); anything else is refused whole, before any verdict is
	// stored.
	if len(job.Reports) == 0 {
		s.fail(w, fmt.Errorf("%w: aggregation job %s names no report", dap.ErrInvalid, jobID))
		return
	}
	seen := make(map[string]bool, len(job.Reports))
	ids := make([]byte, 0, len(job.Reports)*dap.ReportIDSize)
	for i, jr := range job.Reports {
		if len(jr.ID) != dap.ReportIDSize || seen[string(jr.ID)] {
			s.fail(w, fmt.Errorf("%w: aggregation job: report %d: a missing, malformed or repeated report id", dap.ErrInvalid, i))
			return
		}
		seen[string(jr.ID)] = true
		ids = append(ids, jr.ID...)
	}
	// A job answered before is answered again, as it was.
	oldIDs, old, err := s.st.storedJob(r.Context(), s.st.db, p.Task.ID, jobID)
	if err != nil {
		s.fail(w, err)
		return
	}
	if oldIDs != nil {
		if !bytes.Equal(oldIDs, ids) {
			s.fail(w, fmt.Errorf("%w: aggregation job %s of task %q was sent before with other reports", errConflict, jobID, p.Task.ID))
			return
		}
		s.log.Info("aggregation job repeated: the stored answer is sent again", "task", p.Task.ID, "job", jobID)
		writeRaw(w, old)
		return
	}
	if collected {
		s.fail(w, fmt.Errorf("%w: task %q is collected", errConflict, p.Task.ID))
		return
	}
	if err := s.roomToWrite(); err != nil {
		s.fail(w, err)
		return
	}
	res, vs, outs := s.prepareJob(p, &job)
	s.crash("helper-job-prepared")
	resp, err := s.st.commitHelperJob(r.Context(), &p.Task, jobID, ids, vs, outs, func(dup map[string]bool) ([]byte, error) {
		for i := range res.Results {
			if dup[string(res.Results[i].ID)] {
				res.Results[i] = JobResult{ID: res.Results[i].ID, Reason: "replayed report (already judged in another job)"}
			}
		}
		return json.Marshal(res)
	})
	if err != nil {
		s.fail(w, err)
		return
	}
	s.crash("helper-job-committed")
	writeRaw(w, resp)
}

// prepareJob prepares the helper's shares of a job's reports and decides
// each proof on both prep shares.
func (s *Server) prepareJob(p *dap.Preparer, job *Job) (JobResponse, []verdict, []dap.Vec) {
	res := JobResponse{Results: make([]JobResult, len(job.Reports))}
	vs := make([]verdict, len(job.Reports))
	outs := make([]dap.Vec, len(job.Reports))
	parallel(len(job.Reports), func(i int) {
		jr := &job.Reports[i]
		res.Results[i].ID = jr.ID
		reject := func(why string) {
			res.Results[i].Reason = why
			vs[i] = verdict{id: jr.ID, reason: why}
		}
		prep, err := p.Prepare(jr.ID, jr.PublicShare, jr.HelperShare)
		if err != nil {
			reject(err.Error())
			return
		}
		res.Results[i].HelperPrepShare = prep.Share
		if jr.LeaderPrepShare == nil {
			reject("rejected by the leader: " + jr.LeaderRejectedAs)
			return
		}
		out, err := p.Finish(prep, jr.LeaderPrepShare, prep.Share)
		if err != nil {
			reject(err.Error())
			return
		}
		res.Results[i].Accepted = true
		vs[i] = verdict{id: jr.ID, accepted: true}
		outs[i] = out
	})
	return res, vs, outs
}

// writeRaw answers 200 with a stored JSON body.
func writeRaw(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (s *Server) aggregateShare(w http.ResponseWriter, r *http.Request) {
	p, _, err := s.preparer(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	var req ShareRequest
	if err := decode(w, r, maxJSONBody, &req); err != nil {
		s.fail(w, err)
		return
	}
	if _, err := s.policy(&p.Task); err != nil {
		s.fail(w, err)
		return
	}
	check := func(a aggregate) error {
		if a.count != req.Count || !bytes.Equal(a.checksum, req.Checksum) {
			return fmt.Errorf("%w: task %q: the leader aggregated %d reports, the helper %d (or their IDs differ)", errConflict, p.Task.ID, req.Count, a.count)
		}
		// The helper's own floor, whatever min_reports the leader wrote
		// (a share already released is returned again: it is the same
		// noised share, nothing new).
		if a.noised == nil && a.count < s.cfg.MinBatch {
			return fmt.Errorf("%w: task %q: %d valid reports; this helper releases aggregate shares of at least %d (its --min-batch)", dap.ErrInvalid, p.Task.ID, a.count, s.cfg.MinBatch)
		}
		return nil
	}
	a, err := s.st.collect(r.Context(), &p.Task, "", check, s.addNoise(&p.Task))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.crash("helper-share-collected")
	s.log.Info("aggregate share released (noised)", "task", p.Task.ID, "sigma", p.Task.Sigma)
	writeJSON(w, http.StatusOK, ShareResponse{Share: a.noised})
}
