// Package methods is the registry of training methods. Each method has a
// typed Config (defaults from Method.New, validation, documentation in
// struct tags) and trains an Input — the private ratings plus declared
// public facts — into a release.Release whose public part is covered by its
// Guarantee. The command line binds a Config's fields to flags (package
// main, by their `flag` and `help` tags); the experiment runner and the
// reproductions build Configs directly or from JSON parameters (the same
// names). It is the one place that ties data, solver, mechanism and model
// together.
package methods

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
)

// Env is what every method receives besides its Input and Config: the
// requested budget and the sources of randomness.
type Env struct {
	// Epsilon and Delta are the requested privacy parameters (ignored by
	// non-private methods).
	Epsilon, Delta float64
	// Noise is the random source for the privacy noise: noise.Secure()
	// unless the user asked for a seeded experiment.
	Noise *noise.Source
	// Rand is the source for non-privacy randomness (initialisation,
	// shuffling); seeded from Seed so runs are repeatable.
	Rand *noise.Source
	Seed uint64
	// Workers bounds parallelism (0 = GOMAXPROCS).
	Workers int
	Log     *slog.Logger
	// Progress, when non-nil, is told how far a long run has got.
	Progress func(done, total int)
	// Status, when non-nil, is told after each iteration of a non-private
	// method the quantity its solver tracks (what: "objective" or
	// "change") besides how far it has got. Private methods never call it:
	// a training objective computed on the private data is not noised, so
	// showing it would release it; they call Progress only.
	Status func(done, total int, what string, value float64)
	// NoiseFactor, when set (0 means 1), multiplies the standard deviation
	// (or scale) of every privacy-noise draw the method makes while its
	// Guarantee keeps claiming the requested budget. It exists for the
	// whole-artefact audit alone (`privrec audit --method M --noise-factor
	// 0.5` must be caught); a release made with NoiseFactor ≠ 1 is not
	// private as claimed and is never saved or published.
	NoiseFactor float64
	// SensitivityFactor, when set (0 means 1), makes every release the
	// method makes calibrated for SensitivityFactor times the sensitivity
	// its analysis gives — its mechanism declares F·Δ and adds noise for
	// it — while its Guarantee keeps claiming the requested budget. Like
	// NoiseFactor it exists for the audit alone (`privrec audit --method M
	// --sensitivity-factor 0.5` must be caught: the audit derives the
	// sensitivity from a neighbouring pair instead of trusting the
	// declared one); such a release is never saved or published.
	SensitivityFactor float64
	// Fault, when set, removes one safeguard the method's guarantee rests
	// on while its Guarantee keeps claiming the budget (AuditFault). Like
	// NoiseFactor it exists for the audit alone (`privrec audit --method
	// dp-ease --fault gram-unnormalised` must be caught); such a release is
	// never saved or published.
	Fault AuditFault
	// Tap, when set, is shown every privacy-noise release the method
	// makes, before and after the noise (mechanism.Instrument). It exists
	// for the whole-artefact audit alone, which computes its test
	// statistic on these raw noised releases rather than on their
	// post-processing; a non-nil error aborts the training with it.
	Tap func(mechanism.Draw) error
	// Engine, when set, builds the engine that sums the statistics of
	// the methods whose Method.Engine is true (privrec-beam's pipelines);
	// those methods then do not read Input.Ratings, which may be nil, and
	// release no per-user state. Nil: the in-process sums over
	// Input.Ratings.
	Engine EngineFactory
}

// noiseFactor is Env.NoiseFactor with 0 read as 1.
func (e Env) noiseFactor() float64 {
	if e.NoiseFactor == 0 {
		return 1
	}
	return e.NoiseFactor
}

// instrument is what a private method attaches to every mechanism it
// releases through (mechanism.Laplace.Instrumented and the like) and
// passes to its solver: nil unless an audit set NoiseFactor,
// SensitivityFactor or Tap. Every release is calibrated where its
// mechanism is instrumented, so the sensitivity factor is applied there
// (mechanism.Instrument.SensitivityFactor) for every method at once.
func (e Env) instrument() *mechanism.Instrument {
	if e.noiseFactor() == 1 && (e.SensitivityFactor == 0 || e.SensitivityFactor == 1) && e.Tap == nil {
		return nil
	}
	return &mechanism.Instrument{NoiseFactor: e.noiseFactor(), SensitivityFactor: e.SensitivityFactor, Tap: e.Tap}
}

