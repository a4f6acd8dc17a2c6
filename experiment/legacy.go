package experiment

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/release"
)

// The flag path for methods that have no typed Config yet (Method.New ==
// nil): parameters become command-line flags of the method's flag set.
// Everything in this file goes, with methods.Method.Flags, once every
// method has a typed Config.

// legacySpec is a flag-era method's parameter set.
//
// Deprecated: for methods without a typed Config only.
type legacySpec struct {
	args []string
	fs   *flag.FlagSet
	tr   methods.Trainer
}

// legacyScaleFlags are the flag-era methods' own rating-scale flags, set
// from the declared scale when the spec does not set them (typed Configs
// read Input.Declared.Scale instead).
//
// Deprecated: for methods without a typed Config only.
var legacyScaleFlags = map[string]func(s release.Scale) string{
	"rating-min": func(s release.Scale) string { return fmtF(s.Min) },
	"rating-max": func(s release.Scale) string { return fmtF(s.Max) },
}

// prepareLegacy registers the method's flags and turns the spec's params,
// the dataset's method_params the method has and the swept value into
// arguments, checking that they parse.
//
// Deprecated: for methods without a typed Config only.
func prepareLegacy(reg *methods.Method, m MethodSpec, d DataSpec, s *Sweep, v float64) (*prepared, error) {
	if reg.Flags == nil {
		return nil, fmt.Errorf("method %s has neither a typed Config nor flags", reg.Name)
	}
	fs := flag.NewFlagSet(m.Method, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tr := reg.Flags(fs)
	flagName := func(k string) string { return strings.ReplaceAll(k, "_", "-") }
	var args []string
	for _, k := range sortedKeys(m.Params) {
		args = append(args, "--"+flagName(k)+"="+legacyValue(m.Params[k]))
	}
	for _, k := range sortedKeys(d.MethodParams) {
		if _, own := m.Params[k]; !own && fs.Lookup(flagName(k)) != nil {
			args = append(args, "--"+flagName(k)+"="+legacyValue(d.MethodParams[k]))
		}
	}
	p := &prepared{reg: reg}
	if s != nil && s.Target == "param" && fs.Lookup(flagName(s.Name)) != nil {
		if _, set := m.Params[s.Name]; set {
			return nil, fmt.Errorf("method %s: parameter %s is both set and swept", m.LabelOf(), s.Name)
		}
		args = append(args, "--"+flagName(s.Name)+"="+fmtF(v))
		p.swept = true
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("method %s: parameters %v: %w", m.LabelOf(), args, err)
	}
	p.legacy = &legacySpec{args: args, fs: fs, tr: tr}
	return p, nil
}

// legacyValue writes a parameter value as on the command line.
func legacyValue(x any) string {
	switch v := x.(type) {
	case float64:
		if math.IsInf(v, 1) {
			return "inf"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = legacyValue(e)
		}
		return strings.Join(parts, ",")
	case []float64:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = legacyValue(e)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(x)
}

// trainLegacy trains through the flag-era Trainer: the declared scale goes
// to the method's own scale flags (McSherry–Mironov's --rating-min/max).
//
// Deprecated: for methods without a typed Config only.
func trainLegacy(ctx context.Context, p *prepared, in release.Input, env methods.Env) (*trained, error) {
	l := p.legacy
	set := map[string]bool{}
	l.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var extra []string
	if sc := in.Declared.Scale; sc != nil {
		for _, name := range sortedKeys(legacyScaleFlags) {
			if l.fs.Lookup(name) != nil && !set[name] {
				extra = append(extra, "--"+name+"="+legacyScaleFlags[name](*sc))
			}
		}
	}
	// prepare made this flag set for this run; the extra flags add to it.
	if err := l.fs.Parse(extra); err != nil {
		return nil, fmt.Errorf("%s: flags %v: %w", p.reg.Name, extra, err)
	}
	res, err := l.tr.Train(ctx, in.Ratings, methods.Common{Epsilon: env.Epsilon, Delta: env.Delta, Noise: env.Noise, Rand: env.Rand,
		Seed: env.Seed, DataPath: in.Source, Workers: env.Workers, Log: env.Log, Progress: env.Progress})
	if err != nil {
		return nil, err
	}
	return &trained{model: res.Model, save: res.SaveTo, guarantee: res.Guarantee}, nil
}
