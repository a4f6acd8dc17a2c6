package experiment

import (
	"fmt"
	"maps"
	"strings"
)

// The seed papers' figures. Method parameters follow each paper's
// experiments section; where a paper tuned a hyper-parameter on the private
// data we fix it instead (trying values on the private data costs privacy
// that the stated ε does not count) and say so in the description.
// Every dataset declares its public rating scale (synthetic generators
// know theirs) and, implicitly, its catalogue (all items of the source).

// The seed papers, by the number that prefixes their reproductions' names.
const (
	paper000 = "seed 000: Li, Wei, Huang, Mao & Wang, \"One-Bit Matrix Completion with Differential Privacy\""
	paper001 = "seed 001: Jain, Thakkar & Thakurta, \"Differentially Private Matrix Completion, Revisited\" (ICML 2018)"
	paper003 = "seeds 002/003: Zheng, \"Two Differentially Private Rating Collection Mechanisms for Recommender Systems\""
	paper004 = "seed 004: \"Applying Differential Privacy to Tensor Completion\" (arXiv 2110.00539)"
)

// oneBitMethods are seed 000's five lines: Clear and the four mechanisms.
func oneBitMethods() []MethodSpec {
	return []MethodSpec{
		{Method: "onebit-clear", Label: "Clear"},
		{Method: "onebit-inp", Label: "InP"},
		{Method: "onebit-objp", Label: "ObjP"},
		{Method: "onebit-grap", Label: "GraP"},
		{Method: "onebit-outp", Label: "OutP"},
	}
}

func oneBitSynth(name, link string, obs float64) DataSpec {
	methodLink := link
	if link == "logistic" {
		methodLink = "logit" // the onebit methods' name for it
	}
	return DataSpec{Name: name, Source: "onebit-synthetic",
		Params:       map[string]float64{"rows": 100, "cols": 100, "rank": 1, "alpha": 1, "obs": obs, "sigma": 1},
		Strings:      map[string]string{"link": link},
		MethodParams: map[string]any{"link": methodLink, "sigma": 1.0, "alpha": 1.0}}
}

const oneBitSynthDesc = "Synthetic one-bit data as in seed 000 §5.1: d1 = d2 = 100, rank 1, α = 1, M = M1 M2ᵀ with U[−½, ½] factors scaled to ‖M‖∞ = α, " +
	"signs drawn through a probit (σ = 1) or logistic link; τ = α√(d1 d2 r). ARE = ‖M̂ − M‖²_F / ‖M‖²_F over all entries."

func init() {
	for _, r := range []*Reproduction{
		repro000Fig1(),
		repro000Fig2(),
		repro000Fig3(),
		repro000FigObs("4", "probit"),
		repro000FigObs("5", "logistic"),
		repro001Fig2a(),
		repro001Fig2b(),
		repro001Fig2c(),
		repro003Rmse(),
		repro004Defaults(),
		repro004Fig2(),
		repro004Fig3(),
		repro004Fig4(),
	} {
		addRepro(r)
	}
}

// repro000Fig1 is seed 000's Fig. 1: synthetic one-bit data, ARE vs ε.
func repro000Fig1() *Reproduction {
	return &Reproduction{
		Name: "000-fig1", Paper: paper000 + ", Fig. 1",
		Summary: "synthetic 100×100 one-bit data, ARE vs ε for Clear/InP/ObjP/GraP/OutP, probit and logistic noise",
		build: func(paper bool) *Config {
			return &Config{
				Title:       "Seed 000, Fig. 1: recovery on synthetic data vs ε",
				Description: oneBitSynthDesc + " 15 % of entries observed; the paper averages 40 draws.",
				Datasets:    []DataSpec{oneBitSynth("synthetic-probit", "probit", 0.15), oneBitSynth("synthetic-logistic", "logistic", 0.15)},
				Methods:     oneBitMethods(),
				Epsilons:    pick(paper, []float64{1, 4, 10}, grid(1, 10, 1)),
				Runs:        pick(paper, 2, 40),
				Metric:      "are", LogY: true,
				Claims: []string{
					"As ε grows the recovery errors of the mechanisms under both noises decrease and approach Clear.",
					"ObjP, GraP and InP are relatively stable (less sensitive to ε); OutP performs worse when ε is small and is comparable to the others from about ε = 4.",
				},
			}
		},
	}
}

