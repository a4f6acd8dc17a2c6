package methods

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/ldp/recovery"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// Local-DP rating collection (seeds 002/003): ldp-laplace and ldp-rr train
// only on the randomized reports written by `privrec collect` (or
// ldp.Simulate), never on true ratings. The collect header gives the
// mechanism, ε and the facts the clients were told in advance (scale,
// catalogue size, number of clients); the reports themselves are public.
// Training is post-processing of the reports, so the whole model — users,
// factors, biases — is public under the local relation and carries the
// collection's guarantee. ldp-clean runs the same estimator on the true
// ratings: a non-private reference.
func init() {
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		name := "ldp-laplace"
		summary := "recover ratings collected with the modified Laplace mechanism (nuclear-norm recovery, Eq. 4); trains on a `privrec collect` file"
		if mech == ldp.RR {
			name = "ldp-rr"
			summary = "recover ratings collected with randomized response over {missing, 1…d} (nuclear-norm recovery, Eq. 4); trains on a `privrec collect` file"
		}
		Register(&Method{
			Name: name, Summary: summary, Seed: "003", Private: true, EpsilonFromInput: true,
			New: func() Config { return &LDPConfig{LDPRecovery: defaultLDPRecovery(), mech: mech} },
		})
	}
	Register(&Method{
		Name:    "ldp-clean",
		Summary: "the ldp-laplace/ldp-rr recovery run on true ratings (no mechanism): their non-private reference",
		Seed:    "003", Private: false,
		New: func() Config { return &LDPCleanConfig{LDPRecovery: defaultLDPRecovery()} },
	})
}

// LDPRecovery holds the settings of the recovery estimator (ldp/recovery)
// shared by ldp-laplace, ldp-rr and ldp-clean.
type LDPRecovery struct {
	Debias     bool    `json:"debias" flag:"debias" help:"use the debiased recovery (knows the mechanism's means and rates of removed and invented ratings)"`
	Rho        float64 `json:"rho" flag:"rho" help:"plain recovery: residual bound ρ in report units (0: Theorem 3 of seed 003)"`
	Gamma      float64 `json:"gamma" flag:"gamma" help:"Theorem 3 tolerance γ (the bound holds with probability ≥ 1 − γ)"`
	Rho0       float64 `json:"rho0" flag:"rho0" help:"Theorem 3 noise level ρ0 of the true ratings, report units (0: 0.225 of the rating range, i.e. 0.45 normalised / 0.9 level for d = 5)"`
	Lambda     float64 `json:"lambda" flag:"lambda" help:"fix the nuclear-norm multiplier λ instead of searching for ρ"`
	LambdaRule string  `json:"lambda_rule" flag:"lambda-rule" help:"debiased recovery: how λ is chosen, noise-norm (default: λ = expected operator norm of the noise's gradient) or discrepancy (residual = expected noise norm)"`
	Refit      bool    `json:"refit" flag:"refit" help:"debiased recovery with a fixed λ: re-estimate the kept singular values by least squares (undo the nuclear-norm shrinkage)"`
	MaxRank    int     `json:"max_rank" flag:"max-rank" help:"largest rank of the recovered matrix"`
	MaxIter    int     `json:"max_iter" flag:"max-iter" help:"proximal-gradient iterations per λ"`
	Damping    float64 `json:"damping" flag:"damping" help:"debiased recovery: shrinkage of user and item biases, in pseudo-ratings (0: noise variance / (ρ0/2)²)"`
	NoShrink   bool    `json:"no_shrink,omitempty" flag:"no-shrink" help:"ldp-laplace/ldp-rr: do not shrink toward the clients' private mean (by default, when the collection has mean reports, the recovery is cross-fitted on two halves of the cells and shrunk toward it, so it never predicts worse than that mean)"`
	ShrinkZ    float64 `json:"shrink_z,omitempty" flag:"shrink-z" help:"the z of the shrinkage weights' confidence bounds (0: 3; larger is more cautious)"`
}

func defaultLDPRecovery() LDPRecovery {
	return LDPRecovery{Gamma: 0.05, MaxRank: 60, MaxIter: 300}
}

