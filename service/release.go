package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// Server-level release parameters (taken out of params before the
// method sees them): how a user's own row is folded in on her device.
const (
	paramFoldLambda  = "fold_lambda"
	paramUserDamping = "user_damping"
)

func (s *Server) postRelease(w http.ResponseWriter, r *http.Request) {
	if !s.authAdmin(w, r) {
		return
	}
	req, e := api.DecodeReleaseRequest(http.MaxBytesReader(w, r.Body, 1<<20))
	if e != nil {
		writeError(w, e)
		return
	}
	if !s.relMu.TryLock() {
		writeError(w, &api.Error{Status: http.StatusConflict, Code: api.CodeUnavailable, Message: "a release is being trained; retry when it is published"})
		return
	}
	defer s.relMu.Unlock()
	// Training may take long: no write deadline for this answer.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	res, e := s.Publish(r.Context(), req)
	if e != nil {
		s.m.releases.WithLabelValues(e.Code).Inc()
		if e.Status >= 500 {
			s.log.LogAttrs(r.Context(), slog.LevelError, "release", slog.String("method", req.Method), slog.String("error", e.Message))
		}
		writeError(w, e)
		return
	}
	s.m.releases.WithLabelValues("published").Inc()
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "published a release", slog.Int64("id", res.ID), slog.String("method", req.Method),
		slog.Int64("reports", res.Reports), slog.Int("users_charged", res.UsersCharged), slog.Float64("seconds", res.Seconds))
	writeJSON(w, http.StatusCreated, res)
}