// repro000Fig2 is seed 000's Fig. 2: MovieLens-100K binarised, sign accuracy vs ε.
func repro000Fig2() *Reproduction {
	return &Reproduction{
		Name: "000-fig2", Paper: paper000 + ", Fig. 2",
		Summary: "MovieLens-100K binarised at the mean rating, sign accuracy on u1.test vs ε",
		build: func(paper bool) *Config {
			// Quick scale: ε = 4 only, 3 SPG iterations and GraP with
			// K = 3 (an iteration takes seconds on 943 × 1682: several
			// Dykstra rounds of nuclear projections); Clear's sign
			// accuracy is then within about a point of the converged one
			// (docs/onebit.md).
			mlParams := map[string]any{"threshold": 3.5}
			ms := oneBitMethods()
			if !paper {
				mlParams["max_iter"] = 3
				for i := range ms {
					if ms[i].Method == "onebit-grap" {
						ms[i].Params = map[string]any{"iterations": 3} // K = 3 noisy steps
					}
				}
			}
			return &Config{
				Title: "Seed 000, Fig. 2: sign accuracy on MovieLens-100K vs ε",
				Description: "MovieLens-100K, ratings above 3.5 → +1, others → −1 (the paper binarises at the global mean, ≈ 3.5; we fix 3.5 without looking at the data, since a threshold computed from the data would be released un-noised); " +
					"trained on u1.base, tested on u1.test (the paper: 'the default split'). The paper averages 10 runs.",
				Datasets: []DataSpec{{Name: "ML-100K", Source: "file", Path: "ml-100k/u1.base", Test: "ml-100k/u1.test", Format: "movielens-100k",
					Scale: []float64{1, 5}, MethodParams: mlParams}},
				Methods:  ms,
				Epsilons: pick(paper, []float64{4}, grid(1, 10, 1)),
				Runs:     pick(paper, 1, 10),
				Metric:   "accuracy",
				Claims: []string{
					"At approximately ε = 4 all four perturbation mechanisms achieve accuracy above 68 %.",
					"OutP achieves the best results among the four; for small ε the other three are less effective; all approach Clear as ε grows.",
				},
			}
		},
	}
}

// repro000Fig3 is seed 000's Fig. 3: restaurant–consumer ratings, sign accuracy vs ε.
func repro000Fig3() *Reproduction {
	return &Reproduction{
		Name: "000-fig3", Paper: paper000 + ", Fig. 3",
		Summary: "UCI restaurant–consumer ratings (2 → +1, else −1), random 80/20 split, sign accuracy vs ε",
		build: func(paper bool) *Config {
			return &Config{
				Title:       "Seed 000, Fig. 3: sign accuracy on restaurant–consumer (RC) vs ε",
				Description: "RC: 138 consumers × 130 restaurants, overall rating in {0, 1, 2}; 2 → +1, 0 or 1 → −1 (threshold 1.5); a random 80/20 split per run; the paper averages 10 runs.",
				Datasets: []DataSpec{{Name: "RC", Source: "file", Path: "restaurant-consumer/rating_final.csv", Format: "uci-rc", Holdout: 0.2,
					Scale: []float64{0, 2}, MethodParams: map[string]any{"threshold": 1.5}}},
				Methods:  oneBitMethods(),
				Epsilons: pick(paper, []float64{1, 10}, grid(1, 10, 1)),
				Runs:     pick(paper, 1, 10),
				Metric:   "accuracy",
				Claims: []string{
					"When ε is small (e.g. ε = 1) the results of InP, ObjP and GraP are unsatisfactory; overall the mechanisms obtain the expected privacy–accuracy trade-off.",
				},
			}
		},
	}
}

