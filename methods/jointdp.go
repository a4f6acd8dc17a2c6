package methods

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/privrec/privrec/jointdp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/transform"
)

// Seed 001 (joint-DP matrix completion): fw, dpfw, dpsvd and mm. The
// solvers live in package jointdp; this file applies the seed's per-user
// data conventions (ξ cap, centring by the user's own mean), builds the
// noise plans from the budget (jointdp.Plan*), and splits the result into
// the public item side and each user's own state.
//
// What the private methods make public: the declared catalogue (the item
// set: n = its size), the number of users m (public under replace-one-user
// neighbours, or the declared --population), the hyper-parameters, the σ
// of every release, and what the solvers compute from the noisy releases
// only (item factors V, dpfw's λ̂, mm's item averages). What stays with
// each user: her row, her bias (her mean, or mm's damped effect) and the
// items she rated.
func init() {
	Register(&Method{
		Name: "fw", Seed: "001",
		Summary: "Frank–Wolfe nuclear-norm matrix completion (non-private baseline)",
		New: func() Config {
			return &FWConfig{Iterations: 100, Step: jointdp.StepLineSearch, Center: true}
		},
	})
	Register(&Method{
		Name: "dpfw", Seed: "001", Private: true, PerUser: true, Needs: []string{"items"},
		Summary: "private Frank–Wolfe (user-level joint DP, Algorithm 1)",
		New: func() Config {
			return &DPFWConfig{Iterations: 20, Clip: 5, Calibration: jointdp.CalZCDP, Step: jointdp.StepConst, BiasScale: 1,
				Center: true, JointCap: JointCap{MaxPerUser: 80}}
		},
	})
	Register(&Method{
		Name: "dpsvd", Seed: "001", Private: true, PerUser: true, Needs: []string{"items"},
		Summary: "private SVD (user-level joint DP, Algorithm 3)",
		New: func() Config {
			return &DPSVDConfig{Rank: 3, Clip: 5, Calibration: jointdp.CalZCDP, Center: true, Local: DPSVDFit, Ridge: 0.01, JointCap: JointCap{MaxPerUser: 80}}
		},
	})
	Register(&Method{
		Name: "mm", Seed: "001", Private: true, PerUser: true, Needs: []string{"scale", "items"},
		Summary: "McSherry–Mironov SVD after cleansing (user-level joint DP baseline)",
		New: func() Config {
			return &MMConfig{Rank: 3, Bound: 1, JointCap: JointCap{MaxPerUser: 80}}
		},
	})
}

// JointCap is the per-user cap the seed-001 methods share.
type JointCap struct {
	MaxPerUser int `json:"max_per_user" flag:"max-per-user" help:"keep at most ξ random ratings of each user in what enters the (noisy) aggregates, drawn from her own random stream (0: all); her own row and seen items use all her ratings"`
}

func (c JointCap) validate() error {
	if c.MaxPerUser < 0 {
		return fmt.Errorf("--max-per-user must be ≥ 0, got %d", c.MaxPerUser)
	}
	return nil
}

// FWConfig configures fw, the non-private Frank–Wolfe baseline.
type FWConfig struct {
	Nuclear    float64 `json:"nuclear" flag:"nuclear" help:"nuclear-norm bound k (0: √(m·n)/3 from the numbers of users and items only, divided by 1 − (1 − 1/T)^T with the 1/T step, the share of k that T such steps can reach)"`
	Iterations int     `json:"iterations" flag:"iterations" help:"Frank–Wolfe iterations T"`
	Step       string  `json:"step" flag:"step" help:"step rule: linesearch, 1/T or 2/(t+1)"`
	TopItems   int     `json:"top_items" flag:"top-items" help:"keep only the N most-rated items, counted exactly (0: all; non-private)"`
	Center     bool    `json:"center" flag:"center" help:"subtract each user's mean rating"`
	JointCap
}