// Publish trains the requested method on the stored data and publishes
// its release. In local mode it trains ldp-<mechanism> on the reports
// (post-processing: nothing is charged). In central mode it trains the
// method on the users' latest ratings and charges every user whose
// ratings it used her per-user ε of the release, in the transaction that
// publishes it; a release that would take anyone past her budget is
// refused whole.
func (s *Server) Publish(ctx context.Context, req api.ReleaseRequest) (api.ReleaseResult, *api.Error) {
	start := time.Now()
	fold, damping := 1.0, 5.0
	params := map[string]any{}
	for k, v := range req.Params {
		switch k {
		case paramFoldLambda, paramUserDamping:
			f, ok := v.(float64)
			if !ok || !(f >= 0) || math.IsInf(f, 0) {
				return api.ReleaseResult{}, api.BadRequest(api.CodeOutOfRange, "params."+k, "params.%s must be a finite number ≥ 0", k)
			}
			if k == paramFoldLambda {
				fold = f
			} else {
				damping = f
			}
		default:
			params[k] = v
		}
	}
	seed := req.Seed
	if seed == 0 {
		seed = noise.Secure().Uint64()
	}
	env := methods.Env{Epsilon: req.Epsilon, Delta: req.Delta, Seed: seed, Noise: noise.Secure(), Rand: noise.Seeded(seed),
		Workers: s.opt.Workers, Log: s.log}
	var (
		rel     *release.Release
		nrep    int64
		maxSeq  int64
		charges []store.Charge
		states  []store.UserState
		ledger  string
		maxChg  int64
		e       *api.Error
	)
	if s.cfg.Mode == api.ModeLocal {
		rel, nrep, maxSeq, e = s.trainLocal(ctx, req, params, env)
	} else {
		rel, nrep, maxSeq, charges, states, e = s.trainCentral(ctx, req, params, env)
	}
	if e != nil {
		return api.ReleaseResult{}, e
	}
	m := rel.Model()
	if m == nil {
		return api.ReleaseResult{}, &api.Error{Status: http.StatusBadRequest, Code: api.CodeTrainFailed, Field: "method",
			Message: fmt.Sprintf("%s releases a %s, not a low-rank model that clients can fold themselves into", req.Method, rel.Public.Kind())}
	}
	hadUserBias := m.UserBias != nil
	if len(m.Users) > 0 {
		// The users' own rows never go into the public part. In local
		// mode the rows are reports (public post-processing, not served);
		// in central mode they are the users' states, kept for each alone.
		split := m.SplitUsers()
		if s.cfg.Mode == api.ModeCentral && rel.PerUser == nil {
			var err error
			if states, err = encodeStates(split); err != nil {
				return api.ReleaseResult{}, s.fail("encoding user states", err)
			}
		}
	}
	if m.FoldIn == "" {
		m.FoldIn = model.FoldRidge
	}
	if m.FoldLambda == 0 {
		m.FoldLambda = fold
	}
	if hadUserBias && !m.Transform.UserCentred {
		// The model fitted a bias per row; a client estimates her own as
		// her damped mean residual.
		m.Transform.UserCentred, m.UserDamping = true, damping
	}
	pub, err := api.FromModel(m)
	if err != nil {
		return api.ReleaseResult{}, s.fail("preparing the public part", err)
	}
	g := rel.Guarantee
	report := api.Finite(map[string]any(rel.Report))
	if s.cfg.Mode == api.ModeLocal {
		if report == nil {
			report = map[string]any{}
		}
		report["method_guarantee"] = rel.Guarantee
		g = privacy.Guarantee{Epsilon: s.cfg.Budget, Unit: privacy.UnitUser, Notion: privacy.Local, Status: rel.Guarantee.Status,
			Relation:     "all of one user's reports change (any ratings of the declared catalogue on the declared scale); the catalogue, the scale and how many reports each user sent are public",
			Reproducible: rel.Guarantee.Reproducible,
			Note: fmt.Sprintf("Trained by %s on %d reports, each randomized on its user's device and ε = %g-DP for her (method_guarantee in the report states the method's own, per-item terms); the ledger let no user's reports exceed her budget, so this post-processing is at most ε = %g-DP for every user.",
				req.Method, nrep, s.cfg.ReportEpsilon, s.cfg.Budget)}
		ledger = fmt.Sprintf("Local DP: post-processing of the stored reports, charged nothing. Every report cost its user ε = %g when it was stored; no user's reports together exceed the budget ε = %g.", s.cfg.ReportEpsilon, s.cfg.Budget)
	} else {
		for _, c := range charges {
			maxChg = max(maxChg, c.Nano)
		}
		ledger = fmt.Sprintf("Central mode: charged each of the %d users whose ratings it used her per-user ε of this release (at most %g) in the transaction that published it; no user passed her budget ε = %g.",
			len(charges), store.Eps(maxChg), s.cfg.Budget)
	}
	created := s.opt.Now().UTC().Truncate(time.Millisecond)
	doc := api.Release{Created: created, Method: req.Method, Guarantee: g, GuaranteeText: g.String(), Ledger: ledger, Report: report, Model: pub}
	b, err := json.Marshal(doc)
	if err != nil {
		return api.ReleaseResult{}, s.fail("encoding the release", err)
	}
	id, err := s.st.Publish(ctx, store.NewRelease{CreatedMS: created.UnixMilli(), Method: req.Method, MaxSeq: maxSeq, Doc: b, Charges: charges, States: states})
	var ob *store.OverBudgetError
	if errors.As(err, &ob) {
		spent, budget, remaining := store.Eps(ob.Spent), store.Eps(ob.Budget), store.Eps(ob.Budget-ob.Spent)
		return api.ReleaseResult{}, &api.Error{Status: http.StatusForbidden, Code: api.CodeBudgetExceeded, Field: "epsilon",
			Message: fmt.Sprintf("privacy budget exceeded: the release would charge user %s ε = %g, but only %g of her budget ε = %g remains; nothing was published or charged",
				ob.User, store.Eps(ob.Charge), remaining, budget),
			Spent: &spent, Remaining: &remaining, Budget: &budget}
	}
	if err != nil {
		return api.ReleaseResult{}, s.fail("publishing the release", err)
	}
	doc.ID = id
	return api.ReleaseResult{ID: id, UsersCharged: len(charges), MaxCharge: store.Eps(maxChg), Reports: nrep,
		Seconds: time.Since(start).Seconds(), Release: doc}, nil
}

func (s *Server) fail(what string, err error) *api.Error {
	s.log.LogAttrs(context.Background(), slog.LevelError, what, slog.String("error", err.Error()))
	return &api.Error{Status: http.StatusInternalServerError, Code: api.CodeInternal, Message: what + " failed"}
}

func encodeStates(st *model.UserStates) ([]store.UserState, error) {
	out := make([]store.UserState, 0, len(st.States))
	for _, u := range st.States {
		b, err := json.Marshal(struct {
			Method string `json:"method"`
			Rank   int    `json:"rank"`
			model.UserState
		}{st.Method, st.Rank, u})
		if err != nil {
			return nil, err
		}
		out = append(out, store.UserState{User: u.User, State: b})
	}
	return out, nil
}