// repro000FigObs is seed 000's Fig. 4 (probit) or 5 (logistic): ARE vs ε at
// observation ratios 20–80 %.
func repro000FigObs(fig, link string) *Reproduction {
	return &Reproduction{
		Name: "000-fig" + fig, Paper: paper000 + ", Fig. " + fig,
		Summary: fmt.Sprintf("synthetic one-bit data with %s noise, ARE vs ε at observation ratios 20–80 %%", link),
		build: func(paper bool) *Config {
			return &Config{
				Title:       fmt.Sprintf("Seed 000, Fig. %s: recovery with %s noise under different observation ratios", fig, link),
				Description: oneBitSynthDesc + " The observation ratio is swept from 20 % to 80 %; the paper averages 10 runs.",
				Datasets:    []DataSpec{oneBitSynth("synthetic-"+link, link, 0.2)},
				Methods:     oneBitMethods(),
				Epsilons:    pick(paper, []float64{1, 10}, grid(1, 10, 1)),
				Runs:        pick(paper, 1, 10),
				Sweep:       &Sweep{Name: "obs", Target: "data", Label: "observation ratio", Values: pick(paper, []float64{0.2, 0.5, 0.8}, []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8})},
				Metric:      "are", LogY: true,
				Claims: []string{
					"As the observation ratio increases the performance of all four mechanisms becomes better.",
					"For InP and OutP, ARE first decreases with ε and levels off after about ε = 5; ObjP changes drastically with ε.",
					"For ε ≤ 1, ObjP and OutP are less prone to change with the observation ratio.",
				},
			}
		},
	}
}

// repro001Fig2a is seed 001's Fig. 2(a): synthetic rank-one data, RMSE vs ε.
func repro001Fig2a() *Reproduction {
	return &Reproduction{
		Name: "001-fig2a", Paper: paper001 + ", Fig. 2(a)",
		Summary: "synthetic rank-one 400 items, 80 ratings per user, RMSE vs ε (private FW, McSherry–Mironov, non-private FW)",
		build: func(paper bool) *Config {
			return &Config{
				Title:       "Seed 001, Fig. 2(a): RMSE vs ε on synthetic rank-one data",
				Description: "Y* = u vᵀ with ‖Y*‖∞ = 1, n = 400 items, 80 ratings per user; the paper uses m = 500 000 users (the quick scale uses 20 000)." + jointDesc,
				Datasets: []DataSpec{{Name: "synthetic", Source: "rankone-synthetic",
					Params: map[string]float64{"users": pick(paper, 20000.0, 500000.0), "items": 400, "per_user": 80, "holdout": 0.01}}},
				Methods:  jointMethods(),
				Epsilons: pick(paper, []float64{0.5, 2, 10}, []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20}),
				Runs:     pick(paper, 1, 10),
				Delta:    1e-6, Metric: "rmse", LogX: true,
				Claims: []string{
					"The test RMSE of private Frank–Wolfe is close to the non-private baseline even for very small ε and goes down significantly as ε increases.",
					"Private Frank–Wolfe incurs a significantly lower error than McSherry–Mironov.",
				},
			}
		},
	}
}

// repro001Fig2b is seed 001's Fig. 2(b): Jester Dataset 1, RMSE vs ε.
func repro001Fig2b() *Reproduction {
	return &Reproduction{
		Name: "001-fig2b", Paper: paper001 + ", Fig. 2(b)",
		Summary: "Jester Dataset 1 complete (73 421 users, 100 jokes) rescaled to 0–5, RMSE vs ε",
		build: func(paper bool) *Config {
			return &Config{
				Title:       "Seed 001, Fig. 2(b): RMSE vs ε on Jester",
				Description: "The complete Jester Dataset 1 as in the paper (73 421 users, 100 jokes, 4 136 360 ratings), rescaled linearly from the declared scale [−10, 10] to 0–5; no per-user cap (as the paper for Jester)." + jointDesc,
				Datasets:    []DataSpec{jester1()},
				Methods:     jointMethods(),
				Epsilons:    pick(paper, []float64{0.5, 2, 10}, []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20}),
				Runs:        pick(paper, 1, 10),
				Delta:       1e-6, Metric: "rmse", LogX: true,
				Claims: []string{
					"Private Frank–Wolfe is close to the non-private baseline even for small ε and clearly better than McSherry–Mironov.",
				},
			}
		},
	}
}

