package service

// Every call the server makes into package ldp and into the ldp-* training
// methods is in this file, so that changes to those packages (declared
// scale and catalogue, fixed-time samplers, collect header v2) are adapted
// here only. The device side is client/randomize.go.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"reflect"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service/api"
)

// newRandomizer is the device randomizer of a local-mode configuration.
func newRandomizer(mech string, cellEps float64, sc api.Scale) (ldp.Randomizer, error) {
	m, err := ldp.ParseMechanism(mech)
	if err != nil {
		return nil, err
	}
	return ldp.New(m, cellEps, ldp.Scale{Min: sc.Min, Max: sc.Max, Levels: sc.Levels})
}

// localFit is a local-mode collection's per-report parameters.
type localFit struct {
	cellEps float64
	// perRating and perUser compose the n cells with the mean report
	// (ldp.Guarantees); perUser.Epsilon ≤ the per-report ε.
	perRating, perUser privacy.Guarantee
	units              string
	// maxAbs bounds |value| of a laplace report, maxAbsMean |mean| of a
	// mean report (0 without one).
	maxAbs, maxAbsMean float64
}

// localParams fixes the per-cell ε so that one report over the n items of
// the catalogue, with the mean report at meanEps (0: none), is at most
// reportEps-DP for its user (the randomizer's own per-user guarantee over
// the n cells and the mean report's, by basic composition: ldp.Guarantees),
// and returns those guarantees, the report units and the largest |value|
// a laplace report and a mean report can take (each with probability
// 1 − 10⁻²⁶).
func localParams(mech string, reportEps, meanEps float64, n int, sc api.Scale) (localFit, error) {
	var lp localFit
	if meanEps > 0 {
		mr, err := ldp.NewMeanReporter(meanEps, ldp.Scale{Min: sc.Min, Max: sc.Max, Levels: sc.Levels})
		if err != nil {
			return lp, err
		}
		// The mean lies on the scale; |noise| > 60 effective Laplace
		// scales has probability e⁻⁶⁰.
		lp.maxAbsMean = max(math.Abs(sc.Min), math.Abs(sc.Max)) + 60*math.Sqrt(mr.Variance()/2)
	}
	// The randomizer states the ε it realizes (from its realized, rounded
	// probabilities, composed and rounded up), which may exceed n·ε by
	// a few parts in 10¹²: shrink the per-item ε until it fits.
	cellBudget := reportEps - meanEps
	lp.cellEps = cellBudget / float64(n)
	for range 100 {
		r, err := newRandomizer(mech, lp.cellEps, sc)
		if err != nil {
			return lp, err
		}
		if lp.perRating, lp.perUser, err = ldp.Guarantees(r, n, meanEps); err != nil {
			return lp, err
		}
		if lp.perUser.Epsilon <= reportEps {
			lp.units = r.Units()
			if lp.units == "normalised" {
				// The report is a normalised rating in [−1, 1] plus
				// Laplace(2/ε) noise, or pure noise: |noise| > 60·(2/ε)
				// has probability e⁻⁶⁰.
				lp.maxAbs = 1 + 60*2/lp.cellEps
			}
			return lp, nil
		}
		lp.cellEps *= min(cellBudget/(lp.perUser.Epsilon-meanEps), 1-1e-12)
	}
	return lp, fmt.Errorf("cannot fit %d cells into a per-report ε of %g (%g of it for the mean report)", n, reportEps, meanEps)
}

// rrLevels is the number of randomized-response levels of a declared
// scale: given, or hi − lo + 1 for integer ends.
func rrLevels(sc api.Scale) (int, error) {
	if sc.Levels != 0 {
		if sc.Levels < 2 {
			return 0, fmt.Errorf("--levels must be ≥ 2, got %d", sc.Levels)
		}
		return sc.Levels, nil
	}
	if sc.Min == math.Trunc(sc.Min) && sc.Max == math.Trunc(sc.Max) && sc.Max-sc.Min < 1<<16 {
		return int(sc.Max-sc.Min) + 1, nil
	}
	return 0, fmt.Errorf("randomized response needs the number of rating levels: the scale [%g, %g] has non-integer ends, pass --levels d", sc.Min, sc.Max)
}

// writeCollectFile writes the stored reports as a `privrec collect` file
// (header, "#mean \t row \t value" lines and "row \t item \t value"
// lines), which is what the ldp-* methods train on: every report is one row
// (one client's vector over the whole catalogue), so the header's
// population is the number of reports (a report with no present value has
// no data line but counts) and, with a mean report, every report has its
// mean line.
func writeCollectFile(w io.Writer, cfg *api.Config, reps *LocalReports) error {
	r, err := newRandomizer(cfg.Mechanism, cfg.CellEpsilon, cfg.Scale)
	if err != nil {
		return err
	}
	if cfg.MeanEpsilon > 0 && len(reps.Means) != int(reps.N) {
		return fmt.Errorf("%d mean reports for %d reports: with mean_epsilon = %g every report carries one", len(reps.Means), reps.N, cfg.MeanEpsilon)
	}
	if cfg.MeanEpsilon == 0 && len(reps.Means) > 0 {
		return fmt.Errorf("%d mean reports, but the collection declares none (mean_epsilon = 0)", len(reps.Means))
	}
	h := ldp.Header{Mechanism: r.Mechanism(), Epsilon: cfg.CellEpsilon, Units: r.Units(), Scale: r.Scale(),
		Users: int(reps.N), Items: len(cfg.Items), MeanEpsilon: cfg.MeanEpsilon}
	// Header v2 (the ldp branch) records the sampler the devices used;
	// set it when both the field and the method exist, so this file
	// builds before and after that change.
	if sr, ok := r.(interface{ Sampler() string }); ok {
		if f := reflect.ValueOf(&h).Elem().FieldByName("Sampler"); f.IsValid() && f.Kind() == reflect.String {
			f.SetString(sr.Sampler())
		}
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := h.Write(bw, r); err != nil {
		return fmt.Errorf("writing the collect header: %w", err)
	}
	var line []byte
	for _, m := range reps.Means {
		line = ldp.AppendMeanLine(line[:0], m.Row, m.Mean)
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("writing the collect file: %w", err)
		}
	}
	levels := r.Units() == "levels"
	if m := reps.Matrix; m != nil {
		for u := range int32(m.NumUsers()) {
			items, vals := m.UserRow(u)
			name := m.Users.Name(u)
			for k, it := range items {
				line = ldp.AppendReportLine(line[:0], name, m.Items.Name(it), float64(vals[k]), levels)
				if _, err := bw.Write(line); err != nil {
					return fmt.Errorf("writing the collect file: %w", err)
				}
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the collect file: %w", err)
	}
	return nil
}

// trainLocal trains an ldp-* method on the reports (in.Ratings, rows =
// reports; in.Source the collect file written by writeCollectFile). A
// method with a typed Config goes through methods.Train; one still on
// flags (before the ldp conversion lands) through its flag set, params
// given by their JSON names.
func trainLocal(ctx context.Context, name string, params map[string]any, in release.Input, env methods.Env) (*release.Release, error) {
	m, err := methods.Lookup(name)
	if err != nil {
		return nil, err
	}
	if m.New == nil {
		return nil, fmt.Errorf("%s: no typed configuration", name)
	}
	cfg, err := methods.Configure(name, params)
	if err != nil {
		return nil, err
	}
	return methods.Train(ctx, name, cfg, in, env)
}
