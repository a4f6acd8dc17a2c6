package server

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/privrec/privrec/dap"
)

// putModel publishes a model recipe (dap.Recipe): the settings a device
// needs to build a method's public model from the releases of its tasks,
// which must all be published already. A recipe is published once; the
// same name again is refused (409), as a release is.
func (s *Server) putModel(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var rec dap.Recipe
	if err := decode(w, r, maxJSONBody, &rec); err != nil {
		s.fail(w, err)
		return
	}
	if name := r.PathValue("name"); rec.Name != name {
		s.fail(w, fmt.Errorf("%w: recipe %q published at %q", dap.ErrInvalid, rec.Name, name))
		return
	}
	if err := rec.Validate(); err != nil {
		s.fail(w, err)
		return
	}
	for _, id := range rec.Tasks {
		if _, err := s.release(ctx, id); err != nil {
			s.fail(w, fmt.Errorf("%w: recipe %q: task %q has no release (%v)", dap.ErrInvalid, rec.Name, id, err))
			return
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		s.fail(w, fmt.Errorf("dap: encoding recipe: %w", err))
		return
	}
	res, err := s.st.db.ExecContext(ctx, `INSERT INTO models (name, body) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, rec.Name, string(b))
	if err != nil {
		s.fail(w, fmt.Errorf("dap store: %w", err))
		return
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		s.fail(w, fmt.Errorf("%w: model %q is already published", errConflict, rec.Name))
		return
	}
	s.log.Info("model recipe published", "model", rec.Name, "method", rec.Method, "tasks", strings.Join(rec.Tasks, ","))
	writeJSON(w, http.StatusCreated, rec)
}

// listModels lists the published recipes in the order they were published.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	rows, err := s.st.db.QueryContext(r.Context(), `SELECT body FROM models ORDER BY `+s.st.seq)
	if err != nil {
		s.fail(w, fmt.Errorf("dap store: %w", err))
		return
	}
	defer rows.Close()
	out := []json.RawMessage{}
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			s.fail(w, fmt.Errorf("dap store: %w", err))
			return
		}
		out = append(out, json.RawMessage(b))
	}
	if err := rows.Err(); err != nil {
		s.fail(w, fmt.Errorf("dap store: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	var b string
	err := s.st.db.QueryRowContext(r.Context(), `SELECT body FROM models WHERE name = ?`, r.PathValue("name")).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		s.fail(w, fmt.Errorf("model %q: %w", r.PathValue("name"), errNotFound))
		return
	}
	if err != nil {
		s.fail(w, fmt.Errorf("dap store: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, json.RawMessage(b))
}
