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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
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
	body := jsonBody(w, r, 1<<20)
	if body == nil {
		return
	}
	req, e := api.DecodeReleaseRequest(body)
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
// method on the users' latest ratings over the declared catalogue and
// scale, asks chargeFor what the release costs each user it covers (its
// zCDP ρ; or a refusal), and charges them in the transaction that
// publishes it; a release that would take anyone past her budget is
// refused whole, or (policy skip) trained over the users who can pay.
func (s *Server) Publish(ctx context.Context, req api.ReleaseRequest) (api.ReleaseResult, *api.Error) {
	start := time.Now()
	// The release's time (and budget period) is when it was asked for.
	created := s.opt.Now().UTC().Truncate(time.Millisecond)
	fold, params, e := splitFoldParams(req.Params)
	if e != nil {
		return api.ReleaseResult{}, e
	}
	tr, e := s.trainRelease(ctx, req, params, created)
	if e != nil {
		return api.ReleaseResult{}, e
	}
	pub, e := s.publicModel(tr, req.Method, fold)
	if e != nil {
		return api.ReleaseResult{}, e
	}
	doc, adminWarnings, maxChg := s.newReleaseDoc(ctx, req, tr, pub, created)
	id, e := s.storeRelease(ctx, req.Method, tr, &doc, created)
	if e != nil {
		return api.ReleaseResult{}, e
	}
	for _, w := range adminWarnings {
		s.log.LogAttrs(ctx, slog.LevelWarn, "release drowned in noise", slog.Int64("id", id), slog.String("method", req.Method),
			slog.String("code", w.Code), slog.String("warning", w.Message))
	}
	return api.ReleaseResult{ID: id, UsersCharged: len(tr.charges), UsersSkipped: tr.skipped, MaxCharge: store.Eps(maxChg), Unit: s.cfg.LedgerUnit, Reports: tr.nrep,
		Seconds: time.Since(start).Seconds(), Warnings: adminWarnings, Release: doc}, nil
}

// foldSettings are the server-level release parameters: how a user's own
// row is folded in on her device.
type foldSettings struct {
	lambda, damping float64
}

// splitFoldParams takes the server-level parameters (fold_lambda,
// user_damping) out of a release request's; the rest go to the method.
func splitFoldParams(in map[string]any) (foldSettings, map[string]any, *api.Error) {
	fold := foldSettings{lambda: 1, damping: 5}
	params := map[string]any{}
	for k, v := range in {
		switch k {
		case paramFoldLambda, paramUserDamping:
			f, ok := v.(float64)
			if !ok || !(f >= 0) || math.IsInf(f, 0) {
				return fold, nil, api.BadRequest(api.CodeOutOfRange, "params."+k, "params.%s must be a finite number ≥ 0", k)
			}
			if k == paramFoldLambda {
				fold.lambda = f
			} else {
				fold.damping = f
			}
		default:
			params[k] = v
		}
	}
	return fold, params, nil
}

// trained is a release trained on the stored data, before it is
// published: what it charges (central mode), the users' own states kept
// for each alone, the reports it read.
type trained struct {
	rel          *release.Release
	nrep, maxSeq int64
	charges      []store.Charge
	states       []store.UserState
	skipped      int
}

// trainRelease trains the method on the stored data: ldp-<mechanism> on
// the reports in local mode, the method over the users' latest ratings in
// central mode (with what it charges each user it covers).
func (s *Server) trainRelease(ctx context.Context, req api.ReleaseRequest, params map[string]any, created time.Time) (*trained, *api.Error) {
	seed := req.Seed
	if seed == 0 {
		seed = noise.Secure().Uint64()
	}
	env := methods.Env{Epsilon: req.Epsilon, Delta: req.Delta, Seed: seed, Noise: noise.Secure(), Rand: noise.Seeded(seed),
		Workers: s.opt.Workers, Log: s.log}
	tr := &trained{}
	var e *api.Error
	if s.cfg.Mode == api.ModeLocal {
		tr.rel, tr.nrep, tr.maxSeq, e = s.trainLocal(ctx, req, params, env)
	} else {
		e = s.trainCentral(ctx, req, params, env, created, tr)
	}
	if e != nil {
		return nil, e
	}
	return tr, nil
}

