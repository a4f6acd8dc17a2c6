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
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service/api"
)

// Config configures one aggregator.
type Config struct {
	Role dap.Role
	// DB is the aggregator's database (each aggregator its own): an
	// SQLite file (FILE or sqlite:FILE) or a PostgreSQL URL
	// (postgres://…), which several leader processes may share.
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
	// Client is the leader's client to the helper; nil: one with
	// HelperTimeout per request.
	Client *http.Client
	// HelperTimeout bounds each request to the helper when Client is nil
	// (default 2 minutes: a job of 256 Gram reports takes the helper ≈ 25 s
	// of CPU on one core).
	HelperTimeout time.Duration

	// Mode says whether the database must exist already or be new
	// (default OpenOrCreate).
	Mode StoreMode
	// LockTTL is the lease a leader process takes on an aggregation job
	// while it runs it, and on a task while it collects it (renewed every
	// third of it; after a crash another process takes the job, or the
	// task, over once it runs out). Default 30 s. LockWait is how long a
	// collect call waits for the task's lock before it is answered 503
	// with Retry-After (default 60 s).
	LockTTL, LockWait time.Duration
	// MinFreeBytes: below this much free space on the database's file
	// system the aggregator refuses what would write (uploads, enrolment,
	// aggregation jobs; 503 with Retry-After) and /readyz answers 503.
	// 0: 64 MiB; negative: no check.
	MinFreeBytes int64
	// EnrolRate and EnrolBurst admit enrolments (token bucket, per client
	// address and, at 4× each, overall; EnrolRate 0: no limit, EnrolBurst
	// 0: 100); MaxUsers caps the users enrolled (0: no cap).
	EnrolRate  float64
	EnrolBurst int
	MaxUsers   int64
	// Crash, when set, is called at named steps of upload, aggregation and
	// collection (fault-injection tests kill the process there).
	Crash func(step string)
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
	// instance names this process in task leases; claims numbers its
	// aggregation runs (each claims jobs under its own name).
	instance string
	claims   atomic.Uint64

	mu    sync.Mutex // guards preps, sizes, locks and the noise source
	preps map[string]*dap.Preparer
	sizes map[string]int64
	locks map[string]chan struct{}

	enrolAddr, enrolAll *limiter
	ready               readiness

	// uploads feeds the leader's upload writer (group commit); quit stops
	// it, and writerDone is closed when it has.
	uploads          chan *uploadReq
	quit, writerDone chan struct{}
	closeOnce        sync.Once
	closeErr         error
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
	if cfg.HelperTimeout <= 0 {
		cfg.HelperTimeout = 2 * time.Minute
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.HelperTimeout}
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = 30 * time.Second
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = time.Minute
	}
	if cfg.MinFreeBytes == 0 {
		cfg.MinFreeBytes = 64 << 20
	}
	if cfg.EnrolBurst <= 0 {
		cfg.EnrolBurst = 100
	}
	set, err := fingerprints(&cfg)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, cfg.DB, cfg.Mode, set)
	if err != nil {
		return nil, err
	}
	var rnd [9]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		st.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, st: st, log: cfg.Logger.With("role", cfg.Role.String()), noise: cfg.Noise,
		instance: base64.RawURLEncoding.EncodeToString(rnd[:]),
		preps:    map[string]*dap.Preparer{}, sizes: map[string]int64{}, locks: map[string]chan struct{}{}}
	if cfg.EnrolRate > 0 {
		s.enrolAddr, s.enrolAll = newLimiter(cfg.EnrolRate, cfg.EnrolBurst), newLimiter(4*cfg.EnrolRate, 4*cfg.EnrolBurst)
	}
	s.ready.s = s
	s.uploads, s.quit, s.writerDone = make(chan *uploadReq), make(chan struct{}), make(chan struct{})
	if cfg.Role == dap.Leader {
		go s.writeUploads()
	} else {
		close(s.writerDone)
	}
	return s, nil
}

// fingerprints are the settings a database is bound to: the role and
// short hashes of the HPKE public key and of the verification secret.
func fingerprints(cfg *Config) (settings, error) {
	pk, err := cfg.Key.PublicBytes()
	if err != nil {
		return nil, fmt.Errorf("dap: HPKE key: %w", err)
	}
	k := sha256.Sum256(pk)
	sec := sha256.Sum256(append([]byte("privrec/dap verification secret fingerprint/"), cfg.Secret...))
	return settings{"role": cfg.Role.String(), "hpke_key": hex.EncodeToString(k[:8]), "secret": hex.EncodeToString(sec[:8])}, nil
}

