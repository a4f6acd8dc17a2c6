package methods

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/privrec/privrec/metrics"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/tensor"
	"github.com/privrec/privrec/tensor/completion"
)

// Tensor completion (seed 004): users × items × day, CP or Tucker by SGD,
// with input (IP), gradient (GP) and output (OP) perturbation as the seed
// calibrates them, and a sound DP-SGD variant.
func init() {
	mechs := []struct {
		suffix string
		mech   completion.Mechanism
		what   string
	}{
		{"", completion.NoMechanism, "non-private"},
		{"-ip", completion.IP, "input perturbation (Laplace on the ratings; ε-DP per rating, proven)"},
		{"-gp", completion.GP, "gradient perturbation on C as the seed calibrates it (A, B released un-noised: no guarantee)"},
		{"-op", completion.OP, "output perturbation on C as the seed calibrates it (A, B released un-noised: no guarantee)"},
		{"-dpsgd", completion.DPSGD, "DP-SGD over all parameters, zCDP-accounted ((ε, δ) per rating, proven)"},
	}
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		for _, m := range mechs {
			name := string(kind) + m.suffix
			Register(&Method{
				Name:    name,
				Summary: fmt.Sprintf("%s tensor completion (users × items × day) by SGD, %s", strings.ToUpper(string(kind)[:1])+string(kind)[1:], m.what),
				Seed:    "004",
				Private: m.mech != completion.NoMechanism,
				Flags:   func(fs *flag.FlagSet) Trainer { return tensorFlags(fs, name, kind, m.mech) },
			})
		}
	}
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		RegisterEvaluator(string(kind), evaluateTensorFile)
	}
}

func tensorFlags(fs *flag.FlagSet, name string, kind tensor.Kind, mech completion.Mechanism) Trainer {
	def := completion.Defaults(kind)
	rank := fs.Int("rank", def.Rank, "rank d (CP components; Tucker core d × d × d)")
	passes := fs.Int("passes", def.Passes, "passes of SGD over the training entries")
	lr := fs.Float64("lr", def.LR, "learning rate η")
	lambda := fs.Float64("lambda", def.Lambda, "regularisation λ of the factors (Tucker: λ_o)")
	var lambdaG *float64
	if kind == tensor.Tucker {
		lambdaG = fs.Float64("lambda-g", def.LambdaG, "regularisation λ_g of the core")
	}
	initScale := fs.Float64("init", def.InitScale, "standard deviation of the random initial factors")
	rangeFlag := fs.String("range", "", "rating range LO:HI (IP's sensitivity HI − LO, and the clamp of predictions); default: the data's range, which is not private")
	biscale := fs.Bool("biscale", false, "bi-scale each day slice before training (the seed's MovieLens setting; the scaling statistics are not private)")
	biIters := fs.Int("biscale-iters", 10, "alternating rounds of the bi-scaling")
	itemDay := fs.Bool("item-day", false, "item IDs carry a day tag (\"17@3\", as written by privrec data synth-tensor); merge them per item")
	clipV := new(float64)
	clampNoisy := new(bool)
	batchV := new(int)
	centreEps := new(float64)
	switch mech {
	case completion.IP:
		clampNoisy = fs.Bool("clamp", true, "clamp the noisy ratings back into the range (post-processing)")
	case completion.GP:
		clipV = fs.Float64("clip", 1, "clipping constant m of C's gradient rows (Δ = 2m)")
	case completion.OP:
		clipV = fs.Float64("clip", 1, "Lipschitz constant L, enforced by clipping C's gradient rows (Δ = 2·passes·L·η)")
	case completion.DPSGD:
		clipV = fs.Float64("clip", 0.3, "per-entry gradient clip (ℓ2 norm over all parameters)")
		batchV = fs.Int("batch", 0, "entries per noisy step (0: all, one step per pass)")
		centreEps = fs.Float64("centre-eps", 0, "spend this part of ε on a private mean of the ratings (clamped to --range) and train on the centred values (0: no centring); the total stays ε")
	}
	return TrainerFunc(func(ctx context.Context, data *ratings.Matrix, c Common) (*Result, error) {
		cfg := completion.Config{Kind: kind, Rank: *rank, Passes: *passes, LR: *lr, Lambda: *lambda, InitScale: *initScale,
			Mechanism: mech, Epsilon: c.Epsilon, Delta: c.Delta, Clip: *clipV, ClampNoisy: *clampNoisy, Batch: *batchV, CentreEps: *centreEps}
		if lambdaG != nil {
			cfg.LambdaG = *lambdaG
		}
		cfg.Workers = 2
		if c.Workers == 1 {
			cfg.Workers = 1
		}
		return trainTensor(ctx, data, c, name, cfg, tensorOptions{Range: *rangeFlag, BiScale: *biscale, BiIters: *biIters, ItemDay: *itemDay})
	})
}