// DPFWConfig configures dpfw (Algorithm 1).
type DPFWConfig struct {
	Nuclear     float64 `json:"nuclear" flag:"nuclear" help:"nuclear-norm bound k (0: √(m·n)/3 from the public numbers of users and catalogue items, divided by 1 − (1 − 1/T)^T with the 1/T step, the share of k that T such steps can reach)"`
	Iterations  int     `json:"iterations" flag:"iterations" help:"Frank–Wolfe iterations T (= noisy Gram releases)"`
	Clip        float64 `json:"clip" flag:"clip" help:"ℓ2 bound L on each user's (centred) rating row and iterate; rows are scaled down to it"`
	Calibration string  `json:"calibration" flag:"calibration" help:"noise calibration: zcdp (equal ρ_t — equal σ_t after the first release, whose sensitivity is a quarter — exactly the requested ε), zcdp-decay (σ_t ∝ 1/√t, same total), paper (σ = L²√(64T ln(1/δ))/ε)"`
	Step        string  `json:"step" flag:"step" help:"step rule: 1/T (the paper's) or 2/(t+1)"`
	BiasScale   float64 `json:"bias_scale" flag:"bias-scale" help:"multiplier of the bias n^¼√(σ ln(n/β)) added to λ̂ (0: none)"`
	Center      bool    `json:"center" flag:"center" help:"subtract each user's mean rating (her own, kept in her state: no privacy cost)"`
	JointCap
}

// DPSVDConfig configures dpsvd (Algorithm 3).
type DPSVDConfig struct {
	Rank        int     `json:"rank" flag:"rank" help:"rank r of the released item subspace"`
	Clip        float64 `json:"clip" flag:"clip" help:"ℓ2 bound L on each user's (centred) rating row in the Gram matrix"`
	Calibration string  `json:"calibration" flag:"calibration" help:"noise calibration: zcdp (exactly the requested ε) or paper (σ = L²√(64 ln(1/δ))/ε)"`
	Center      bool    `json:"center" flag:"center" help:"subtract each user's mean rating (her own, kept in her state: no privacy cost)"`
	Local       string  `json:"local" flag:"local" help:"each user's own step on the public V_r: fit (ridge least squares of her ratings on her items' rows of V_r) or project (Algorithm 3 as written: (n/|Ω_i|)·x_i V_r, which overshoots when her items are not a uniform sample of the catalogue)"`
	Ridge       float64 `json:"ridge" flag:"ridge" help:"ridge λ of the fit local step (added to V_ΩᵀV_Ω, whose eigenvalues are about |Ω_i|/n)"`
	JointCap
}

// The local steps of dpsvd.
const (
	DPSVDFit     = "fit"
	DPSVDProject = "project"
)

// MMConfig configures mm, the McSherry–Mironov baseline.
type MMConfig struct {
	Rank  int     `json:"rank" flag:"rank" help:"rank r of the released item subspace"`
	Bound float64 `json:"bound" flag:"bound" help:"clamp B of the centred ratings entering the covariance"`
	JointCap
}

func checkNuclear(k float64) error {
	if !(k >= 0) || math.IsInf(k, 0) {
		return fmt.Errorf("--nuclear must be finite and ≥ 0, got %g", k)
	}
	return nil
}

func checkClip(L float64) error {
	if !(L > 0) || math.IsInf(L, 0) {
		return fmt.Errorf("--clip must be positive and finite, got %g", L)
	}
	return nil
}

// Validate checks the settings.
func (c *FWConfig) Validate() error {
	if err := checkNuclear(c.Nuclear); err != nil {
		return err
	}
	if c.Iterations < 1 {
		return fmt.Errorf("--iterations must be ≥ 1, got %d", c.Iterations)
	}
	switch c.Step {
	case jointdp.StepLineSearch, jointdp.StepConst, jointdp.StepClassic:
	default:
		return fmt.Errorf("--step must be %s, %s or %s, got %q", jointdp.StepLineSearch, jointdp.StepConst, jointdp.StepClassic, c.Step)
	}
	if c.TopItems < 0 {
		return fmt.Errorf("--top-items must be ≥ 0, got %d", c.TopItems)
	}
	return c.JointCap.validate()
}

