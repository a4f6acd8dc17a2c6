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
	a, err := parseSynthArgs(args)
	if err != nil {
		return err
	}
	rep := synthReport{Setup: a.setup, Seed: a.seed, Out: a.outPath, Truth: a.truthPath}
	if a.setup == "implicit" || a.setup == "netflix" {
		return a.stream(ctx, &rep, out)
	}
	return a.stored(ctx, &rep, out)
}

// synthArgs is privrec data synth's command line.
type synthArgs struct {
	set                                                  map[string]bool
	setup, link, testPath, outPath, truthPath            string
	seed                                                 uint64
	users, items, rank, perUser, levels, factors         int
	interactions                                         int64
	alpha, obs, sigma, noiseLevel, popExp, spread, taste float64
	mean, userBias, itemBias, affinity, holdout          float64
	jsonOut                                              bool
}

// parseSynthArgs parses privrec data synth's command line and refuses
// flags that do not apply to the setup or are out of range.
func parseSynthArgs(args []string) (*synthArgs, error) {
	fs := newFlags("data synth --setup onebit|jointdp|ldp [params] --seed S --out FILE [--truth FILE] [--json]", dataSynthSynopsis, dataSynthExample)
	a := &synthArgs{}
	fs.StringVar(&a.setup, "setup", "", "onebit (seed 000), jointdp (seed 001) or ldp (seeds 002/003)")
	fs.Uint64Var(&a.seed, "seed", 0, "seed (the data is a deterministic function of setup, parameters and seed)")
	fs.IntVar(&a.users, "users", 0, "number of users / rows d1 (default: the setup's)")
	fs.IntVar(&a.items, "items", 0, "number of items / columns d2 (default: the setup's)")
	fs.IntVar(&a.rank, "rank", 0, "rank of the truth (onebit, ldp; default 1 onebit, 5 ldp)")
	fs.Float64Var(&a.alpha, "alpha", 0, "onebit: ‖M‖∞ = α (default 1)")
	fs.Float64Var(&a.obs, "obs", 0, "onebit, ldp: observed fraction of entries (default 0.15 onebit, 0.1 ldp)")
	fs.StringVar(&a.link, "link", "probit", "onebit: probit or logistic")
	fs.Float64Var(&a.sigma, "sigma", 0, "onebit probit: noise scale σ (default 1)")
	fs.IntVar(&a.perUser, "per-user", 0, "jointdp: ratings per user (default 80)")
	fs.Float64Var(&a.noiseLevel, "noise", 0, "jointdp, netflix: Gaussian noise σ on ratings; ldp: bound ρ0 on |X − Θ| (default 0, 0.65 and 0.1)")
	fs.IntVar(&a.levels, "levels", 0, "ldp: discrete rating scale 1..d (0: continuous in [−1, 1]); netflix: the scale 1..d (default 5)")
	fs.Int64Var(&a.interactions, "interactions", 0, "implicit: total interactions (default 5000000)")
	fs.Float64Var(&a.popExp, "pop-exponent", 0, "implicit: power-law exponent of item popularity (default 0.9)")
	fs.Float64Var(&a.spread, "activity-spread", 0, "implicit: σ of the log-normal spread of users' activity (default 1)")
	fs.Float64Var(&a.taste, "taste", 0, "implicit: share of a user's items from her favourite genre (default 0.5)")
	fs.IntVar(&a.factors, "factors", 0, "netflix: rank of the users' taste (default 8)")
	fs.Float64Var(&a.mean, "mean", 0, "netflix: global mean rating (default 3.6)")
	fs.Float64Var(&a.userBias, "user-bias", 0, "netflix: standard deviation of the user biases (default 0.4)")
	fs.Float64Var(&a.itemBias, "item-bias", 0, "netflix: standard deviation of the item biases (default 0.35)")
	fs.Float64Var(&a.affinity, "affinity", 0, "netflix: standard deviation of the taste term ⟨p_u, q_i⟩ (default 0.8)")
	fs.Float64Var(&a.holdout, "holdout", 0, "netflix: share of ratings held out into --test (default 0.01)")
	fs.StringVar(&a.testPath, "test", "", "netflix: where to write the held-out ratings (TSV)")
	fs.StringVar(&a.outPath, "out", "", "where to write the observed ratings (TSV)")
	fs.StringVar(&a.truthPath, "truth", "", "where to write every entry of the true matrix (TSV; optional)")
	fs.BoolVar(&a.jsonOut, "json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	a.set = setFlags(fs)
	return a, a.check()
}

// check refuses flags that do not apply to the setup or are out of range.
func (a *synthArgs) check() error {
	allowed, ok := synthFlags[a.setup]
	if !ok {
		return usagef("--setup %q: want onebit, jointdp, ldp, implicit or netflix", a.setup)
	}
	for _, name := range []string{"users", "items", "rank", "alpha", "obs", "link", "sigma", "per-user", "noise", "levels", "interactions", "pop-exponent", "activity-spread", "taste",
		"factors", "mean", "user-bias", "item-bias", "affinity", "holdout"} {
		if a.set[name] && !slices.Contains(allowed, name) {
			return usagef("--%s does not apply to --setup %s", name, a.setup)
		}
	}
	if a.outPath == "" {
		return usagef("--out is required")
	}
	if a.truthPath != "" && sameFile(a.outPath, a.truthPath) {
		return usagef("--out and --truth name the same file")
	}
	for _, c := range []struct {
		name string
		bad  bool
	}{
		{"users", a.users < 0}, {"items", a.items < 0}, {"rank", a.rank < 0}, {"alpha", a.alpha < 0},
		{"obs", a.obs < 0 || a.obs > 1}, {"sigma", a.sigma < 0}, {"per-user", a.perUser < 0},
		{"noise", a.noiseLevel < 0}, {"levels", a.levels < 0 || a.levels == 1},
		{"interactions", a.interactions < 0}, {"pop-exponent", a.popExp < 0}, {"activity-spread", a.spread < 0}, {"taste", a.taste < 0 || a.taste > 1},
		{"factors", a.factors < 0}, {"user-bias", a.userBias < 0}, {"item-bias", a.itemBias < 0}, {"affinity", a.affinity < 0},
		{"holdout", a.holdout < 0 || a.holdout >= 1},
	} {
		if c.bad {
			return usagef("--%s: value out of range (see --help)", c.name)
		}
	}
	return nil
}

// orI is v when flag name was given, else the default d.
func (a *synthArgs) orI(name string, v, d int) int {
	if a.set[name] {
		return v
	}
	return d
}

// orF is v when flag name was given, else the default d.
func (a *synthArgs) orF(name string, v, d float64) float64 {
	if a.set[name] {
		return v
	}
	return d
}

// synthGen streams a generated population user by user.
type synthGen func(emit func(u int, items []int32, vals []float32, held []bool) error) error

// stream generates the streamed setups (implicit, netflix) into --out
// (and --test) and reports them.
func (a *synthArgs) stream(ctx context.Context, rep *synthReport, out io.Writer) error {
	if a.truthPath != "" {
		return usagef("--truth does not apply to --setup %s (it streams; there is no stored truth)", a.setup)
	}
	ic := synth.ImplicitDefaults()
	if a.setup == "netflix" {
		ic = synth.ExplicitDefaults().ImplicitConfig
	}
	ic.Users, ic.Items, ic.Rank = a.orI("users", a.users, ic.Users), a.orI("items", a.items, ic.Items), a.orI("rank", a.rank, ic.Rank)
	if a.set["interactions"] {
		ic.Interactions = a.interactions
	}
	ic.PopExponent = a.orF("pop-exponent", a.popExp, ic.PopExponent)
	ic.ActivitySpread = a.orF("activity-spread", a.spread, ic.ActivitySpread)
	ic.Taste = a.orF("taste", a.taste, ic.Taste)
	rep.Params = map[string]any{"users": ic.Users, "items": ic.Items, "interactions": ic.Interactions, "rank": ic.Rank,
		"pop_exponent": ic.PopExponent, "activity_spread": ic.ActivitySpread, "taste": ic.Taste}
	var gen synthGen
	var err error
	if a.setup == "implicit" {
		gen, err = a.implicitGen(ctx, ic)
	} else {
		gen, err = a.explicitGen(ctx, ic, rep)
	}
	if err != nil {
		return err
	}
	st, err := writeSynthStream(a.outPath, a.testPath, ic.Items, gen)
	if err != nil {
		return err
	}
	rep.Users, rep.Items, rep.Ratings, rep.TestRatings = st.users, st.items, int(st.train), int(st.test)
	rep.Density = float64(st.train+st.test) / (float64(st.users) * float64(max(st.items, 1)))
	rep.Min, rep.Max = st.min, st.max
	return rep.print(out, a.jsonOut, true)
}

// implicitGen is the implicit setup's generator (every interaction a 1).
func (a *synthArgs) implicitGen(ctx context.Context, ic synth.ImplicitConfig) (synthGen, error) {
	if a.testPath != "" {
		return nil, usagef("--test does not apply to --setup implicit (split it with privrec data split)")
	}
	if err := ic.Check(); err != nil {
		return nil, usagef("%v", err)
	}
	var ones []float32
	return func(emit func(int, []int32, []float32, []bool) error) error {
		return synth.Implicit(ctx, ic, a.seed, func(u int, items []int32) error {
			for len(ones) < len(items) {
				ones = append(ones, 1)
			}
			return emit(u, items, ones[:len(items)], nil)
		})
	}, nil
}

// explicitGen is the netflix setup's generator, with its parameters
// recorded in rep.
func (a *synthArgs) explicitGen(ctx context.Context, ic synth.ImplicitConfig, rep *synthReport) (synthGen, error) {
	c := synth.ExplicitDefaults()
	c.ImplicitConfig = ic
	c.Factors = a.orI("factors", a.factors, c.Factors)
	c.Mean = a.orF("mean", a.mean, c.Mean)
	c.UserBias = a.orF("user-bias", a.userBias, c.UserBias)
	c.ItemBias = a.orF("item-bias", a.itemBias, c.ItemBias)
	c.Affinity = a.orF("affinity", a.affinity, c.Affinity)
	c.Noise = a.orF("noise", a.noiseLevel, c.Noise)
	c.High = a.orI("levels", a.levels, c.High)
	c.Holdout = a.orF("holdout", a.holdout, c.Holdout)
	if err := c.Check(); err != nil {
		return nil, usagef("%v", err)
	}
	switch {
	case c.Holdout > 0 && a.testPath == "":
		return nil, usagef("--test is required: --holdout %g sends that share of the ratings there (--holdout 0 for none)", c.Holdout)
	case c.Holdout == 0 && a.testPath != "":
		return nil, usagef("--test given with --holdout 0: nothing would be held out")
	case a.testPath != "" && sameFile(a.outPath, a.testPath):
		return nil, usagef("--out and --test name the same file")
	}
	for k, v := range map[string]any{"factors": c.Factors, "mean": c.Mean, "user_bias": c.UserBias, "item_bias": c.ItemBias,
		"affinity": c.Affinity, "noise": c.Noise, "levels": c.High, "holdout": c.Holdout} {
		rep.Params[k] = v
	}
	rep.Test = a.testPath
	return func(emit func(int, []int32, []float32, []bool) error) error {
		return synth.Explicit(ctx, c, a.seed, emit)
	}, nil
}

// stored generates the setups held in memory (onebit, jointdp, ldp),
// writes the ratings (and --truth) and reports them.
func (a *synthArgs) stored(ctx context.Context, rep *synthReport, out io.Writer) error {
	obsM, truth, err := a.generate(ctx, rep)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	files := []atomicfile.File{{Path: a.outPath, Write: func(w io.Writer) error { return ratingio.WriteTSV(w, obsM) }}}
	if a.truthPath != "" {
		files = append(files, atomicfile.File{Path: a.truthPath, Write: func(w io.Writer) error { return writeTruthTSV(ctx, w, truth) }})
	}
	if err := atomicfile.WriteAll(0o644, files...); err != nil {
		return err
	}
	rep.Users, rep.Items, rep.Ratings, rep.Density = obsM.NumUsers(), obsM.NumItems(), obsM.Len(), obsM.Density()
	rep.Min, rep.Max = obsM.Range()
	rep.TruthMax = truth.MaxAbs()
	return rep.print(out, a.jsonOut, false)
}

// print prints the report: JSON with jsonOut, else its lines (streamed:
// a streamed setup's, which counts the users and items with a rating and
// may hold ratings out; else a stored one's, with its truth).
func (rep *synthReport) print(out io.Writer, jsonOut, streamed bool) error {
	switch {
	case jsonOut:
		return writeJSON(out, rep)
	case streamed:
		fmt.Fprintf(out, "%s (seed %d): %d users × %d items (with a rating), %d ratings (density %.4g) → %s\n",
			rep.Setup, rep.Seed, rep.Users, rep.Items, rep.Ratings, rep.Density, rep.Out)
		if rep.Test != "" {
			fmt.Fprintf(out, "%d held-out ratings → %s\n", rep.TestRatings, rep.Test)
		}
	default:
		fmt.Fprintf(out, "%s (seed %d): %d users × %d items, %d ratings (density %.4f) → %s\n",
			rep.Setup, rep.Seed, rep.Users, rep.Items, rep.Ratings, rep.Density, rep.Out)
		if rep.Truth != "" {
			fmt.Fprintf(out, "true matrix (‖·‖∞ = %.4g, every entry) → %s\n", rep.TruthMax, rep.Truth)
		}
	}
	return nil
}

// generate draws the observed ratings and the truth of a stored setup,
// its parameters recorded in rep.
func (a *synthArgs) generate(ctx context.Context, rep *synthReport) (*ratings.Matrix, *synth.Factors, error) {
	switch a.setup {
	case "onebit":
		c := synth.OneBitDefaults()
		c.Rows, c.Cols, c.Rank = a.orI("users", a.users, c.Rows), a.orI("items", a.items, c.Cols), a.orI("rank", a.rank, c.Rank)
		c.Alpha = a.orF("alpha", a.alpha, c.Alpha)
		c.ObsFrac = a.orF("obs", a.obs, c.ObsFrac)
		c.Sigma = a.orF("sigma", a.sigma, c.Sigma)
		l, err := synth.ParseLink(a.link)
		if err != nil {
			return nil, nil, usagef("--link: %v", err)
		}
		c.Link = l
		d, err := synth.OneBit(c, a.seed)
		if err != nil {
			return nil, nil, err
		}
		rep.Params = map[string]any{"d1": c.Rows, "d2": c.Cols, "rank": c.Rank, "alpha": c.Alpha, "obs": c.ObsFrac, "link": string(c.Link), "sigma": c.Sigma}
		return d.Observed, d.Truth, nil
	case "jointdp":
		c := synth.RankOneDefaults()
		c.Users, c.Items, c.PerUser = a.orI("users", a.users, c.Users), a.orI("items", a.items, c.Items), a.orI("per-user", a.perUser, c.PerUser)
		c.Noise = a.orF("noise", a.noiseLevel, c.Noise)
		d, err := synth.RankOne(ctx, c, a.seed)
		if err != nil {
			return nil, nil, err
		}
		rep.Params = map[string]any{"users": c.Users, "items": c.Items, "per_user": c.PerUser, "noise": c.Noise}
		return d.Observed, d.Truth, nil
	default: // ldp
		c := synth.LowRankDefaults()
		c.Users, c.Items, c.Rank = a.orI("users", a.users, c.Users), a.orI("items", a.items, c.Items), a.orI("rank", a.rank, c.Rank)
		c.ObsFrac = a.orF("obs", a.obs, c.ObsFrac)
		c.Noise = a.orF("noise", a.noiseLevel, c.Noise)
		c.Levels = a.levels
		d, err := synth.LowRank(c, a.seed)
		if err != nil {
			return nil, nil, err
		}
		rep.Params = map[string]any{"users": c.Users, "items": c.Items, "rank": c.Rank, "obs": c.ObsFrac, "noise": c.Noise, "levels": c.Levels}
		return d.Observed, d.Truth, nil
	}
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