type tensorOptions struct {
	Range   string
	BiScale bool
	BiIters int
	ItemDay bool
}

func parseRange(s string) (lo, hi float64, err error) {
	a, b, ok := strings.Cut(s, ":")
	lo, err1 := strconv.ParseFloat(a, 64)
	hi, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil || !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return 0, 0, fmt.Errorf("--range %q: want LO:HI with finite LO < HI", s)
	}
	return lo, hi, nil
}

func trainTensor(ctx context.Context, data *ratings.Matrix, c Common, name string, cfg completion.Config, opt tensorOptions) (*Result, error) {
	t, ax, err := tensor.FromRatings(data)
	if err != nil {
		return nil, fmt.Errorf("building the users × items × day tensor: %w", err)
	}
	items := data.Items.Names()
	if opt.ItemDay {
		if t, items, err = tensor.MergeItemDays(t, items); err != nil {
			return nil, err
		}
	}
	var notes []string
	lo, hi := t.Range()
	if opt.Range != "" {
		if lo, hi, err = parseRange(opt.Range); err != nil {
			return nil, err
		}
	} else if cfg.Mechanism != completion.NoMechanism {
		notes = append(notes, fmt.Sprintf("The rating range [%g, %g] was read from the training data (not private); pass --range to declare it.", lo, hi))
	}
	if !(lo < hi) {
		hi = lo + 1
	}
	cfg.Lo, cfg.Hi = lo, hi
	var scaling *tensor.Scaling
	train := t
	if opt.BiScale {
		if train, scaling, err = tensor.BiScaleDays(t, opt.BiIters); err != nil {
			return nil, err
		}
		// IP's range in the scaled space
		cfg.Lo, cfg.Hi = train.Range()
		if !(cfg.Lo < cfg.Hi) {
			cfg.Hi = cfg.Lo + 1
		}
	}
	progress := c.Progress
	m, info, err := completion.Train(ctx, train, cfg, c.Rand, c.Noise, progress)
	if err != nil {
		return nil, err
	}
	g := info.Guarantee
	if opt.BiScale && cfg.Mechanism != completion.NoMechanism {
		inner := g
		g = privacy.Guarantee{Epsilon: math.Inf(1), Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.None, ClaimedEpsilon: c.Epsilon,
			Note: "The per-day bi-scaling (means and scales of every user and item in every day slice) is computed from the raw ratings and stored in the model without noise, and one rating changes the scaling of its whole slice row and column; so the model has no DP guarantee. With the scaled tensor regarded as the data, the mechanism gives: " + inner.String()}
	}
	for _, n := range notes {
		g.Note = strings.TrimSpace(g.Note + " " + n)
	}
	params := map[string]any{"rank": cfg.Rank, "passes": cfg.Passes, "lr": cfg.LR, "lambda": cfg.Lambda, "init": cfg.InitScale,
		"range": []float64{lo, hi}, "biscale": opt.BiScale, "epsilon": c.Epsilon, "delta": c.Delta, "seed": c.Seed}
	if cfg.Kind == tensor.Tucker {
		params["lambda_g"] = cfg.LambdaG
	}
	if cfg.Mechanism != completion.NoMechanism && cfg.Mechanism != completion.IP {
		params["clip"] = cfg.Clip
	}
	if cfg.Mechanism == completion.DPSGD {
		params["batch"] = info.Batch
		if cfg.CentreEps > 0 {
			params["centre_eps"] = cfg.CentreEps
		}
	}
	f := &completion.File{Method: name, Params: params, Guarantee: g, Fingerprint: data.Fingerprint(),
		Users: data.Users.Names(), Items: items, Axis: ax, ItemDay: opt.ItemDay, Lo: lo, Hi: hi, Model: m, Scaling: scaling}
	res := &Result{Guarantee: g, Info: map[string]any{"days": ax.Days, "updates": info.Updates, "train_rmse": info.TrainRMSE}}
	if info.NoiseScale > 0 {
		res.Info["noise_scale"] = info.NoiseScale
		res.Info["sensitivity"] = info.Sensitivity
	}
	if info.ClippedFraction > 0 {
		res.Info["clipped_fraction"] = info.ClippedFraction
	}
	if info.Sigma > 0 {
		res.Info["sigma"], res.Info["rho"] = info.Sigma, info.Rho
	}
	if cfg.CentreEps > 0 {
		res.Info["offset"] = info.Offset
	}
	res.Save = func(path string) error {
		f.Guarantee = res.Guarantee // train may mark the noise reproducible
		return f.Save(path)
	}
	return res, nil
}

