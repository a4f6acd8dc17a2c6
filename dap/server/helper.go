package server

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"

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

// Job is a batch of reports the leader asks the helper to prepare.
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
	if err := decode(r, &t); err != nil {
		s.fail(w, err)
		return
	}
	if t.ID != r.PathValue("id") {
		s.fail(w, fmt.Errorf("%w: task id %q in the body, %q in the path", dap.ErrInvalid, t.ID, r.PathValue("id")))
		return
	}
	// The helper derives the task's privacy parameters from its plan
	// itself and applies its policy to what it derived.
	d, err := dap.Derive(t)
	if err != nil {
		s.fail(w, err)
		return
	}
	if s.cfg.MaxTaskRho > 0 && d.ChargeRho > s.cfg.MaxTaskRho {
		s.fail(w, fmt.Errorf("%w: task %q costs each user ρ %v (stated %v; %v if one aggregator omits its noise, derived from its plan); this helper's policy allows at most %v",
			dap.ErrInvalid, t.ID, d.ChargeRho, t.Rho, d.RhoAlone, s.cfg.MaxTaskRho))
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

func (s *Server) aggregationJob(w http.ResponseWriter, r *http.Request) {
	p, collected, err := s.preparer(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if collected {
		s.fail(w, fmt.Errorf("%w: task %q is collected", errConflict, p.Task.ID))
		return
	}
	var job Job
	if err := decode(r, &job); err != nil {
		s.fail(w, err)
		return
	}
	// A job names each report once by a well-formed ID (the leader sends
	// only such); anything else is refused whole, before any verdict is
	// stored.
	seen := make(map[string]bool, len(job.Reports))
	for i, jr := range job.Reports {
		if len(jr.ID) != dap.ReportIDSize || seen[string(jr.ID)] {
			s.fail(w, fmt.Errorf("%w: aggregation job: report %d: a missing, malformed or repeated report id", dap.ErrInvalid, i))
			return
		}
		seen[string(jr.ID)] = true
	}
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
		if len(jr.ID) != dap.ReportIDSize {
			reject("malformed report id")
			return
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
	s.mu.Lock()
	dup, err := s.st.commitJob(r.Context(), &p.Task, vs, outs)
	s.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	for i := range res.Results {
		if dup[string(res.Results[i].ID)] {
			res.Results[i] = JobResult{ID: res.Results[i].ID, Reason: "replayed report (already judged)"}
		}
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) aggregateShare(w http.ResponseWriter, r *http.Request) {
	p, _, err := s.preparer(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	var req ShareRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.st.aggregate(r.Context(), s.st.db, &p.Task)
	if err != nil {
		s.fail(w, err)
		return
	}
	if a.count != req.Count || !bytes.Equal(a.checksum, req.Checksum) {
		s.fail(w, fmt.Errorf("%w: task %q: the leader aggregated %d reports, the helper %d (or their IDs differ)", errConflict, p.Task.ID, req.Count, a.count))
		return
	}
	// The helper's own floor, whatever min_reports the leader wrote (a
	// share already released is returned again: it is the same noised
	// share, nothing new).
	if a.noised == nil && a.count < s.cfg.MinBatch {
		s.fail(w, fmt.Errorf("%w: task %q: %d valid reports; this helper releases aggregate shares of at least %d (its --min-batch)", dap.ErrInvalid, p.Task.ID, a.count, s.cfg.MinBatch))
		return
	}
	a, err = s.st.collect(r.Context(), &p.Task, func(v dap.Vec) { p.Task.AddNoise(v, s.noise) })
	if err != nil {
		s.fail(w, err)
		return
	}
	s.log.Info("aggregate share released (noised)", "task", p.Task.ID, "sigma", p.Task.Sigma)
	writeJSON(w, http.StatusOK, ShareResponse{Share: a.noised})
}
