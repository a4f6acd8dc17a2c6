// Package service is `privrec serve`: the collection and serving system.
// Users enrol and receive a secret token (the server keeps only its
// SHA-256); in local mode each user's device randomizes a report over the
// whole published catalogue and submits it, and the server debits her
// privacy ledger and stores the report in one durable transaction, refusing
// anything beyond her budget; an administrator trains a method on the
// stored reports and publishes its Release, whose public part every
// client downloads to compute her own recommendations from her own
// ratings. docs/SERVICE.md describes the API, the threat model and the
// operations; docs/openapi.yaml the wire format.
package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// Server serves the API over a store.
type Server struct {
	opt     Options
	cfg     *api.Config
	cfgJSON []byte
	charge  int64 // nano-ε debited per report
	version int   // the collection version reports are stored under
	budget  int64 // nano-ε of every new user
	st      store.Store
	b       *batcher
	m       *metrics
	log     *slog.Logger
	users   *limiter
	enrols  *limiter
	admin   [32]byte
	isAdm   bool
	mux     *http.ServeMux

	authMu sync.RWMutex
	auth   map[[32]byte]authEntry // token hash → user (positive lookups, for authTTL)
	admMu  sync.Mutex
	adm    map[[32]byte]admEntry // token hash → admin verdict, for authTTL

	ready *readiness
	errs  *errLog
	// stopping is set when a shutdown begins.
	stopping atomic.Bool

	relMu    sync.Mutex // one training at a time
	docMu    sync.Mutex
	docCache map[int64][]byte // published release documents by ID (immutable)
}

// New checks the options, records (or checks) the collection in the
// store, and starts the group-commit writer. Close stops it.
func New(ctx context.Context, st store.Store, opt Options) (*Server, error) {
	opt.defaults()
	cfg, err := BuildConfig(opt)
	if err != nil {
		return nil, err
	}
	version, err := openCollection(ctx, st, cfg, opt)
	if err != nil {
		return nil, err
	}
	s := &Server{opt: opt, cfg: cfg, st: st, version: version, m: newMetrics(), log: opt.Log,
		users: newLimiter(opt.Rate, opt.Burst), enrols: newLimiter(opt.EnrollRate, opt.EnrollBurst),
		auth: map[[32]byte]authEntry{}, adm: map[[32]byte]admEntry{}, docCache: map[int64][]byte{}}
	if cfg.Mode == api.ModeLocal {
		if s.charge, err = store.ChargeNano(cfg.ReportEpsilon); err != nil {
			return nil, err
		}
	}
	if s.budget, err = store.BudgetNano(LedgerBudget(cfg)); err != nil {
		return nil, err
	}
	if s.cfgJSON, err = json.Marshal(cfg); err != nil {
		return nil, fmt.Errorf("encoding the configuration: %w", err)
	}
	if opt.AdminToken != "" {
		if len(opt.AdminToken) < 16 {
			return nil, fmt.Errorf("the admin token must be at least 16 characters")
		}
		s.admin, s.isAdm = sha256.Sum256([]byte(opt.AdminToken)), true
	}
	writers := max(opt.Writers, 1)
	if st.Kind() == "sqlite" {
		writers = 1 // one write connection
	}
	s.ready = &readiness{st: st, now: opt.Now}
	s.errs = newErrLog(opt.Log, 10*time.Second, opt.Now)
	s.b = newBatcher(st, opt.MaxBatch, writers, s.m, s.ready.wrote)
	s.routes()
	return s, nil
}

// Config is the published collection configuration.
func (s *Server) Config() *api.Config { return s.cfg }

// Handler is the HTTP handler of the whole API.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops the writer after the writes already queued. Call it after
// the HTTP server has shut down; it does not close the store.
func (s *Server) Close() { s.b.close() }