// evaluateTensorFile scores a cp/tucker model on held-out timestamped
// ratings: each rating's day is its timestamp on the training day axis
// (clamped to the axis's ends); ratings of unknown users or items are
// counted in Dropped. RMSE and MAE are on the raw rating scale.
func evaluateTensorFile(ctx context.Context, path string, test *ratings.Matrix, opt EvalOptions) (*Report, error) {
	f, err := completion.Load(path)
	if err != nil {
		return nil, err
	}
	return EvaluateTensor(ctx, f, test)
}

// EvaluateTensor scores a loaded tensor model on held-out ratings.
func EvaluateTensor(ctx context.Context, f *completion.File, test *ratings.Matrix) (*Report, error) {
	if !test.HasTime() {
		return nil, fmt.Errorf("the test ratings have no timestamps; a tensor model needs the day of each rating")
	}
	rep := &Report{Method: f.Method, Guarantee: f.Guarantee.String()}
	uIdx := make(map[string]int, len(f.Users))
	for x, n := range f.Users {
		uIdx[n] = x
	}
	iIdx := make(map[string]int, len(f.Items))
	for x, n := range f.Items {
		iIdx[n] = x
	}
	var pred, truth []float64
	for u := range int32(test.NumUsers()) {
		if u&1023 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		mu, ok := uIdx[test.Users.Name(u)]
		items, vals := test.UserRow(u)
		times := test.UserTimes(u)
		for n, it := range items {
			name := test.Items.Name(it)
			if f.ItemDay {
				name = tensor.BaseItem(name)
			}
			mi, ok2 := iIdx[name]
			if !ok || !ok2 {
				rep.Dropped++
				continue
			}
			day, _ := f.Axis.Clamp(times[n])
			pred = append(pred, f.Predict(mu, mi, day))
			truth = append(truth, float64(vals[n]))
		}
	}
	rep.N = len(pred)
	if rep.N == 0 {
		return nil, fmt.Errorf("no held-out rating is of a user and item the model knows (%d dropped)", rep.Dropped)
	}
	r, err := metrics.RMSE(pred, truth)
	if err != nil {
		return nil, err
	}
	a, err := metrics.MAE(pred, truth)
	if err != nil {
		return nil, err
	}
	rep.RMSE, rep.MAE = ptr(r), ptr(a)
	return rep, nil
}
