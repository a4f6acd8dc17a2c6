// Package experiment runs privacy–accuracy sweeps: datasets × methods × ε
// grid × runs (× one swept parameter), in parallel, writing every finished
// run to results.csv at once so an interrupted sweep resumes where it
// stopped; then summarises the runs (summary.csv), draws the figures
// (package plots) and writes report.md beside the source papers' claims.
// It also holds the named reproductions of the papers' figures.
package experiment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Config is a sweep. It is read from JSON (see docs/EXPERIMENTS.md).
type Config struct {
	// Name identifies the sweep; it is part of every run's seed.
	Name string `json:"name"`
	// Title heads the report.
	Title string `json:"title,omitempty"`
	// Description is a paragraph for the report (setup, what the paper did).
	Description string       `json:"description,omitempty"`
	Datasets    []DataSpec   `json:"datasets"`
	Methods     []MethodSpec `json:"methods"`
	// Epsilons is the ε grid for private methods; non-private methods run
	// once per dataset, sweep value and run.
	Epsilons []float64 `json:"epsilons"`
	// Delta is passed to every method (default 1e-6).
	Delta float64 `json:"delta,omitempty"`
	// Runs is the number of repetitions per cell (default 1).
	Runs int `json:"runs,omitempty"`
	// Sweep, when set, is a further parameter swept over its Values.
	Sweep *Sweep `json:"sweep,omitempty"`
	// Metric is what the figures plot: rmse, mae, accuracy or are.
	Metric string `json:"metric"`
	// K > 0 adds top-k metrics to every evaluation.
	K int `json:"k,omitempty"`
	// Protocol is "ratings" (default: held-out ratings of known users) or
	// "users" (strong generalisation: every dataset holds out users, each
	// scored from her history; recall_at_k and ndcg_at_k are then
	// Recall@k and NDCG@k of metrics.HeldOut). See docs/EXPERIMENTS.md.
	Protocol string `json:"protocol,omitempty"`
	// Evaluate, with protocol "users", picks the held-out users scored:
	// "test" (default) or "validation" (for choosing settings).
	Evaluate string `json:"evaluate,omitempty"`
	// LogY puts the metric axis on a log scale (as the paper did). ε axes
	// are always on a log₂ scale; LogX is read for old configs and has no
	// effect.
	LogX bool `json:"log_x,omitempty"`
	LogY bool `json:"log_y,omitempty"`
	// Claims are the source paper's statements about this figure, quoted
	// in the report beside our numbers.
	Claims []string `json:"claims,omitempty"`
	// Paper cites the source (authors, title, figure).
	Paper string `json:"paper,omitempty"`
}

// DataSpec says where a dataset comes from and how it is split.
type DataSpec struct {
	// Name labels the dataset in results and figures.
	Name string `json:"name"`
	// Source is "file" or the name of a registered generator (see
	// RegisterGenerator; e.g. "onebit-synthetic").
	Source string `json:"source"`
	// Path and Format name a ratings file (Source "file"); Test, when set,
	// is a canonical test file, otherwise Holdout of the ratings are held
	// out at random per run. Column picks the uci-rc column.
	Path    string  `json:"path,omitempty"`
	Test    string  `json:"test,omitempty"`
	Format  string  `json:"format,omitempty"`
	Column  string  `json:"column,omitempty"`
	Holdout float64 `json:"holdout,omitempty"`
	// Scale is the dataset's public rating scale [min, max] (MovieLens
	// [1, 5], Jester [−10, 10], UCI RC [0, 2]): a declared fact, given to
	// every method as release.Input.Declared.Scale and used by local-DP
	// collection. Synthetic generators know theirs; set it to override.
	Scale []float64 `json:"scale,omitempty"`
	// TopItems > 0 keeps the most-rated items (before splitting);
	// CapPerUser > 0 keeps at most that many training ratings per user.
	TopItems   int `json:"top_items,omitempty"`
	CapPerUser int `json:"cap_per_user,omitempty"`
	// Rescale, when set to [lo, hi], maps the declared Scale linearly onto
	// it (seed 001 rescales Jester from [−10, 10] to [0, 5]); the declared
	// scale is then [lo, hi].
	Rescale []float64 `json:"rescale,omitempty"`
	// HoldoutUsers = [VAL, TEST] (protocol "users", source file): the
	// validation and test users held out per run; Positive (ratings ≥ it
	// are interactions; 0: every rating), MinPositives (users with fewer
	// interactions are dropped; default 5) and TargetFrac (each held-out
	// user's share of targets; default 0.2) shape the split. Items, when
	// set, is the declared catalogue file (relative to the data directory).
	HoldoutUsers []int   `json:"holdout_users,omitempty"`
	Positive     float64 `json:"positive,omitempty"`
	MinPositives int     `json:"min_positives,omitempty"`
	TargetFrac   float64 `json:"target_frac,omitempty"`
	Items        string  `json:"items,omitempty"`
	// Params are generator parameters (sizes, observation ratio, …).
	Params map[string]float64 `json:"params,omitempty"`
	// Strings are generator options that are not numbers (e.g. link).
	Strings map[string]string `json:"strings,omitempty"`
	// MethodParams are method parameters (JSON names, as in MethodSpec.Params)
	// given to every method whose Config has them when it runs on this
	// dataset (e.g. the link that generated synthetic data, or a
	// binarisation threshold); a method spec's own Params win.
	MethodParams map[string]any `json:"method_params,omitempty"`
}