// validate checks the recovery settings, naming the flag.
func (o *LDPRecovery) validate() error {
	if o.MaxRank < 1 {
		return fmt.Errorf("--max-rank must be ≥ 1, got %d", o.MaxRank)
	}
	if o.MaxIter < 1 {
		return fmt.Errorf("--max-iter must be ≥ 1, got %d", o.MaxIter)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"rho", o.Rho}, {"rho0", o.Rho0}, {"lambda", o.Lambda}, {"damping", o.Damping}, {"shrink-z", o.ShrinkZ}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("--%s must be finite and ≥ 0, got %g", f.name, f.v)
		}
	}
	if !(o.Gamma > 0 && o.Gamma < 1) {
		return fmt.Errorf("--gamma must be in (0, 1), got %g", o.Gamma)
	}
	rule, err := o.rule()
	if err != nil {
		return err
	}
	if o.Refit && (!o.Debias || (rule == recovery.Discrepancy && o.Lambda == 0)) {
		return fmt.Errorf("--refit applies to the debiased recovery (--debias) with the noise-norm λ rule or a fixed --lambda")
	}
	return nil
}

func (o *LDPRecovery) rule() (recovery.LambdaRule, error) {
	if o.LambdaRule == "" {
		return "", nil
	}
	r, err := recovery.ParseLambdaRule(o.LambdaRule)
	if err != nil {
		return "", fmt.Errorf("--lambda-rule: %w", err)
	}
	return r, nil
}

// options are the estimator's options.
func (o *LDPRecovery) options(env Env) (recovery.Options, error) {
	rule, err := o.rule()
	if err != nil {
		return recovery.Options{}, err
	}
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return recovery.Options{Debias: o.Debias, Rho: o.Rho, Gamma: o.Gamma, Rho0: o.Rho0, Lambda: o.Lambda,
		LambdaRule: rule, Refit: o.Refit, MaxRank: o.MaxRank, MaxIter: o.MaxIter, Damping: o.Damping,
		Workers: env.Workers, Rand: env.Rand, Log: log}, nil
}

// recover runs the estimator on p.
func (o *LDPRecovery) recover(ctx context.Context, p *recovery.Problem, env Env) (*recovery.Result, error) {
	opts, err := o.options(env)
	if err != nil {
		return nil, err
	}
	return recovery.Recover(ctx, p, opts)
}

// privateMean averages the clients' mean reports (one per client, on the
// original scale) into μ̃, clamped to the scale (post-processing), and
// returns it with its standard deviation from the reports' Laplace noise.
// Every user with cell reports must have sent one.
func privateMean(means map[string]float64, reports *ratings.Matrix, h ldp.Header) (mu, sd float64, err error) {
	for _, u := range reports.Users.Names() {
		if _, ok := means[u]; !ok {
			return 0, 0, fmt.Errorf("client %q sent cell reports but no mean report", u)
		}
	}
	mr, err := ldp.NewMeanReporter(h.MeanEpsilon, h.Scale)
	if err != nil {
		return 0, 0, err
	}
	// Summed in a fixed order (by client ID) so the result does not
	// depend on map order.
	ids := make([]string, 0, len(means))
	for u := range means {
		ids = append(ids, u)
	}
	slices.Sort(ids)
	var s float64
	for _, u := range ids {
		s += means[u]
	}
	n := float64(len(ids))
	mu = math.Max(h.Scale.Min, math.Min(h.Scale.Max, s/n))
	return mu, math.Sqrt(mr.Variance() / n), nil
}