// repro001Fig2c is seed 001's Fig. 2(c): MovieLens top 400, RMSE vs ε.
func repro001Fig2c() *Reproduction {
	return &Reproduction{
		Name: "001-fig2c", Paper: paper001 + ", Fig. 2(c)",
		Summary: "MovieLens-1M restricted to the 400 most-rated movies (standing in for ML-10M top 400), ξ = 80, RMSE vs ε",
		build: func(paper bool) *Config {
			return &Config{
				Title: "Seed 001, Fig. 2(c): RMSE vs ε on MovieLens top 400",
				Description: "The paper uses MovieLens-10M restricted to the 400 most-rated movies (≈ 70 K users); we have MovieLens-1M (6 040 users) and restrict it the same way. " +
					"At most ξ = 80 training ratings per user." + jointDesc,
				Datasets: []DataSpec{{Name: "ML-1M-top400", Source: "file", Path: "ml-1m/ratings.tsv", Format: "tsv",
					Scale: []float64{1, 5}, Holdout: 0.01, TopItems: 400, CapPerUser: 80}},
				Methods:  jointMethods(),
				Epsilons: pick(paper, []float64{0.5, 2, 10}, []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20}),
				Runs:     pick(paper, 1, 10),
				Delta:    1e-6, Metric: "rmse", LogX: true,
				Claims: []string{
					"Private Frank–Wolfe is close to the non-private baseline even for small ε and clearly better than McSherry–Mironov (paper: MovieLens-10M top 400).",
				},
			}
		},
	}
}

// repro003Rmse is seed 003 (local-DP rating collection; the paper has no
// experiments): synthetic low-rank ratings, RMSE vs per-rating ε.
func repro003Rmse() *Reproduction {
	return &Reproduction{
		Name: "003-rmse", Paper: paper003 + "; the paper runs no experiments",
		Summary: "synthetic low-rank ratings, RMSE vs per-rating ε for the modified Laplace and randomized-response mechanisms",
		build: func(paper bool) *Config {
			users, items := pick(paper, 300.0, 1000.0), pick(paper, 200.0, 500.0)
			return &Config{
				Title: "Seed 003: RMSE vs ε of local-DP collection + nuclear-norm recovery",
				Description: "Our synthetic instance of the paper's generating process (Figure 1): a rank-5 Θ in [−1, 1], 10 % observed with bounded noise ρ0 = 0.1; " +
					"the modified Laplace mechanism on continuous ratings, randomized response on ratings rounded to 1..5; 10 % of the observed ratings held out; RMSE on the held-out ratings. " +
					"ε is per rating: a user with n ratings gets nε (the guarantee table shows what is provable). " +
					"The recovery is given the generating process's ρ0 (Theorem 3's deviation of X from Θ, a parameter of the paper's model, not read from the data): " +
					"0.1 for the continuous ratings (|X − Θ| ≤ 0.1); 0.35 levels for the 5 levels (0.1 is 0.2 level, plus rounding: RMS ≈ 0.31, rounded up). " +
					"With the default ρ0 (0.225 of the range, meant for real ratings) the debiased recovery's bias prior is too wide and its error peaks at ε ≈ 2–4 (docs/RESULTS.md).",
				Datasets: []DataSpec{
					{Name: "synthetic-continuous", Source: "lowrank-synthetic", Params: map[string]float64{"users": users, "items": items, "rank": 5, "obs": 0.1, "noise": 0.1, "holdout": 0.1},
						MethodParams: map[string]any{"rho0": 0.1}},
					{Name: "synthetic-5-levels", Source: "lowrank-synthetic", Params: map[string]float64{"users": users, "items": items, "rank": 5, "obs": 0.1, "noise": 0.1, "levels": 5, "holdout": 0.1},
						MethodParams: map[string]any{"rho0": 0.35}},
				},
				Methods: []MethodSpec{
					{Method: "ldp-laplace", Label: "modified Laplace", Collect: "laplace", Datasets: []string{"synthetic-continuous"}},
					{Method: "ldp-rr", Label: "randomized response", Collect: "rr", Datasets: []string{"synthetic-5-levels"}},
					{Method: "ldp-laplace", Label: "modified Laplace, debiased", Collect: "laplace", Datasets: []string{"synthetic-continuous"}, Params: map[string]any{"debias": true}},
					{Method: "ldp-rr", Label: "randomized response, debiased", Collect: "rr", Datasets: []string{"synthetic-5-levels"}, Params: map[string]any{"debias": true}},
					{Method: "bias", Label: "biases on raw data"},
				},
				Epsilons: pick(paper, []float64{0.5, 1, 2, 4, 8}, []float64{0.25, 0.5, 1, 2, 3, 4, 6, 8}),
				Runs:     pick(paper, 2, 10),
				// log y: the plain recovery's error (≈ 2) and the debiased one's (≈ 0.3) on one plot
				Metric: "rmse", LogX: true, LogY: true,
				Claims: []string{
					"Theorem 3: the recovery error bound decreases toward ρ0√s as ε grows (less privacy, less noise, more precise estimation).",
				},
			}
		},
	}
}