// publicModel is the release's public part: its model without the users'
// rows (in central mode kept as their states, for each alone), with the
// fold-in each client uses for her own row.
func (s *Server) publicModel(tr *trained, method string, fold foldSettings) (api.PublicModel, *api.Error) {
	m := tr.rel.Model()
	if m == nil {
		return api.PublicModel{}, &api.Error{Status: http.StatusBadRequest, Code: api.CodeTrainFailed, Field: "method",
			Message: fmt.Sprintf("%s releases a %s, not a low-rank model that clients can fold themselves into", method, tr.rel.Public.Kind())}
	}
	hadUserBias := m.UserBias != nil
	if len(m.Users) > 0 {
		// The users' own rows never go into the public part. In local
		// mode the rows are reports (public post-processing, not served);
		// in central mode they are the users' states, kept for each alone.
		split := m.SplitUsers()
		if s.cfg.Mode == api.ModeCentral && tr.rel.PerUser == nil {
			var err error
			if tr.states, err = encodeStates(split); err != nil {
				return api.PublicModel{}, s.fail("encoding user states", err)
			}
		}
	}
	if m.FoldIn == "" {
		m.FoldIn = model.FoldRidge
	}
	if m.FoldLambda == 0 {
		m.FoldLambda = fold.lambda
	}
	if hadUserBias && !m.Transform.UserCentred {
		// The model fitted a bias per row; a client estimates her own as
		// her damped mean residual.
		m.Transform.UserCentred, m.UserDamping = true, fold.damping
	}
	pub, err := api.FromModel(m)
	if err != nil {
		return api.PublicModel{}, s.fail("preparing the public part", err)
	}
	return pub, nil
}

// newReleaseDoc is the public release document: the guarantee it gives
// (local mode: the budget's, by post-processing) and the ledger's
// sentence, with the public warnings; and the admin's warnings, which add
// the population it covered (no count goes into the public release), and
// the largest charge.
func (s *Server) newReleaseDoc(ctx context.Context, req api.ReleaseRequest, tr *trained, pub api.PublicModel, created time.Time) (api.Release, []release.Warning, int64) {
	rel, m := tr.rel, tr.rel.Model()
	g := rel.Guarantee
	report := api.Finite(map[string]any(rel.Report))
	var ledger string
	var maxChg int64
	if s.cfg.Mode == api.ModeLocal {
		if report == nil {
			report = map[string]any{}
		}
		report["method_guarantee"] = rel.Guarantee
		g = s.localGuarantee(req.Method, rel.Guarantee, tr.nrep)
		ledger = fmt.Sprintf("Local DP: post-processing of the stored reports, charged nothing. Every report cost its user ε = %g when it was stored; no user's reports together exceed the budget ε = %g.", s.cfg.ReportEpsilon, s.cfg.Budget)
	} else {
		for _, c := range tr.charges {
			maxChg = max(maxChg, c.Nano)
		}
		ledger = s.centralLedgerText(store.Eps(maxChg))
		if d := deltaCap(0, len(tr.charges)); s.cfg.BudgetDelta > d {
			// The ρ budget stays honest; its (ε, δ) reading does not
			// meet the δ rule for this many users.
			s.log.LogAttrs(ctx, slog.LevelWarn, "the budget's δ is above 1/(10·population): read the guarantee in ρ, or use a new collection with a smaller --budget-delta",
				slog.Float64("budget_delta", s.cfg.BudgetDelta), slog.Float64("one_tenth_over_population", d))
		}
	}
	doc := api.Release{Created: created, Method: req.Method, Guarantee: g, GuaranteeText: g.String(), Ledger: ledger, Report: report, Model: pub,
		Warnings: release.Warnings(rel.Report, m, release.Facts{})}
	var adminWarnings []release.Warning
	if s.cfg.Mode == api.ModeCentral {
		adminWarnings = release.Warnings(rel.Report, m, release.Facts{Users: len(tr.charges)})
	}
	return doc, adminWarnings, maxChg
}