// fill copies the recovered matrix into m (report units mapped from the
// scale by the transform) and returns the recovery's facts for the report.
func (o *LDPRecovery) fill(m *model.Model, res *recovery.Result, sc ldp.Scale, om ldp.OutputModel) release.Report {
	to := func(v float64) float64 { return om.ToReport(v) }
	m.Transform.Scale = &model.Scale{FromMin: sc.Min, FromMax: sc.Max, ToMin: to(sc.Min), ToMax: to(sc.Max)}
	m.Transform.Clamp = &model.Range{Min: sc.Min, Max: sc.Max}
	m.Rank, m.U, m.V, m.Offset = res.Rank, res.U, res.V, res.Offset
	m.UserBias, m.ItemBias = res.UserBias, res.ItemBias
	if m.U == nil {
		m.U, m.V = []float64{}, []float64{}
	}
	m.Params = map[string]any{"debias": o.Debias, "rho": res.Rho, "lambda": res.Lambda, "gamma": o.Gamma,
		"lambda_rule": string(res.Rule), "refit": o.Refit, "max_rank": o.MaxRank, "max_iter": o.MaxIter}
	return release.Report{
		"rho": res.Rho, "residual": res.Residual, "lambda": res.Lambda, "rank": res.Rank, "iterations": res.Iterations,
		"zero_solution": res.Zero, "lambda_rule": string(res.Rule), "refit": o.Refit, "noise_op_norm": res.NoiseOpNorm, "report_norm": res.ZNorm,
	}
}

// LDPConfig configures ldp-laplace and ldp-rr.
type LDPConfig struct {
	Collected string `json:"collected" flag:"collected" help:"the collect file whose header gives the mechanism, ε, the declared scale and population (default: the --data file, which must then be a collect file)"`
	LDPRecovery
	mech ldp.Mechanism
}

// Validate implements Config.
func (c *LDPConfig) Validate() error { return c.validate() }

func (c *LDPConfig) name() string { return "ldp-" + string(c.mech) }

// Train implements Config: it reads the collect header, checks the input
// is that file's reports and agrees with anything declared, recovers the
// matrix from the reports (shrunk toward the clients' private mean when
// they sent one) and states the local guarantee.
func (c *LDPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	col, err := c.collection(in)
	if err != nil {
		return nil, err
	}
	h := col.header
	if env.Log != nil && env.Epsilon != h.Epsilon {
		env.Log.Debug("ldp: ε comes from the collect header, not --epsilon", "header_epsilon", h.Epsilon, "flag_epsilon", env.Epsilon)
	}
	rnd, err := ldp.New(h.Mechanism, h.Epsilon, h.Scale)
	if err != nil {
		return nil, err
	}
	rec, err := c.recoverCollection(ctx, col, rnd.Model(), env)
	if err != nil {
		return nil, err
	}
	m := col.model(c.name())
	rep := c.fill(m, rec.res, h.Scale, rnd.Model())
	m.Params["mechanism"], m.Params["collected_epsilon"] = string(h.Mechanism), h.Epsilon
	rec.describe(m, rep, len(col.means))
	g, err := col.guarantee(rnd, rep)
	if err != nil {
		return nil, err
	}
	rep["estimated_true_ratings"] = math.Round(rec.res.SEstimate)
	return &release.Release{Public: m, Guarantee: g, Report: rep}, nil
}

// ldpCollection is a collect file's reports as a method trains on them:
// its path, header and number of reports, the clients' mean reports (nil:
// none sent), the reports on the declared catalogue (cat, nil when none
// was declared).
type ldpCollection struct {
	path    string
	header  ldp.Header
	n       int64
	means   map[string]float64
	reports *ratings.Matrix
	cat     *model.Catalogue
}

// collection reads the collect header and checks the input is that file's
// reports and agrees with anything declared.
func (c *LDPConfig) collection(in release.Input) (*ldpCollection, error) {
	name := c.name()
	path := c.Collected
	if path == "" {
		path = in.Source
	}
	if path == "" {
		return nil, fmt.Errorf("%s trains only on the reports of `privrec collect`: pass the collect file as --data (its header gives the mechanism, ε, the declared scale and the population) or name it with --collected", name)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the collect file: %w", err)
	}
	h, n, means, err := ldp.ScanReports(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s trains only on the reports of `privrec collect`, whose header gives the mechanism, ε, the declared scale and the population (refusing to take them from flags or from the ratings): %s: %w", name, path, err)
	}
	if h.Mechanism != c.mech {
		return nil, fmt.Errorf("%s was collected with mechanism %s; train it with --method ldp-%s, not %s", path, h.Mechanism, h.Mechanism, name)
	}
	col := &ldpCollection{path: path, header: h, n: n, means: means, reports: in.Ratings}
	if err := col.checkReports(); err != nil {
		return nil, err
	}
	if err := col.checkDeclared(in.Declared); err != nil {
		return nil, err
	}
	return col, nil
}