// reportValues decodes a stored report's values and checks there is one
// per catalogue item.
func reportValues(r store.Report, cfg *api.Config) ([]*float64, error) {
	vals, err := api.DecodeValues(r.Values)
	if err != nil {
		return nil, err
	}
	if len(vals) != len(cfg.Items) {
		return nil, fmt.Errorf("report %d has %d values for %d items", r.Seq, len(vals), len(cfg.Items))
	}
	return vals, nil
}

// ReportsMatrix reads the stored local-mode reports as a matrix whose rows
// are reports ("r<seq>") and whose columns are catalogue items, values in
// the report units; it returns the number of reports (a report with no
// present value has an empty row, which the matrix does not hold) and the
// largest seq read.
func ReportsMatrix(ctx context.Context, st store.Store, cfg *api.Config) (*ratings.Matrix, int64, int64, error) {
	b := ratings.NewBuilder(ratings.DupError)
	var n int64
	last, err := st.ScanReports(ctx, 0, func(r store.Report) error {
		vals, err := reportValues(r, cfg)
		if err != nil {
			return err
		}
		row := "r" + strconv.FormatInt(r.Seq, 10)
		for j, v := range vals {
			if v != nil {
				if err := b.Add(row, cfg.Items[j].ID, *v, r.Seq); err != nil {
					return err
				}
			}
		}
		n++
		return nil
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading reports: %w", err)
	}
	if b.Len() == 0 {
		return nil, n, last, nil
	}
	m, err := b.Build()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading reports: %w", err)
	}
	return m, n, last, nil
}

// RatingsMatrix reads the stored central-mode reports as each user's
// latest rating of each item (a later report overrides an earlier one).
func RatingsMatrix(ctx context.Context, st store.Store, cfg *api.Config) (*ratings.Matrix, int64, int64, error) {
	latest := map[string]map[int]float64{}
	var order []string
	var n int64
	last, err := st.ScanReports(ctx, 0, func(r store.Report) error {
		vals, err := reportValues(r, cfg)
		if err != nil {
			return err
		}
		row, ok := latest[r.User]
		if !ok {
			row = map[int]float64{}
			latest[r.User] = row
			order = append(order, r.User)
		}
		for j, v := range vals {
			if v != nil {
				row[j] = *v
			}
		}
		n++
		return nil
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading reports: %w", err)
	}
	b := ratings.NewBuilder(ratings.DupError)
	for _, u := range order {
		for j, v := range latest[u] {
			if err := b.Add(u, cfg.Items[j].ID, v, 0); err != nil {
				return nil, 0, 0, err
			}
		}
	}
	if b.Len() == 0 {
		return nil, n, last, nil
	}
	m, err := b.Build()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading reports: %w", err)
	}
	return m, n, last, nil
}

// Catalogue is the configuration's catalogue as a model.Catalogue.
func Catalogue(cfg *api.Config) (*model.Catalogue, error) {
	ids := make([]string, len(cfg.Items))
	var titles []string
	for k, it := range cfg.Items {
		ids[k] = it.ID
		if it.Title != "" {
			if titles == nil {
				titles = make([]string, len(cfg.Items))
			}
			titles[k] = it.Title
		}
	}
	return model.NewCatalogue(ids, titles)
}