// localGuarantee is a local-mode release's guarantee: post-processing of
// reports each randomized on its user's device, none past her budget.
func (s *Server) localGuarantee(method string, mg privacy.Guarantee, nrep int64) privacy.Guarantee {
	return privacy.Guarantee{Epsilon: s.cfg.Budget, Unit: privacy.UnitUser, Notion: privacy.Local, Status: mg.Status,
		Relation:     "all of one user's reports change (any ratings of the declared catalogue on the declared scale); the catalogue, the scale and how many reports each user sent are public",
		Reproducible: mg.Reproducible,
		Note: fmt.Sprintf("Trained by %s on %d reports, each randomized on its user's device and ε = %g-DP for her (%s; method_guarantee in the report states the method's own, per-item terms); the ledger let no user's reports exceed her budget, so this post-processing is at most ε = %g-DP for every user.",
			method, nrep, s.cfg.ReportEpsilon, reportComposition(s.cfg), s.cfg.Budget)}
}

// storeRelease publishes doc with its charges and states in one
// transaction and sets its ID; a release that would take a user past her
// budget is refused whole (403), nothing published or charged.
func (s *Server) storeRelease(ctx context.Context, method string, tr *trained, doc *api.Release, created time.Time) (int64, *api.Error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return 0, s.fail("encoding the release", err)
	}
	id, err := s.st.Publish(ctx, store.NewRelease{CreatedMS: created.UnixMilli(), Method: method, MaxSeq: tr.maxSeq, Doc: b, Charges: tr.charges, States: tr.states,
		PeriodStartMS: s.periodStart(created)})
	var ob *store.OverBudgetError
	if errors.As(err, &ob) {
		spent, budget, remaining := store.Eps(ob.Spent), store.Eps(ob.Budget), store.Eps(ob.Budget-ob.Spent)
		return 0, &api.Error{Status: http.StatusForbidden, Code: api.CodeBudgetExceeded, Field: "epsilon",
			Message: fmt.Sprintf("privacy budget exceeded: the release would charge user %s ρ = %g (zCDP), but only %g of her budget ρ = %g remains%s; nothing was published or charged (start the server with --exhausted skip to publish over the users who can still pay)",
				ob.User, store.Eps(ob.Charge), remaining, budget, s.periodText()),
			Spent: &spent, Remaining: &remaining, Budget: &budget}
	}
	if err != nil {
		return 0, s.fail("publishing the release", err)
	}
	doc.ID = id
	return id, nil
}

// centralLedgerText is the public ledger sentence of a central release:
// what it cost each user it covers, and the policy — no counts of users
// (which users a release covers is not published).
func (s *Server) centralLedgerText(rho float64) string {
	eps, err := accountant.ZCDPToApprox(rho, s.cfg.BudgetDelta)
	conv := ""
	if err == nil {
		conv = fmt.Sprintf(" (alone: (ε = %.4g, δ = %g)-DP)", eps, s.cfg.BudgetDelta)
	}
	return fmt.Sprintf("Central mode: each user this release covers was charged ρ = %.6g zCDP%s in the transaction that published it. Every user's releases%s together cost at most her budget ρ = %.6g, which is (ε = %g, δ = %g)-DP; %s.",
		rho, conv, s.periodText(), s.cfg.BudgetRho, s.cfg.Budget, s.cfg.BudgetDelta, exhaustedText(s.cfg.Exhausted))
}