// Validate checks the settings.
func (c *DPFWConfig) Validate() error {
	if err := checkNuclear(c.Nuclear); err != nil {
		return err
	}
	if c.Iterations < 1 {
		return fmt.Errorf("--iterations must be ≥ 1, got %d", c.Iterations)
	}
	if err := checkClip(c.Clip); err != nil {
		return err
	}
	switch c.Calibration {
	case jointdp.CalZCDP, jointdp.CalDecay, jointdp.CalPaper:
	default:
		return fmt.Errorf("--calibration must be %s, %s or %s, got %q", jointdp.CalZCDP, jointdp.CalDecay, jointdp.CalPaper, c.Calibration)
	}
	switch c.Step {
	case jointdp.StepConst, jointdp.StepClassic:
	default:
		return fmt.Errorf("--step must be %s or %s (a line search would read the private data), got %q", jointdp.StepConst, jointdp.StepClassic, c.Step)
	}
	if !(c.BiasScale >= 0) || math.IsInf(c.BiasScale, 0) {
		return fmt.Errorf("--bias-scale must be finite and ≥ 0, got %g", c.BiasScale)
	}
	return c.JointCap.validate()
}

// Validate checks the settings.
func (c *DPSVDConfig) Validate() error {
	if c.Rank < 1 {
		return fmt.Errorf("--rank must be ≥ 1, got %d", c.Rank)
	}
	if err := checkClip(c.Clip); err != nil {
		return err
	}
	switch c.Calibration {
	case jointdp.CalZCDP, jointdp.CalPaper:
	default:
		return fmt.Errorf("--calibration must be %s or %s (one release), got %q", jointdp.CalZCDP, jointdp.CalPaper, c.Calibration)
	}
	switch c.Local {
	case DPSVDFit:
		if !(c.Ridge > 0) || math.IsInf(c.Ridge, 0) {
			return fmt.Errorf("--ridge must be positive and finite, got %g", c.Ridge)
		}
	case DPSVDProject:
	default:
		return fmt.Errorf("--local must be %s or %s, got %q", DPSVDFit, DPSVDProject, c.Local)
	}
	return c.JointCap.validate()
}

// Validate checks the settings.
func (c *MMConfig) Validate() error {
	if c.Rank < 1 {
		return fmt.Errorf("--rank must be ≥ 1, got %d", c.Rank)
	}
	if !(c.Bound > 0) || math.IsInf(c.Bound, 0) {
		return fmt.Errorf("--bound must be positive and finite, got %g", c.Bound)
	}
	return c.JointCap.validate()
}

// jointData is what a seed-001 method trains on after the per-user steps.
type jointData struct {
	// full is every user's ratings on the item set: her own rows (her
	// local steps and seen items).
	full *ratings.Matrix
	// agg is what enters the (noisy) aggregates: full, ξ-capped per user,
	// minus each user's mean when centring.
	agg *ratings.Matrix
	// means are the users' means over full (nil when not centring).
	means []float64
	// m is the number of users (public under replace-one-user neighbours,
	// or declared), n the number of items.
	m, n int
	cat  *model.Catalogue
}

