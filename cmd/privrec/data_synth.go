package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/synth"
)

func init() {
	registerData(&command{name: "synth", summary: "generate a seed paper's synthetic ratings (and the true matrix)", run: runDataSynth})
}

const dataSynthSynopsis = `
Generate the synthetic data of a seed paper, with the paper's parameters as
defaults, deterministically for --seed. --out gets the observed ratings as
canonical TSV (users and items named 1..n); --truth, if given, gets every
entry of the true matrix (user \t item \t value), which
'privrec eval --truth' uses for ARE = ‖M̂−M‖²_F/‖M‖²_F.

Setups:
  onebit   seed 000: M = M1 M2ᵀ (U[−½,½] factors, rank --rank) scaled to
           ‖M‖∞ = --alpha; a uniform --obs share of entries observed as
           signs ±1 through a --link (probit with --sigma, or logistic).
           Defaults: 100 × 100, rank 1, alpha 1, obs 0.15, probit, sigma 1.
  jointdp  seed 001: rank-one Y* = u vᵀ with ‖Y*‖∞ = 1; every user rates
           --per-user distinct uniform items, value Y*_ij (+ N(0, --noise²)).
           Defaults: 500000 users × 400 items, 80 per user (40 M ratings),
           noise 0. (The full truth is then 200 M lines: give --truth only
           for smaller sizes unless you mean it.)
  ldp      seeds 002/003: low-rank Θ (N(0,1) factors, rank --rank) scaled to
           ‖Θ‖∞ = 1, a uniform --obs share observed as
           X = clamp(Θ + U[−noise, noise], −1, 1), so |X − Θ| ≤ --noise;
           --levels d maps both to the scale 1..d and rounds X (the input of
           randomized response). The papers run no experiments, so these
           defaults are ours: 1000 × 500, rank 5, obs 0.1, noise 0.1.
  implicit a Netflix-like implicit-feedback population (no rating values:
           every line is "user \t item \t 1"): item popularity a power law
           (--pop-exponent a: the j-th most popular item has weight j^−a),
           users' activity log-normal (--activity-spread σ), exactly
           --interactions in all, and low-rank taste: items fall into
           --rank genres and each user draws a --taste share of her items
           from her favourite genre. Written as it is generated (memory
           stays small at any size); no --truth. Defaults: 100000 users ×
           5000 items, 5 M interactions, rank 16, a 0.9, σ 1, taste 0.5.
  netflix  a Netflix-sized population with rating values, for tuning and
           benchmarking at scale: who rates what as in implicit (the same
           flags), and the rating round(clamp(--mean + b_u + b_i + ⟨p_u,q_i⟩
           + e, 1, --levels)) with user and item biases of standard
           deviation --user-bias and --item-bias, rank --factors taste of
           standard deviation --affinity and noise --noise. --holdout
           shares of the ratings go to --test (required when --holdout >
           0). Written as it is generated. Defaults: the Netflix Prize's
           shape, 480189 users × 17770 items, 100480507 ratings on 1..5,
           mean 3.6, biases 0.4 and 0.35, factors 8, affinity 0.8, noise
           0.65, holdout 0.01 (≈ 1.3 GB of TSV).

Only the flags of the chosen setup may be given. Both files are written
only if everything succeeds.`

const dataSynthExample = `  privrec data synth --setup onebit --link logistic --seed 3 \
      --out onebit.tsv --truth onebit.truth.tsv
  privrec train --data onebit.tsv --format tsv --method onebit-inp --epsilon 4 --scale -1:1 --out ob.model
  privrec eval --model ob.model --data onebit.tsv --format tsv --truth onebit.truth.tsv
  privrec data synth --setup jointdp --users 50000 --seed 1 --out r1.tsv --json
  privrec data synth --setup implicit --users 1000000 --items 20000 --interactions 50000000 --seed 1 --out netflix-like.tsv
  privrec data synth --setup netflix --seed 1 --out netflix.train.tsv --test netflix.test.tsv`

// synthFlags lists which parameter flags each setup accepts.
var synthFlags = map[string][]string{
	"onebit":   {"users", "items", "rank", "alpha", "obs", "link", "sigma"},
	"jointdp":  {"users", "items", "per-user", "noise"},
	"ldp":      {"users", "items", "rank", "obs", "noise", "levels"},
	"implicit": {"users", "items", "interactions", "rank", "pop-exponent", "activity-spread", "taste"},
	"netflix": {"users", "items", "interactions", "rank", "pop-exponent", "activity-spread", "taste",
		"factors", "mean", "user-bias", "item-bias", "affinity", "noise", "levels", "holdout"},
}