// route registers a path whose methods are dispatched here, so that a
// wrong method gets a JSON 405 like every other error.
func (s *Server) route(path string, handlers map[string]http.HandlerFunc) {
	allow := slices.Sorted(maps.Keys(handlers)) // one order for the Allow header and the message
	s.mux.Handle(path, s.instrument(path, func(w http.ResponseWriter, r *http.Request) {
		h, ok := handlers[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = handlers[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, &api.Error{Status: http.StatusMethodNotAllowed, Code: api.CodeMethod,
				Message: fmt.Sprintf("%s does not take %s (allowed: %s)", path, r.Method, strings.Join(allow, ", "))})
			return
		}
		h(w, r)
	}))
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.route(api.PathConfig, map[string]http.HandlerFunc{http.MethodGet: s.getConfig})
	s.route(api.PathEnroll, map[string]http.HandlerFunc{http.MethodPost: s.postEnroll})
	s.route(api.PathMe, map[string]http.HandlerFunc{http.MethodGet: s.getMe, http.MethodDelete: s.deleteMe})
	s.route(api.PathMyExport, map[string]http.HandlerFunc{http.MethodGet: s.getMyExport})
	s.route(api.PathAdminUsers+"/{id}", map[string]http.HandlerFunc{http.MethodDelete: s.adminDeleteUser})
	s.route(api.PathAdminUsers+"/{id}/export", map[string]http.HandlerFunc{http.MethodGet: s.adminExportUser})
	s.route(api.PathMyToken, map[string]http.HandlerFunc{http.MethodPost: s.postMyToken})
	s.route(api.PathAdminTokens, map[string]http.HandlerFunc{http.MethodGet: s.getAdminTokens, http.MethodPost: s.postAdminTokens})
	s.route(api.PathAdminTokens+"/{id}", map[string]http.HandlerFunc{http.MethodDelete: s.deleteAdminToken})
	s.route(api.PathAdminToken, map[string]http.HandlerFunc{http.MethodPost: s.postAdminToken})
	s.route(api.PathAdminUsers+"/{id}/token", map[string]http.HandlerFunc{http.MethodPost: s.postUserToken, http.MethodDelete: s.deleteUserToken})
	s.route(api.PathMyState, map[string]http.HandlerFunc{http.MethodGet: s.getMyState})
	s.route(api.PathReports, map[string]http.HandlerFunc{http.MethodPost: s.postReport, http.MethodGet: s.getReports})
	s.route(api.PathReports+"/{id}", map[string]http.HandlerFunc{http.MethodGet: s.getReport})
	s.route(api.PathLatestRelease, map[string]http.HandlerFunc{http.MethodGet: s.getLatestRelease})
	s.route(api.PathReleases+"/{id}", map[string]http.HandlerFunc{http.MethodGet: s.getRelease})
	s.route(api.PathAdminReleases, map[string]http.HandlerFunc{http.MethodPost: s.postRelease})
	s.route(api.PathAdminStats, map[string]http.HandlerFunc{http.MethodGet: s.getStats})
	s.route(api.PathHealth, map[string]http.HandlerFunc{http.MethodGet: s.getReady})
	s.route(api.PathReady, map[string]http.HandlerFunc{http.MethodGet: s.getReady})
	s.route(api.PathLive, map[string]http.HandlerFunc{http.MethodGet: s.getLive})
	// The metrics count enrolments, reports and releases refused for lack
	// of budget exactly: facts about the users, not covered by any
	// guarantee, so they are the admin's (as GET /v1/admin/stats is).
	metrics := promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{})
	s.route(api.PathMetrics, map[string]http.HandlerFunc{http.MethodGet: func(w http.ResponseWriter, r *http.Request) {
		if !s.authAdmin(w, r) {
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		metrics.ServeHTTP(w, r)
	}})
	s.mux.Handle("/v1/", s.instrument("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: fmt.Sprintf("no endpoint %s", r.URL.Path)})
	}))
	root := s.opt.Root
	if root == nil {
		root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: fmt.Sprintf("no endpoint %s (the API is under /v1/)", r.URL.Path)})
		})
	}
	s.mux.Handle("/", s.instrument("/", root.ServeHTTP))
}

// recorder captures what a handler answered, for metrics and logs.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
	user   string
	// quiet: the handler logged its failure already (rate-limited).
	quiet bool
	// cut: a shutdown stopped reading the request's body; whatever the
	// handler answers, the client gets 503 with Retry-After.
	cut bool
}