// prepareJoint applies the per-user conventions. Private methods train on
// the declared catalogue only; fw uses it when declared.
func prepareJoint(in release.Input, name string, private bool, scale *release.Scale, xi, topItems int, center bool, seed uint64) (*jointData, error) {
	d := &jointData{}
	r := in.Ratings
	if scale != nil && private {
		r = release.ClampToScale(r, *scale)
	}
	if private {
		cat, err := in.NeedCatalogue(name)
		if err != nil {
			return nil, err
		}
		d.cat = cat
	} else if in.Declared.Catalogue != nil && topItems == 0 {
		d.cat = in.Declared.Catalogue
	}
	if in.Declared.Catalogue != nil {
		var err error
		if r, err = release.OnCatalogue(r, in.Declared.Catalogue); err != nil {
			return nil, err
		}
	}
	if topItems > 0 {
		if private {
			return nil, fmt.Errorf("%s: a top-N item restriction from exact counts is not private: declare a top-N catalogue (--items) instead", name)
		}
		r = transform.TopItems(r, topItems)
	}
	d.full = r
	d.m, d.n = r.NumUsers(), r.NumItems()
	if p := in.Declared.Population; p > 0 {
		if p < d.m {
			return nil, fmt.Errorf("the declared --population %d is smaller than the number of users in the data", p)
		}
		d.m = p
	}
	capped, err := capPerUser(r, xi, seed)
	if err != nil {
		return nil, err
	}
	d.agg = capped
	if center {
		d.means = transform.UserMeans(r)
		d.agg = capped.MapValues(func(e ratings.Entry) float32 { return float32(float64(e.Value) - d.means[e.User]) })
	}
	return d, nil
}

// nuclear returns k, or the default: the bound √(m·n)/3 on the norm of
// the result, divided by the share of k that T steps of the step rule can
// reach (jointdp.Reach: 1 − (1 − 1/T)^T for the seed's 1/T, 1 for the
// others), so that the final iterate can reach norm √(m·n)/3 whatever the
// rule. Without the division the 1/T rule stops at 0.64·√(m·n)/3 (T = 20):
// on the seed's synthetic set that was most of private FW's gap to FW
// (docs/jointdp.md, "Private FW's non-private limit").
func (d *jointData) nuclear(k float64, step string, T int) (float64, error) {
	if k > 0 {
		return k, nil
	}
	k = math.Sqrt(float64(d.m)*float64(d.n)) / 3
	if step == jointdp.StepLineSearch {
		return k, nil
	}
	reach, err := jointdp.Reach(step, T)
	if err != nil {
		return 0, err
	}
	return k / reach, nil
}

// shell is the full model (users included, as training sees it) over the
// item set, before its users are split off.
func (d *jointData) shell(name string) *model.Model {
	m := model.New(name, d.full)
	if d.cat != nil && d.cat.HasTitles() {
		m.Titles = d.cat.Titles()
	}
	return m
}

// capPerUser keeps, for each user with more than xi ratings, a uniformly
// random xi-subset of them (xi ≤ 0: all). Each user's subset is drawn from
// a stream of her own, seeded by seed and her user ID, so it depends on her
// ratings only: replacing one user's ratings changes no other user's
// sample. (transform.CapPerUser draws every user from one shared stream,
// so one user's number of ratings would shift every later user's sample
// and the Gram sensitivity, which assumes the others' rows fixed, would
// not hold for a known seed.)
func capPerUser(m *ratings.Matrix, xi int, seed uint64) (*ratings.Matrix, error) {
	if xi <= 0 {
		return m, nil
	}
	nu := m.NumUsers()
	ptr := make([]int64, nu+1)
	cols := make([]int32, 0, min(m.Len(), nu*xi))
	vals := make([]float32, 0, cap(cols))
	var idx []int
	for u := range int32(nu) {
		items, v := m.UserRow(u)
		if len(items) <= xi {
			cols = append(cols, items...)
			vals = append(vals, v...)
		} else {
			h := fnv.New64a()
			h.Write([]byte(m.Users.Name(u)))
			rnd := rand.New(rand.NewPCG(seed, h.Sum64()))
			idx = idx[:0]
			for k := range items {
				idx = append(idx, k)
			}
			for k := range xi { // partial Fisher–Yates: every xi-subset equally likely
				j := k + rnd.IntN(len(idx)-k)
				idx[k], idx[j] = idx[j], idx[k]
			}
			keep := idx[:xi]
			slices.Sort(keep)
			for _, k := range keep {
				cols = append(cols, items[k])
				vals = append(vals, v[k])
			}
		}
		ptr[u+1] = int64(len(cols))
	}
	out, err := ratings.FromCSR(m.Users, m.Items, m.NumItems(), ptr, cols, vals, nil)
	if err != nil {
		return nil, fmt.Errorf("capping ratings per user: %w", err)
	}
	return out, nil
}

