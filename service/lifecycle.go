package service

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// Leaving and taking one's data: DELETE /v1/me deletes the caller's
// reports and states and revokes her token, keeping her ledger (see
// store.DeleteUser); GET /v1/me/export returns everything stored about
// her. The admin has both for a named user.

func (s *Server) deleteMe(w http.ResponseWriter, r *http.Request) {
	id, ok := s.authUser(w, r)
	if !ok {
		return
	}
	s.deleteUser(w, r, id)
}

func (s *Server) getMyExport(w http.ResponseWriter, r *http.Request) {
	id, ok := s.authUser(w, r)
	if !ok {
		return
	}
	s.exportUser(w, r, id)
}

func (s *Server) adminDeleteUser(w http.ResponseWriter, r *http.Request) {
	if s.authAdmin(w, r) {
		s.deleteUser(w, r, r.PathValue("id"))
	}
}

func (s *Server) adminExportUser(w http.ResponseWriter, r *http.Request) {
	if s.authAdmin(w, r) {
		s.exportUser(w, r, r.PathValue("id"))
	}
}

func noSuchUser(id string) *api.Error {
	return &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Field: "id", Message: fmt.Sprintf("no user %q", api.Truncate(id))}
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request, id string) {
	er, err := s.st.DeleteUser(r.Context(), id, s.opt.Now().UnixMilli())
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, noSuchUser(id))
		return
	}
	if err != nil {
		s.internal(w, r, "deleting the user", err)
		return
	}
	s.forgetUser(id)
	ex, err := s.st.ExportUser(r.Context(), id)
	if err != nil {
		s.internal(w, r, "deleting the user", err)
		return
	}
	if !er.Repeat {
		s.log.Info("user deleted", "user", id, "reports", er.Reports, "states", er.States)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, api.Deletion{User: id, Deleted: time.UnixMilli(er.DeletedMS).UTC(), ReportsDeleted: er.Reports,
		StatesDeleted: er.States, TokenRevoked: true, AlreadyDeleted: er.Repeat,
		Retained: api.Retained{Spent: store.Eps(ex.User.Spent), Budget: store.Eps(ex.User.Budget), Unit: s.cfg.LedgerUnit,
			ReportsCounted: ex.User.Reports, ReleaseCharges: releaseCharges(ex.Charges), Why: api.RetainedWhy}})
}

// forgetUser drops a user's tokens from the authentication cache.
func (s *Server) forgetUser(id string) {
	s.authMu.Lock()
	for h, e := range s.auth {
		if e.id == id {
			delete(s.auth, h)
		}
	}
	s.authMu.Unlock()
}

func releaseCharges(cs []store.ReleaseCharge) []api.ReleaseCharge {
	out := make([]api.ReleaseCharge, len(cs))
	for k, c := range cs {
		out[k] = api.ReleaseCharge{Release: c.Release, Charged: store.Eps(c.Nano)}
	}
	return out
}

func (s *Server) exportUser(w http.ResponseWriter, r *http.Request, id string) {
	ex, err := s.st.ExportUser(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, noSuchUser(id))
		return
	}
	if err != nil {
		s.internal(w, r, "exporting the user", err)
		return
	}
	u := ex.User
	out := api.Export{User: u.ID, Created: time.UnixMilli(u.CreatedMS).UTC(),
		Ledger: api.ExportLedger{Spent: store.Eps(u.Spent), Remaining: store.Eps(u.Budget - u.Spent), Budget: store.Eps(u.Budget),
			Unit: s.cfg.LedgerUnit, Reports: u.Reports, ErasedSpent: store.Eps(ex.ErasedNano), ErasedReports: ex.ErasedReports},
		Reports: make([]api.StoredReport, 0, len(ex.Reports)), States: make([]api.ExportState, 0, len(ex.States)),
		ReleaseCharges: releaseCharges(ex.Charges)}
	if ex.DeletedMS > 0 {
		t := time.UnixMilli(ex.DeletedMS).UTC()
		out.Deleted, out.Retained = &t, api.RetainedWhy
	}
	for _, rep := range ex.Reports {
		sr, err := storedReport(rep)
		if err != nil {
			s.internal(w, r, "exporting the user", err)
			return
		}
		out.Reports = append(out.Reports, sr)
	}
	for _, st := range ex.States {
		out.States = append(out.States, api.ExportState{Release: st.Release, State: st.State})
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="privrec-`+u.ID+`.json"`)
	writeJSON(w, http.StatusOK, out)
}

// pageParams reads ?limit= and ?cursor= of a listing, refusing any other
// parameter; on failure it has answered.
func pageParams(w http.ResponseWriter, q url.Values) (limit int, after int64, ok bool) {
	for k := range q {
		if k != "limit" && k != "cursor" {
			writeError(w, api.BadRequest(api.CodeUnknownField, k, "unknown query parameter %q (a listing takes limit and cursor)", api.Truncate(k)))
			return 0, 0, false
		}
	}
	limit = api.DefaultPageLimit
	if v, set := q["limit"]; set {
		n, err := strconv.Atoi(v[0])
		if err != nil || len(v) > 1 || n < 1 || n > api.MaxPageLimit {
			writeError(w, api.BadRequest(api.CodeInvalidValue, "limit", "limit must be one whole number 1…%d, got %q", api.MaxPageLimit, api.Truncate(v[0])))
			return 0, 0, false
		}
		limit = n
	}
	if v, set := q["cursor"]; set {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || len(v) > 1 || n < 0 {
			writeError(w, api.BadRequest(api.CodeInvalidValue, "cursor", "cursor %q is not one this server gave (use next_cursor of the previous page)", api.Truncate(v[0])))
			return 0, 0, false
		}
		after = n
	}
	return limit, after, true
}