// WriteCollectFile writes the stored local-mode reports as a `privrec
// collect` file at path; `privrec train --data sqlite:FILE` trains on it.
func WriteCollectFile(path string, cfg *api.Config, reps *ratings.Matrix, population int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeCollectFile(f, cfg, reps, int(population)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *Server) trainLocal(ctx context.Context, req api.ReleaseRequest, params map[string]any, env methods.Env) (*release.Release, int64, int64, *api.Error) {
	if want := "ldp-" + s.cfg.Mechanism; req.Method != want {
		return nil, 0, 0, api.BadRequest(api.CodeInvalidValue, "method", "the reports were collected with %s: train %s on them, not %q", s.cfg.Mechanism, want, req.Method)
	}
	if _, set := params["debias"]; !set {
		// The plain recovery tends to the zero matrix at per-report
		// budgets (every item spread over the whole catalogue); the
		// debiased one knows the mechanism's rates and keeps the signal.
		params["debias"] = true
	}
	data, n, last, err := ReportsMatrix(ctx, s.st, s.cfg)
	if err != nil {
		return nil, 0, 0, s.fail("reading the reports", err)
	}
	if data == nil {
		return nil, 0, 0, &api.Error{Status: http.StatusConflict, Code: api.CodeTrainFailed, Message: "no reports with a present value yet: nothing to train on"}
	}
	f, err := os.CreateTemp("", "privrec-serve-*.collect.tsv")
	if err != nil {
		return nil, 0, 0, s.fail("writing the reports for training", err)
	}
	defer os.Remove(f.Name())
	if err := writeCollectFile(f, s.cfg, data, int(n)); err != nil {
		f.Close()
		return nil, 0, 0, s.fail("writing the reports for training", err)
	}
	if err := f.Close(); err != nil {
		return nil, 0, 0, s.fail("writing the reports for training", err)
	}
	cat, err := Catalogue(s.cfg)
	if err != nil {
		return nil, 0, 0, s.fail("building the catalogue", err)
	}
	scale := release.Scale{Min: s.cfg.Scale.Min, Max: s.cfg.Scale.Max}
	env.Epsilon = s.cfg.CellEpsilon
	rel, err := trainLocal(ctx, req.Method, params, release.Input{Ratings: data, Source: f.Name(),
		Declared: release.Declared{Scale: &scale, Catalogue: cat}}, env)
	if err != nil {
		return nil, 0, 0, &api.Error{Status: http.StatusBadRequest, Code: api.CodeTrainFailed, Field: "params", Message: err.Error()}
	}
	return rel, n, last, nil
}

// chargeFor is a user's per-user ε of a release: its ε when the guarantee
// is user-level; k·ε by group privacy over her k ratings when it is
// per rating (pure DP only).
func chargeFor(g privacy.Guarantee, k int) (float64, error) {
	switch {
	case !g.Private():
		return 0, fmt.Errorf("the release promises no privacy (status %s): it cannot be charged to a finite budget", g.Status)
	case g.Unit == privacy.UnitUser:
		return g.Epsilon, nil
	case g.Delta > 0:
		return 0, fmt.Errorf("the release is (ε, δ)-DP per rating; a per-user charge by group privacy needs a pure-DP (δ = 0) guarantee or a user-level method")
	}
	return float64(k) * g.Epsilon, nil
}

func (s *Server) trainCentral(ctx context.Context, req api.ReleaseRequest, params map[string]any, env methods.Env) (*release.Release, int64, int64, []store.Charge, []store.UserState, *api.Error) {
	meth, err := methods.Lookup(req.Method)
	if err != nil {
		return nil, 0, 0, nil, nil, api.BadRequest(api.CodeInvalidValue, "method", "%v", err)
	}
	if !meth.Private {
		return nil, 0, 0, nil, nil, api.BadRequest(api.CodeInvalidValue, "method", "%s is not private: its release could not be charged to any budget", req.Method)
	}
	if meth.New == nil {
		return nil, 0, 0, nil, nil, api.BadRequest(api.CodeInvalidValue, "method", "%s has no typed configuration yet (it cannot state a release's guarantee)", req.Method)
	}
	if !(req.Epsilon > 0) {
		return nil, 0, 0, nil, nil, api.BadRequest(api.CodeBadEpsilon, "epsilon", "a central release needs its ε (> 0), got %g", req.Epsilon)
	}
	cfg, err := methods.Configure(req.Method, params)
	if err != nil {
		return nil, 0, 0, nil, nil, api.BadRequest(api.CodeInvalidValue, "params", "%v", err)
	}
	data, n, last, err := RatingsMatrix(ctx, s.st, s.cfg)
	if err != nil {
		return nil, 0, 0, nil, nil, s.fail("reading the ratings", err)
	}
	if data == nil {
		return nil, 0, 0, nil, nil, &api.Error{Status: http.StatusConflict, Code: api.CodeTrainFailed, Message: "no ratings yet: nothing to train on"}
	}
	cat, err := Catalogue(s.cfg)
	if err != nil {
		return nil, 0, 0, nil, nil, s.fail("building the catalogue", err)
	}
	scale := release.Scale{Min: s.cfg.Scale.Min, Max: s.cfg.Scale.Max}
	rel, err := methods.Train(ctx, req.Method, cfg, release.Input{Ratings: data, Declared: release.Declared{Scale: &scale, Catalogue: cat}}, env)
	if err != nil {
		return nil, 0, 0, nil, nil, &api.Error{Status: http.StatusBadRequest, Code: api.CodeTrainFailed, Field: "params", Message: err.Error()}
	}
	charges := make([]store.Charge, 0, data.NumUsers())
	for u := range int32(data.NumUsers()) {
		eps, err := chargeFor(rel.Guarantee, data.UserCount(u))
		if err != nil {
			return nil, 0, 0, nil, nil, api.BadRequest(api.CodeInvalidValue, "method", "%s: %v", req.Method, err)
		}
		c, err := store.ChargeNano(eps)
		if err != nil {
			return nil, 0, 0, nil, nil, api.BadRequest(api.CodeBadEpsilon, "epsilon", "%v", err)
		}
		charges = append(charges, store.Charge{User: data.Users.Name(u), Nano: c})
	}
	var states []store.UserState
	if rel.PerUser != nil {
		if states, err = encodeStates(rel.PerUser); err != nil {
			return nil, 0, 0, nil, nil, s.fail("encoding user states", err)
		}
	}
	return rel, n, last, charges, states, nil
}

// releaseDoc returns the JSON document of a published release (cached:
// releases never change).
func (s *Server) releaseDoc(ctx context.Context, id int64) ([]byte, error) {
	s.docMu.Lock()
	b, ok := s.docCache[id]
	s.docMu.Unlock()
	if ok {
		return b, nil
	}
	var row store.ReleaseRow
	var err error
	if id == 0 {
		row, err = s.st.LatestRelease(ctx)
	} else {
		row, err = s.st.Release(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	var doc api.Release
	if err := json.Unmarshal(row.Doc, &doc); err != nil {
		return nil, fmt.Errorf("release %d: %w", row.ID, err)
	}
	doc.ID = row.ID
	if b, err = json.Marshal(doc); err != nil {
		return nil, err
	}
	s.docMu.Lock()
	if len(s.docCache) > 16 {
		clear(s.docCache)
	}
	s.docCache[row.ID] = b
	s.docMu.Unlock()
	return b, nil
}

func (s *Server) getLatestRelease(w http.ResponseWriter, r *http.Request) {
	row, err := s.st.LatestRelease(r.Context())
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: "no release published yet"})
		return
	}
	if err != nil {
		s.internal(w, r, "reading the latest release", err)
		return
	}
	s.serveRelease(w, r, row.ID)
}