// foldLambda is the ridge with which fw (non-private, whose users are in
// its model) folds in a user it does not know (model.FoldRidge):
// ridge·ξ′/n, the relative ridge of mm's local fit for a user with ξ′ = ξ
// ratings (100 when uncapped, at most n).
func foldLambda(ridge float64, xi, n int) float64 {
	ref := xi
	if ref <= 0 {
		ref = 100
	}
	return ridge * float64(min(ref, n)) / float64(n)
}

// jointGuarantee states a plan's guarantee as the method's.
func jointGuarantee(g privacy.Guarantee, notes ...string) privacy.Guarantee {
	g.Relation = privacy.RelationUserReplace
	notes = append(notes,
		"Public: the item side over the declared catalogue; each user's row, bias and rated items are in her own state only (joint DP).",
		"The ξ cap and centring by her own mean are per-user steps (her sample is drawn from her own stream).",
		"Hyper-parameters (k, T, L, r) chosen by trying values on this same data cost extra privacy that is not counted here; tune on public or synthetic data.")
	g.Note = strings.Join(notes, " ")
	return g
}

// declaredClamp is the declared scale as a prediction clamp (nil when
// undeclared).
func declaredClamp(in release.Input) *model.Range {
	if in.Declared.Scale == nil {
		return nil
	}
	s := *in.Declared.Scale
	return &s
}

// Train implements Config.
func (c *FWConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	d, err := prepareJoint(in, "fw", false, in.Declared.Scale, c.MaxPerUser, c.TopItems, c.Center, env.Seed)
	if err != nil {
		return nil, err
	}
	p, err := jointdp.NewProblem(d.agg)
	if err != nil {
		return nil, err
	}
	k, err := d.nuclear(c.Nuclear, c.Step, c.Iterations)
	if err != nil {
		return nil, err
	}
	r, err := jointdp.FrankWolfe(ctx, p, jointdp.FWOptions{K: k, T: c.Iterations, Step: c.Step, Workers: env.Workers, Rand: env.Rand,
		Progress: func(done, total int, obj float64) { env.iteration(done, total, "objective", obj) }})
	if err != nil {
		return nil, err
	}
	m := d.shell("fw")
	m.Rank, m.U, m.V = r.Rank, r.U, r.V
	if c.Center {
		m.Transform.UserCentred, m.UserBias = true, d.means
	}
	m.Transform.MaxPerUser, m.Transform.TopItems = c.MaxPerUser, c.TopItems
	m.Transform.Clamp = declaredClamp(in)
	m.FoldIn, m.FoldLambda = model.FoldRidge, foldLambda(0.1, c.MaxPerUser, d.n)
	m.Params = map[string]any{"nuclear": k, "iterations": c.Iterations, "step": c.Step, "max_per_user": c.MaxPerUser, "top_items": c.TopItems, "center": c.Center}
	g := privacy.NoPrivacy(privacy.UnitUser, "Non-private baseline: the factors are computed from the raw ratings without noise; the model holds every user's row.")
	rep := release.Report{"iterations": len(r.Objective), "step": c.Step, "nuclear": k}
	if n := len(r.Objective); n > 0 {
		rep["objective"] = r.Objective[n-1]
	}
	return &release.Release{Public: m, Guarantee: g, Report: rep}, nil
}

