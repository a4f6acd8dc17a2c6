package methods

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/ldp/recovery"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
)

// Local-DP rating collection (seeds 002/003): the data these methods train
// on are the randomized reports written by `privrec collect`, never true
// ratings. Training is post-processing of locally private data, so the
// model carries the collection's guarantee.
func init() {
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		name := "ldp-laplace"
		summary := "recover ratings collected with the modified Laplace mechanism (nuclear-norm recovery, Eq. 4)"
		if mech == ldp.RR {
			name = "ldp-rr"
			summary = "recover ratings collected with randomized response over {missing, 1…d} (nuclear-norm recovery, Eq. 4)"
		}
		Register(&Method{
			Name: name, Summary: summary, Seed: "003", Private: true,
			Flags: func(fs *flag.FlagSet) Trainer { return ldpFlags(fs, mech) },
		})
	}
	Register(&Method{
		Name:    "ldp-clean",
		Summary: "the ldp-laplace/ldp-rr recovery run on true ratings (no mechanism): their non-private reference",
		Seed:    "003", Private: false,
		Flags: func(fs *flag.FlagSet) Trainer { return ldpFlags(fs, recovery.Clean) },
	})
}

func ldpFlags(fs *flag.FlagSet, mech ldp.Mechanism) Trainer {
	collected := fs.String("collected", "", "the collected file whose header gives mechanism, ε, scale and population size (default: the --data file, when it is a collect file)")
	scaleFlag := fs.String("rating-scale", "", "original rating scale MIN:MAX when there is no --collected header")
	levels := fs.Int("levels", 0, "number of rating levels d (RR) when there is no --collected header")
	users := fs.Int("population-users", 0, "users the clients covered, when there is no header (0: users in the data)")
	items := fs.Int("population-items", 0, "items the clients covered, when there is no header (0: items in the data)")
	debias := fs.Bool("debias", false, "use the debiased recovery (knows the mechanism's means and rates of removed and invented ratings)")
	rho := fs.Float64("rho", 0, "plain recovery: residual bound ρ in report units (0: Theorem 3 of seed 003)")
	gamma := fs.Float64("gamma", 0.05, "Theorem 3 tolerance γ (the bound holds with probability ≥ 1 − γ)")
	rho0 := fs.Float64("rho0", 0, "Theorem 3 noise level ρ0 of the true ratings, report units (0: 0.225 of the rating range, i.e. 0.45 normalised / 0.9 level for d = 5)")
	lambda := fs.Float64("lambda", 0, "fix the nuclear-norm multiplier λ instead of searching for ρ")
	rule := fs.String("lambda-rule", "", "debiased recovery: how λ is chosen, noise-norm (default: λ = expected operator norm of the noise's gradient) or discrepancy (residual = expected noise norm)")
	refit := fs.Bool("refit", false, "debiased recovery with a fixed λ: re-estimate the kept singular values by least squares (undo the nuclear-norm shrinkage)")
	maxRank := fs.Int("max-rank", 60, "largest rank of the recovered matrix")
	maxIter := fs.Int("max-iter", 300, "proximal-gradient iterations per λ")
	damping := fs.Float64("damping", 0, "debiased recovery: shrinkage of user and item biases, in pseudo-ratings (0: noise variance / (ρ0/2)²)")
	return TrainerFunc(func(ctx context.Context, data *ratings.Matrix, c Common) (*Result, error) {
		var h ldp.Header
		clean := mech == recovery.Clean
		collected := *collected
		if collected == "" && !clean && isCollectFile(c.DataPath) {
			collected = c.DataPath // the --data file is itself the collect file
		}
		switch {
		case clean:
			if collected != "" {
				return nil, fmt.Errorf("ldp-clean trains on true ratings; --collected is for ldp-laplace/ldp-rr")
			}
			h = ldp.Header{Mechanism: mech, Scale: ldp.DetectScale(data)}
			if *scaleFlag != "" {
				a, b, err := parseScale(*scaleFlag)
				if err != nil {
					return nil, err
				}
				h.Scale.Min, h.Scale.Max = a, b
			}
			if lo, hi := data.Range(); lo < h.Scale.Min || hi > h.Scale.Max {
				return nil, fmt.Errorf("ratings in [%g, %g] fall outside --rating-scale [%g, %g]", lo, hi, h.Scale.Min, h.Scale.Max)
			}
		case collected != "":
			f, err := os.Open(collected)
			if err != nil {
				return nil, fmt.Errorf("--collected: %w", err)
			}
			var n int64
			h, n, err = ldp.CountReports(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("--collected %s: %w", collected, err)
			}
			if n != int64(data.Len()) {
				return nil, fmt.Errorf("--collected %s holds %d reports but the --data ratings number %d: pass the collect file (or its data lines) as --data", collected, n, data.Len())
			}
			if h.Mechanism != mech {
				return nil, fmt.Errorf("--collected %s was made with mechanism %s, not %s", collected, h.Mechanism, mech)
			}
		default:
			if *scaleFlag == "" {
				return nil, fmt.Errorf("give --collected FILE (the collect header) or --rating-scale MIN:MAX")
			}
			a, b, err := parseScale(*scaleFlag)
			if err != nil {
				return nil, err
			}
			h = ldp.Header{Mechanism: mech, Epsilon: c.Epsilon, Scale: ldp.Scale{Min: a, Max: b, Levels: *levels},
				Users: *users, Items: *items}
		}
		if h.Users == 0 {
			h.Users = data.NumUsers()
		}
		if h.Items == 0 {
			h.Items = data.NumItems()
		}
		if data.NumUsers() > h.Users || data.NumItems() > h.Items {
			return nil, fmt.Errorf("the data have %d users × %d items, more than the collected population %d × %d",
				data.NumUsers(), data.NumItems(), h.Users, h.Items)
		}
		var rnd ldp.Randomizer
		var err error
		if !clean {
			if rnd, err = ldp.New(h.Mechanism, h.Epsilon, h.Scale); err != nil {
				return nil, err
			}
		}
		if *maxRank < 1 || *maxIter < 1 || *rho < 0 || *lambda < 0 || !(*gamma > 0 && *gamma < 1) || *rho0 < 0 || *damping < 0 {
			return nil, fmt.Errorf("--max-rank and --max-iter must be positive, --rho, --rho0 and --lambda non-negative, --damping non-negative, 0 < --gamma < 1")
		}
		var lrule recovery.LambdaRule
		if *rule != "" {
			if lrule, err = recovery.ParseLambdaRule(*rule); err != nil {
				return nil, fmt.Errorf("--lambda-rule: %w", err)
			}
		}
		if *refit && (!*debias || (lrule == recovery.Discrepancy && *lambda == 0)) {
			return nil, fmt.Errorf("--refit applies to the debiased recovery with the noise-norm λ rule or a fixed --lambda")
		}
		var p *recovery.Problem
		if clean {
			p, err = recovery.NewCleanProblem(data, h.Scale)
		} else {
			p, err = recovery.NewProblem(data, h)
		}
		if err != nil {
			return nil, err
		}
		opt := recovery.Options{Debias: *debias, Rho: *rho, Gamma: *gamma, Rho0: *rho0, Lambda: *lambda,
			LambdaRule: lrule, Refit: *refit, MaxRank: *maxRank, MaxIter: *maxIter, Damping: *damping, Workers: c.Workers, Rand: c.Rand, Log: c.Log}
		res, err := recovery.Recover(ctx, p, opt)
		if err != nil {
			return nil, err
		}
		name := "ldp-laplace"
		switch mech {
		case ldp.RR:
			name = "ldp-rr"
		case recovery.Clean:
			name = "ldp-clean"
		}
		m := model.New(name, data)
		om := ldp.OutputModel{ToReportB: 1} // ldp-clean: report units are the rating scale
		if clean {
			m.SeenPtr, m.SeenItems = seenItems(data)
		} else {
			// The service cannot know which items a user really rated
			// (reports include invented ratings and miss removed ones), so
			// nothing is excluded from recommendations.
			m.SeenPtr = make([]int64, data.NumUsers()+1)
			m.SeenItems = []int32{}
			om = rnd.Model()
		}
		to := func(v float64) float64 { return om.ToReport(v) }
		m.Transform.Scale = &model.Scale{FromMin: h.Scale.Min, FromMax: h.Scale.Max, ToMin: to(h.Scale.Min), ToMax: to(h.Scale.Max)}
		m.Transform.Clamp = &model.Range{Min: h.Scale.Min, Max: h.Scale.Max}
		m.Rank, m.U, m.V, m.Offset = res.Rank, res.U, res.V, res.Offset
		m.UserBias, m.ItemBias = res.UserBias, res.ItemBias
		if m.U == nil {
			m.U, m.V = []float64{}, []float64{}
		}
		m.Params = map[string]any{"debias": *debias, "rho": res.Rho, "lambda": res.Lambda, "gamma": *gamma,
			"lambda_rule": string(res.Rule), "refit": *refit, "mechanism": string(h.Mechanism)}
		info := map[string]any{
			"rho": res.Rho, "residual": res.Residual, "lambda": res.Lambda, "rank": res.Rank, "iterations": res.Iterations,
			"zero_solution": res.Zero, "lambda_rule": string(res.Rule), "refit": *refit, "noise_op_norm": res.NoiseOpNorm, "report_norm": res.ZNorm,
		}
		if clean {
			g := privacy.NoPrivacy(privacy.UnitEntry, "Non-private reference: the local-DP recovery's estimator run on the true ratings, with no randomization.")
			return &Result{Model: m, Guarantee: g, Info: info}, nil
		}
		m.Params["collected_epsilon"] = h.Epsilon
		g := rnd.PerRating()
		pu := rnd.PerUser(h.Items)
		g.Note = fmt.Sprintf("Post-processing of ratings randomized on the users' devices. %s Per user (all %d items of her vector): ε = %.6g.", g.Note, h.Items, pu.Epsilon)
		if c.Epsilon != h.Epsilon && collected != "" {
			c.Log.Debug("ldp: ε comes from the collected file's header, not --epsilon", "header_epsilon", h.Epsilon, "flag_epsilon", c.Epsilon)
		}
		if h.Reproducible {
			g.Reproducible = true
		}
		info["per_rating_epsilon"], info["per_user_epsilon"], info["per_user_guarantee"] = h.Epsilon, pu.Epsilon, pu
		info["estimated_true_ratings"] = math.Round(res.SEstimate)
		return &Result{Model: m, Guarantee: g, Info: info}, nil
	})
}

// parseScale reads a MIN:MAX rating scale.
func parseScale(v string) (lo, hi float64, err error) {
	a, b, ok := strings.Cut(v, ":")
	lo, err1 := strconv.ParseFloat(a, 64)
	hi, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil || !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return 0, 0, fmt.Errorf("--rating-scale %q: want MIN:MAX with finite MIN < MAX", v)
	}
	return lo, hi, nil
}

// seenItems returns the CSR of each user's training items (excluded from
// recommendations).
func seenItems(data *ratings.Matrix) ([]int64, []int32) {
	ptr := make([]int64, data.NumUsers()+1)
	items := make([]int32, 0, data.Len())
	for u := range int32(data.NumUsers()) {
		its, _ := data.UserRow(u)
		items = append(items, its...)
		ptr[u+1] = int64(len(items))
	}
	return ptr, items
}

// isCollectFile reports whether path starts with a privrec collect header.
func isCollectFile(path string) bool {
	if path == "" {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = ldp.ParseHeader(f)
	return err == nil
}