type synthReport struct {
	Setup    string         `json:"setup"`
	Seed     uint64         `json:"seed"`
	Params   map[string]any `json:"params"`
	Users    int            `json:"users"`
	Items    int            `json:"items"`
	Ratings  int            `json:"ratings"`
	Density  float64        `json:"density"`
	Min      float64        `json:"rating_min"`
	Max      float64        `json:"rating_max"`
	TruthMax float64        `json:"truth_max_abs"`
	Out      string         `json:"out"`
	Truth    string         `json:"truth,omitempty"`
	Test     string         `json:"test,omitempty"`
	// TestRatings is the number of held-out ratings (netflix).
	TestRatings int `json:"test_ratings,omitempty"`
}

func runDataSynth(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("data synth --setup onebit|jointdp|ldp [params] --seed S --out FILE [--truth FILE] [--json]", dataSynthSynopsis, dataSynthExample)
	setup := fs.String("setup", "", "onebit (seed 000), jointdp (seed 001) or ldp (seeds 002/003)")
	seed := fs.Uint64("seed", 0, "seed (the data is a deterministic function of setup, parameters and seed)")
	users := fs.Int("users", 0, "number of users / rows d1 (default: the setup's)")
	items := fs.Int("items", 0, "number of items / columns d2 (default: the setup's)")
	rank := fs.Int("rank", 0, "rank of the truth (onebit, ldp; default 1 onebit, 5 ldp)")
	alpha := fs.Float64("alpha", 0, "onebit: ‖M‖∞ = α (default 1)")
	obs := fs.Float64("obs", 0, "onebit, ldp: observed fraction of entries (default 0.15 onebit, 0.1 ldp)")
	link := fs.String("link", "probit", "onebit: probit or logistic")
	sigma := fs.Float64("sigma", 0, "onebit probit: noise scale σ (default 1)")
	perUser := fs.Int("per-user", 0, "jointdp: ratings per user (default 80)")
	noiseLevel := fs.Float64("noise", 0, "jointdp, netflix: Gaussian noise σ on ratings; ldp: bound ρ0 on |X − Θ| (default 0, 0.65 and 0.1)")
	levels := fs.Int("levels", 0, "ldp: discrete rating scale 1..d (0: continuous in [−1, 1]); netflix: the scale 1..d (default 5)")
	interactions := fs.Int64("interactions", 0, "implicit: total interactions (default 5000000)")
	popExp := fs.Float64("pop-exponent", 0, "implicit: power-law exponent of item popularity (default 0.9)")
	spread := fs.Float64("activity-spread", 0, "implicit: σ of the log-normal spread of users' activity (default 1)")
	taste := fs.Float64("taste", 0, "implicit: share of a user's items from her favourite genre (default 0.5)")
	factors := fs.Int("factors", 0, "netflix: rank of the users' taste (default 8)")
	mean := fs.Float64("mean", 0, "netflix: global mean rating (default 3.6)")
	userBias := fs.Float64("user-bias", 0, "netflix: standard deviation of the user biases (default 0.4)")
	itemBias := fs.Float64("item-bias", 0, "netflix: standard deviation of the item biases (default 0.35)")
	affinity := fs.Float64("affinity", 0, "netflix: standard deviation of the taste term ⟨p_u, q_i⟩ (default 0.8)")
	holdout := fs.Float64("holdout", 0, "netflix: share of ratings held out into --test (default 0.01)")
	testPath := fs.String("test", "", "netflix: where to write the held-out ratings (TSV)")
	outPath := fs.String("out", "", "where to write the observed ratings (TSV)")
	truthPath := fs.String("truth", "", "where to write every entry of the true matrix (TSV; optional)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	allowed, ok := synthFlags[*setup]
	if !ok {
		return usagef("--setup %q: want onebit, jointdp, ldp, implicit or netflix", *setup)
	}
	set := setFlags(fs)
	for _, name := range []string{"users", "items", "rank", "alpha", "obs", "link", "sigma", "per-user", "noise", "levels", "interactions", "pop-exponent", "activity-spread", "taste",
		"factors", "mean", "user-bias", "item-bias", "affinity", "holdout"} {
		if set[name] && !slices.Contains(allowed, name) {
			return usagef("--%s does not apply to --setup %s", name, *setup)
		}
	}
	if *outPath == "" {
		return usagef("--out is required")
	}
	if *truthPath != "" && sameFile(*outPath, *truthPath) {
		return usagef("--out and --truth name the same file")
	}
	for _, c := range []struct {
		name string
		bad  bool
	}{
		{"users", *users < 0}, {"items", *items < 0}, {"rank", *rank < 0}, {"alpha", *alpha < 0},
		{"obs", *obs < 0 || *obs > 1}, {"sigma", *sigma < 0}, {"per-user", *perUser < 0},
		{"noise", *noiseLevel < 0}, {"levels", *levels < 0 || *levels == 1},
		{"interactions", *interactions < 0}, {"pop-exponent", *popExp < 0}, {"activity-spread", *spread < 0}, {"taste", *taste < 0 || *taste > 1},
		{"factors", *factors < 0}, {"user-bias", *userBias < 0}, {"item-bias", *itemBias < 0}, {"affinity", *affinity < 0},
		{"holdout", *holdout < 0 || *holdout >= 1},
	} {
		if c.bad {
			return usagef("--%s: value out of range (see --help)", c.name)
		}
	}
	orDefaultI := func(name string, v, d int) int {
		if set[name] {
			return v
		}
		return d
	}
	orDefaultF := func(name string, v, d float64) float64 {
		if set[name] {
			return v
		}
		return d
	}

	rep := synthReport{Setup: *setup, Seed: *seed, Out: *outPath, Truth: *truthPath}
	if *setup == "implicit" || *setup == "netflix" {
		if *truthPath != "" {
			return usagef("--truth does not apply to --setup %s (it streams; there is no stored truth)", *setup)
		}
		ic := synth.ImplicitDefaults()
		if *setup == "netflix" {
			ic = synth.ExplicitDefaults().ImplicitConfig
		}
		ic.Users, ic.Items, ic.Rank = orDefaultI("users", *users, ic.Users), orDefaultI("items", *items, ic.Items), orDefaultI("rank", *rank, ic.Rank)
		if set["interactions"] {
			ic.Interactions = *interactions
		}
		ic.PopExponent = orDefaultF("pop-exponent", *popExp, ic.PopExponent)
		ic.ActivitySpread = orDefaultF("activity-spread", *spread, ic.ActivitySpread)
		ic.Taste = orDefaultF("taste", *taste, ic.Taste)
		rep.Params = map[string]any{"users": ic.Users, "items": ic.Items, "interactions": ic.Interactions, "rank": ic.Rank,
			"pop_exponent": ic.PopExponent, "activity_spread": ic.ActivitySpread, "taste": ic.Taste}
		var gen func(emit func(u int, items []int32, vals []float32, held []bool) error) error
		if *setup == "implicit" {
			if *testPath != "" {
				return usagef("--test does not apply to --setup implicit (split it with privrec data split)")
			}
			if err := ic.Check(); err != nil {
				return usagef("%v", err)
			}
			var ones []float32
			gen = func(emit func(int, []int32, []float32, []bool) error) error {
				return synth.Implicit(ctx, ic, *seed, func(u int, items []int32) error {
					for len(ones) < len(items) {
						ones = append(ones, 1)
					}
					return emit(u, items, ones[:len(items)], nil)
				})
			}
		} else {
			c := synth.ExplicitDefaults()
			c.ImplicitConfig = ic
			c.Factors = orDefaultI("factors", *factors, c.Factors)
			c.Mean = orDefaultF("mean", *mean, c.Mean)
			c.UserBias = orDefaultF("user-bias", *userBias, c.UserBias)
			c.ItemBias = orDefaultF("item-bias", *itemBias, c.ItemBias)
			c.Affinity = orDefaultF("affinity", *affinity, c.Affinity)
			c.Noise = orDefaultF("noise", *noiseLevel, c.Noise)
			c.High = orDefaultI("levels", *levels, c.High)
			c.Holdout = orDefaultF("holdout", *holdout, c.Holdout)
			if err := c.Check(); err != nil {
				return usagef("%v", err)
			}
			switch {
			case c.Holdout > 0 && *testPath == "":
				return usagef("--test is required: --holdout %g sends that share of the ratings there (--holdout 0 for none)", c.Holdout)
			case c.Holdout == 0 && *testPath != "":
				return usagef("--test given with --holdout 0: nothing would be held out")
			case *testPath != "" && sameFile(*outPath, *testPath):
				return usagef("--out and --test name the same file")
			}
			for k, v := range map[string]any{"factors": c.Factors, "mean": c.Mean, "user_bias": c.UserBias, "item_bias": c.ItemBias,
				"affinity": c.Affinity, "noise": c.Noise, "levels": c.High, "holdout": c.Holdout} {
				rep.Params[k] = v
			}
			rep.Test = *testPath
			gen = func(emit func(int, []int32, []float32, []bool) error) error {
				return synth.Explicit(ctx, c, *seed, emit)
			}
		}
		st, err := writeSynthStream(*outPath, *testPath, ic.Items, gen)
		if err != nil {
			return err
		}
		rep.Users, rep.Items, rep.Ratings, rep.TestRatings = st.users, st.items, int(st.train), int(st.test)
		rep.Density = float64(st.train+st.test) / (float64(st.users) * float64(max(st.items, 1)))
		rep.Min, rep.Max = st.min, st.max
		if *jsonOut {
			return writeJSON(out, rep)
		}
		fmt.Fprintf(out, "%s (seed %d): %d users × %d items (with a rating), %d ratings (density %.4g) → %s\n",
			rep.Setup, rep.Seed, rep.Users, rep.Items, rep.Ratings, rep.Density, rep.Out)
		if rep.Test != "" {
			fmt.Fprintf(out, "%d held-out ratings → %s\n", rep.TestRatings, rep.Test)
		}
		return nil
	}
	var obsM *ratings.Matrix
	var truth *synth.Factors
	switch *setup {
	case "onebit":
		c := synth.OneBitDefaults()
		c.Rows, c.Cols, c.Rank = orDefaultI("users", *users, c.Rows), orDefaultI("items", *items, c.Cols), orDefaultI("rank", *rank, c.Rank)
		c.Alpha = orDefaultF("alpha", *alpha, c.Alpha)
		c.ObsFrac = orDefaultF("obs", *obs, c.ObsFrac)
		c.Sigma = orDefaultF("sigma", *sigma, c.Sigma)
		l, err := synth.ParseLink(*link)
		if err != nil {
			return usagef("--link: %v", err)
		}
		c.Link = l
		d, err := synth.OneBit(c, *seed)
		if err != nil {
			return err
		}
		obsM, truth = d.Observed, d.Truth
		rep.Params = map[string]any{"d1": c.Rows, "d2": c.Cols, "rank": c.Rank, "alpha": c.Alpha, "obs": c.ObsFrac, "link": string(c.Link), "sigma": c.Sigma}
	case "jointdp":
		c := synth.RankOneDefaults()
		c.Users, c.Items, c.PerUser = orDefaultI("users", *users, c.Users), orDefaultI("items", *items, c.Items), orDefaultI("per-user", *perUser, c.PerUser)
		c.Noise = orDefaultF("noise", *noiseLevel, c.Noise)
		d, err := synth.RankOne(ctx, c, *seed)
		if err != nil {
			return err
		}
		obsM, truth = d.Observed, d.Truth
		rep.Params = map[string]any{"users": c.Users, "items": c.Items, "per_user": c.PerUser, "noise": c.Noise}
	case "ldp":
		c := synth.LowRankDefaults()
		c.Users, c.Items, c.Rank = orDefaultI("users", *users, c.Users), orDefaultI("items", *items, c.Items), orDefaultI("rank", *rank, c.Rank)
		c.ObsFrac = orDefaultF("obs", *obs, c.ObsFrac)
		c.Noise = orDefaultF("noise", *noiseLevel, c.Noise)
		c.Levels = *levels
		d, err := synth.LowRank(c, *seed)
		if err != nil {
			return err
		}
		obsM, truth = d.Observed, d.Truth
		rep.Params = map[string]any{"users": c.Users, "items": c.Items, "rank": c.Rank, "obs": c.ObsFrac, "noise": c.Noise, "levels": c.Levels}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	files := []atomicfile.File{{Path: *outPath, Write: func(w io.Writer) error { return ratingio.WriteTSV(w, obsM) }}}
	if *truthPath != "" {
		files = append(files, atomicfile.File{Path: *truthPath, Write: func(w io.Writer) error { return writeTruthTSV(ctx, w, truth) }})
	}
	if err := atomicfile.WriteAll(0o644, files...); err != nil {
		return err
	}
	rep.Users, rep.Items, rep.Ratings, rep.Density = obsM.NumUsers(), obsM.NumItems(), obsM.Len(), obsM.Density()
	rep.Min, rep.Max = obsM.Range()
	rep.TruthMax = truth.MaxAbs()
	if *jsonOut {
		return writeJSON(out, rep)
	}
	fmt.Fprintf(out, "%s (seed %d): %d users × %d items, %d ratings (density %.4f) → %s\n",
		rep.Setup, rep.Seed, rep.Users, rep.Items, rep.Ratings, rep.Density, rep.Out)
	if rep.Truth != "" {
		fmt.Fprintf(out, "true matrix (‖·‖∞ = %.4g, every entry) → %s\n", rep.TruthMax, rep.Truth)
	}
	return nil
}

// writeTruthTSV writes every entry of t as "user \t item \t value" with
// users and items named 1..n (as in the observed file), values with the
// fewest digits that read back to the same float32 (the precision of the
// rating store).
func writeTruthTSV(ctx context.Context, w io.Writer, t *synth.Factors) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	rows, cols := t.Dims()
	buf := make([]byte, 0, 64)
	row := make([]float64, cols)
	for i := range rows {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		for j := range cols {
			row[j] = t.At(i, j)
		}
		ui := strconv.Itoa(i + 1)
		for j, v := range row {
			buf = append(buf[:0], ui...)
			buf = append(buf, '\t')
			buf = strconv.AppendInt(buf, int64(j+1), 10)
			buf = append(buf, '\t')
			buf = strconv.AppendFloat(buf, float64(float32(v)), 'g', -1, 32)
			buf = append(buf, '\n')
			if _, err := bw.Write(buf); err != nil {
				return fmt.Errorf("writing truth: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing truth: %w", err)
	}
	return nil
}

// synthStream counts what writeSynthStream wrote.
type synthStream struct {
	users, items int
	train, test  int64
	min, max     float64
}

// writeSynthStream writes a streamed population as canonical TSV (users
// and items named 1..n) to trainPath, and the ratings gen marks as held
// out to testPath (both or neither written).
func writeSynthStream(trainPath, testPath string, nItems int, gen func(emit func(u int, items []int32, vals []float32, held []bool) error) error) (synthStream, error) {
	st := synthStream{min: math.Inf(1), max: math.Inf(-1)}
	seen := make([]bool, nItems)
	// Held-out lines go through a pipe to the test file's writer, which
	// atomicfile runs beside the training file's: one pass of the
	// generator fills both, and a failure of either fails both.
	var pr *io.PipeReader
	var pw *io.PipeWriter
	if testPath != "" {
		pr, pw = io.Pipe()
	}
	writeTrain := func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		var tw *bufio.Writer
		if pw != nil {
			tw = bufio.NewWriterSize(pw, 1<<20)
		}
		buf := make([]byte, 0, 64)
		err := gen(func(u int, items []int32, vals []float32, held []bool) error {
			st.users++
			ui := strconv.Itoa(u + 1)
			for k, j := range items {
				seen[j] = true
				v := float64(vals[k])
				st.min, st.max = min(st.min, v), max(st.max, v)
				buf = append(buf[:0], ui...)
				buf = append(buf, '\t')
				buf = strconv.AppendInt(buf, int64(j)+1, 10)
				buf = append(buf, '\t')
				buf = strconv.AppendFloat(buf, v, 'g', -1, 32)
				buf = append(buf, '\n')
				dst, path := bw, trainPath
				if held != nil && held[k] {
					dst, path = tw, testPath
					st.test++
				} else {
					st.train++
				}
				if _, err := dst.Write(buf); err != nil {
					return fmt.Errorf("writing %s: %w", path, err)
				}
			}
			return nil
		})
		if err == nil {
			if err = bw.Flush(); err != nil {
				err = fmt.Errorf("writing %s: %w", trainPath, err)
			}
		}
		if err == nil && tw != nil {
			if err = tw.Flush(); err != nil {
				err = fmt.Errorf("writing %s: %w", testPath, err)
			}
		}
		if pw != nil {
			pw.CloseWithError(err) // nil: the test file ends here
		}
		return err
	}
	files := []atomicfile.File{{Path: trainPath, Write: writeTrain}}
	if testPath != "" {
		files = append(files, atomicfile.File{Path: testPath, Write: func(w io.Writer) error {
			_, err := io.Copy(w, pr)
			pr.CloseWithError(err) // unblocks the training writer on failure
			return err
		}})
	}
	if err := atomicfile.WriteAll(0o644, files...); err != nil {
		return st, err
	}
	for _, s := range seen {
		if s {
			st.items++
		}
	}
	return st, nil
}