// Train implements Config.
func (c *DPFWConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	d, err := prepareJoint(in, "dpfw", true, nil, c.MaxPerUser, 0, c.Center, env.Seed)
	if err != nil {
		return nil, err
	}
	plan, err := jointdp.PlanDPFW(c.Calibration, env.Epsilon, env.Delta, c.Iterations, c.Clip, d.n)
	if err != nil {
		return nil, err
	}
	p, err := jointdp.NewProblem(d.agg)
	if err != nil {
		return nil, err
	}
	k, err := d.nuclear(c.Nuclear, c.Step, c.Iterations)
	if err != nil {
		return nil, err
	}
	if env.Log != nil {
		env.Log.Info("training", "method", "dpfw", "catalogue_items", d.n, "k", k, "sigma_first", plan.Mechs[0].Sigma())
	}
	r, err := jointdp.PrivateFrankWolfe(ctx, p, jointdp.DPFWOptions{K: k, Plan: plan, Step: c.Step, BiasScale: c.BiasScale, NoBias: c.BiasScale == 0,
		Noise: env.Noise, Rand: env.Rand, Workers: env.Workers, Progress: env.Progress, Instrument: env.instrument()})
	if err != nil {
		return nil, err
	}
	lams := make([]float64, len(r.Public.Broadcasts))
	for t, b := range r.Public.Broadcasts {
		lams[t] = b.Lambda
	}
	m := model.NewPublic("dpfw", d.cat)
	m.Rank, m.V = r.Rank, r.V
	m.Transform.UserCentred = c.Center
	m.Transform.MaxPerUser = c.MaxPerUser
	m.Transform.Clamp = declaredClamp(in)
	m.FoldIn = jointdp.FoldReplay
	// Each user's own row, as her device computes it: her replay of the
	// public broadcasts (jointdp.LocalRow) on all her centred catalogue
	// ratings — the fold-in rule the model records, so privrec recommend
	// --ratings reproduces her state. (During training her local steps ran
	// on her ξ sample, which is what entered the noisy Gram matrices.)
	states := &model.UserStates{Method: "dpfw", Rank: r.Rank, States: make([]model.UserState, d.full.NumUsers())}
	for u := range int32(d.full.NumUsers()) {
		if u%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		items, vals := d.full.UserRow(u)
		st := model.UserState{User: d.full.Users.Name(u), Seen: make([]string, len(items))}
		cv := make([]float32, len(vals))
		for k, it := range items {
			st.Seen[k] = d.full.Items.Name(it)
			cv[k] = vals[k]
			if c.Center {
				cv[k] = float32(float64(vals[k]) - d.means[u])
			}
		}
		if c.Center {
			st.Bias = d.means[u]
		}
		row, err := jointdp.LocalRow(&r.Public, items, cv)
		if err != nil {
			return nil, err
		}
		st.Row = row
		states.States[u] = st
	}
	sig := r.Sigmas
	m.Params = map[string]any{"nuclear": k, "iterations": c.Iterations, "clip": c.Clip, "step": c.Step, "calibration": c.Calibration,
		"bias_scale": c.BiasScale, "max_per_user": c.MaxPerUser, "center": c.Center, "lambda_biased": lams, "sigmas": sig}
	note := fmt.Sprintf("Algorithm 1 of seed 001: %d Gaussian releases of Σ_i A_iᵀA_i, ℓ2 sensitivity √2·L² for the first (every iterate starts at 0) and 4√2·L² for the others, for one user's ratings replaced (L = %g), accounted in zCDP (ρ = %.4g) and converted tightly to (ε, δ).", c.Iterations, c.Clip, plan.Guarantee.Rho)
	if c.Calibration == jointdp.CalPaper {
		note += fmt.Sprintf(" The paper's σ = L²√(64T ln(1/δ))/ε was used; the paper claims ε = %g, the accountant proves ε = %.4g for replace-one neighbours.", env.Epsilon, plan.Guarantee.Epsilon)
	}
	note += " Each user's row is her replay of the public broadcasts on her own ratings (jointdp.LocalRow, fold-in rule dpfw-replay)."
	g := jointGuarantee(plan.Guarantee, note)
	rep := release.Report{"iterations": c.Iterations, "clip": c.Clip, "nuclear": k, "sigma_first": sig[0], "sigma_last": sig[len(sig)-1],
		"calibration": c.Calibration, "step": c.Step, "bias_scale": c.BiasScale, "max_per_user": c.MaxPerUser, "items": d.n}
	return &release.Release{Public: m, PerUser: states, Guarantee: g, Report: rep}, nil
}