// checkReports checks the reports are the collect file's: as many, within
// the header's clients and catalogue, in its units.
func (col *ldpCollection) checkReports() error {
	reports, h := col.reports, col.header
	if col.n != int64(reports.Len()) {
		return fmt.Errorf("%s holds %d reports but the training data number %d ratings: pass the collect file (or its data lines) as --data", col.path, col.n, reports.Len())
	}
	if reports.NumUsers() > h.Users || reports.NumItems() > h.Items {
		return fmt.Errorf("the reports cover %d users × %d items, more than the header's %d clients × %d catalogue items", reports.NumUsers(), reports.NumItems(), h.Users, h.Items)
	}
	if err := checkReports(reports, h); err != nil {
		return fmt.Errorf("%s: %w", col.path, err)
	}
	return nil
}

// checkDeclared checks the declared facts agree with what the clients
// were told, and puts the reports on a declared catalogue.
func (col *ldpCollection) checkDeclared(d release.Declared) error {
	h := col.header
	if s := d.Scale; s != nil && (s.Min != h.Scale.Min || s.Max != h.Scale.Max) {
		return fmt.Errorf("--scale %g:%g differs from the scale the clients used, %g:%g (collect header); drop --scale, the header gives it", s.Min, s.Max, h.Scale.Min, h.Scale.Max)
	}
	if p := d.Population; p != 0 && p != h.Users {
		return fmt.Errorf("--population %d differs from the %d clients of the collect header", p, h.Users)
	}
	cat := d.Catalogue
	if cat == nil {
		return nil
	}
	if cat.Len() != h.Items {
		return fmt.Errorf("--items lists %d items, but the reports cover a catalogue of %d (collect header)", cat.Len(), h.Items)
	}
	for _, id := range col.reports.Items.Names() {
		if _, ok := cat.Index(id); !ok {
			return fmt.Errorf("the reports cover item %q, which is not in --items: the collection used another catalogue", id)
		}
	}
	reports, err := release.OnCatalogue(col.reports, cat)
	if err != nil {
		return err
	}
	col.reports, col.cat = reports, cat
	return nil
}

// ldpRecovery is the recovery of a collection's matrix: shrunk (sh) toward
// the clients' private mean mu (standard deviation muSD) when they sent
// mean reports and shrinking is on.
type ldpRecovery struct {
	res      *recovery.Result
	shrink   bool
	sh       *recovery.Shrinkage
	mu, muSD float64
	// why is the reason it was not shrunk (empty when it was).
	why string
}

// recoverCollection recovers the matrix from the collection's reports (in
// the report units of om).
func (c *LDPConfig) recoverCollection(ctx context.Context, col *ldpCollection, om ldp.OutputModel, env Env) (ldpRecovery, error) {
	var rec ldpRecovery
	p, err := recovery.NewProblem(col.reports, col.header)
	if err != nil {
		return rec, err
	}
	rec.shrink = col.means != nil && !c.NoShrink
	if !rec.shrink {
		rec.why = "not shrunk (--no-shrink)"
		if col.means == nil {
			rec.why = "not shrunk: the collection has no mean reports (collected with --mean-epsilon 0 or by an older privrec), so nothing guarantees this model predicts better than a constant"
		}
		rec.res, err = c.recover(ctx, p, env)
		return rec, err
	}
	if rec.mu, rec.muSD, err = privateMean(col.means, col.reports, col.header); err != nil {
		return rec, fmt.Errorf("%s: %w", col.path, err)
	}
	opts, err := c.options(env)
	if err != nil {
		return rec, err
	}
	rec.res, rec.sh, err = recovery.Shrink(ctx, p, opts, om.ToReport(rec.mu), c.ShrinkZ)
	return rec, err
}