// iteration reports one finished iteration of a non-private method: to
// Status with the tracked value when it is set, else to Progress.
func (e Env) iteration(done, total int, what string, value float64) {
	switch {
	case e.Status != nil:
		e.Status(done, total, what, value)
	case e.Progress != nil:
		e.Progress(done, total)
	}
}

// Config is a method's typed configuration. Its exported fields carry
// `json` tags (the parameter names of experiment files), `flag` tags (the
// command-line names; the same as the JSON names) and `help` tags.
type Config interface {
	// Validate checks the settings themselves (not the data); it names
	// the offending setting by its flag name.
	Validate() error
	// Train runs the method.
	Train(ctx context.Context, in release.Input, env Env) (*release.Release, error)
}

// Method describes one trainable method.
type Method struct {
	Name    string
	Summary string
	// Seed names the paper the method comes from (e.g. "000"), if any.
	Seed string
	// Private is false for non-private baselines.
	Private bool
	// New returns the method's Config with its defaults.
	New func() Config
	// PerUser is true when the method's Release has per-user state
	// (joint DP): users' rows are kept apart from the public model.
	PerUser bool
	// Needs lists the declared facts the method cannot train without
	// ("scale", "items"), for help texts.
	Needs []string
	// EpsilonFromInput is true when the method's ε is fixed by its input
	// (a `privrec collect` file's header), not by Env.Epsilon.
	EpsilonFromInput bool
	// Engine is true when the method's statistics can be summed by an
	// external engine (Env.Engine; privrec-beam).
	Engine bool
}

// Configure returns the method's default Config with params applied by
// their JSON names (see SetParam); an unknown or mistyped parameter is an
// error naming it.
func Configure(name string, params map[string]any) (Config, error) {
	m, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if m.New == nil {
		return nil, fmt.Errorf("method %s has no typed configuration yet", name)
	}
	c := m.New()
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := SetParam(c, k, params[k]); err != nil {
			return nil, Named(name, err)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, Named(name, err)
	}
	return c, nil
}

// HasParam reports whether cfg has a parameter of that JSON name.
func HasParam(cfg Config, name string) bool {
	_, ok := paramField(reflect.ValueOf(cfg).Elem(), name)
	return ok
}

// SetParam sets the field of cfg whose JSON name is name. value may be
// of the field's type, a JSON number, or a string as on the command line
// ("0.5", "inf", "true").
func SetParam(cfg Config, name string, value any) error {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config %T is not a pointer to a struct", cfg)
	}
	f, ok := paramField(v.Elem(), name)
	if !ok {
		return fmt.Errorf("unknown parameter %q", name)
	}
	s, isString := value.(string)
	switch f.Kind() {
	case reflect.Float64:
		x, err := paramNumber(name, value)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	case reflect.Int, reflect.Int64, reflect.Uint64:
		if u, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64); isString && err == nil && f.Kind() == reflect.Uint64 {
			f.SetUint(u) // exact beyond 2⁵³ (seeds)
			return nil
		}
		x, err := paramNumber(name, value)
		if err != nil {
			return err
		}
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 || (f.Kind() == reflect.Uint64 && x < 0) {
			return fmt.Errorf("parameter %s: %v is not a whole number in range", name, x)
		}
		if f.Kind() == reflect.Uint64 {
			f.SetUint(uint64(x))
		} else {
			f.SetInt(int64(x))
		}
	case reflect.Bool:
		switch x := value.(type) {
		case bool:
			f.SetBool(x)
		case string:
			b, err := strconv.ParseBool(x)
			if err != nil {
				return fmt.Errorf("parameter %s: %q is not true or false", name, x)
			}
			f.SetBool(b)
		default:
			return fmt.Errorf("parameter %s: want true or false, got %T", name, value)
		}
	case reflect.String:
		if !isString {
			return fmt.Errorf("parameter %s: want a string, got %T", name, value)
		}
		f.SetString(s)
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.Float64 {
			return fmt.Errorf("parameter %s has an unsupported type", name)
		}
		var out []float64
		switch x := value.(type) {
		case []float64:
			out = x
		case float64: // one number is a list of one
			out = []float64{x}
		case int:
			out = []float64{float64(x)}
		case []any:
			for _, e := range x {
				y, ok := e.(float64)
				if !ok {
					return fmt.Errorf("parameter %s: want numbers", name)
				}
				out = append(out, y)
			}
		case string:
			for _, part := range strings.Split(x, ",") {
				y, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
				if err != nil {
					return fmt.Errorf("parameter %s: %q is not a number", name, part)
				}
				out = append(out, y)
			}
		default:
			return fmt.Errorf("parameter %s: want a list of numbers, got %T", name, value)
		}
		f.Set(reflect.ValueOf(out))
	default:
		return fmt.Errorf("parameter %s has an unsupported type", name)
	}
	return nil
}