func (s *Server) getRelease(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		writeError(w, api.BadRequest(api.CodeInvalidValue, "id", "release id %q is not a positive integer", api.Truncate(r.PathValue("id"))))
		return
	}
	s.serveRelease(w, r, id)
}

func (s *Server) serveRelease(w http.ResponseWriter, r *http.Request, id int64) {
	b, err := s.releaseDoc(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Field: "id", Message: fmt.Sprintf("no release %d", id)})
		return
	}
	if err != nil {
		s.internal(w, r, "reading a release", err)
		return
	}
	writeJSONBytes(w, http.StatusOK, b)
}

// getMyState serves the caller's own state in a release (joint DP): her
// row and bias, computed by the curator from her own ratings. Nobody
// else's is reachable: the lookup is by the caller's token.
func (s *Server) getMyState(w http.ResponseWriter, r *http.Request) {
	uid, ok := s.authUser(w, r)
	if !ok {
		return
	}
	var rid int64
	if q := r.URL.Query().Get("release"); q != "" && q != "latest" {
		id, err := strconv.ParseInt(q, 10, 64)
		if err != nil || id < 1 {
			writeError(w, api.BadRequest(api.CodeInvalidValue, "release", "release %q is not a positive integer or latest", api.Truncate(q)))
			return
		}
		rid = id
	} else {
		row, err := s.st.LatestRelease(r.Context())
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: "no release published yet"})
			return
		}
		if err != nil {
			s.internal(w, r, "reading the latest release", err)
			return
		}
		rid = row.ID
	}
	b, err := s.st.UserState(r.Context(), rid, uid)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: fmt.Sprintf("release %d holds no state of yours (local-mode releases hold none: fold yourself in from the public part)", rid)})
		return
	}
	if err != nil {
		s.internal(w, r, "reading your state", err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSONBytes(w, http.StatusOK, b)
}