// describe records the shrinking in the model's parameters and the report
// (meanReports: the number of mean reports).
func (rec ldpRecovery) describe(m *model.Model, rep release.Report, meanReports int) {
	m.Params["shrink"] = rec.shrink
	if !rec.shrink {
		rep["shrink"] = map[string]any{"note": rec.why}
		return
	}
	sh := rec.sh
	m.Params["shrink_target"], m.Params["shrink_weights"] = rec.mu, sh.Weights[:]
	rep["shrink"] = map[string]any{"target": rec.mu, "target_sd": rec.muSD, "mean_reports": meanReports, "weights": sh.Weights[:],
		"a": sh.A[:], "b": sh.B[:], "sd_a": sh.SA[:], "sd_b": sh.SB[:], "fold_ranks": []int{sh.Folds[0].Rank, sh.Folds[1].Rank},
		"note": "the recovery of each of two fixed pseudo-random halves of the cells, weighed on the other half's reports toward the clients' private mean rating; weight 0: the fold predicts the mean"}
}

// model is the public model of the collection's clients and items, to be
// filled by the recovery.
func (col *ldpCollection) model(name string) *model.Model {
	m := model.New(name, col.reports)
	if col.cat != nil && col.cat.HasTitles() {
		m.Titles = col.cat.Titles()
	}
	// The service cannot know which items a user really rated (reports
	// include invented ratings and miss removed ones), so nothing is
	// excluded from recommendations.
	m.SeenPtr = make([]int64, col.reports.NumUsers()+1)
	m.SeenItems = []int32{}
	return m
}

// guarantee is the local guarantee of the collection's reports, per
// rating and per user (the mean reports composed in), which it also
// records in rep.
func (col *ldpCollection) guarantee(rnd ldp.Randomizer, rep release.Report) (privacy.Guarantee, error) {
	h := col.header
	per, user, err := ldp.Guarantees(rnd, h.Items, h.MeanEpsilon)
	if err != nil {
		return privacy.Guarantee{}, err
	}
	g := user
	g.Notion, g.Relation, g.Reproducible = privacy.Local, privacy.RelationLocalReport, h.Reproducible
	meanPart := ""
	if h.MeanEpsilon > 0 {
		meanPart = fmt.Sprintf(" Each also sent her mean rating with Laplace noise at ε = %g, composed into both figures (basic composition).", h.MeanEpsilon)
	}
	g.Note = fmt.Sprintf("Post-processing of reports randomized on the users' devices (%s, noise sampler %s): each of the %d clients randomized her whole vector over the declared catalogue of %d items on the declared scale [%g, %g].%s Per rating (one cell, rated ↔ missing included): ε = %.6g. Per user (all %d cells of her report): ε = %.6g. The reports, the model's users, factors and biases are public.",
		strings.TrimSuffix(rnd.PerRating().Note, "."), h.Sampler, h.Users, h.Items, h.Scale.Min, h.Scale.Max, meanPart, per.Epsilon, h.Items, user.Epsilon)
	rep["mechanism"], rep["sampler"] = string(h.Mechanism), h.Sampler
	rep["per_rating_epsilon"], rep["per_user_epsilon"], rep["mean_epsilon"] = per.Epsilon, user.Epsilon, h.MeanEpsilon
	rep["clients"], rep["catalogue_items"], rep["reports"] = h.Users, h.Items, col.n
	return g, nil
}

// checkReports checks every report is in the header's units: a level
// 1…d for randomized response, a finite value for Laplace.
func checkReports(z *ratings.Matrix, h ldp.Header) error {
	var bad error
	z.All(func(e ratings.Entry) bool {
		v := float64(e.Value)
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			bad = fmt.Errorf("report %v is not a number", v)
		case h.Mechanism == ldp.RR && (v != math.Trunc(v) || v < 1 || v > float64(h.Scale.Levels)):
			bad = fmt.Errorf("report %v is not a level 1…%d", v, h.Scale.Levels)
		}
		return bad == nil
	})
	return bad
}

// LDPCleanConfig configures ldp-clean.
type LDPCleanConfig struct {
	LDPRecovery
}

// Validate implements Config.
func (c *LDPCleanConfig) Validate() error { return c.validate() }

