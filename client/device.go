package client

// The device side: every call into package ldp that a client makes is in
// this file (randomizing a report, checking the server's ε claims), so
// that changes to ldp are adapted here only.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service/api"
)

// Ratings are one user's own ratings: item ID → rating on the declared
// scale. They never leave the device in local mode.
type Ratings map[string]float64

func randomizer(cfg *api.Config) (ldp.Randomizer, error) {
	m, err := ldp.ParseMechanism(cfg.Mechanism)
	if err != nil {
		return nil, err
	}
	return ldp.New(m, cfg.CellEpsilon, declaredScale(cfg))
}

func declaredScale(cfg *api.Config) ldp.Scale {
	return ldp.Scale{Min: cfg.Scale.Min, Max: cfg.Scale.Max, Levels: cfg.Scale.Levels}
}

// meanReporter is the configuration's mean report (nil when it takes none).
func meanReporter(cfg *api.Config) (*ldp.MeanReporter, error) {
	if cfg.MeanEpsilon == 0 {
		return nil, nil
	}
	return ldp.NewMeanReporter(cfg.MeanEpsilon, declaredScale(cfg))
}

// CheckConfig verifies, with the device's own code, what the server's
// configuration claims: in local mode that one report over the whole
// catalogue with the published per-item ε, together with the mean report
// at the published mean_epsilon (basic composition, ldp.Guarantees), is at
// most report_epsilon-DP for the user, and that the report's ε fits the
// budget. A client must not
// randomize under a configuration that fails: a server could otherwise
// publish a small ε and ask for noise that protects less.
func CheckConfig(cfg *api.Config) error {
	if len(cfg.Items) == 0 {
		return fmt.Errorf("client: the configuration lists no catalogue items")
	}
	switch cfg.Mode {
	case api.ModeLocal:
		r, err := randomizer(cfg)
		if err != nil {
			return fmt.Errorf("client: the configuration's mechanism: %w", err)
		}
		if !(cfg.MeanEpsilon >= 0) {
			return fmt.Errorf("client: the configuration's mean_epsilon = %g is not an ε ≥ 0", cfg.MeanEpsilon)
		}
		if _, err := meanReporter(cfg); err != nil {
			return fmt.Errorf("client: the configuration's mean report: %w", err)
		}
		_, g, err := ldp.Guarantees(r, len(cfg.Items), cfg.MeanEpsilon)
		if err != nil {
			return fmt.Errorf("client: composing the report's guarantee: %w", err)
		}
		if !(g.Epsilon <= cfg.ReportEpsilon*(1+1e-9)) {
			mean := ""
			if cfg.MeanEpsilon > 0 {
				mean = fmt.Sprintf(" with the mean report at ε = %g", cfg.MeanEpsilon)
			}
			return fmt.Errorf("client: the server claims ε = %g per report, but %s at per-item ε = %g over %d items%s is ε = %g-DP: refusing to randomize",
				cfg.ReportEpsilon, cfg.Mechanism, cfg.CellEpsilon, len(cfg.Items), mean, g.Epsilon)
		}
		if !(cfg.ReportEpsilon <= cfg.Budget) {
			return fmt.Errorf("client: the per-report ε = %g exceeds the budget %g", cfg.ReportEpsilon, cfg.Budget)
		}
		if r.Units() != cfg.Units {
			return fmt.Errorf("client: the configuration says units %q, the mechanism reports %q", cfg.Units, r.Units())
		}
	case api.ModeCentral:
	default:
		return fmt.Errorf("client: unknown collection mode %q", cfg.Mode)
	}
	return nil
}

// NewReportID returns a fresh random report ID (128 bits).
func NewReportID() string {
	var b [16]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "r-" + hex.EncodeToString(b[:])
}

// Device randomizes reports under one collection configuration, checked
// once (CheckConfig); it is safe for concurrent use.
type Device struct {
	cfg   *api.Config
	rnd   ldp.Randomizer    // nil in central mode
	mean  *ldp.MeanReporter // nil without a mean report
	index map[string]int
}

