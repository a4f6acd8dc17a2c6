package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/privrec/privrec/experiment"
)

func init() {
	register(&command{name: "experiment", summary: "run a privacy–accuracy sweep: results.csv, summary.csv, plots, report.md", run: runExperiment})
}

const experimentSynopsis = `
Run a sweep of datasets × methods × ε grid × runs (× one swept parameter)
described by a JSON config (format: docs/EXPERIMENTS.md). Runs go in
parallel on all cores with a progress line and ETA on stderr. Every
finished run is appended to DIR/results.csv at once (and synced to disk),
so re-running the same command resumes and skips what is done. Each run's
seed is derived from the config name and the run's cell, and each run's
guarantee is recorded with its numbers. At the end DIR gets summary.csv
(mean, sd, n per cell), figures (PNG and SVG, metric vs ε with ±1 sd
bands) and report.md.

"protocol": "users" evaluates top-N recommendation on held-out users
instead of held-out ratings: each dataset gives "holdout_users": [VAL, TEST]
(and "positive", "min_positives", "target_frac", "items"), the metric is
recall_at_k or ndcg_at_k at "k", measured on the test users, or on the
validation users with "evaluate": "validation" — choose settings there.

Privacy noise in experiments comes from seeded streams, so results are
repeatable; such models are experiments, never releases.`

// dataDirEnv names the environment variable that gives --data-dir its
// default; without it (and without the flag) relative dataset paths are
// resolved against the working directory.
const dataDirEnv = "PRIVREC_DATA_DIR"

func defaultDataDir() string { return os.Getenv(dataDirEnv) }

func runExperiment(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("experiment --config FILE --out DIR [--data-dir DIR] [--workers N]", experimentSynopsis,
		`  privrec experiment --config sweep.json --out results/sweep
  privrec experiment --config sweep.json --out results/sweep   # resumes
  privrec reproduce 000-fig3 --out rc --print-config > sweep.json   # a config to start from`)
	cfgPath := fs.String("config", "", "experiment config (JSON)")
	outDir := fs.String("out", "", "output directory")
	dataDir := fs.String("data-dir", defaultDataDir(), "directory that relative dataset paths are resolved against (default $"+dataDirEnv+")")
	workers := fs.Int("workers", 0, "runs trained at once (0: all cores)")
	reportOnly := fs.Bool("report-only", false, "only rewrite summary, figures and report from results.csv (after changing the config's metric: new figures and report-METRIC.md beside the first ones)")
	jsonOut := fs.Bool("json", false, "print a JSON summary on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *cfgPath == "" || *outDir == "" {
		return usagef("--config and --out are required")
	}
	cfg, err := experiment.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	return runSweep(ctx, cfg, *outDir, *dataDir, *workers, *reportOnly, *jsonOut, out)
}

// runSweep runs a config (shared by experiment and reproduce) and prints
// where the outputs are.
func runSweep(ctx context.Context, cfg *experiment.Config, outDir, dataDir string, workers int, reportOnly, jsonOut bool, out io.Writer) error {
	start := time.Now()
	var err error
	if reportOnly {
		err = experiment.WriteOutputs(cfg, outDir)
	} else {
		// On a terminal one line is rewritten in place; into a file or a
		// pipe, whole lines at each tenth of the runs.
		err = experiment.Run(ctx, cfg, experiment.Options{Out: outDir, DataDir: dataDir, Workers: workers,
			Progress: progressOut, ProgressLines: !progressTerminal(), Log: slog.Default()})
	}
	secs := time.Since(start).Seconds()
	report := filepath.Join(outDir, "report.md")
	_, statErr := os.Stat(report)
	if jsonOut {
		if werr := writeJSON(out, map[string]any{"name": cfg.Name, "out": outDir, "seconds": secs,
			"report": report, "results": filepath.Join(outDir, "results.csv"), "summary": filepath.Join(outDir, "summary.csv"),
			"complete": err == nil}); werr != nil {
			return werr
		}
	} else if statErr == nil {
		fmt.Fprintf(out, "%s: %.1f s; report %s (results.csv, summary.csv and figures beside it)\n", cfg.Name, secs, report)
	}
	return err
}