// repro004Defaults runs seed 004's tensor methods with their default
// solvers (docs/tensor.md).
func repro004Defaults() *Reproduction {
	return &Reproduction{
		Name: "004-defaults", Paper: paper004 + "; docs/tensor.md (default settings)",
		Summary: "the tensor methods' default solvers (not the seed's SGD): MovieLens-100K ua/ub and the synthetic CP/Tucker tensors, RMSE at ε = 1 beside bias and the training mean",
		build: func(paper bool) *Config {
			ml := func(split string) DataSpec {
				return DataSpec{Name: "ML-100K-" + split, Source: "file", Path: "ml-100k/" + split + ".base", Test: "ml-100k/" + split + ".test", Format: "movielens-100k",
					Scale: []float64{1, 5}}
			}
			synth := tensorSynth("cp", 0.5)
			synth.Name = "synthetic-cp"
			tsynth := tensorSynth("tucker", 0.5)
			mls := []string{"ML-100K-ua", "ML-100K-ub"}
			return &Config{
				Title: "Tensor completion with the default settings",
				Description: "Default settings of cp, tucker, cp-ip and cp-dpsgd (ALS with biases and a validation-chosen λ; DP-SGD with its defaults), declared scale 1–5 on MovieLens-100K " +
					"(users × movies × day, canonical ua/ub splits, no bi-scaling) and [0, 1] on seed 004's synthetic tensors; δ = 10⁻⁵. The references: the non-private bias model and the training mean.",
				Datasets: []DataSpec{ml("ua"), ml("ub"), synth, tsynth},
				Methods: []MethodSpec{
					{Method: "global-mean", Label: "training mean (non-private)"},
					{Method: "bias", Label: "bias (non-private)", Datasets: mls},
					{Method: "cp", Label: "CP (non-private)"},
					{Method: "tucker", Label: "Tucker (non-private)"},
					{Method: "cp-ip", Label: "CP-IP", Datasets: []string{"synthetic-cp", "synthetic-tucker"}},
					{Method: "cp-dpsgd", Label: "CP-DP-SGD"},
				},
				Epsilons: []float64{1},
				Runs:     pick(paper, 3, 50),
				Delta:    1e-5,
				Metric:   "rmse",
			}
		},
	}
}

// repro004Fig2 is seed 004's Fig. 2: synthetic tensors, RMSE vs ε.
func repro004Fig2() *Reproduction {
	return &Reproduction{
		Name: "004-fig2", Paper: paper004 + ", Fig. 2",
		Summary: "synthetic 20×20×20 CP and Tucker tensors, 50 % missing, RMSE vs ε for IP/GP/OP/DP-SGD and the non-private baselines",
		build: func(paper bool) *Config {
			return &Config{
				Title:       "Seed 004, Fig. 2: RMSE vs ε on synthetic tensors (CP and Tucker)",
				Description: tensorSynthDesc + " 50 % missing; the paper averages 50 realisations.",
				Datasets:    []DataSpec{tensorSynth("cp", 0.5), tensorSynth("tucker", 0.5)},
				Methods:     tensorMethods(false),
				Epsilons:    pick(paper, []float64{0.1, 0.5, 1, 2, 5}, []float64{0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}),
				Runs:        pick(paper, 3, 50),
				Delta:       1e-5, // DP-SGD
				Metric:      "rmse", LogX: true,
				Claims: []string{
					"RMSE increases as ε shrinks; there is no significant difference in the privacy–accuracy trade-off between CP and Tucker.",
					"GP is followed by OP and IP in accuracy and stability; GP's curves are very close to the baselines; OP's fluctuation decreases sharply with ε.",
				},
			}
		},
	}
}

