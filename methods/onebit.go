package methods

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/onebit"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// One-bit matrix completion with DP (seed 000): five methods sharing one
// set of options; InP adds its flip probabilities, GraP its number of
// noisy steps and clamp. Under the seed's relation (one rating's value
// changes; which ratings exist is public) the users, the items and who
// rated what are public, so the model holds them (model.New) with the
// factors U, V (or OutP's dense matrix); only the signs are private.
func init() {
	for _, m := range []struct {
		mech    onebit.Mechanism
		summary string
	}{
		{onebit.Clear, "one-bit matrix completion (SPG, nuclear- and max-norm constraints), no noise"},
		{onebit.InP, "one-bit completion after randomised response on the signs (input perturbation)"},
		{onebit.ObjP, "one-bit completion with a random linear objective term (objective perturbation; ε as claimed, not proven)"},
		{onebit.GraP, "one-bit completion with Laplace noise on clamped gradients (gradient perturbation)"},
		{onebit.OutP, "one-bit completion with Laplace noise on the completed matrix (output perturbation; per-entry ε)"},
	} {
		mech := m.mech
		Register(&Method{
			Name:    "onebit-" + string(mech),
			Summary: m.summary,
			Seed:    "000",
			Private: mech != onebit.Clear,
			New:     func() Config { return newOnebitConfig(mech) },
		})
	}
}

// OnebitConfig configures the one-bit methods (onebit-clear, -objp and
// -outp directly; -inp and -grap embed it).
type OnebitConfig struct {
	Link      string  `json:"link" flag:"link" help:"link function: logit or probit"`
	Sigma     float64 `json:"sigma" flag:"sigma" help:"probit noise scale σ (h(x) = Φ(x/σ))"`
	Tau       float64 `json:"tau" flag:"tau" help:"nuclear-norm radius τ (0: α·√(users·items), the seed's τ for rank 1; √(users·items) with --alpha inf)"`
	Alpha     float64 `json:"alpha" flag:"alpha" help:"max-norm bound α on the latent matrix; inf drops the bound (nuclear ball only, as the 1BMC reference code runs MovieLens; not for onebit-outp or probit onebit-objp)"`
	Threshold float64 `json:"threshold" flag:"threshold" help:"ratings above this are +1, others −1; fix it without looking at the data (default: the midpoint of the declared --scale; private methods need one of the two)"`
	Solver    string  `json:"solver" flag:"solver" help:"dr: Douglas–Rachford splitting with Anderson acceleration, stopped by a certified duality gap (default); spg: spectral projected gradient with Dykstra projections (the previous solver, much slower with a finite --alpha)"`
	GapTol    float64 `json:"gap_tol" flag:"gap-tol" help:"dr stops when the objective is within this fraction of a proven lower bound on the optimum"`
	MaxIter   int     `json:"max_iter" flag:"max-iter" help:"iteration limit (dr: nuclear projections; spg: SPG steps)"`
	OptTol    float64 `json:"opt_tol" flag:"opt-tol" help:"spg stops when the projected step ‖P(X−αg)−X‖∞/min(α,1) is below this (it also stops when the objective stalls: < 1e-5 relative decrease over 10 iterations)"`
	ProjTol   float64 `json:"proj_tol" flag:"proj-tol" help:"spg: Dykstra tolerance of the projection, relative to α (tightened automatically when needed)"`
	FullSVD   bool    `json:"full_svd" flag:"full-svd" help:"use a full SVD in every nuclear projection (slow reference)"`

	mech onebit.Mechanism
}

// OnebitInPConfig configures onebit-inp.
type OnebitInPConfig struct {
	OnebitConfig
	P1 float64 `json:"p1" flag:"p1" help:"flip probability of +1 (0 with --p2 0: the symmetric 1/(1+e^ε)); refused if the exact privacy loss of p1, p2 exceeds ε"`
	P2 float64 `json:"p2" flag:"p2" help:"flip probability of −1"`
}