// Train implements Config: the estimator on the true ratings, with an
// identity "mechanism". Non-private: the scale is the declared one when
// given (--scale), else the data's range.
func (c *LDPCleanConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	data := in.Ratings
	var sc ldp.Scale
	if s := in.Declared.Scale; s != nil {
		sc = ldp.Scale{Min: s.Min, Max: s.Max}
		if lo, hi := data.Range(); lo < sc.Min || hi > sc.Max {
			return nil, fmt.Errorf("ratings in [%g, %g] fall outside --scale %g:%g", lo, hi, sc.Min, sc.Max)
		}
	} else {
		// Non-private: the data's own range (ldp.DetectScale reads the
		// ratings, which is allowed here only because nothing is promised).
		sc = ldp.DetectScale(data)
		if !(sc.Min < sc.Max) {
			return nil, errors.New("all ratings are equal: declare the scale with --scale MIN:MAX")
		}
	}
	p, err := recovery.NewCleanProblem(data, sc)
	if err != nil {
		return nil, err
	}
	res, err := c.recover(ctx, p, env)
	if err != nil {
		return nil, err
	}
	m := model.New("ldp-clean", data)
	rep := c.fill(m, res, sc, ldp.OutputModel{ToReportB: 1}) // report units are the rating scale
	g := privacy.NoPrivacy(privacy.UnitEntry, "Non-private reference: the local-DP recovery's estimator run on the true ratings, with no randomization.")
	return &release.Release{Public: m, Guarantee: g, Report: rep}, nil
}

// PrepareFunc turns one side's raw input into what a method trains on,
// as the users' devices would (the type of AuditOptions.Prepare).
type PrepareFunc = func(ctx context.Context, in release.Input, src *noise.Source) (release.Input, func(), error)

// LDPPrepare simulates the clients of a local-DP collection: every user of
// in.Ratings (the clients) randomizes her vector over the declared
// catalogue on the declared scale with mechanism mech at per-rating ε,
// drawing from src, and the result is an Input whose Ratings are the
// reports and whose Source is a temporary collect file with its header
// (the cleanup function removes it). The declared facts pass through. It
// is the device side of ldp-laplace and ldp-rr for the whole-artefact
// audit and for simulations.
func LDPPrepare(mech ldp.Mechanism, eps float64, workers int) PrepareFunc {
	return func(ctx context.Context, in release.Input, src *noise.Source) (release.Input, func(), error) {
		f, err := os.CreateTemp("", "privrec-collect-*.tsv")
		if err != nil {
			return release.Input{}, nil, fmt.Errorf("temporary collect file: %w", err)
		}
		path := f.Name()
		cleanup := func() { os.Remove(path) }
		bw := bufio.NewWriter(f)
		reports, err := ldpReports(ctx, in, mech, eps, src, workers, bw)
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			cleanup()
			return release.Input{}, nil, err
		}
		return release.Input{Ratings: reports, Declared: in.Declared, Source: path}, cleanup, nil
	}
}

// ldpReports runs the clients of LDPPrepare and returns their reports,
// writing the collect file to w (nil: nowhere).
func ldpReports(ctx context.Context, in release.Input, mech ldp.Mechanism, eps float64, src *noise.Source, workers int, w io.Writer) (*ratings.Matrix, error) {
	scale, err := in.NeedScale("the local-DP clients")
	if err != nil {
		return nil, err
	}
	cat, err := in.NeedCatalogue("the local-DP clients")
	if err != nil {
		return nil, err
	}
	if p := in.Declared.Population; p != 0 && p != in.Ratings.NumUsers() {
		return nil, fmt.Errorf("--population %d, but the data have %d users (the clients)", p, in.Ratings.NumUsers())
	}
	sc, err := ldp.DeclaredScale(scale.Min, scale.Max, 0, mech)
	if err != nil {
		return nil, err
	}
	c, err := ldp.SimulateTo(ctx, w, in.Ratings, mech, eps, ldp.DefaultMeanEpsilon(eps, cat.Len()), sc, cat.IDs(), src, workers)
	if err != nil {
		return nil, fmt.Errorf("simulating the clients: %w", err)
	}
	return c.Reports, nil
}