// writeCut answers a request whose body a shutdown stopped reading.
func (r *recorder) writeCut() {
	if r.status != 0 {
		return
	}
	r.status = http.StatusServiceUnavailable
	b, _ := json.Marshal(&api.Error{Status: r.status, Code: api.CodeUnavailable,
		Message: "the server is shutting down and stopped reading this request before its body arrived; nothing was stored; retry"})
	h := r.ResponseWriter.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	h.Set("Retry-After", retryAfter)
	h.Set("Connection", "close")
	r.ResponseWriter.WriteHeader(r.status)
	r.ResponseWriter.Write(append(b, '\n'))
}

// cutBody notes when a shutdown's read deadline ends a body's read.
type cutBody struct {
	io.ReadCloser
	s   *Server
	rec *recorder
}

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.s.stopping.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		b.rec.cut = true
	}
	return n, err
}

func (r *recorder) WriteHeader(code int) {
	if r.cut {
		r.writeCut()
		return
	}
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.cut {
		r.writeCut()
		return len(b), nil
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument records metrics and writes one structured log line per
// request (at debug level when it succeeded): method, route, status,
// duration, the user ID when authenticated — never a token, a body or a
// report value.
func (s *Server) instrument(route string, h http.HandlerFunc) http.Handler {
	lat := s.m.latency.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		w.Header()["X-Content-Type-Options"] = []string{"nosniff"}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			r.Body = &cutBody{ReadCloser: r.Body, s: s, rec: rec}
		}
		h(rec, r)
		if rec.cut {
			rec.writeCut()
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		d := time.Since(start)
		lat.Observe(d.Seconds())
		s.m.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
		level := slog.LevelDebug
		switch {
		case rec.status >= 500 && rec.quiet:
			level = slog.LevelDebug
		case rec.status >= 500:
			level = slog.LevelError
		case rec.status >= 400:
			level = slog.LevelInfo
		}
		if s.log.Enabled(r.Context(), level) {
			attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", route), slog.Int("status", rec.status),
				slog.Float64("ms", float64(d.Microseconds())/1000), slog.Int("bytes", rec.bytes)}
			if rec.user != "" {
				attrs = append(attrs, slog.String("user", rec.user))
			}
			s.log.LogAttrs(r.Context(), level, "request", attrs...)
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, &api.Error{Status: http.StatusInternalServerError, Code: api.CodeInternal, Message: "encoding the answer failed"})
		return
	}
	writeJSONBytes(w, status, b)
}

// writeAck answers a report: json.Marshal's encoding of a, written
// without reflection (this runs for every report).
func writeAck(w http.ResponseWriter, status int, a api.Ack) {
	buf := make([]byte, 0, 256)
	b, ok := a.AppendJSON(buf)
	if !ok {
		writeJSON(w, status, a)
		return
	}
	b = append(b, '\n')
	writeJSONHeader(w, status, len(b))
	w.Write(b)
}

// writeJSONBytes writes b, a JSON document, and a newline.
func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	writeJSONHeader(w, status, len(b)+1)
	w.Write(b)
	w.Write([]byte{'\n'})
}

// writeJSONHeader sets the headers of a JSON answer of n bytes and
// writes the status.
func writeJSONHeader(w http.ResponseWriter, status, n int) {
	h := w.Header()
	// Canonical keys assigned directly: no canonicalization per answer.
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(n)}
	w.WriteHeader(status)
}