// Train implements Config.
func (c *DPSVDConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	d, err := prepareJoint(in, "dpsvd", true, nil, c.MaxPerUser, 0, c.Center, env.Seed)
	if err != nil {
		return nil, err
	}
	if c.Rank > d.n {
		return nil, fmt.Errorf("--rank %d exceeds the %d catalogue items", c.Rank, d.n)
	}
	plan, err := jointdp.PlanDPSVD(c.Calibration, env.Epsilon, env.Delta, c.Clip, d.n)
	if err != nil {
		return nil, err
	}
	p, err := jointdp.NewProblem(d.agg)
	if err != nil {
		return nil, err
	}
	if env.Log != nil {
		env.Log.Info("training", "method", "dpsvd", "catalogue_items", d.n, "sigma", plan.Mechs[0].Sigma())
	}
	r, err := jointdp.PrivateSVD(ctx, p, jointdp.DPSVDOptions{Rank: c.Rank, Plan: plan, Noise: env.Noise, Workers: env.Workers, Instrument: env.instrument()})
	if err != nil {
		return nil, err
	}
	m := model.NewPublic("dpsvd", d.cat)
	m.Rank, m.V = c.Rank, r.V
	m.Transform.UserCentred = c.Center
	m.Transform.MaxPerUser = c.MaxPerUser
	m.Transform.Clamp = declaredClamp(in)
	// Each user's local step (her own data and the public V_r only: no
	// privacy cost). Algorithm 3 projects her row with the inverse sampling
	// rate, (n/|Ω_i|)·x_i V_r, unbiased only when her items are a uniform
	// sample of the catalogue; on real data (users rate popular items) a
	// sharp, low-noise V_r makes it overshoot, so the default is her own
	// ridge least-squares fit on her items' rows of V_r (docs/jointdp.md:
	// ML-1M test RMSE 1.050 → 1.043 at ε = 1, 1.090 → 0.993 at ε = 100).
	m.FoldIn = model.FoldRidge
	m.FoldLambda = c.Ridge
	if c.Local == DPSVDProject {
		m.FoldIn, m.FoldLambda = model.FoldProject, 0
	}
	m.Params = map[string]any{"rank": c.Rank, "clip": c.Clip, "calibration": c.Calibration, "max_per_user": c.MaxPerUser, "center": c.Center, "sigma": r.Sigma,
		"local": c.Local}
	if c.Local == DPSVDFit {
		m.Params["ridge"] = c.Ridge
	}
	// The local step as each user's device computes it, on her centred
	// ratings (all of them, not only her ξ sample) — exactly
	// model.FoldInUser with the model's rule, so privrec recommend
	// --ratings reproduces her state.
	states := &model.UserStates{Method: "dpsvd", Rank: c.Rank, States: make([]model.UserState, d.full.NumUsers())}
	for u := range int32(d.full.NumUsers()) {
		if u%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ids, fv := d.full.UserRatings(u)
		st, err := m.FoldInUser(d.full.Users.Name(u), ids, fv)
		if err != nil {
			return nil, err
		}
		states.States[u] = *st
	}
	local := "each user fits her own row to her ratings on V_r (ridge least squares, λ = %[2]g)"
	if c.Local == DPSVDProject {
		local = "each user projects her own row with her own scale n/|Ω_i| (the paper's mn/|Ω| would release |Ω| unnoised)"
	}
	g := jointGuarantee(plan.Guarantee, fmt.Sprintf("Algorithm 3 of seed 001: one Gaussian release of Σ_i Π_L(x_i)ᵀΠ_L(x_i), ℓ2 sensitivity √2·L² for one user's ratings replaced (L = %[1]g); "+local+".", c.Clip, c.Ridge))
	rep := release.Report{"sigma": r.Sigma, "rank": c.Rank, "clip": c.Clip, "calibration": c.Calibration, "max_per_user": c.MaxPerUser, "items": d.n, "local": c.Local}
	return &release.Release{Public: m, PerUser: states, Guarantee: g, Report: rep}, nil
}