// MethodSpec is one line of the figures: a registered method with its
// parameters.
type MethodSpec struct {
	// Method is the registered name (privrec train --method).
	Method string `json:"method"`
	// Label names the line (default Method); labels must be unique.
	Label string `json:"label,omitempty"`
	// Params set fields of the method's typed Config by their JSON names
	// (the flag names with '-' → '_'): numbers, true/false, or strings as
	// on the command line ("inf", "probit", "2/(t+1)").
	Params map[string]any `json:"params,omitempty"`
	// Epsilons, when set, replaces the sweep's ε grid for this method.
	Epsilons []float64 `json:"epsilons,omitempty"`
	// Datasets, when set, restricts the method to the named datasets.
	Datasets []string `json:"datasets,omitempty"`
	// Runs, when set (at most the config's runs), runs the method on the
	// first Runs splits only: for a method too slow to repeat on every
	// split (the report's n column shows how many runs a cell has).
	Runs int `json:"runs,omitempty"`
	// Collect, when set to a local-DP mechanism ("laplace" or "rr"),
	// first randomizes the training ratings at the run's ε exactly as
	// users' devices would (privrec collect), over the declared catalogue
	// and on the dataset's declared scale, and trains on what the service
	// would receive (the collected file is the method's Input.Source).
	Collect string `json:"collect,omitempty"`
}

// runsOn says whether the method runs on dataset name.
func (m MethodSpec) runsOn(name string) bool {
	if len(m.Datasets) == 0 {
		return true
	}
	for _, d := range m.Datasets {
		if d == name {
			return true
		}
	}
	return false
}

// Sweep is a further swept parameter.
type Sweep struct {
	// Name of the parameter: a generator parameter (Target "data") or a
	// method parameter by its JSON name (Target "param"), set in every
	// method whose Config has it.
	Name   string    `json:"name"`
	Target string    `json:"target"`
	Values []float64 `json:"values"`
	// Label for figure axes (default Name).
	Label string `json:"label,omitempty"`
}

// LabelOf returns the method spec's label.
func (m MethodSpec) LabelOf() string {
	if m.Label != "" {
		return m.Label
	}
	return m.Method
}

// Metrics are the metric names a config may plot.
var Metrics = []string{"rmse", "mae", "accuracy", "are", "precision_at_k", "recall_at_k", "ndcg_at_k"}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)