// crash calls the fault-injection hook at step.
func (s *Server) crash(step string) {
	if s.cfg.Crash != nil {
		s.cfg.Crash(step)
	}
}

// Close stops the upload writer and closes the store.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.writerDone
		s.closeErr = s.st.Close()
	})
	return s.closeErr
}

// Handler is the aggregator's HTTP API.
func (s *Server) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /livez", s.live)
	m.HandleFunc("GET /readyz", s.readyHandler)
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
		m.HandleFunc("PUT /dap/v1/tasks/{id}/aggregation_jobs/{job}", s.peer(s.aggregationJob))
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
	s.mu.Lock()
	p, ok := s.preps[id]
	s.mu.Unlock()
	if ok { // a task's parameters never change: only its state is read again
		collected, err := s.st.collected(ctx, id)
		return p, collected, err
	}
	t, collected, err := s.st.task(ctx, id)
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.preps[id]; ok {
		return p, collected, nil
	}
	p, err = dap.NewPreparer(t, s.cfg.Role, s.cfg.Key, s.cfg.Secret)
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

// errConflict, errBudget, errTooLarge and errUnavailable map to 409,
// 403, 413 and 503; errHelper to 502 (the helper unreachable, or failing).
var (
	errConflict    = errors.New("conflict")
	errBudget      = errors.New("over budget")
	errTooLarge    = errors.New("request body too large")
	errUnavailable = errors.New("unavailable")
	errHelper      = errors.New("the helper failed")
)

// retryAfter is the Retry-After (seconds) of a 502 or 503.
const retryAfter = "5"

func (s *Server) fail(w http.ResponseWriter, err error) {
	var sq *sqlite.Error
	dbWhy, pgDown := pgUnavailable(err) // why the database refused (SQLite's: below)
	switch {
	case errors.Is(err, dap.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, errNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, errConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, errBudget):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, errTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, errUnavailable), errors.Is(err, errLocked), errors.As(err, &sq), pgDown:
		// The database (full, failing, busy) or the task's lock: nothing
		// was changed; the client retries.
		s.log.Warn("request refused: unavailable", "err", err)
		w.Header().Set("Retry-After", retryAfter)
		msg := err.Error()
		if sq != nil {
			dbWhy = sqlite.ErrorCodeString[sq.Code()&0xff]
		}
		if dbWhy != "" {
			msg = "the aggregator's database cannot take it right now (" + dbWhy + "); nothing was changed; retry later"
		}
		writeError(w, http.StatusServiceUnavailable, msg)
	case errors.Is(err, errHelper):
		s.log.Warn("request failed at the helper", "err", err)
		w.Header().Set("Retry-After", retryAfter)
		code := http.StatusBadGateway
		if errors.Is(err, errUnavailable) {
			code = http.StatusServiceUnavailable
		}
		writeError(w, code, err.Error())
	default:
		s.log.Error("request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

// maxJSONBody bounds a JSON request body other than a report (a task
// with its plan, an aggregation job: a batch of 256 reports' helper
// shares and prep shares is well under 1 MB).
const maxJSONBody = 32 << 20

// limitBody refuses a body over limit bytes before it is read (a
// Content-Length over it) or as it is read (a chunked body).
func limitBody(w http.ResponseWriter, r *http.Request, limit int64) error {
	if r.ContentLength > limit {
		return fmt.Errorf("%w: %s %s: body of %d bytes; at most %d are accepted here", errTooLarge, r.Method, r.URL.Path, r.ContentLength, limit)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	return nil
}

// decode reads a JSON body into v strictly, as the central API does
// (api.DecodeStrict: unknown, repeated or wrong-case members, trailing
// data and invalid UTF-8 are errors naming the request); a body over
// limit bytes is refused (413).
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if err := limitBody(w, r, limit); err != nil {
		return err
	}
	if e := api.DecodeStrict(r.Body, v); e != nil {
		if e.Status == http.StatusRequestEntityTooLarge {
			return fmt.Errorf("%w: %s %s: %s", errTooLarge, r.Method, r.URL.Path, e.Message)
		}
		return fmt.Errorf("%w: %s %s: body: %s", dap.ErrInvalid, r.Method, r.URL.Path, e.Message)
	}
	return nil
}
