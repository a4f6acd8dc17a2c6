package methods

import (
	"context"
	"flag"
	"fmt"
	"math"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/onebit"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
)

// One-bit matrix completion with DP (seed 000): five methods sharing one
// set of flags.
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
			Flags: func(fs *flag.FlagSet) Trainer {
				f := addOnebitFlags(fs, mech)
				return TrainerFunc(func(ctx context.Context, data *ratings.Matrix, c Common) (*Result, error) {
					return trainOnebit(ctx, data, c, mech, f)
				})
			},
		})
	}
}

type onebitFlags struct {
	link                *string
	sigma, tau, alpha   *float64
	threshold           *float64
	iterations, maxIter *int
	clamp, p1, p2, tol  *float64
	projTol             *float64
	fullSVD             *bool
}

func addOnebitFlags(fs *flag.FlagSet, mech onebit.Mechanism) *onebitFlags {
	f := &onebitFlags{
		link:      fs.String("link", "logit", "link function: logit or probit"),
		sigma:     fs.Float64("sigma", 1, "probit noise scale σ (h(x) = Φ(x/σ))"),
		tau:       fs.Float64("tau", 0, "nuclear-norm radius τ (0: α·√(users·items), the seed's τ for rank 1)"),
		alpha:     fs.Float64("alpha", 1, "max-norm bound α on the latent matrix; inf drops the bound (nuclear ball only, as the 1BMC reference code runs MovieLens; not for onebit-outp or probit onebit-objp)"),
		threshold: fs.Float64("threshold", math.NaN(), "ratings above this are +1, others −1 (default: 0 for ±1 data, else the training mean — which is then stored un-noised, so private methods lose their guarantee; fix it without looking at the data)"),
		maxIter:   fs.Int("max-iter", 500, "SPG iteration limit"),
		tol:       fs.Float64("opt-tol", 1e-4, "SPG stops when the projected step ‖P(X−αg)−X‖∞/min(α,1) is below this (it also stops when the objective stalls: < 1e-5 relative decrease over 10 iterations)"),
		projTol:   fs.Float64("proj-tol", 1e-2, "Dykstra tolerance of the projection, relative to α (tightened automatically when needed)"),
		fullSVD:   fs.Bool("full-svd", false, "use a full SVD in every nuclear projection (slow reference)"),
	}
	switch mech {
	case onebit.GraP:
		f.iterations = fs.Int("iterations", 10, "gradient perturbation: the number K of noisy iterations (noise scale K·Δ1/ε)")
		f.clamp = fs.Float64("clamp", 0.5, "gradient perturbation: clamp gradient entries to [−C, C] (Δ1 = 2C; negative: no clamp, Δ1 = the link's Δ)")
	case onebit.InP:
		f.p1 = fs.Float64("p1", 0, "input perturbation: flip probability of +1 (0 with --p2 0: 1/(1+e^ε))")
		f.p2 = fs.Float64("p2", 0, "input perturbation: flip probability of −1")
	}
	return f
}

func trainOnebit(ctx context.Context, data *ratings.Matrix, c Common, mech onebit.Mechanism, f *onebitFlags) (*Result, error) {
	if data.Len() == 0 {
		return nil, fmt.Errorf("no training ratings")
	}
	var link onebit.Link
	switch *f.link {
	case "logit", "logistic":
		link = onebit.Logistic{}
	case "probit":
		if !(*f.sigma > 0) || math.IsInf(*f.sigma, 0) {
			return nil, fmt.Errorf("--sigma must be positive and finite, got %g", *f.sigma)
		}
		link = onebit.Probit{Sigma: *f.sigma}
	default:
		return nil, fmt.Errorf("--link must be logit or probit, got %q", *f.link)
	}
	d1, d2 := data.NumUsers(), data.NumItems()
	alpha := *f.alpha
	if !(alpha > 0) {
		return nil, fmt.Errorf("--alpha must be positive (or inf), got %g", alpha)
	}
	tau := *f.tau
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
	thr := *f.threshold
	fromData := false
	if math.IsNaN(thr) {
		signs := true
		for _, v := range data.Values() {
			if v != 1 && v != -1 {
				signs = false
				break
			}
		}
		if signs {
			thr = 0
		} else {
			thr, fromData = data.Mean(), true
		}
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
	cfg := onebit.Config{
		Mechanism: mech, Epsilon: c.Epsilon, Noise: c.Noise,
		Solver: onebit.Options{Link: link, Tau: tau, Alpha: alpha, MaxIter: *f.maxIter, OptTol: *f.tol,
			ProjTol: *f.projTol, FullSVD: *f.fullSVD, Rand: c.Rand.Float64, Progress: c.Progress},
	}
	if f.iterations != nil {
		cfg.Iterations, cfg.Clamp = *f.iterations, *f.clamp
	}
	if f.p1 != nil {
		cfg.P1, cfg.P2 = *f.p1, *f.p2
	}
	res, err := onebit.Run(ctx, p, cfg)
	if err != nil {
		return nil, err
	}
	g := res.Guarantee
	if fromData && g.Status != privacy.None {
		claimed := g.ClaimedEpsilon
		if claimed == 0 {
			claimed = g.Epsilon
		}
		g = privacy.Guarantee{Epsilon: math.Inf(1), ClaimedEpsilon: claimed, Unit: g.Unit, Notion: g.Notion, Status: privacy.None,
			Note: fmt.Sprintf("The binarisation threshold %.6g is the training mean, computed from the raw ratings and stored in the model without noise, so the model as a whole has no guarantee; pass --threshold with a value chosen without looking at the data for the mechanism's guarantee to apply. Mechanism: %s", thr, g.Note)}
	}
	m := model.New("onebit-"+string(mech), data)
	m.Output = model.Signs
	m.Transform.Binarise, m.Transform.Threshold = true, thr
	m.Params = map[string]any{"link": *f.link, "tau": tau, "alpha": onebit.AlphaParam(alpha), "threshold": thr, "threshold_from_data": fromData}
	if *f.link == "probit" {
		m.Params["sigma"] = *f.sigma
	}
	if res.Dense != nil {
		m.Dense = res.Dense
		m.U, m.V = []float64{}, []float64{}
	} else {
		if m.Rank, m.U, m.V, err = res.Solution.FactorsUV(d1, d2); err != nil {
			return nil, err
		}
	}
	m.Guarantee = g
	info := res.Info
	info["threshold"] = thr
	return &Result{Model: m, Guarantee: g, Info: info}, nil
}