// OnebitGraPConfig configures onebit-grap.
type OnebitGraPConfig struct {
	OnebitConfig
	Iterations int     `json:"iterations" flag:"iterations" help:"the number K of noisy gradient steps (each gets ε/K; noise scale K·Δ1/ε)"`
	Clamp      float64 `json:"clamp" flag:"clamp" help:"clamp gradient entries to [−C, C] (Δ1 = 2C; negative: no clamp, Δ1 = the link's Δ, which needs a finite α for probit)"`
	ProjIter   int     `json:"proj_iter" flag:"proj-iter" help:"--solver dr: splitting iterations per projection onto the constraint set, warm-started (the result is always in the set; more iterations project more exactly and cost one nuclear projection each)"`
}

func newOnebitConfig(mech onebit.Mechanism) Config {
	base := OnebitConfig{Link: "logit", Sigma: 1, Alpha: 1, Threshold: math.NaN(), Solver: "dr", GapTol: 1e-3, MaxIter: 500, OptTol: 1e-4, ProjTol: 1e-2, mech: mech}
	switch mech {
	case onebit.InP:
		return &OnebitInPConfig{OnebitConfig: base}
	case onebit.GraP:
		return &OnebitGraPConfig{OnebitConfig: base, Iterations: 10, Clamp: 0.5, ProjIter: 1}
	}
	return &base
}

// Validate checks the shared settings.
func (c *OnebitConfig) Validate() error {
	switch c.Link {
	case "logit", "logistic", "probit":
	default:
		return fmt.Errorf("--link must be logit or probit, got %q", c.Link)
	}
	if c.Link == "probit" && (!(c.Sigma > 0) || math.IsInf(c.Sigma, 0)) {
		return fmt.Errorf("--sigma must be positive and finite, got %g", c.Sigma)
	}
	if !(c.Alpha > 0) {
		return fmt.Errorf("--alpha must be positive (or inf), got %g", c.Alpha)
	}
	if !(c.Tau >= 0) || math.IsInf(c.Tau, 0) {
		return fmt.Errorf("--tau must be finite and ≥ 0 (0: the default), got %g", c.Tau)
	}
	if math.IsInf(c.Threshold, 0) {
		return fmt.Errorf("--threshold must be finite, got %g", c.Threshold)
	}
	if c.Solver != "dr" && c.Solver != "spg" {
		return fmt.Errorf("--solver must be dr or spg, got %q", c.Solver)
	}
	if !(c.GapTol > 0 && c.GapTol < 1) {
		return fmt.Errorf("--gap-tol must be in (0, 1), got %g", c.GapTol)
	}
	if c.MaxIter < 1 {
		return fmt.Errorf("--max-iter must be ≥ 1, got %d", c.MaxIter)
	}
	if !(c.OptTol > 0) || math.IsInf(c.OptTol, 0) {
		return fmt.Errorf("--opt-tol must be positive and finite, got %g", c.OptTol)
	}
	if !(c.ProjTol > 0) || math.IsInf(c.ProjTol, 0) {
		return fmt.Errorf("--proj-tol must be positive and finite, got %g", c.ProjTol)
	}
	if math.IsInf(c.Alpha, 1) && c.mech == onebit.OutP {
		return fmt.Errorf("--alpha inf: onebit-outp's noise is calibrated to α; give a finite --alpha")
	}
	if math.IsInf(c.Alpha, 1) && c.mech == onebit.ObjP && c.Link == "probit" {
		return fmt.Errorf("--alpha inf: probit onebit-objp's sensitivity depends on α; give a finite --alpha")
	}
	return nil
}

// Validate checks the shared settings and the flip probabilities.
func (c *OnebitInPConfig) Validate() error {
	if err := c.OnebitConfig.Validate(); err != nil {
		return err
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"p1", c.P1}, {"p2", c.P2}} {
		if !(p.v >= 0 && p.v < 1) {
			return fmt.Errorf("--%s must be in [0, 1), got %g", p.name, p.v)
		}
	}
	if (c.P1 == 0) != (c.P2 == 0) {
		return fmt.Errorf("--p1 and --p2 must both be given (each in (0, 1)) or both be 0 (the symmetric 1/(1+e^ε)); got %g and %g", c.P1, c.P2)
	}
	if !(c.P1+c.P2 < 1) {
		return fmt.Errorf("--p1 + --p2 must be below 1, got %g", c.P1+c.P2)
	}
	return nil
}