func writeError(w http.ResponseWriter, e *api.Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="privrec"`)
	}
	writeJSON(w, e.Status, e)
}

// internal answers a failure: a database's (503 with Retry-After: see
// unavailable) or, marked serverFault, the server's own (500); the cause
// is logged, rate-limited, and not answered.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client hung up before its write was queued: nothing was
		// stored, and nobody is listening for the answer.
		writeError(w, &api.Error{Status: 499, Code: api.CodeUnavailable, Message: "request cancelled"})
		return
	}
	if errors.Is(err, errClosed) {
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, Message: "the server is shutting down; retry"})
		return
	}
	var fault serverFault
	if !errors.As(err, &fault) {
		s.unavailable(w, r, what, err)
		return
	}
	s.errs.log(r.Context(), what, err)
	quiet(w)
	writeError(w, &api.Error{Status: http.StatusInternalServerError, Code: api.CodeInternal, Message: what + " failed"})
}

// bearer extracts the bearer token of a request ("" when none).
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || len(tok) > 256 {
		return ""
	}
	return strings.TrimSpace(tok)
}

// authUser authenticates a user call and applies her rate limit; on
// failure it has answered and returns false.
func (s *Server) authUser(w http.ResponseWriter, r *http.Request) (string, bool) {
	tok := bearer(r)
	if tok == "" {
		writeError(w, &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: "missing bearer token: send Authorization: Bearer TOKEN (the token from POST " + api.PathEnroll + ")"})
		return "", false
	}
	h := sha256.Sum256([]byte(tok))
	id, e := s.userOf(r.Context(), h)
	if e != nil {
		if e.Status >= 500 {
			s.internal(w, r, "authentication", e)
		} else {
			writeError(w, e)
		}
		return "", false
	}
	if rec, ok := w.(*recorder); ok {
		rec.user = id
	}
	if !s.users.allow(id, s.opt.Now()) {
		s.m.rateLimited.Inc()
		w.Header().Set("Retry-After", "1")
		writeError(w, &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeRateLimited,
			Message: fmt.Sprintf("too many requests for this token (limit %g per second, burst %d)", s.opt.Rate, s.opt.Burst)})
		return "", false
	}
	return id, true
}

// authAdmin checks the admin token: a token recorded in the database
// (privrec serve token create) that is neither revoked nor expired, or
// the configured one (constant-time on its hash) unless the database
// records it revoked.
func (s *Server) authAdmin(w http.ResponseWriter, r *http.Request) bool {
	h := sha256.Sum256([]byte(bearer(r)))
	ok, known, err := s.adminOK(r.Context(), h)
	if err != nil {
		s.internal(w, r, "authentication", err)
		return false
	}
	if !ok && !known && !s.isAdm {
		writeError(w, &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: "the admin API is disabled: start the server with --admin-token-file FILE or PRIVREC_ADMIN_TOKEN, or create an admin token with privrec serve token create"})
		return false
	}
	if !ok {
		writeError(w, &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: "a valid admin token is required (unknown, revoked or expired)"})
		return false
	}
	if rec, ok := w.(*recorder); ok {
		rec.user = "admin"
	}
	return true
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=60")
	writeJSONBytes(w, http.StatusOK, s.cfgJSON)
}

// clientAddr is the address enrolment is rate-limited by.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// jsonBody checks a request body's Content-Type (415 unless JSON) and
// bounds its size; on failure it has answered and returns nil.
func jsonBody(w http.ResponseWriter, r *http.Request, limit int64) io.Reader {
	if e := api.CheckContentType(r.Header.Get("Content-Type"), r.ContentLength); e != nil {
		writeError(w, e)
		return nil
	}
	return http.MaxBytesReader(w, r.Body, limit)
}

func (s *Server) postEnroll(w http.ResponseWriter, r *http.Request) {
	if s.opt.EnrollAdminOnly {
		if !s.authAdmin(w, r) {
			return
		}
	} else if !s.enrols.allow("addr:"+clientAddr(r), s.opt.Now()) {
		s.m.rateLimited.Inc()
		w.Header().Set("Retry-After", "1")
		writeError(w, &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeRateLimited,
			Message: fmt.Sprintf("too many enrolments from this address (limit %g per second, burst %d)", s.opt.EnrollRate, s.opt.EnrollBurst)})
		return
	}
	if !emptyBody(w, r) {
		return
	}
	var idb [10]byte
	rand.Read(idb[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	id := "u_" + hex.EncodeToString(idb[:])
	tok := NewToken("prt_")
	h := sha256.Sum256([]byte(tok))
	o := &op{enrol: &store.NewUser{ID: id, TokenHash: h[:], Budget: s.budget, CreatedMS: s.opt.Now().UnixMilli(), TokenExpiresMS: s.tokenExpiry()}}
	if err := s.b.do(r.Context(), o); err != nil {
		s.internal(w, r, "enrolment", err)
		return
	}
	s.m.enrolments.Inc()
	if rec, ok := w.(*recorder); ok {
		rec.user = id
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, api.Enrolment{User: id, Token: tok})
}

func (s *Server) getMe(w http.ResponseWriter, r *http.Request) {
	id, ok := s.authUser(w, r)
	if !ok {
		return
	}
	u, err := s.st.User(r.Context(), id)
	if err != nil {
		s.internal(w, r, "reading the ledger", err)
		return
	}
	st := api.Status{User: u.ID, Spent: store.Eps(u.Spent), Remaining: store.Eps(u.Budget - u.Spent),
		Budget: store.Eps(u.Budget), Reports: u.Reports, Unit: s.cfg.LedgerUnit}
	if p := s.periodStart(s.opt.Now()); p > 0 {
		spent, err := s.st.UserSpentSince(r.Context(), u.ID, p)
		if err != nil {
			s.internal(w, r, "reading the ledger", err)
			return
		}
		t := time.UnixMilli(p).UTC()
		st.Spent, st.Remaining, st.PeriodStart = store.Eps(spent), store.Eps(u.Budget-spent), &t
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, st)
}

// LedgerBudget is every user's budget in the ledger's unit: ε in local
// mode, ρ in central mode.
func LedgerBudget(cfg *api.Config) float64 {
	if cfg.LedgerUnit == api.UnitRho {
		return cfg.BudgetRho
	}
	return cfg.Budget
}

// TokenHash is what the store keeps of a token: its SHA-256 (a token has
// 256 random bits, so no salt or slow hash is needed).
func TokenHash(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// reportHash identifies a report's content: ID, ε, canonical values and
// the mean report, when there is one (a report without is hashed as
// before mean reports existed, so resubmissions of older reports match).
func reportHash(rep api.Report, vals []byte) []byte {
	h := sha256.New()
	h.Write([]byte(rep.ID))
	h.Write([]byte{0})
	h.Write(strconv.AppendFloat(nil, rep.Epsilon, 'g', -1, 64))
	h.Write([]byte{0})
	h.Write(vals)
	if rep.Mean != nil {
		h.Write([]byte("\x00mean\x00"))
		h.Write(strconv.AppendFloat(nil, *rep.Mean, 'g', -1, 64))
	}
	return h.Sum(nil)
}

func ack(rep store.Report, budget int64) api.Ack {
	return api.Ack{ID: rep.ClientID, Accepted: true, Seq: rep.Seq, Epsilon: store.Eps(rep.Charge),
		Spent: store.Eps(rep.SpentAfter), Remaining: store.Eps(budget - rep.SpentAfter), Budget: store.Eps(budget),
		Received: time.UnixMilli(rep.Received).UTC()}
}

func (s *Server) postReport(w http.ResponseWriter, r *http.Request) {
	id, ok := s.authUser(w, r)
	if !ok {
		return
	}
	body := jsonBody(w, r, s.opt.MaxBody)
	if body == nil {
		s.m.reports.WithLabelValues("invalid").Inc()
		return
	}
	rep, e := api.DecodeReport(body, s.cfg)
	if e != nil {
		s.m.reports.WithLabelValues("invalid").Inc()
		writeError(w, e)
		return
	}
	vals := api.EncodeValues(rep.Values)
	o := &op{sub: &store.Submission{User: id, ClientID: rep.ID, BodyHash: reportHash(rep, vals), Charge: s.charge,
		Values: vals, Mean: rep.Mean, Received: s.opt.Now().UnixMilli(), Version: s.version}}
	if err := s.b.do(r.Context(), o); err != nil {
		s.internal(w, r, "storing the report", err)
		return
	}
	res := o.res
	s.m.reports.WithLabelValues(res.Outcome.String()).Inc()
	w.Header()["Cache-Control"] = []string{"no-store"} // canonical key: no canonicalization per report
	switch res.Outcome {
	case store.Stored:
		writeAck(w, http.StatusCreated, ack(res.Report, res.Budget))
	case store.Duplicate:
		w.Header().Set(api.HeaderReplayed, "true")
		writeAck(w, http.StatusOK, ack(res.Report, res.Budget))
	case store.Conflict:
		writeError(w, &api.Error{Status: http.StatusConflict, Code: api.CodeIDConflict, Field: "id",
			Message: fmt.Sprintf("report id %q was used before with other content; choose a new id for a new report", rep.ID)})
	case store.OverBudget:
		spent, budget := store.Eps(res.Spent), store.Eps(res.Budget)
		remaining := store.Eps(res.Budget - res.Spent)
		writeError(w, &api.Error{Status: http.StatusForbidden, Code: api.CodeBudgetExceeded, Field: "epsilon",
			Message: fmt.Sprintf("privacy budget exceeded: this report costs ε = %g, but only %g of your budget ε = %g remains (spent %g); nothing was stored or charged",
				store.Eps(s.charge), remaining, budget, spent),
			Spent: &spent, Remaining: &remaining, Budget: &budget})
	default:
		writeError(w, &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: "unknown user"})
	}
}

func storedReport(r store.Report) (api.StoredReport, error) {
	vals, err := api.DecodeValues(r.Values)
	if err != nil {
		return api.StoredReport{}, err
	}
	return api.StoredReport{ID: r.ClientID, Seq: r.Seq, Epsilon: store.Eps(r.Charge), Received: time.UnixMilli(r.Received).UTC(), Values: vals, Mean: r.Mean}, nil
}

func (s *Server) getReports(w http.ResponseWriter, r *http.Request) {
	id, ok := s.authUser(w, r)
	if !ok {
		return
	}
	limit, after, ok := pageParams(w, r.URL.Query())
	if !ok {
		return
	}
	// One more than the page tells whether another page follows.
	reps, err := s.st.ReportsPage(r.Context(), id, after, limit+1)
	if err != nil {
		s.internal(w, r, "listing reports", err)
		return
	}
	page := api.ReportPage{Reports: make([]api.StoredReport, 0, min(len(reps), limit))}
	for k, rep := range reps {
		if k == limit {
			page.NextCursor = strconv.FormatInt(reps[k-1].Seq, 10)
			break
		}
		sr, err := storedReport(rep)
		if err != nil {
			s.internal(w, r, "listing reports", serverFault{err})
			return
		}
		page.Reports = append(page.Reports, sr)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) getReport(w http.ResponseWriter, r *http.Request) {
	id, ok := s.authUser(w, r)
	if !ok {
		return
	}
	rid := r.PathValue("id")
	// Only the caller's own reports are looked up: another user's ID is
	// simply not found.
	rep, err := s.st.Report(r.Context(), id, rid)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Field: "id", Message: fmt.Sprintf("you have no report %q", api.Truncate(rid))})
		return
	}
	if err != nil {
		s.internal(w, r, "reading a report", err)
		return
	}
	sr, err := storedReport(rep)
	if err != nil {
		s.internal(w, r, "reading a report", serverFault{err})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, sr)
}

func (s *Server) getStats(w http.ResponseWriter, r *http.Request) {
	if !s.authAdmin(w, r) {
		return
	}
	st, err := s.st.Stats(r.Context())
	if err != nil {
		s.internal(w, r, "stats", err)
		return
	}
	writeJSON(w, http.StatusOK, StatsOf(st, s.cfg))
}

// StatsOf converts store counts for the API, in the ledger's unit (with a
// per-period budget, MaxSpent is the largest lifetime spending).
func StatsOf(st store.Stats, cfg *api.Config) api.Stats {
	return api.Stats{Users: st.Users, Reports: st.Reports, Releases: st.Releases, MaxSpent: store.Eps(st.MaxSpent), Budget: LedgerBudget(cfg), Unit: cfg.LedgerUnit}
}
