package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/tensor"
)

func init() {
	registerData(&command{name: "synth-tensor", summary: "synthetic CP/Tucker tensor of seed 004 as user/item/rating/time TSV", run: runSynthTensor})
}

func runSynthTensor(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("data synth-tensor --train FILE --test FILE [flags]", `
Generate the synthetic tensor of seed 004 (§5.1): rank-d CP with N(0, 1)
factors whose columns have unit length (or Tucker with orthonormal factors
and an N(0, 1) core), min–max scaled to [0, 1], plus Gaussian noise at
--snr (sd of the true entries / noise sd), with a --missing fraction of entries unobserved and the
observed ones split --train-frac / rest. --train gets the noisy training
entries; --test gets the noise-free true values at the held-out positions
(the seed's RMSE is against the truth).

Lines are "user <TAB> item <TAB> value <TAB> time" with 1-based IDs and
time = day·86400. A rating file holds one rating per (user, item), so the
item ID carries the day as a tag, "item@day"; train tensor methods with
--item-day to merge the tags.`,
		`  privrec data synth-tensor --kind cp --seed 1 --train syn.train --test syn.test
  privrec train --data syn.train --format tsv --method cp-ip --item-day --scale -0.5:1.5 \
      --epsilon 1 --seed 1 --out syn.model
  privrec eval --model syn.model --data syn.test --format tsv --json`)
	kind := fs.String("kind", "cp", "decomposition: cp or tucker")
	dims := fs.String("dims", "20,20,20", "n1,n2,n3")
	rank := fs.Int("rank", 3, "rank d")
	snr := fs.Float64("snr", 1, "signal-to-noise ratio sd(X̃)/σ (0: no noise)")
	missing := fs.Float64("missing", 0.5, "fraction of all entries unobserved")
	trainFrac := fs.Float64("train-frac", 0.8, "share of observed entries for training")
	seed := fs.Uint64("seed", 1, "random seed (the data are reproducible per seed)")
	trainPath := fs.String("train", "", "output file for the noisy training entries")
	testPath := fs.String("test", "", "output file for the true values at held-out positions")
	jsonOut := fs.Bool("json", false, "print a JSON summary on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *trainPath == "" || *testPath == "" {
		return usagef("--train and --test are required")
	}
	k, err := tensor.ParseKind(*kind)
	if err != nil {
		return usagef("--kind: %v", err)
	}
	var d [3]int
	parts := strings.Split(*dims, ",")
	if len(parts) != 3 {
		return usagef("--dims %q: want n1,n2,n3", *dims)
	}
	for x, p := range parts {
		if d[x], err = strconv.Atoi(strings.TrimSpace(p)); err != nil {
			return usagef("--dims %q: %v", *dims, err)
		}
	}
	cfg := tensor.SynthConfig{Kind: k, Dims: d, Rank: *rank, SNR: *snr, Missing: *missing, TrainFrac: *trainFrac}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	s, err := tensor.Synthesize(cfg, noise.Seeded(*seed))
	if err != nil {
		return err
	}
	if err := atomicfile.WriteAll(0o644,
		atomicfile.File{Path: *trainPath, Write: func(w io.Writer) error { return writeTensorTSV(w, s.Train) }},
		atomicfile.File{Path: *testPath, Write: func(w io.Writer) error { return writeTensorTSV(w, s.Test) }},
	); err != nil {
		return err
	}
	if *jsonOut {
		return writeJSON(out, map[string]any{"kind": string(k), "dims": d, "rank": *rank, "sigma": s.Sigma, "seed": *seed,
			"train": *trainPath, "train_entries": s.Train.Len(), "test": *testPath, "test_entries": s.Test.Len()})
	}
	fmt.Fprintf(out, "%s tensor %v, rank %d, noise σ = %.4g: %d training entries → %s, %d test entries (true values) → %s\n",
		k, d, *rank, s.Sigma, s.Train.Len(), *trainPath, s.Test.Len(), *testPath)
	return nil
}

// writeTensorTSV writes t as "user item@day value time" lines.
func writeTensorTSV(w io.Writer, t *tensor.Tensor) error {
	bw := bufio.NewWriter(w)
	for e := range t.Len() {
		fmt.Fprintf(bw, "%d\t%d%s%d\t%s\t%d\n", t.I[e]+1, t.J[e]+1, tensor.ItemDaySep, t.K[e], strconv.FormatFloat(t.Val[e], 'g', -1, 64), int64(t.K[e])*tensor.SecondsPerDay)
	}
	return bw.Flush()
}