// Validate checks the shared settings, K and C.
func (c *OnebitGraPConfig) Validate() error {
	if err := c.OnebitConfig.Validate(); err != nil {
		return err
	}
	if c.Iterations < 1 {
		return fmt.Errorf("--iterations must be ≥ 1, got %d", c.Iterations)
	}
	if c.ProjIter < 1 {
		return fmt.Errorf("--proj-iter must be ≥ 1, got %d", c.ProjIter)
	}
	if c.Clamp == 0 || math.IsNaN(c.Clamp) || math.IsInf(c.Clamp, 0) {
		return fmt.Errorf("--clamp must be finite and non-zero (negative: no clamp), got %g", c.Clamp)
	}
	if c.Clamp < 0 && math.IsInf(c.Alpha, 1) && c.Link == "probit" {
		return fmt.Errorf("--clamp %g without --alpha: unclamped probit gradients have no sensitivity bound; give a finite --alpha or a positive --clamp", c.Clamp)
	}
	return nil
}

// Train implements Config.
func (c *OnebitConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.train(ctx, in, env, onebit.Config{}, nil)
}

// Train implements Config.
func (c *OnebitInPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.train(ctx, in, env, onebit.Config{P1: c.P1, P2: c.P2}, nil)
}

// Train implements Config.
func (c *OnebitGraPConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	return c.train(ctx, in, env, onebit.Config{Iterations: c.Iterations, Clamp: c.Clamp, ProjIter: c.ProjIter},
		map[string]any{"iterations": c.Iterations, "clamp": c.Clamp, "proj_iter": c.ProjIter})
}

// threshold returns the binarisation threshold and where it came from. A
// private method never reads it from the ratings: it is --threshold, or the
// midpoint of the declared --scale; without either it refuses. Only the
// non-private onebit-clear may fall back to the data (0 for ±1 data, else
// the training mean).
func (c *OnebitConfig) threshold(in release.Input) (float64, string, error) {
	sc := in.Declared.Scale
	switch {
	case !math.IsNaN(c.Threshold):
		if sc != nil && !(c.Threshold >= sc.Min && c.Threshold < sc.Max) {
			return 0, "", fmt.Errorf("--threshold %g binarises every rating on the declared scale [%g, %g] to the same sign; pick one in [MIN, MAX)", c.Threshold, sc.Min, sc.Max)
		}
		return c.Threshold, "declared (--threshold)", nil
	case sc != nil:
		return (sc.Min + sc.Max) / 2, fmt.Sprintf("midpoint of the declared scale [%g, %g]", sc.Min, sc.Max), nil
	case c.mech != onebit.Clear:
		return 0, "", errors.New("a private method needs a binarisation threshold fixed without looking at the private ratings: pass --threshold T (ratings above T are +1), or declare the rating scale with --scale MIN:MAX (the threshold is then its midpoint; --scale -1:1 for ±1 data)")
	}
	signs := true
	for _, v := range in.Ratings.Values() {
		if v != 1 && v != -1 {
			signs = false
			break
		}
	}
	if signs {
		return 0, "0 for ±1 data (read from the data; non-private method)", nil
	}
	return in.Ratings.Mean(), "training mean (read from the data; non-private method)", nil
}