// NewDevice checks the configuration and prepares the randomizer.
func NewDevice(cfg *api.Config) (*Device, error) {
	if err := CheckConfig(cfg); err != nil {
		return nil, err
	}
	d := &Device{cfg: cfg, index: make(map[string]int, len(cfg.Items))}
	for j, it := range cfg.Items {
		d.index[it.ID] = j
	}
	if cfg.Mode == api.ModeLocal {
		r, err := randomizer(cfg)
		if err != nil {
			return nil, err
		}
		d.rnd = r
		if d.mean, err = meanReporter(cfg); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Randomize builds the report the device sends (see the package function
// Randomize).
func (d *Device) Randomize(r Ratings, src *noise.Source, id string) (api.Report, int, error) {
	cfg := d.cfg
	n := len(cfg.Items)
	in := make([]float64, n)
	for j := range in {
		in[j] = ldp.Missing
	}
	outside := 0
	for item, v := range r {
		j, ok := d.index[item]
		if !ok {
			outside++
			continue
		}
		if math.IsNaN(v) || v < cfg.Scale.Min || v > cfg.Scale.Max {
			return api.Report{}, 0, fmt.Errorf("client: rating %g of item %q is outside the scale [%g, %g]", v, item, cfg.Scale.Min, cfg.Scale.Max)
		}
		in[j] = v
	}
	rep := api.Report{ID: id, Values: make([]*float64, n)}
	vals := make([]float64, n) // backing store of the present values
	if d.rnd != nil {
		if err := d.rnd.Randomize(src, in, vals); err != nil {
			return api.Report{}, 0, fmt.Errorf("client: randomizing: %w", err)
		}
		rep.Epsilon = cfg.ReportEpsilon
		if d.mean != nil {
			// Her mean rating, from the same vector, drawn after the
			// cells from the same noise source.
			m, err := d.mean.Report(src, in)
			if err != nil {
				return api.Report{}, 0, fmt.Errorf("client: the mean report: %w", err)
			}
			rep.Mean = &m
		}
	} else {
		copy(vals, in)
	}
	for j := range vals {
		if !ldp.IsMissing(vals[j]) {
			rep.Values[j] = &vals[j]
		}
	}
	if e := api.CheckReport(cfg, rep); e != nil {
		return api.Report{}, 0, fmt.Errorf("client: the report fails the server's checks: %w", e)
	}
	return rep, outside, nil
}

// Randomize builds the report the device sends: in local mode, the
// user's vector over the whole catalogue (a missing rating is a cell too)
// randomized with the configuration's mechanism and per-item ε, and, when
// the configuration has a mean_epsilon, her mean rating with Laplace noise
// at that ε (the mean report), noise from src (noise.Secure(): fresh
// crypto/rand); in central mode, her ratings as
// they are. Ratings of items outside the catalogue are not reported
// (their count is returned); a rating off the scale is an error.
func Randomize(cfg *api.Config, r Ratings, src *noise.Source, id string) (api.Report, int, error) {
	d, err := NewDevice(cfg)
	if err != nil {
		return api.Report{}, 0, err
	}
	return d.Randomize(r, src, id)
}

// ReadRatings reads one user's ratings: one "item rating" pair per line
// (separated by a tab, a comma or spaces), or "user item rating" lines of
// a single user; blank lines and lines starting with # are skipped, and a
// first line whose rating is not a number is taken as a header.
func ReadRatings(r io.Reader, name string) (Ratings, error) {
	out := Ratings{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line, user := 0, ""
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.FieldsFunc(t, func(c rune) bool { return c == '\t' || c == ',' || c == ' ' })
		if len(f) != 2 && len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"item rating\" or \"user item rating\", got %d fields", name, line, len(f))
		}
		if len(f) == 3 {
			if user != "" && f[0] != user {
				return nil, fmt.Errorf("%s:%d: user %q after %q: a ratings file holds one user's ratings", name, line, f[0], user)
			}
			user, f = f[0], f[1:]
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			if len(out) == 0 && line == 1 {
				continue // a header line
			}
			return nil, fmt.Errorf("%s:%d: rating %q is not a finite number", name, line, f[1])
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("%s:%d: item %q rated twice", name, line, f[0])
		}
		out[f[0]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// LoadRatings reads a ratings file (ReadRatings).
func LoadRatings(path string) (Ratings, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading ratings: %w", err)
	}
	defer f.Close()
	return ReadRatings(f, path)
}

// Items returns the rated item IDs in order, and their ratings.
func (r Ratings) Items() ([]string, []float64) {
	ids := make([]string, 0, len(r))
	for id := range r {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	vals := make([]float64, len(ids))
	for k, id := range ids {
		vals[k] = r[id]
	}
	return ids, vals
}
