// Package server runs privrec's two aggregators over HTTP/JSON: the leader
// (devices enrol and upload reports to it; it drives aggregation and
// collection and keeps the per-user ρ ledger) and the helper (it sees only
// its encrypted input shares and report IDs, never who sent them). Each has
// its own SQLite database, HPKE key and noise; they share only the task
// verification secret and a bearer token for leader→helper requests.
//
// Endpoints (all under /dap/v1/):
//
//	both    GET  hpke_config                      the aggregator's HPKE public key
//	leader  GET  tasks, tasks/{id}                public task parameters
//	leader  POST users                            enrol: a user ID and a bearer token
//	leader  GET  ledger                           (user) her ρ spent and budget
//	leader  PUT  tasks/{id}/reports               (user) upload one report, charged ρ (JSON, or
//	                                              EncodeReport's binary encoding as ReportMediaType)
//	leader  POST admin/tasks                      (admin) create a task at both aggregators
//	leader  POST admin/tasks/{id}/aggregate       (admin) verify and aggregate pending reports
//	leader  POST admin/tasks/{id}/collect         (admin) noised shares → the release
//	leader  GET  tasks/{id}/release               the published release
//	leader  PUT  admin/models/{name}              (admin) publish a model recipe (dap.Recipe) over released tasks
//	leader  GET  models, models/{name}            the published model recipes: what a device needs to
//	                                              build a method's model from the releases (dap/devicemodel)
//	helper  PUT  tasks/{id}                       (leader) provision a task (the helper checks its ρ policy)
//	helper  POST tasks/{id}/aggregation_jobs      (leader) prepare a batch of reports
//	helper  POST tasks/{id}/aggregate_share       (leader) the helper's noised aggregate share
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/privacy/noise"
)

// Config configures one aggregator.
type Config struct {
	Role dap.Role
	// DB is the SQLite file (each aggregator its own).
	DB string
	// Key is the aggregator's HPKE key pair.
	Key dap.KeyPair
	// Secret is the verification secret both aggregators share (≥ 16 bytes).
	Secret []byte
	// AggregatorToken authenticates the leader to the helper.
	AggregatorToken string
	// Leader only: AdminToken for admin endpoints, HelperURL the helper's
	// base URL, BudgetRho each user's total ρ.
	AdminToken string
	HelperURL  string
	BudgetRho  float64
	// Helper only: MaxTaskRho, the largest ρ per task the helper's operator
	// agrees to provision (0: no limit of its own), applied to the ρ the
	// helper derives itself (dap.Derive: the charge a device would pay);
	// MinBatch, the fewest reports the helper releases an aggregate share
	// for, whatever min_reports the leader wrote (0: DefaultMinBatch).
	MaxTaskRho float64
	MinBatch   int
	// Noise is the source of the aggregator's discrete Gaussian noise; nil
	// means noise.Secure(). A seeded source is for tests and experiments.
	Noise *noise.Source
	// BatchSize is the number of reports per aggregation job (default 256).
	BatchSize int
	Logger    *slog.Logger
	Client    *http.Client
}

// DefaultMinBatch is the helper's own minimum batch when Config.MinBatch
// is 0.
const DefaultMinBatch = 100

// Server is one aggregator.
type Server struct {
	cfg   Config
	st    *store
	log   *slog.Logger
	noise *noise.Source

	mu    sync.Mutex // serializes aggregation and collection per server, and the noise source
	preps map[string]*dap.Preparer
}