// periodText names the budget period, if any, for messages.
func (s *Server) periodText() string {
	if s.cfg.PeriodSeconds <= 0 {
		return ""
	}
	return fmt.Sprintf(" in one budget period (%s)", time.Duration(s.cfg.PeriodSeconds)*time.Second)
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

// reportValues decodes a stored report's values, one per catalogue item.
// A report made for an earlier collection version covers the shorter
// catalogue of then (items are only ever added, at its end): the items
// added since get no value (nil).
func reportValues(r store.Report, cfg *api.Config) ([]*float64, error) {
	vals, err := api.DecodeValues(r.Values)
	if err != nil {
		return nil, err
	}
	if len(vals) > len(cfg.Items) {
		return nil, fmt.Errorf("report %d has %d values for %d items", r.Seq, len(vals), len(cfg.Items))
	}
	for len(vals) < len(cfg.Items) {
		vals = append(vals, nil)
	}
	return vals, nil
}

// LocalReports are the stored local-mode reports of the current
// collection version, read as training data.
type LocalReports struct {
	// Matrix has a row per report ("r<seq>") with a present value and a
	// column per catalogue item, values in the report units; nil when no
	// report has a present value.
	Matrix *ratings.Matrix
	// Means are the reports' mean reports, one per report in seq order
	// (also of reports with no present value), when the collection takes
	// them (mean_epsilon > 0); nil otherwise.
	Means []RowMean
	// N is the number of reports (rows, with or without a present value)
	// and Last the largest seq read.
	N, Last int64
}

// RowMean is one report's mean report.
type RowMean struct {
	Row  string
	Mean float64
}

// ReadLocalReports reads the stored local-mode reports.
//
// Only the reports of the current collection version are read: an
// earlier version's were randomized over another catalogue, at another
// per-item ε, so the mechanism's debiasing does not apply to them. With
// mean_epsilon > 0 a report without a mean report is an error (none can be
// stored), as is one with a mean report when the collection takes none.
func ReadLocalReports(ctx context.Context, st store.Store, cfg *api.Config) (*LocalReports, error) {
	b := ratings.NewBuilder(ratings.DupError)
	out := &LocalReports{}
	version, err := st.CollectionVersion(ctx)
	if err != nil {
		return nil, err
	}
	out.Last, err = st.ScanReports(ctx, 0, func(r store.Report) error {
		if max(r.Version, 1) != version {
			return nil
		}
		vals, err := reportValues(r, cfg)
		if err != nil {
			return err
		}
		row := "r" + strconv.FormatInt(r.Seq, 10)
		switch {
		case cfg.MeanEpsilon > 0 && r.Mean == nil:
			return fmt.Errorf("report %d has no mean report, but the collection takes one at ε = %g", r.Seq, cfg.MeanEpsilon)
		case cfg.MeanEpsilon == 0 && r.Mean != nil:
			return fmt.Errorf("report %d carries a mean report, but the collection takes none", r.Seq)
		case r.Mean != nil:
			out.Means = append(out.Means, RowMean{Row: row, Mean: *r.Mean})
		}
		for j, v := range vals {
			if v != nil {
				if err := b.Add(row, cfg.Items[j].ID, *v, r.Seq); err != nil {
					return err
				}
			}
		}
		out.N++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading reports: %w", err)
	}
	if b.Len() == 0 {
		return out, nil
	}
	if out.Matrix, err = b.Build(); err != nil {
		return nil, fmt.Errorf("reading reports: %w", err)
	}
	return out, nil
}

// ReportsMatrix is ReadLocalReports' matrix, number of reports and
// largest seq read.
func ReportsMatrix(ctx context.Context, st store.Store, cfg *api.Config) (*ratings.Matrix, int64, int64, error) {
	reps, err := ReadLocalReports(ctx, st, cfg)
	if err != nil {
		return nil, 0, 0, err
	}
	return reps.Matrix, reps.N, reps.Last, nil
}

// RatingsMatrix reads the stored central-mode reports as each user's
// latest rating of each item (a later report overrides an earlier one).
// Its rows are every user who sent a report, in the order of her first
// report (a user whose reports hold no rating has an empty row: who
// reported is public, what she rated is not); its columns are the declared
// catalogue, in order, rated or not. It returns nil when no rating is
// stored.
func RatingsMatrix(ctx context.Context, st store.Store, cfg *api.Config) (*ratings.Matrix, int64, int64, error) {
	users, rows, n, last, err := centralRows(ctx, st, cfg)
	if err != nil {
		return nil, 0, 0, err
	}
	m, err := centralMatrix(cfg, users, rows)
	if err != nil {
		return nil, 0, 0, err
	}
	return m, n, last, nil
}

// centralRows reads every user's latest rating of each catalogue item,
// users in the order of their first report.
func centralRows(ctx context.Context, st store.Store, cfg *api.Config) ([]string, map[string]map[int]float64, int64, int64, error) {
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
		return nil, nil, 0, 0, fmt.Errorf("reading reports: %w", err)
	}
	return order, latest, n, last, nil
}

// centralMatrix builds the matrix of the given users' rows over the
// catalogue (nil when it holds no rating).
func centralMatrix(cfg *api.Config, users []string, rows map[string]map[int]float64) (*ratings.Matrix, error) {
	uids, err := ratings.IDsFrom(users)
	if err != nil {
		return nil, fmt.Errorf("reading reports: %w", err)
	}
	ids := make([]string, len(cfg.Items))
	for j, it := range cfg.Items {
		ids[j] = it.ID
	}
	items, err := ratings.IDsFrom(ids)
	if err != nil {
		return nil, fmt.Errorf("the catalogue: %w", err)
	}
	ptr := make([]int64, len(users)+1)
	var cols []int32
	var vals []float32
	for u, id := range users {
		row := rows[id]
		js := make([]int, 0, len(row))
		for j := range row {
			js = append(js, j)
		}
		slices.Sort(js)
		for _, j := range js {
			cols = append(cols, int32(j))
			vals = append(vals, float32(row[j]))
		}
		ptr[u+1] = int64(len(cols))
	}
	if len(cols) == 0 {
		return nil, nil
	}
	m, err := ratings.FromCSR(uids, items, len(ids), ptr, cols, vals, nil)
	if err != nil {
		return nil, fmt.Errorf("reading reports: %w", err)
	}
	return m, nil
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
func WriteCollectFile(path string, cfg *api.Config, reps *LocalReports) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeCollectFile(f, cfg, reps); err != nil {
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
	reps, err := ReadLocalReports(ctx, s.st, s.cfg)
	if err != nil {
		return nil, 0, 0, s.fail("reading the reports", err)
	}
	data, n, last := reps.Matrix, reps.N, reps.Last
	if data == nil {
		return nil, 0, 0, &api.Error{Status: http.StatusConflict, Code: api.CodeTrainFailed, Message: "no reports with a present value yet: nothing to train on"}
	}
	f, err := os.CreateTemp("", "privrec-serve-*.collect.tsv")
	if err != nil {
		return nil, 0, 0, s.fail("writing the reports for training", err)
	}
	defer os.Remove(f.Name())
	if err := writeCollectFile(f, s.cfg, reps); err != nil {
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

// reportComposition states what one local-mode report's ε is made of.
func reportComposition(cfg *api.Config) string {
	n := len(cfg.Items)
	if cfg.MeanEpsilon > 0 {
		return fmt.Sprintf("by basic composition: %d cells at per-item ε = %.6g and her mean report at ε = %g", n, cfg.CellEpsilon, cfg.MeanEpsilon)
	}
	return fmt.Sprintf("by basic composition: %d cells at per-item ε = %.6g, no mean report", n, cfg.CellEpsilon)
}

// deltaCap is the largest δ a central release over population users may
// state: 1/(10·population), and at most maxDelta when that is set.
func deltaCap(maxDelta float64, population int) float64 {
	c := 1 / (10 * float64(max(population, 1)))
	if maxDelta > 0 {
		c = min(c, maxDelta)
	}
	return c
}

// chargeFor is the one place that decides what a central release costs
// each user it covers, in the ledger's unit (zCDP ρ), or refuses it,
// saying why. deltaMax is the δ policy for the release's population.
//
//   - Only a proven, user-level guarantee (central or joint DP; noise
//     from the secure source) under a relation that covers the collection's
//     is published: a per-rating guarantee makes which items a user rated
//     public (and its constants, such as the item set, come from the
//     data), an as-claimed one proves nothing.
//   - Its δ must be within the policy: a release whose printed ε is tiny
//     because its δ is huge is not free.
//   - The cost is its zCDP ρ when it states one (Gaussian releases), else
//     ε²/2 for a pure ε-DP release; an (ε, δ) guarantee with no ρ cannot
//     be composed in ρ and is refused. Under the add/remove-one-user
//     relation, a replacement is two steps: group privacy gives 4ρ.
//
// Every user a release covers pays the same: the charge depends on the
// guarantee alone, never on her ratings.
// centralMethods are the registered methods whose releases central mode
// publishes (proven, user-level, under the collection's relation), named
// in a refusal; TestChargeForEveryMethod checks the list is exactly those.
var centralMethods = []string{"dp-ease", "dp-ease-features", "dp-features", "dp-popularity", "dp-ials", "dp-bias", "dpals", "dpfw", "dpsvd", "mm"}

func chargeFor(g privacy.Guarantee, deltaMax float64) (float64, error) {
	if err := g.Validate(); err != nil {
		return 0, fmt.Errorf("the release's guarantee is malformed: %w", err)
	}
	switch {
	case !g.Private():
		return 0, fmt.Errorf("the release promises no privacy (status %s): it cannot be charged to a finite budget", g.Status)
	case g.Status != privacy.Proven:
		return 0, fmt.Errorf("the release's guarantee is %s, not proven (%s): central mode publishes and charges proven guarantees only", g.Status, firstSentence(g.Note))
	case g.Reproducible:
		return 0, fmt.Errorf("the release's noise came from a seeded, reproducible stream: not private, never published")
	case g.Unit != privacy.UnitUser:
		return 0, fmt.Errorf("the release is private per rating (%s), not per user: that relation makes public which items each user rated, and group privacy over her ratings does not cover that; central mode publishes user-level guarantees only (%s)", g.Relation, strings.Join(centralMethods, ", "))
	case g.Notion != privacy.Central && g.Notion != privacy.Joint:
		return 0, fmt.Errorf("the release's guarantee is %s DP: central mode publishes central or joint DP releases only", g.Notion)
	}
	group := 1.0
	switch g.Relation {
	case privacy.RelationUserReplace:
	case privacy.RelationUserAddRemove:
		group = 2 // a replacement is a removal and an addition
	default:
		return 0, fmt.Errorf("the release is proven under %q, which does not cover the collection's relation (%s)", g.Relation, RelationCentral)
	}
	if g.Delta > deltaMax {
		return 0, fmt.Errorf("the release states δ = %g, above the server's policy δ ≤ %g (1/(10·population), or --max-delta): a large δ makes a small ε meaningless", g.Delta, deltaMax)
	}
	var rho float64
	switch {
	case g.Rho > 0:
		rho = g.Rho
	case g.Delta == 0:
		r, err := accountant.PureToZCDP(g.Epsilon)
		if err != nil {
			return 0, fmt.Errorf("the release's ε: %w", err)
		}
		rho = r
	default:
		return 0, fmt.Errorf("the release states (ε = %g, δ = %g) with no zCDP ρ: the ledger composes in ρ, and an (ε, δ) guarantee has none", g.Epsilon, g.Delta)
	}
	rho *= group * group
	if !(rho > 0) || math.IsInf(rho, 0) {
		return 0, fmt.Errorf("the release's ρ = %g cannot be charged", rho)
	}
	return rho, nil
}

// ledgerCharge is a charge of ρ in ledger units: rounded up, and at
// least one unit (10⁻⁹): no release is free.
func ledgerCharge(rho float64) (int64, error) {
	n, err := store.ChargeNano(rho)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}

// firstSentence is the start of a note, for messages.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if s == "" {
		return "no reason given"
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// periodStart is the start of the budget period holding t (0 when the
// budget is for all time).
func (s *Server) periodStart(t time.Time) int64 {
	p := s.cfg.PeriodSeconds * 1000
	if p <= 0 {
		return 0
	}
	ms := t.UnixMilli()
	return ms - ms%p
}

// trainCentral trains a central release as configuration → the users'
// latest ratings, their spending, the catalogue → training settled on the
// users who can pay → each covered user's charge and state, into tr.
func (s *Server) trainCentral(ctx context.Context, req api.ReleaseRequest, params map[string]any, env methods.Env, created time.Time, tr *trained) *api.Error {
	cfg, e := centralMethodConfig(req, params)
	if e != nil {
		return e
	}
	users, rows, n, last, err := centralRows(ctx, s.st, s.cfg)
	if err != nil {
		return s.fail("reading the ratings", err)
	}
	if len(users) == 0 {
		return &api.Error{Status: http.StatusConflict, Code: api.CodeTrainFailed, Message: "no ratings yet: nothing to train on"}
	}
	// Who can pay: each user's spending (this period's with a per-period
	// budget) is a function of the public release history.
	spent, err := s.st.SpentSince(ctx, s.periodStart(created))
	if err != nil {
		return s.fail("reading the ledgers", err)
	}
	cat, err := Catalogue(s.cfg)
	if err != nil {
		return s.fail("building the catalogue", err)
	}
	c := &centralTraining{s: s, req: req, cfg: cfg, env: env, rows: rows, spent: spent, cat: cat}
	rel, nano, cover, skipped, e := c.settle(ctx, users)
	if e != nil {
		return e
	}
	charges := make([]store.Charge, len(cover))
	for k, u := range cover {
		charges[k] = store.Charge{User: u, Nano: nano}
	}
	var states []store.UserState
	if rel.PerUser != nil {
		if states, err = encodeStates(rel.PerUser); err != nil {
			return s.fail("encoding user states", err)
		}
	}
	tr.rel, tr.nrep, tr.maxSeq, tr.charges, tr.states, tr.skipped = rel, n, last, charges, states, skipped
	return nil
}

// centralMethodConfig checks that the method can be published in central
// mode and returns its validated configuration.
func centralMethodConfig(req api.ReleaseRequest, params map[string]any) (methods.Config, *api.Error) {
	meth, err := methods.Lookup(req.Method)
	if err != nil {
		return nil, api.BadRequest(api.CodeInvalidValue, "method", "%v", err)
	}
	if !meth.Private {
		return nil, api.BadRequest(api.CodeInvalidValue, "method", "%s is not private: its release could not be charged to any budget", req.Method)
	}
	if meth.New == nil {
		return nil, api.BadRequest(api.CodeInvalidValue, "method", "%s has no typed configuration yet (it cannot state a release's guarantee)", req.Method)
	}
	if !(req.Epsilon > 0) {
		return nil, api.BadRequest(api.CodeBadEpsilon, "epsilon", "a central release needs its ε (> 0), got %g", req.Epsilon)
	}
	cfg, err := methods.Configure(req.Method, params)
	if err != nil {
		return nil, api.BadRequest(api.CodeInvalidValue, "params", "%v", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, api.BadRequest(api.CodeInvalidValue, "params", "%s: %v", req.Method, err)
	}
	return cfg, nil
}

// centralTraining is a central release being trained: the request, the
// method's configuration, the users' latest ratings, what each has spent
// and the declared catalogue.
type centralTraining struct {
	s     *Server
	req   api.ReleaseRequest
	cfg   methods.Config
	env   methods.Env
	rows  map[string]map[int]float64
	spent map[string]int64
	cat   *model.Catalogue
}

// settle trains on the users in cover and prices the release. The cost is
// a function of its guarantee, which only training states; with the skip
// policy the users who cannot pay are left out and the method trained
// again on the others (nothing of a discarded training is published). A
// user-level release costs every user the same, so this settles in at
// most a few rounds. It returns the release, its cost per user, the users
// it covers and how many were left out.
func (c *centralTraining) settle(ctx context.Context, cover []string) (*release.Release, int64, []string, int, *api.Error) {
	skipped := 0
	for round := 0; ; round++ {
		rel, nano, e := c.train(ctx, cover)
		if e != nil {
			return nil, 0, nil, 0, e
		}
		if c.s.cfg.Exhausted != api.ExhaustedSkip {
			return rel, nano, cover, skipped, nil
		}
		keep := make([]string, 0, len(cover))
		for _, u := range cover {
			if c.spent[u]+nano <= c.s.budget {
				keep = append(keep, u)
			}
		}
		if len(keep) == len(cover) {
			return rel, nano, cover, skipped, nil
		}
		if len(keep) == 0 {
			return nil, 0, nil, 0, &api.Error{Status: http.StatusForbidden, Code: api.CodeBudgetExceeded, Field: "epsilon",
				Message: fmt.Sprintf("privacy budget exceeded: the release costs each user ρ = %g, and no user who sent ratings has that much budget left%s; nothing was published or charged", store.Eps(nano), c.s.periodText())}
		}
		if round >= 4 {
			return nil, 0, nil, 0, &api.Error{Status: http.StatusConflict, Code: api.CodeTrainFailed, Message: "the release's cost did not settle when users who cannot pay were left out; nothing was published or charged"}
		}
		skipped += len(cover) - len(keep)
		cover = keep
	}
}

// train trains the method on the ratings of the users in cover (δ within
// the server's policy for that population) and returns the release and
// what it charges each of them.
func (c *centralTraining) train(ctx context.Context, cover []string) (*release.Release, int64, *api.Error) {
	s, req := c.s, c.req
	if d := deltaCap(s.cfg.MaxDelta, len(cover)); req.Delta > d {
		return nil, 0, api.BadRequest(api.CodeOutOfRange, "delta", "delta = %g is above the server's policy δ ≤ %g (1/(10·population) for the %d users the release covers, or --max-delta): a large δ makes a small ε meaningless; nothing was published or charged", req.Delta, d, len(cover))
	}
	data, err := centralMatrix(s.cfg, cover, c.rows)
	if err != nil {
		return nil, 0, s.fail("reading the ratings", err)
	}
	if data == nil {
		return nil, 0, &api.Error{Status: http.StatusConflict, Code: api.CodeTrainFailed, Message: "no ratings yet among the users the release could cover: nothing to train on"}
	}
	scale := release.Scale{Min: s.cfg.Scale.Min, Max: s.cfg.Scale.Max}
	in := release.Input{Ratings: data, Declared: release.Declared{Scale: &scale, Catalogue: c.cat, Population: len(cover)}}
	rel, err := methods.Train(ctx, req.Method, c.cfg, in, c.env)
	if err != nil {
		return nil, 0, &api.Error{Status: http.StatusBadRequest, Code: api.CodeTrainFailed, Field: "params", Message: err.Error()}
	}
	rho, err := chargeFor(rel.Guarantee, deltaCap(s.cfg.MaxDelta, len(cover)))
	if err != nil {
		return nil, 0, api.BadRequest(api.CodeInvalidValue, "method", "%s cannot be published in central mode: %v", req.Method, err)
	}
	nano, err := ledgerCharge(rho)
	if err != nil {
		return nil, 0, api.BadRequest(api.CodeBadEpsilon, "epsilon", "%v", err)
	}
	return rel, nano, nil
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
	if id, ok := s.latestReleaseID(w, r); ok {
		s.serveRelease(w, r, id)
	}
}

// latestReleaseID is the latest release's ID; where there is none (404)
// or it cannot be read (500) it writes the error and returns false.
func (s *Server) latestReleaseID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	row, err := s.st.LatestRelease(r.Context())
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: "no release published yet"})
		return 0, false
	}
	if err != nil {
		s.internal(w, r, "reading the latest release", err)
		return 0, false
	}
	return row.ID, true
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
	} else if rid, ok = s.latestReleaseID(w, r); !ok {
		return
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