// DevicePrepare returns the step a method's users' devices run before the
// service trains, at per-rating ε (nil for methods that train on the
// ratings themselves): the local-DP collection for ldp-laplace and ldp-rr.
func DevicePrepare(name string, eps float64) PrepareFunc {
	switch name {
	case "ldp-laplace":
		return LDPPrepare(ldp.Laplace, eps, 1)
	case "ldp-rr":
		return LDPPrepare(ldp.RR, eps, 1)
	}
	return nil
}

// AuditDesign implements AuditDesigner. The privacy noise of ldp-laplace
// and ldp-rr is drawn on the users' devices, so the audit reads it there:
// the statistic is the canary client's report for item1, the one cell in
// which the default pair of the local relation differs between rated
// (rating 1, side 0) and missing (side 1) — a worst case for both
// randomizers (their per-rating ε is attained between a rating and
// missing). The claim tested is the per-rating ε the devices randomize
// with; the per-user guarantee n·ε composes it over the n cells. The
// training that follows is post-processing and is not run for the bound.
func (c *LDPConfig) AuditDesign(eps, _ float64) (*AuditDesign, error) {
	return &AuditDesign{
		Epsilon: eps,
		Device: func(_ context.Context, in release.Input, src *noise.Source, eps float64) (release.Input, error) {
			return canaryReport(in, c.mech, eps, src)
		},
		Name:     "the canary client's report for item1 (rating 1 vs missing)",
		Prepared: true,
		Statistic: func(prepared release.Input, _ []mechanism.Draw, _ *release.Release) float64 {
			m := prepared.Ratings
			if m == nil {
				return math.NaN()
			}
			u, ok := m.Users.Lookup(CanaryUser)
			if !ok {
				return math.NaN()
			}
			i, ok := m.Items.Lookup("item1")
			if !ok {
				return math.NaN()
			}
			v, ok := m.Get(u, i)
			if !ok {
				return math.NaN()
			}
			return float64(v)
		},
	}, nil
}

// canaryReport runs the canary client's device on her item1 cell — the
// randomizer every device runs (ldp.New, Randomize), at per-rating eps —
// and returns her report as a one-cell input (no cell when the report is
// missing): what the audit's statistic reads. Each device randomizes its
// own ratings alone, so the other clients' reports do not change hers.
func canaryReport(in release.Input, mech ldp.Mechanism, eps float64, src *noise.Source) (release.Input, error) {
	scale, err := in.NeedScale("the local-DP clients")
	if err != nil {
		return release.Input{}, err
	}
	cat, err := in.NeedCatalogue("the local-DP clients")
	if err != nil {
		return release.Input{}, err
	}
	sc, err := ldp.DeclaredScale(scale.Min, scale.Max, 0, mech)
	if err != nil {
		return release.Input{}, err
	}
	rz, err := ldp.New(mech, eps, sc)
	if err != nil {
		return release.Input{}, err
	}
	u, ok := in.Ratings.Users.Lookup(CanaryUser)
	if !ok {
		return release.Input{}, fmt.Errorf("audit: no canary client in the input")
	}
	// Her item1 cell: each cell is randomized on its own (per-rating ε),
	// so the other cells of her row do not change its report.
	if !slices.Contains(cat.IDs(), "item1") {
		return release.Input{}, fmt.Errorf("audit: item1 is not in the catalogue")
	}
	cell, out := []float64{ldp.Missing}, []float64{0}
	if i, ok := in.Ratings.Items.Lookup("item1"); ok {
		if v, ok := in.Ratings.Get(u, i); ok {
			cell[0] = float64(v)
		}
	}
	if err := rz.Randomize(src, cell, out); err != nil {
		return release.Input{}, fmt.Errorf("audit: the canary's device: %w", err)
	}
	b := ratings.NewBuilder(ratings.DupError)
	if !ldp.IsMissing(out[0]) {
		if err := b.Add(CanaryUser, "item1", out[0], 1); err != nil {
			return release.Input{}, err
		}
	}
	m, err := b.Build()
	if err != nil {
		return release.Input{}, fmt.Errorf("audit: the canary's report: %w", err)
	}
	in.Ratings = m
	return in, nil
}
