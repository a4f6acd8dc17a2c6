package experiment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// Reproduction is a named measurement: a sweep that reproduces one figure
// or table of a seed paper or of the docs, at a quick scale (minutes,
// fewer runs and ε values) or at the paper's scale; or, for the few
// measurements that are not privacy–accuracy sweeps, a measurement that
// writes its own report.
type Reproduction struct {
	Name    string
	Summary string
	Paper   string
	// build returns the sweep (quick or paper scale).
	build func(paper bool) *Config
	// measure, set instead of build, runs a measurement that is not a
	// sweep and writes report.md into out.
	measure func(ctx context.Context, paper bool, dataDir, out string, opts MeasureOptions) error
	// topN, set for the top-N measurements, lists the grids measure runs
	// (part of them with MeasureOptions.Only).
	topN func(paper bool) []TopNSpec
	// files are the data files a measurement reads.
	files []string
}

// IsSweep reports whether the reproduction is a sweep (with a Config)
// rather than a measurement of its own (Measure).
func (r *Reproduction) IsSweep() bool { return r.build != nil }

func parseScale(scale string) (paper bool, err error) {
	switch scale {
	case "quick":
		return false, nil
	case "paper":
		return true, nil
	}
	return false, fmt.Errorf("scale %q: want quick or paper", scale)
}

// MeasureOptions are a measurement's options beyond its scale and data.
type MeasureOptions struct {
	// Only runs part of a top-N measurement's grid (empty: all of it).
	Only TopNSubset
}

// TakesSubsets reports whether the measurement runs part of its grid
// (MeasureOptions.Only): the top-N reproductions do.
func (r *Reproduction) TakesSubsets() bool { return r.topN != nil }

// CheckSubset refuses a subset the reproduction's grid at scale does not
// have (a method, ε or seed it lacks), or any subset of a reproduction
// that runs as a whole.
func (r *Reproduction) CheckSubset(scale string, only TopNSubset) error {
	if only.IsZero() {
		return nil
	}
	if r.topN == nil {
		return fmt.Errorf("reproduction %s runs as a whole: it takes no subset of methods, ε or seeds", r.Name)
	}
	paper, err := parseScale(scale)
	if err != nil {
		return err
	}
	if err := only.check(r.topN(paper)...); err != nil {
		return fmt.Errorf("reproduction %s at scale %s: %w", r.Name, scale, err)
	}
	return nil
}

// Measure runs a measurement that is not a sweep, writing report.md into
// out (created if needed).
func (r *Reproduction) Measure(ctx context.Context, scale, dataDir, out string, opts MeasureOptions) error {
	if r.measure == nil {
		return fmt.Errorf("reproduction %s is a sweep: run its Config", r.Name)
	}
	paper, err := parseScale(scale)
	if err != nil {
		return err
	}
	if err := r.CheckSubset(scale, opts.Only); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating output directory: %w", err)
	}
	return r.measure(ctx, paper, dataDir, out, opts)
}

// Config returns the sweep for a scale ("quick" or "paper").
func (r *Reproduction) Config(scale string) (*Config, error) {
	paper, err := parseScale(scale)
	if err != nil {
		return nil, err
	}
	if r.build == nil {
		return nil, fmt.Errorf("reproduction %s is a measurement, not a sweep: it has no config", r.Name)
	}
	c := r.build(paper)
	c.Name = r.Name + "-" + scale
	if c.Paper == "" {
		c.Paper = r.Paper
	}
	if !paper {
		c.Description = strings.TrimSpace(c.Description + " Quick scale: fewer runs and ε values than the paper (privrec reproduce " + r.Name + " --scale paper for the full run).")
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("reproduction %s: %w", r.Name, err)
	}
	return c, nil
}

// Files lists the data files the reproduction reads (relative to the data
// directory).
func (r *Reproduction) Files() []string {
	if r.build == nil {
		return append([]string(nil), r.files...)
	}
	var out []string
	for _, d := range r.build(false).Datasets {
		if d.Source == "file" {
			out = append(out, d.Path)
			if d.Test != "" {
				out = append(out, d.Test)
			}
		}
	}
	return out
}

// CheckData reports the first missing data file, naming where to get it.
func (r *Reproduction) CheckData(dataDir string) error {
	type file struct{ dataset, path string }
	var files []file
	if r.build == nil {
		for _, p := range r.files {
			files = append(files, file{r.Name, p})
		}
	} else {
		for _, d := range r.build(false).Datasets {
			if d.Source != "file" {
				continue
			}
			for _, p := range []string{d.Path, d.Test} {
				if p != "" {
					files = append(files, file{d.Name, p})
				}
			}
		}
	}
	for _, f := range files {
		full := resolve(dataDir, f.path)
		if _, err := os.Stat(full); errors.Is(err, fs.ErrNotExist) {
			hint := dataHints[baseName(f.path)]
			if dataDir == "" {
				hint += " (no --data-dir given and PRIVREC_DATA_DIR is not set, so the path is relative to the working directory)"
			}
			return &MissingDataError{Path: full, Dataset: f.dataset, Hint: strings.ReplaceAll(hint, "DATA-DIR", dataDirOr(dataDir))}
		} else if err != nil {
			return fmt.Errorf("dataset %s: %w", f.dataset, err)
		}
	}
	return nil
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

func dataDirOr(d string) string {
	if d == "" {
		return "."
	}
	return d
}

var reproductions = map[string]*Reproduction{}

func addRepro(r *Reproduction) { reproductions[r.Name] = r }

// Reproductions lists the named reproductions, sorted by name.
func Reproductions() []*Reproduction {
	out := make([]*Reproduction, 0, len(reproductions))
	for _, r := range reproductions {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupReproduction finds a reproduction by name.
func LookupReproduction(name string) (*Reproduction, error) {
	r, ok := reproductions[name]
	if !ok {
		names := make([]string, 0, len(reproductions))
		for _, r := range Reproductions() {
			names = append(names, r.Name)
		}
		return nil, fmt.Errorf("unknown reproduction %q (known: %s)", name, strings.Join(names, ", "))
	}
	return r, nil
}

// pick returns quick or paper.
func pick[T any](paper bool, quick, full T) T {
	if paper {
		return full
	}
	return quick
}

func grid(lo, hi, step float64) []float64 {
	var out []float64
	for x := lo; x <= hi+1e-9; x += step {
		out = append(out, x)
	}
	return out
}