func (c *OnebitConfig) train(ctx context.Context, in release.Input, env Env, ocfg onebit.Config, extra map[string]any) (*release.Release, error) {
	data := in.Ratings
	var link onebit.Link
	switch c.Link {
	case "logit", "logistic":
		link = onebit.Logistic{}
	case "probit":
		link = onebit.Probit{Sigma: c.Sigma}
	default:
		return nil, fmt.Errorf("--link must be logit or probit, got %q", c.Link)
	}
	thr, thrSource, err := c.threshold(in)
	if err != nil {
		return nil, err
	}
	// The shape is public under the seed's relation.
	d1, d2 := data.NumUsers(), data.NumItems()
	alpha, tau := c.Alpha, c.Tau
	if tau == 0 {
		// The seed's τ = α√(d1·d2) for r = 1; without a max-norm bound, the
		// 1BMC reference's MovieLens radius √(d1·d2).
		tau = math.Sqrt(float64(d1) * float64(d2))
		if !math.IsInf(alpha, 1) {
			tau *= alpha
		}
	}
	if !(tau > 0) || math.IsInf(tau, 0) {
		return nil, fmt.Errorf("--tau must be positive and finite, got %g", tau)
	}
	p := &onebit.Problem{D1: d1, D2: d2}
	p.Rows = make([]int32, 0, data.Len())
	p.Cols = make([]int32, 0, data.Len())
	p.Y = make([]float64, 0, data.Len())
	data.All(func(e ratings.Entry) bool {
		y := -1.0
		if float64(e.Value) > thr {
			y = 1
		}
		p.Rows, p.Cols, p.Y = append(p.Rows, e.User), append(p.Cols, e.Item), append(p.Y, y)
		return true
	})
	ocfg.Mechanism, ocfg.Epsilon, ocfg.Noise, ocfg.Instrument = c.mech, env.Epsilon, env.Noise, env.instrument()
	ocfg.Solver = onebit.Options{Link: link, Tau: tau, Alpha: alpha, Solver: c.Solver, GapTol: c.GapTol, MaxIter: c.MaxIter, OptTol: c.OptTol,
		ProjTol: c.ProjTol, FullSVD: c.FullSVD, Rand: env.Rand.Float64, Progress: env.Progress}
	res, err := onebit.Run(ctx, p, ocfg)
	if err != nil {
		return nil, err
	}
	// Users, items and who rated what are public under the relation.
	m := model.New("onebit-"+string(c.mech), data)
	m.Output = model.Signs
	m.Transform.Binarise, m.Transform.Threshold = true, thr
	m.Params = map[string]any{"link": c.Link, "tau": tau, "alpha": onebit.AlphaParam(alpha), "threshold": thr}
	if c.Link == "probit" {
		m.Params["sigma"] = c.Sigma
	}
	for k, v := range extra {
		m.Params[k] = v
	}
	for _, k := range []string{"p1", "p2"} { // InP's flip probabilities as used
		if v, ok := res.Info[k]; ok {
			m.Params[k] = v
		}
	}
	if res.Dense != nil {
		m.Dense = res.Dense
		m.U, m.V = []float64{}, []float64{}
	} else if m.Rank, m.U, m.V, err = res.Solution.FactorsUV(d1, d2); err != nil {
		return nil, err
	}
	g := res.Guarantee
	if g.Private() {
		g.Relation = privacy.RelationRatingValue
	}
	// onebit.Run's Info holds, for a private mechanism, only public
	// settings and post-processing of the noisy release (see onebit.Run).
	rep := release.Report{}
	for k, v := range res.Info {
		rep[k] = v
	}
	rep["threshold"], rep["threshold_source"] = thr, thrSource
	return &release.Release{Public: m, Guarantee: g, Report: rep}, nil
}

// AuditDesign implements AuditDesigner: the K gradient releases are
// adaptive (gradient k is taken at an iterate that depends on the earlier
// noise), so the audit trains one step — the same code, the first
// gradient, taken at the data-independent starting point, carrying the
// whole budget.
func (c *OnebitGraPConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Iterations = 1
	return &AuditDesign{Config: &one}, nil
}

// AuditDesign implements AuditDesigner: onebit-outp accounts each entry of
// its one Laplace release as a release of its own (per-entry ε, composed
// over the entries in its guarantee), so the audit measures the pair's
// sensitivity per entry; the other one-bit methods use the default audit
// (nil).
func (c *OnebitConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	if c.mech != onebit.OutP {
		return nil, nil
	}
	return &AuditDesign{PerCoordinate: true, Sides: SignAuditPair}, nil
}