// paramNumber reads a parameter value given as a number or as a string
// written as on the command line ("0.5", "inf", "1e-6").
func paramNumber(name string, value any) (float64, error) {
	switch x := value.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case string:
		y, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("parameter %s: %q is not a number", name, x)
		}
		return y, nil
	}
	return 0, fmt.Errorf("parameter %s: want a number, got %T", name, value)
}

// paramField finds the settable field with JSON name name (embedded
// structs included).
func paramField(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if fv, ok := paramField(v.Field(i), name); ok {
				return fv, true
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// Train validates cfg, trains, marks a release made with reproducible
// noise as such, and checks the release is well formed.
func Train(ctx context.Context, name string, cfg Config, in release.Input, env Env) (*release.Release, error) {
	if err := cfg.Validate(); err != nil {
		return nil, Named(name, err)
	}
	if env.Engine != nil {
		if m, err := Lookup(name); err != nil || !m.Engine {
			return nil, fmt.Errorf("%s: its statistics cannot be summed by an external engine", name)
		}
	} else if in.Ratings == nil || in.Ratings.Len() == 0 {
		return nil, fmt.Errorf("%s: no training ratings", name)
	}
	if f := env.NoiseFactor; math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return nil, fmt.Errorf("%s: noise factor %v must be positive and finite (0 means 1)", name, f)
	}
	if f := env.SensitivityFactor; math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return nil, fmt.Errorf("%s: sensitivity factor %v must be positive and finite (0 means 1)", name, f)
	}
	if err := env.Fault.check(name); err != nil {
		return nil, err
	}
	if env.Noise == nil {
		env.Noise = noise.Secure()
	}
	if env.Rand == nil {
		env.Rand = noise.Seeded(env.Seed)
	}
	r, err := cfg.Train(ctx, in, env)
	if err != nil {
		return nil, Named(name, err)
	}
	if m, ok := registry[name]; env.Noise.Reproducible() && (!ok || m.Private) {
		// Only a private method draws noise; a non-private model carries
		// no warning about a stream it never used.
		r.Guarantee.Reproducible = true
	}
	if m := r.Model(); m != nil {
		m.Guarantee = r.Guarantee
	}
	if err := r.Validate(); err != nil {
		return nil, Named(name, err)
	}
	return r, nil
}

var registry = map[string]*Method{}

// Register adds a method; it panics on a duplicate name (a programming error
// caught by any test that imports the registering packages).
func Register(m *Method) {
	if _, dup := registry[m.Name]; dup {
		panic("methods: duplicate method " + m.Name)
	}
	if m.New == nil {
		panic("methods: method " + m.Name + " has no Config (New)")
	}
	registry[m.Name] = m
}

// Lookup finds a method by name.
func Lookup(name string) (*Method, error) {
	m, ok := registry[name]
	if !ok {
		names := Names()
		if near := Nearest(name, names); len(near) > 0 {
			return nil, fmt.Errorf("unknown method %q: did you mean %s? (known: %v)", name, strings.Join(near, " or "), names)
		}
		return nil, fmt.Errorf("unknown method %q (known: %v)", name, names)
	}
	return m, nil
}

// Nearest returns the names closest to name by edit distance (insertions,
// deletions, substitutions, case ignored), if any is within a third of
// name's length (at least 1, at most 3 edits): the suggestions for a
// mistyped name, in the order of names.
func Nearest(name string, names []string) []string {
	a := []rune(strings.ToLower(name))
	limit := min(3, max(1, len(a)/3))
	best := limit + 1
	var out []string
	for _, n := range names {
		d := editDistance(a, []rune(strings.ToLower(n)))
		switch {
		case d < best:
			best, out = d, []string{n}
		case d == best:
			out = append(out, n)
		}
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b []rune) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Names lists the registered methods in order.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// All returns the registered methods sorted by name.
func All() []*Method {
	out := make([]*Method, 0, len(registry))
	for _, n := range Names() {
		out = append(out, registry[n])
	}
	return slices.Clip(out)
}

// Named prefixes err with the method's name, unless its message already
// starts with that name (so no message reads "dpals: dpals needs …").
func Named(name string, err error) error {
	if msg := err.Error(); strings.HasPrefix(msg, name+" ") || strings.HasPrefix(msg, name+":") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}