// repro004Fig3 is seed 004's Fig. 3: synthetic tensors at missing ratios 0.1–0.9.
func repro004Fig3() *Reproduction {
	return &Reproduction{
		Name: "004-fig3", Paper: paper004 + ", Fig. 3",
		Summary: "synthetic CP and Tucker tensors, RMSE vs ε at missing ratios 0.1–0.9",
		build: func(paper bool) *Config {
			return &Config{
				Title:       "Seed 004, Fig. 3: RMSE under different missing ratios (CP and Tucker)",
				Description: tensorSynthDesc + " The missing ratio (MR) is swept from 0.1 to 0.9; the paper averages 10 runs.",
				Datasets:    []DataSpec{tensorSynth("cp", 0.5), tensorSynth("tucker", 0.5)},
				Methods:     tensorMethods(false),
				Epsilons:    pick(paper, []float64{0.5, 2}, []float64{0.1, 0.5, 1, 2, 5}),
				Runs:        pick(paper, 2, 10),
				Sweep:       &Sweep{Name: "missing", Target: "data", Label: "missing ratio", Values: pick(paper, []float64{0.1, 0.5, 0.9}, []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9})},
				Delta:       1e-5, // DP-SGD
				Metric:      "rmse", LogX: true,
				Claims: []string{
					"RMSE increases with the missing ratio; a significant decrease in performance occurs only at MR = 0.9.",
				},
			}
		},
	}
}

// repro004Fig4 is seed 004's Fig. 4: MovieLens-100K as users × movies × day.
func repro004Fig4() *Reproduction {
	return &Reproduction{
		Name: "004-fig4", Paper: paper004 + ", Fig. 4",
		Summary: "MovieLens-100K as users × movies × day, canonical ua/ub splits, RMSE vs ε for CP and Tucker with IP/GP/OP/DP-SGD, the training mean and the bi-scaling alone",
		build: func(paper bool) *Config {
			return &Config{
				Title: "Seed 004, Fig. 4: RMSE vs ε on MovieLens-100K (CP and Tucker)",
				Description: "Users × movies × day, bi-scaled per day slice (--biscale; the scaling statistics are not private), trained on ua.base/ub.base and tested on ua.test/ub.test; rank 3; 100 passes; " +
					"CP λ = 0.01, lr 0.005; Tucker λo = 0.01, λg = 0.001, lr 0.003; IP's sensitivity from the declared scale 1–5; DP-SGD clip 0.3, δ = 10⁻⁵. " +
					"Reference lines: the training mean, and the bi-scaling alone (its un-scaled zero model). The paper averages both splits over 10 runs (the quick scale uses ua only).",
				Datasets: pick(paper, []DataSpec{mlTensor("ua")}, []DataSpec{mlTensor("ua"), mlTensor("ub")}),
				Methods:  tensorMethods(true),
				Epsilons: pick(paper, []float64{1, 8}, []float64{0.1, 0.5, 1, 2, 4, 8}),
				Runs:     pick(paper, 1, 10),
				Delta:    1e-5, // DP-SGD
				Metric:   "rmse", LogX: true,
				Claims: []string{
					"The three approaches have comparable performance to that on synthetic data, which validates the proposal in practical scenarios.",
				},
			}
		},
	}
}

// jointMethods are seed 001's four lines (joint-DP matrix completion).
func jointMethods() []MethodSpec {
	return []MethodSpec{
		{Method: "fw", Label: "FW (non-private)"},
		{Method: "dpfw", Label: "private FW"},
		{Method: "mm", Label: "McSherry–Mironov"},
		{Method: "dpsvd", Label: "private SVD"},
	}
}

// jointDesc ends the descriptions of seed 001's figures.
const jointDesc = " Per-user mean centring (free of privacy cost); the rating scale (used by McSherry–Mironov) and the catalogue are declared public facts; δ = 10⁻⁶; 1 % of ratings held out at random; RMSE. " +
	"The paper cross-validates the nuclear-norm bound k and the number of iterations T on the data, which costs privacy; we fix them instead (the methods' defaults)."

