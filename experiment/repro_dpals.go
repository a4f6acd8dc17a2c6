package experiment

import "fmt"

// Issue 13's measurements: the user-level private recommenders (dpals,
// dp-bias and seed 001's dpfw, dpsvd and McSherry–Mironov) beside the
// non-private als and the global mean, on MovieLens-1M, on the complete
// Jester dataset 1 and on seed 001's rank-one synthetic set at 500 000
// users (docs/mf.md, docs/RESULTS.md).

// privateRecEps is the ε grid of the issue.
var privateRecEps = []float64{0.5, 1, 2, 4, 8, 16}

// privateRecMethods are the lines of the dpals reproductions. Every method
// runs with its defaults, which were chosen on MovieLens' 1–5 scale
// (width 4); on a dataset declaring another scale the parameters in rating
// units (dpals' and dp-bias' clip of a centred rating, dpfw's and dpsvd's
// ℓ2 row bound, McSherry–Mironov's clamp; not dpals' user clip Γ, which
// only its --steps line uses) are multiplied by width/4, a
// function of the declared scale only (never of the data). With that rule
// dpals and dp-bias are equivariant to an affine change of scale: their
// RMSE in units of the scale's width does not depend on the scale.
// slowRuns > 0 limits dpfw and mm (the slow ones on large data) to the
// first slowRuns splits.
func privateRecMethods(width float64, slowRuns, dpsvdRuns int) []MethodSpec {
	f := width / 4
	scaled := func(name string, v float64, kv ...any) map[string]any {
		p := map[string]any{}
		if f != 1 { // otherwise the method's own default, exactly
			p[name] = v * f
		}
		for i := 0; i < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		if len(p) == 0 {
			return nil
		}
		return p
	}
	return []MethodSpec{
		{Method: "global-mean", Label: "global mean (non-private)"},
		{Method: "als", Label: "als (non-private)"},
		{Method: "dp-bias", Label: "dp-bias", Params: scaled("clip", 1.5)},
		{Method: "dpals", Label: "dpals", Params: scaled("clip", 1)},
		// The papers' algorithm: two noised ALS steps after the bias release.
		{Method: "dpals", Label: "dpals --steps 2", Params: scaled("clip", 1, "steps", 2)},
		{Method: "dpfw", Label: "dpfw", Params: scaled("clip", 5), Runs: slowRuns},
		{Method: "dpsvd", Label: "dpsvd", Params: scaled("clip", 5), Runs: dpsvdRuns},
		{Method: "mm", Label: "mm", Params: scaled("bound", 1), Runs: slowRuns},
	}
}

const privateRecDesc = " User-level joint DP (replace one user's ratings), δ = 10⁻⁶; the declared facts are the rating scale and the catalogue (every item of the source). " +
	"dpals, dp-bias, dpfw, dpsvd and mm (McSherry–Mironov) with their defaults (docs/mf.md, docs/jointdp.md); als is the non-private reference (its defaults), the global mean the floor a model must beat. " +
	"Each run draws its own split and its own seeded noise; mean ± sd over runs (n in the table)."