// LoadConfig reads a JSON config; unknown fields are errors (a typo must
// not silently change a sweep).
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading experiment config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes and validates a JSON config.
func ParseConfig(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		if msg := err.Error(); strings.Contains(msg, `"flags"`) || strings.Contains(msg, `"method_flags"`) {
			return nil, fmt.Errorf("decoding config: %w (method settings are now \"params\" and \"method_params\", by JSON name: the flag name with '-' → '_')", err)
		}
		return nil, fmt.Errorf("decoding config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the config and fills defaults (Runs 1, Delta 1e-6).
func (c *Config) Validate() error {
	if err := c.validateHeader(); err != nil {
		return err
	}
	if err := c.validateProtocol(); err != nil {
		return err
	}
	if err := checkEps("epsilons", c.Epsilons); err != nil {
		return err
	}
	datasets := map[string]bool{}
	for _, d := range c.Datasets {
		if err := c.validateDataset(d, datasets); err != nil {
			return err
		}
	}
	labels := map[string]bool{}
	for _, m := range c.Methods {
		if err := c.validateMethod(m, datasets, labels); err != nil {
			return err
		}
	}
	return c.Sweep.validate()
}

// validateHeader checks the name, runs, δ, metric and that there are
// datasets and methods, filling the defaults of runs and δ.
func (c *Config) validateHeader() error {
	if !nameRE.MatchString(c.Name) {
		return fmt.Errorf("config name %q: use letters, digits, '.', '_', '+', '-'", c.Name)
	}
	if c.Runs == 0 {
		c.Runs = 1
	}
	if c.Runs < 0 {
		return fmt.Errorf("runs must be positive, got %d", c.Runs)
	}
	if c.Delta == 0 {
		c.Delta = 1e-6
	}
	if !(c.Delta > 0 && c.Delta < 1) {
		return fmt.Errorf("delta must be in (0, 1), got %g", c.Delta)
	}
	if len(c.Datasets) == 0 {
		return fmt.Errorf("no datasets")
	}
	if len(c.Methods) == 0 {
		return fmt.Errorf("no methods")
	}
	if !slices.Contains(Metrics, c.Metric) {
		return fmt.Errorf("metric %q: want one of %s", c.Metric, strings.Join(Metrics, ", "))
	}
	return nil
}

// validateProtocol checks the protocol and the settings that go with it.
func (c *Config) validateProtocol() error {
	switch c.Protocol {
	case "", "ratings":
		if c.Evaluate != "" {
			return fmt.Errorf("evaluate %q belongs to protocol users", c.Evaluate)
		}
	case "users":
		if c.Metric != "recall_at_k" && c.Metric != "ndcg_at_k" {
			return fmt.Errorf("protocol users: metric %q: want recall_at_k or ndcg_at_k", c.Metric)
		}
		if c.K <= 0 {
			return fmt.Errorf("protocol users: set k > 0, the cut-off of Recall@k and NDCG@k")
		}
		if c.Evaluate != "" && c.Evaluate != "test" && c.Evaluate != "validation" {
			return fmt.Errorf("evaluate %q: want test or validation", c.Evaluate)
		}
	default:
		return fmt.Errorf("protocol %q: want ratings or users", c.Protocol)
	}
	return nil
}

// checkEps checks that every ε of a grid is positive and finite.
func checkEps(where string, es []float64) error {
	for _, e := range es {
		if !(e > 0) || math.IsInf(e, 0) {
			return fmt.Errorf("%s: ε must be positive and finite, got %g", where, e)
		}
	}
	return nil
}

// validateDataset checks one dataset entry and records its name in seen
// (a name listed twice is an error).
func (c *Config) validateDataset(d DataSpec, seen map[string]bool) error {
	if !nameRE.MatchString(d.Name) {
		return fmt.Errorf("dataset name %q: use letters, digits, '.', '_', '+', '-'", d.Name)
	}
	if seen[d.Name] {
		return fmt.Errorf("dataset %q listed twice", d.Name)
	}
	seen[d.Name] = true
	if err := c.validateSource(d); err != nil {
		return err
	}
	if err := checkRange(d.Scale); err != nil {
		return fmt.Errorf("dataset %q: scale: %w", d.Name, err)
	}
	if d.Rescale != nil {
		if err := checkRange(d.Rescale); err != nil {
			return fmt.Errorf("dataset %q: rescale: %w", d.Name, err)
		}
		if d.Source != "file" || d.Scale == nil {
			return fmt.Errorf("dataset %q: rescale maps a file's declared scale: give source file and \"scale\"", d.Name)
		}
	}
	if err := checkParams(d.MethodParams); err != nil {
		return fmt.Errorf("dataset %q: method_params: %w", d.Name, err)
	}
	return nil
}

// validateSource checks a dataset's source and its split against the
// protocol: held-out users, a file with a test file or a holdout
// fraction, or a generator.
func (c *Config) validateSource(d DataSpec) error {
	users := c.Protocol == "users"
	if users != (d.HoldoutUsers != nil) {
		return fmt.Errorf("dataset %q: holdout_users [VAL, TEST] and \"protocol\": \"users\" go together", d.Name)
	}
	switch {
	case users:
		if d.Source != "file" || d.Path == "" || d.Test != "" || d.Holdout != 0 || d.TopItems != 0 || d.CapPerUser != 0 || d.Rescale != nil {
			return fmt.Errorf("dataset %q: protocol users needs source file with a path, and no test, holdout, top_items, cap_per_user or rescale", d.Name)
		}
		if len(d.HoldoutUsers) != 2 || d.HoldoutUsers[0] < 0 || d.HoldoutUsers[1] < 1 {
			return fmt.Errorf("dataset %q: holdout_users must be [VAL, TEST] with VAL ≥ 0 and TEST ≥ 1, got %v", d.Name, d.HoldoutUsers)
		}
		if d.MinPositives < 0 || d.MinPositives == 1 || d.TargetFrac < 0 || d.TargetFrac >= 1 || math.IsNaN(d.Positive) || math.IsInf(d.Positive, 0) {
			return fmt.Errorf("dataset %q: want min_positives ≥ 2 (0: 5), target_frac in (0, 1) (0: 0.2) and a finite positive", d.Name)
		}
	case d.Source == "file":
		if d.Path == "" {
			return fmt.Errorf("dataset %q: source file needs a path", d.Name)
		}
		if d.Test == "" && !(d.Holdout > 0 && d.Holdout < 1) {
			return fmt.Errorf("dataset %q: give a test file or a holdout fraction in (0, 1)", d.Name)
		}
	case d.Source == "":
		return fmt.Errorf("dataset %q: source is required (file or a generator: %s)", d.Name, strings.Join(Generators(), ", "))
	}
	return nil
}

// validateMethod checks one method entry against the config's runs and
// the datasets' names, and records its label in labels (a label listed
// twice is an error).
func (c *Config) validateMethod(m MethodSpec, datasets, labels map[string]bool) error {
	l := m.LabelOf()
	if m.Method == "" {
		return fmt.Errorf("a method entry has no method name")
	}
	if strings.ContainsAny(l, "|\n") {
		return fmt.Errorf("method label %q may not contain '|' or a newline", l)
	}
	if labels[l] {
		return fmt.Errorf("method label %q listed twice; give each a distinct label", l)
	}
	labels[l] = true
	if err := checkEps("method "+l, m.Epsilons); err != nil {
		return err
	}
	if m.Runs < 0 || m.Runs > c.Runs {
		return fmt.Errorf("method %s: runs %d: want 0 (every run) up to the config's %d", l, m.Runs, c.Runs)
	}
	if err := checkParams(m.Params); err != nil {
		return fmt.Errorf("method %s: params: %w", l, err)
	}
	if m.Collect != "" && m.Collect != "laplace" && m.Collect != "rr" {
		return fmt.Errorf("method %s: collect %q: want laplace or rr", l, m.Collect)
	}
	for _, d := range m.Datasets {
		if !datasets[d] {
			return fmt.Errorf("method %s: unknown dataset %q", l, d)
		}
	}
	return nil
}

// validate checks a sweep (nil: nothing swept).
func (s *Sweep) validate() error {
	if s == nil {
		return nil
	}
	if s.Name == "" || len(s.Values) == 0 {
		return fmt.Errorf("sweep needs a name and values")
	}
	if s.Target == "flag" {
		return fmt.Errorf("sweep target \"flag\" is now \"param\" (name the parameter by its JSON name, '-' → '_')")
	}
	if s.Target != "data" && s.Target != "param" {
		return fmt.Errorf("sweep target %q: want data or param", s.Target)
	}
	if s.Target == "param" && strings.Contains(s.Name, "-") {
		return fmt.Errorf("sweep: parameter %q: use its JSON name %q", s.Name, strings.ReplaceAll(s.Name, "-", "_"))
	}
	return nil
}

// checkRange checks an optional [lo, hi] pair.
func checkRange(r []float64) error {
	if r == nil {
		return nil
	}
	if len(r) != 2 || math.IsInf(r[0], 0) || math.IsInf(r[1], 0) || !(r[0] < r[1]) {
		return fmt.Errorf("want [lo, hi] with finite lo < hi, got %v", r)
	}
	return nil
}

// checkParams checks parameter names are JSON names and values are
// numbers, booleans, strings or lists of numbers.
func checkParams(p map[string]any) error {
	for _, k := range sortedKeys(p) {
		if strings.Contains(k, "-") {
			return fmt.Errorf("parameter %q: use its JSON name %q ('-' → '_')", k, strings.ReplaceAll(k, "-", "_"))
		}
		switch v := p[k].(type) {
		case float64, int, bool, string, []float64:
		case []any:
			for _, e := range v {
				if _, ok := e.(float64); !ok {
					return fmt.Errorf("parameter %s: a list must hold numbers only", k)
				}
			}
		default:
			return fmt.Errorf("parameter %s: want a number, true/false, a string or a list of numbers, got %T", k, v)
		}
	}
	return nil
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// epsFor is the ε grid of a method.
func (c *Config) epsFor(m MethodSpec) []float64 {
	if len(m.Epsilons) > 0 {
		return m.Epsilons
	}
	return c.Epsilons
}

// sweepValues returns the swept values, or one NaN when nothing is swept.
func (c *Config) sweepValues() []float64 {
	if c.Sweep == nil {
		return []float64{math.NaN()}
	}
	return c.Sweep.Values
}