// mmUserDamping (β_p) and mmRidge are mm's user damping and relative
// ridge, recorded in the model so fold-in computes the same effect and fit.
const mmUserDamping, mmRidge = 20, 0.1

// Train implements Config.
func (c *MMConfig) Train(ctx context.Context, in release.Input, env Env) (*release.Release, error) {
	scale, err := in.NeedScale("mm")
	if err != nil {
		return nil, err
	}
	d, err := prepareJoint(in, "mm", true, &scale, c.MaxPerUser, 0, false, env.Seed)
	if err != nil {
		return nil, err
	}
	if c.Rank > d.n {
		return nil, fmt.Errorf("--rank %d exceeds the %d catalogue items", c.Rank, d.n)
	}
	plan, err := jointdp.PlanMM(env.Epsilon, env.Delta, [3]float64{}, scale.Min, scale.Max, c.Bound, d.n)
	if err != nil {
		return nil, err
	}
	p, err := jointdp.NewProblem(d.agg)
	if err != nil {
		return nil, err
	}
	local, err := jointdp.NewProblem(d.full)
	if err != nil {
		return nil, err
	}
	r, err := jointdp.McSherryMironov(ctx, p, jointdp.MMOptions{Rank: c.Rank, Plan: plan, UserDamping: mmUserDamping, Ridge: mmRidge,
		Local: local, Noise: env.Noise, Workers: env.Workers, Instrument: env.instrument()})
	if err != nil {
		return nil, err
	}
	m := d.shell("mm")
	m.Rank, m.U, m.V = c.Rank, r.U, r.V
	m.ItemBias, m.UserBias = r.ItemAvg, r.UserEffect
	m.Transform.UserCentred, m.UserDamping = true, mmUserDamping
	states := m.SplitUsers()
	m.Transform.MaxPerUser = c.MaxPerUser
	m.Transform.Clamp = &scale
	m.FoldIn = jointdp.FoldMM // her own fit, reproduced exactly from "bound" and "ridge"
	s := plan.Sigmas()
	m.Params = map[string]any{"rank": c.Rank, "bound": c.Bound, "ridge": mmRidge, "max_per_user": c.MaxPerUser, "sigmas": s[:]}
	g := jointGuarantee(plan.Guarantee, fmt.Sprintf("McSherry & Mironov (KDD 2009) with Gaussian noise: a noisy global average, damped noisy item averages and a noisy weighted item–item covariance (zCDP budget split 2/18/80 %%), ratings clamped to the declared scale [%g, %g]; then each user's own damped effect and ridge fit on its top eigenvectors (fold-in rule mm-fit).", scale.Min, scale.Max))
	rep := release.Report{"rank": c.Rank, "bound": c.Bound, "max_per_user": c.MaxPerUser, "items": d.n,
		"sigma_global": s[0], "sigma_items": s[1], "sigma_covariance": s[2], "global_average": r.GlobalAvg}
	return &release.Release{Public: m, PerUser: states, Guarantee: g, Report: rep}, nil
}

// AuditDesign implements AuditDesigner: the T Frank–Wolfe releases are
// adaptive (each user's row in release t depends on the earlier noisy
// broadcasts), so the audit trains one iteration — the same code, one
// Gram release carrying the whole budget. That release is priced at
// √2·L² (jointdp.DPFWFirstSensitivity: every iterate starts at 0); like
// dpsvd's Gram it is a packed upper triangle that only a row on one item
// moves by the whole √2·L², so the audit trains uncentred (--center=false,
// the same code) on the pair whose canary rates one item, 5 = L, on each
// side (SingleAuditPair).
func (c *DPFWConfig) AuditDesign(_, _ float64) (*AuditDesign, error) {
	one := *c
	one.Iterations = 1
	one.Center = false
	return &AuditDesign{Config: &one, Sides: SingleAuditPair}, nil
}
