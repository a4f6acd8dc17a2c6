package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// Reproduction is a named configuration that reproduces one figure of a
// seed paper, at a quick scale (minutes, fewer runs and ε values) or at
// the paper's scale.
type Reproduction struct {
	Name    string
	Summary string
	Paper   string
	// Scales lists the scales it offers ("quick", "paper").
	build func(paper bool) *Config
}

// Config returns the sweep for a scale ("quick" or "paper").
func (r *Reproduction) Config(scale string) (*Config, error) {
	var paper bool
	switch scale {
	case "quick":
	case "paper":
		paper = true
	default:
		return nil, fmt.Errorf("scale %q: want quick or paper", scale)
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
	for _, d := range r.build(false).Datasets {
		if d.Source != "file" {
			continue
		}
		for _, p := range []string{d.Path, d.Test} {
			if p == "" {
				continue
			}
			full := resolve(dataDir, p)
			if _, err := os.Stat(full); errors.Is(err, fs.ErrNotExist) {
				hint := dataHints[baseName(p)]
				if dataDir == "" {
					hint += " (no --data-dir given and ../shared/data does not exist)"
				}
				return &MissingDataError{Path: full, Dataset: d.Name, Hint: strings.ReplaceAll(hint, "DATA-DIR", dataDirOr(dataDir))}
			} else if err != nil {
				return fmt.Errorf("dataset %s: %w", d.Name, err)
			}
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
		return "the data directory"
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