func init() {
	addRepro(&Reproduction{
		Name: "dpals-ml1m", Paper: "issue 13 (private recommendations worth having); docs/mf.md",
		Summary: "MovieLens-1M, random 90/10 splits, user level, δ = 1e-6: dpals, dp-bias, dpfw, dpsvd, mm vs ε beside als and the global mean",
		build: func(paper bool) *Config {
			// dpfw takes about 3 minutes a run on ML-1M (20 Lanczos solves on the
			// 3 706 × 3 706 Gram matrix) and mm about 25 s: one split each at
			// paper scale, every split for the others.
			ms := privateRecMethods(4, 1, 0)
			eps := pick(paper, []float64{1, 8}, privateRecEps)
			if !paper {
				for i := range ms {
					if ms[i].Method == "dpfw" || ms[i].Method == "mm" {
						ms[i].Epsilons = []float64{8}
					}
				}
			}
			return &Config{
				Title: "Private recommenders on MovieLens-1M: test RMSE vs ε",
				Description: "MovieLens-1M (6 040 users, 3 706 movies, 1 000 209 ratings), a random 10 % of the ratings held out per run, declared scale 1–5. " +
					pick(paper, "Quick scale: one split; dpfw and mm at ε = 8 only.", "Three splits; dpfw and mm on the first split only (slow).") + privateRecDesc,
				Datasets: []DataSpec{{Name: "ML-1M", Source: "file", Path: "ml-1m/ratings.tsv", Format: "tsv",
					Scale: []float64{1, 5}, Holdout: 0.1}},
				Methods:  ms,
				Epsilons: eps,
				Runs:     pick(paper, 1, 3),
				Delta:    1e-6, Metric: "rmse", LogX: true,
			}
		},
	})
	addRepro(&Reproduction{
		Name: "dpals-jester", Paper: "issue 13 (private recommendations worth having); docs/mf.md",
		Summary: "Jester dataset 1 complete (73 421 users, 100 jokes), random 99/1 split, raw −10..10 and rescaled 0–5: the private recommenders vs ε",
		build: func(paper bool) *Config {
			raw := jester1()
			raw.Name, raw.Rescale = "Jester1-raw", nil
			rescaled := jester1()
			rescaled.Name = "Jester1-0to5"
			var ms []MethodSpec
			for _, d := range []struct {
				name  string
				width float64
			}{{raw.Name, 20}, {rescaled.Name, 5}} {
				ms0 := privateRecMethods(d.width, 0, 0)
				for _, m := range ms0 {
					m.Datasets = []string{d.name}
					m.Label += fmt.Sprintf(" [%s]", d.name[len("Jester1-"):])
					ms = append(ms, m)
				}
			}
			return &Config{
				Title: "Private recommenders on Jester dataset 1: test RMSE vs ε",
				Description: "The complete Jester dataset 1 (73 421 users, 100 jokes, 4 136 360 ratings in [−10, 10]), a random 1 % of the ratings held out per run; " +
					"once on the raw declared scale [−10, 10] and once mapped linearly onto 0–5 as seed 001 does (RMSE in the dataset's own units: divide the raw figures by 4 to compare). " +
					"Labels carry the scale. " + pick(paper, "Quick scale: ε ∈ {1, 8}, one split.", "One split per scale.") + privateRecDesc,
				Datasets: []DataSpec{raw, rescaled},
				Methods:  ms,
				Epsilons: pick(paper, []float64{1, 8}, privateRecEps),
				Runs:     1,
				Delta:    1e-6, Metric: "rmse", LogX: true,
			}
		},
	})
	addRepro(&Reproduction{
		Name: "dpals-synthetic", Paper: "issue 13 (private recommendations worth having); " + paper001 + "'s synthetic set",
		Summary: "seed 001's rank-one synthetic set (500 000 users at paper scale), 1 % held out: the private recommenders vs ε",
		build: func(paper bool) *Config {
			return &Config{
				Title: "Private recommenders on seed 001's rank-one synthetic set: test RMSE vs ε",
				Description: "Y* = u vᵀ with ‖Y*‖∞ = 1 (declared scale [−1, 1]), 400 items, 80 ratings per user, " +
					pick(paper, "1 000 users (quick scale: ε ∈ {1, 8}).", "500 000 users as in the seed (40 M ratings), one draw.") +
					" 1 % of the ratings held out." + privateRecDesc,
				Datasets: []DataSpec{{Name: "synthetic", Source: "rankone-synthetic",
					Params: map[string]float64{"users": pick(paper, 1000.0, 500000.0), "items": 400, "per_user": 80, "holdout": 0.01}}},
				Methods:  privateRecMethods(2, 0, 0),
				Epsilons: pick(paper, []float64{1, 8}, privateRecEps),
				Runs:     1,
				Delta:    1e-6, Metric: "rmse", LogX: true,
			}
		},
	})
}

// jester1 is the complete Jester dataset 1 (73 421 users, 100 jokes) on
// its declared scale [−10, 10], mapped linearly onto [0, 5] as seed 001
// does, 1 % of the ratings held out.
func jester1() DataSpec {
	return DataSpec{Name: "Jester1", Source: "file", Path: "jester1/ratings.tsv.gz", Format: "tsv",
		Holdout: 0.01, Scale: []float64{-10, 10}, Rescale: []float64{0, 5}}
}
