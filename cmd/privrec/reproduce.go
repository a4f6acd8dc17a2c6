package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/privrec/privrec/experiment"
)

func init() {
	register(&command{name: "reproduce", summary: "reproduce a seed paper's figure: privrec reproduce --list", run: runReproduce})
}

const reproduceSynopsis = `
Run one named reproduction — a seed paper's figure, or a measurement the
docs report — as an experiment (see 'privrec experiment --help'):
results.csv, summary.csv, figures and a report.md with our numbers beside
the paper's claims. A few measurements are not privacy–accuracy sweeps;
they write their own report.md. --scale quick runs in minutes with fewer
runs and ε values; --scale paper uses the paper's grid and number of runs.
Real data is read from --data-dir, or from $PRIVREC_DATA_DIR when the flag
is not given (never embedded); a missing file is an error naming the file,
where to download it and the layout expected. Re-running the same command
resumes an interrupted reproduction. Every dataset declares its public
rating scale and catalogue (all items of the source) to the methods.

The top-N reproductions (topn-*) run in parts: --methods, --epsilons and
--seeds pick methods, ε and noise seeds (0, 1, 2) of the grid — ε and
seeds restrict the private methods; each part adds to the same
results.csv with the grid's own noise seeds, so parts run one after
another make the whole grid, and a part with nothing left to train
rewrites the report without reading the data.`

func runReproduce(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("reproduce NAME --out DIR [--scale quick|paper] [--data-dir DIR]\n       privrec reproduce --list", reproduceSynopsis,
		`  privrec reproduce --list
  privrec reproduce 000-fig3 --out repro/000-fig3
  privrec reproduce 001-fig2c --scale paper --data-dir ~/data --out repro/001-fig2c
  privrec reproduce topn-netflix-150k --scale paper --methods popularity,ease,dp-ease --epsilons 1,8 --seeds 0`)
	list := fs.Bool("list", false, "list the named reproductions")
	outDir := fs.String("out", "", "output directory (default repro/NAME-SCALE)")
	scale := fs.String("scale", "quick", "quick or paper")
	dataDir := fs.String("data-dir", defaultDataDir(), "directory holding the real datasets (ml-100k/, ml-1m/, jester/, restaurant-consumer/; default $"+dataDirEnv+")")
	workers := fs.Int("workers", 0, "runs trained at once (0: all cores)")
	printConfig := fs.Bool("print-config", false, "print the experiment config as JSON and stop (a starting point for privrec experiment)")
	jsonOut := fs.Bool("json", false, "print a JSON summary on stdout")
	methodList := fs.String("methods", "", "top-N reproductions: run only these methods of the grid (comma-separated labels; default all)")
	epsList := fs.String("epsilons", "", "top-N reproductions: run the private methods at these ε of the grid only (comma-separated; default all)")
	seedList := fs.String("seeds", "", "top-N reproductions: run the private methods with these noise seeds of the grid only (comma-separated, from 0; default all)")
	// NAME may come before or after the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parse(fs, args, true); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		if name != "" || fs.NArg() > 1 {
			return usagef("give one reproduction name")
		}
		name = fs.Arg(0)
	}
	if *list {
		return listReproductions(out, *jsonOut)
	}
	if name == "" {
		return usagef("name a reproduction (privrec reproduce --list shows them)")
	}
	r, err := experiment.LookupReproduction(name)
	if err != nil {
		return usagef("%v", err)
	}
	only, err := parseTopNSubset(*methodList, *epsList, *seedList)
	if err != nil {
		return err
	}
	if !only.IsZero() && !r.TakesSubsets() {
		return usagef("--methods, --epsilons and --seeds pick part of a top-N reproduction's grid: %s runs as a whole", name)
	}
	if err := r.CheckSubset(*scale, only); err != nil {
		return usagef("%v", err)
	}
	if !r.IsSweep() {
		return runMeasurement(ctx, r, *scale, *outDir, *dataDir, *printConfig, *jsonOut, experiment.MeasureOptions{Only: only}, out)
	}
	cfg, err := r.Config(*scale)
	if err != nil {
		return usagef("%v", err)
	}
	if *printConfig {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(cfg)
	}
	if err := r.CheckData(*dataDir); err != nil {
		return err
	}
	if _, err := experiment.Plan(cfg); err != nil {
		return fmt.Errorf("reproduction %s cannot run yet: %w", name, err)
	}
	dir := *outDir
	if dir == "" {
		dir = filepath.Join("repro", cfg.Name)
	}
	return runSweep(ctx, cfg, dir, *dataDir, *workers, false, *jsonOut, out)
}