// tensorMethods are seed 004's lines (DP tensor completion): the training mean, and CP and Tucker
// non-private and with IP, GP, OP and DP-SGD; on MovieLens-100K (ml) also
// the bi-scaling alone.
func tensorMethods(ml bool) []MethodSpec {
	// The training mean: the accuracy a model must beat to have learnt
	// anything (on the synthetic tensors and on ML-100K it is close to
	// every method's).
	ms := []MethodSpec{{Method: "global-mean", Label: "training mean (non-private)"}}
	if ml {
		// The per-day bi-scaling alone: a CP model whose factors stay ≈ 0
		// (initial sd 10⁻⁹, learning rate 10⁻¹², one pass), so its
		// predictions are the un-scaled zero (day mean + the user's and
		// the item's centres that day).
		ms = append(ms, MethodSpec{Method: "cp", Label: "bi-scaling alone, z ≈ 0 (non-private)",
			Params: map[string]any{"init": 1e-9, "lr": 1e-12, "passes": 1}})
	}
	for _, k := range []string{"cp", "tucker"} {
		name := map[string]string{"cp": "CP", "tucker": "Tucker"}[k] // the paper's names
		// The seed's settings (the methods' defaults are better solvers;
		// docs/tensor.md): per-entry SGD without biases, λ and lr as the
		// paper sets them.
		seed := map[string]any{"lambda": 0.01, "lr": 0.005, "passes": 100}
		if k == "tucker" {
			seed = map[string]any{"lambda": 0.001, "lambda_g": 0.0001, "lr": 0.005, "passes": 100}
			if ml { // the seed's ML-100K Tucker setting
				seed = map[string]any{"lambda": 0.01, "lambda_g": 0.001, "lr": 0.003, "passes": 100}
			}
		}
		with := func(extra map[string]any) map[string]any {
			p := maps.Clone(seed)
			maps.Copy(p, extra)
			return p
		}
		sgd := with(map[string]any{"solver": "sgd", "biases": false, "validation": 0})
		ds := []string{"synthetic-" + k}
		if ml {
			ds = nil
		}
		ms = append(ms, MethodSpec{Method: k, Label: name + " (non-private)", Params: sgd, Datasets: ds})
		// IP, GP, OP as the seed calibrates them; DP-SGD (clip 0.3, full
		// batch), the only one whose guarantee covers the whole model.
		for _, p := range []string{"ip", "gp", "op", "dpsgd"} {
			params := seed
			switch p {
			case "ip":
				params = sgd
			case "dpsgd":
				params = with(map[string]any{"clip": 0.3, "biases": false, "precondition": false})
			}
			ms = append(ms, MethodSpec{Method: k + "-" + p, Label: name + "-" + strings.ToUpper(p), Params: params, Datasets: ds})
		}
	}
	return ms
}

// mlTensor is MovieLens-100K split as users × movies × day, bi-scaled.
func mlTensor(split string) DataSpec {
	return DataSpec{Name: "ML-100K-" + split, Source: "file", Path: "ml-100k/" + split + ".base", Test: "ml-100k/" + split + ".test", Format: "movielens-100k",
		Scale: []float64{1, 5}, MethodParams: map[string]any{"biscale": true}}
}

// tensorSynth is seed 004's synthetic 20 × 20 × 20 tensor of the kind cp or
// tucker.
func tensorSynth(kind string, missing float64) DataSpec {
	return DataSpec{Name: "synthetic-" + kind, Source: "tensor-synthetic",
		Params:       map[string]float64{"n1": 20, "n2": 20, "n3": 20, "rank": 3, "snr": 1, "missing": missing, "train_frac": 0.8},
		Strings:      map[string]string{"kind": kind},
		MethodParams: map[string]any{"item_day": true}}
}

// tensorSynthDesc describes seed 004's synthetic tensors.
const tensorSynthDesc = "Synthetic 20 × 20 × 20 tensors of rank 3 (CP: N(0, 1) factors with unit columns; Tucker: orthonormal factors and an N(0, 1) 3 × 3 × 3 core), " +
	"min–max scaled to [0, 1], Gaussian noise at SNR 1, observed entries split 80/20; RMSE against the noise-free truth on the held-out entries. " +
	"CP λ = 0.01, lr 0.005; Tucker λo = 0.001, λg = 0.0001, lr 0.005; 100 passes (the methods' defaults). IP's sensitivity uses the declared scale [0, 1]; " +
	"DP-SGD clips per-entry gradients to 0.3 with δ = 10⁻⁵."

// jester is Jester's 5 000-user sample on its declared scale [−10, 10],
// mapped linearly onto [0, 5] as seed 001 does.
func jester() DataSpec {
	return DataSpec{Name: "Jester-5k", Source: "file", Path: "jester/jester5k_ratings.tsv", Format: "tsv",
		Holdout: 0.01, Scale: []float64{-10, 10}, Rescale: []float64{0, 5}}
}