// New opens the aggregator's store.
func New(ctx context.Context, cfg Config) (*Server, error) {
	switch {
	case cfg.Role != dap.Leader && cfg.Role != dap.Helper:
		return nil, fmt.Errorf("%w: role %v", dap.ErrInvalid, cfg.Role)
	case cfg.Key.Private == nil:
		return nil, fmt.Errorf("%w: no HPKE key", dap.ErrInvalid)
	case len(cfg.Secret) < 16:
		return nil, fmt.Errorf("%w: verification secret of %d bytes (want ≥ 16)", dap.ErrInvalid, len(cfg.Secret))
	case len(cfg.AggregatorToken) < 16:
		return nil, fmt.Errorf("%w: aggregator token shorter than 16 characters", dap.ErrInvalid)
	}
	if cfg.Role == dap.Leader {
		switch {
		case len(cfg.AdminToken) < 16:
			return nil, fmt.Errorf("%w: admin token shorter than 16 characters", dap.ErrInvalid)
		case cfg.HelperURL == "":
			return nil, fmt.Errorf("%w: the leader needs the helper's URL", dap.ErrInvalid)
		case !(cfg.BudgetRho > 0):
			return nil, fmt.Errorf("%w: per-user budget ρ %v must be positive", dap.ErrInvalid, cfg.BudgetRho)
		}
	}
	if cfg.Noise == nil {
		cfg.Noise = noise.Secure()
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.MinBatch <= 0 {
		cfg.MinBatch = DefaultMinBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	st, err := openStore(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, st: st, log: cfg.Logger.With("role", cfg.Role.String()), noise: cfg.Noise, preps: map[string]*dap.Preparer{}}, nil
}

// Close closes the store.
func (s *Server) Close() error { return s.st.Close() }

// Handler is the aggregator's HTTP API.
func (s *Server) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /dap/v1/hpke_config", s.hpkeConfig)
	if s.cfg.Role == dap.Leader {
		m.HandleFunc("GET /dap/v1/tasks", s.listTasks)
		m.HandleFunc("GET /dap/v1/tasks/{id}", s.getTask)
		m.HandleFunc("POST /dap/v1/users", s.enrol)
		m.HandleFunc("GET /dap/v1/ledger", s.ledger)
		m.HandleFunc("PUT /dap/v1/tasks/{id}/reports", s.upload)
		m.HandleFunc("POST /dap/v1/admin/tasks", s.admin(s.createTask))
		m.HandleFunc("POST /dap/v1/admin/tasks/{id}/aggregate", s.admin(s.aggregateHandler))
		m.HandleFunc("POST /dap/v1/admin/tasks/{id}/collect", s.admin(s.collectHandler))
		m.HandleFunc("GET /dap/v1/tasks/{id}/release", s.getRelease)
		m.HandleFunc("PUT /dap/v1/admin/models/{name}", s.admin(s.putModel))
		m.HandleFunc("GET /dap/v1/models", s.listModels)
		m.HandleFunc("GET /dap/v1/models/{name}", s.getModel)
	} else {
		m.HandleFunc("PUT /dap/v1/tasks/{id}", s.peer(s.provision))
		m.HandleFunc("POST /dap/v1/tasks/{id}/aggregation_jobs", s.peer(s.aggregationJob))
		m.HandleFunc("POST /dap/v1/tasks/{id}/aggregate_share", s.peer(s.aggregateShare))
	}
	return m
}

// HPKEConfig is an aggregator's published key.
type HPKEConfig struct {
	Role      string `json:"role"`
	PublicKey []byte `json:"public_key"`
}

// hpkeConfig answers any origin: a browser device served by the leader
// fetches the helper's key from the helper itself (cross-origin), so that
// the leader never hands her the key her helper share is sealed to. The
// key is public and the request carries no credentials.
func (s *Server) hpkeConfig(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	pk, err := s.cfg.Key.PublicBytes()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, HPKEConfig{Role: s.cfg.Role.String(), PublicKey: pk})
}

// preparer returns the cached Preparer of a task.
func (s *Server) preparer(ctx context.Context, id string) (*dap.Preparer, bool, error) {
	t, collected, err := s.st.task(ctx, id)
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.preps[id]; ok {
		return p, collected, nil
	}
	p, err := dap.NewPreparer(t, s.cfg.Role, s.cfg.Key, s.cfg.Secret)
	if err != nil {
		return nil, false, err
	}
	s.preps[id] = p
	return p, collected, nil
}

// bearer extracts a bearer token.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return t
	}
	return ""
}

func tokenEqual(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return s.guard(s.cfg.AdminToken, h)
}

func (s *Server) peer(h http.HandlerFunc) http.HandlerFunc {
	return s.guard(s.cfg.AggregatorToken, h)
}

func (s *Server) guard(token string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !tokenEqual(bearer(r), token) {
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		h(w, r)
	}
}

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

// errConflict and errBudget map to 409 and 403.
var (
	errConflict = errors.New("conflict")
	errBudget   = errors.New("over budget")
)

func (s *Server) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, dap.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, errNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, errConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, errBudget):
		writeError(w, http.StatusForbidden, err.Error())
	default:
		s.log.Error("request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

// maxBody bounds a request body (a report at MaxDimension·32 bits is far
// below; a batch of 256 reports of ML-1M's catalogue is ≈ 20 MB).
const maxBody = 256 << 20

// decode reads a JSON body into v; unknown fields and trailing data are
// errors naming the request.
func decode(r *http.Request, v any) error {
	d := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %s %s: body: %v", dap.ErrInvalid, r.Method, r.URL.Path, err)
	}
	if d.More() {
		return fmt.Errorf("%w: %s %s: trailing data after the JSON body", dap.ErrInvalid, r.Method, r.URL.Path)
	}
	return nil
}