// runMeasurement runs a reproduction that is not a sweep.
func runMeasurement(ctx context.Context, r *experiment.Reproduction, scale, outDir, dataDir string, printConfig, jsonOut bool, opts experiment.MeasureOptions, out io.Writer) error {
	if printConfig {
		return usagef("%s is a measurement, not a sweep: it has no config to print", r.Name)
	}
	if scale != "quick" && scale != "paper" {
		return usagef("scale %q: want quick or paper", scale)
	}
	if err := r.CheckData(dataDir); err != nil {
		return err
	}
	dir := outDir
	if dir == "" {
		dir = filepath.Join("repro", r.Name+"-"+scale)
	}
	start := time.Now()
	if err := r.Measure(ctx, scale, dataDir, dir, opts); err != nil {
		return err
	}
	report := filepath.Join(dir, "report.md")
	secs := time.Since(start).Seconds()
	if jsonOut {
		return writeJSON(out, map[string]any{"name": r.Name + "-" + scale, "out": dir, "seconds": secs, "report": report, "complete": true})
	}
	fmt.Fprintf(out, "%s-%s: %.1f s; report %s\n", r.Name, scale, secs, report)
	return nil
}

// parseTopNSubset reads --methods, --epsilons and --seeds (each empty:
// all of the grid); whether the grid has them is the reproduction's check.
func parseTopNSubset(methodList, epsList, seedList string) (experiment.TopNSubset, error) {
	var o experiment.TopNSubset
	split := func(s string) []string {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	for _, m := range split(methodList) {
		if m = strings.TrimSpace(m); m == "" {
			return o, usagef("--methods %q: an empty name", methodList)
		}
		o.Methods = append(o.Methods, m)
	}
	for _, f := range split(epsList) {
		e, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(e > 0) || math.IsInf(e, 0) {
			return o, usagef("--epsilons %q: %q is not an ε > 0", epsList, f)
		}
		o.Epsilons = append(o.Epsilons, e)
	}
	for _, f := range split(seedList) {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return o, usagef("--seeds %q: %q is not a noise seed index (0, 1, …)", seedList, f)
		}
		o.Seeds = append(o.Seeds, n)
	}
	return o, nil
}

func listReproductions(out io.Writer, jsonOut bool) error {
	rs := experiment.Reproductions()
	if jsonOut {
		type item struct {
			Name    string   `json:"name"`
			Paper   string   `json:"paper"`
			Summary string   `json:"summary"`
			Files   []string `json:"files,omitempty"`
			Ready   bool     `json:"ready"`
			Missing string   `json:"missing,omitempty"`
		}
		var items []item
		for _, r := range rs {
			it := item{Name: r.Name, Paper: r.Paper, Summary: r.Summary, Files: r.Files(), Ready: true}
			if !r.IsSweep() {
				items = append(items, it)
				continue
			}
			if cfg, err := r.Config("quick"); err != nil {
				it.Ready, it.Missing = false, err.Error()
			} else if _, err := experiment.Plan(cfg); err != nil {
				it.Ready, it.Missing = false, err.Error()
			}
			items = append(items, it)
		}
		return writeJSON(out, items)
	}
	fmt.Fprintln(out, "Named reproductions (privrec reproduce NAME --out DIR [--scale quick|paper]):")
	for _, r := range rs {
		status := ""
		if !r.IsSweep() {
			status = "  [a measurement, not a sweep]"
		} else if cfg, err := r.Config("quick"); err == nil {
			if _, err := experiment.Plan(cfg); err != nil {
				status = "  [not runnable in this build: " + err.Error() + "]"
			}
		}
		fmt.Fprintf(out, "  %-19s %s — %s%s\n", r.Name, r.Paper, r.Summary, status)
		if files := r.Files(); len(files) > 0 {
			fmt.Fprintf(out, "  %-19s reads: %s\n", "", strings.Join(files, ", "))
		}
	}
	return nil
}
