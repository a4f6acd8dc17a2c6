package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/plots"
)

// Issue 39's measurement: the top-N methods across populations, from
// MovieLens-1M's 6 040 users to a Netflix-shaped population of 480 189,
// each population's sweep in its own directory, then one report: a panel
// of Recall@20 against ε per population, a table per population (each
// model's Recall@20 and NDCG@100 over seeds, CPU-seconds and plan) and
// the checks, each stated as met or not with its numbers.

// topNPopulations are the populations of the sweep, smallest first.
var topNPopulations = []string{"topn-ml1m", "topn-jester1", "topn-netflix-50k", "topn-netflix-150k", "topn-netflix-480k"}

// netflixCoreEps is the 480 189-user population's core grid: the full
// grid (six methods × six ε × three seeds) costs more than a shared
// 2-core machine affords in a session.
var netflixCoreEps = []float64{1, 8}

// netflixCoreSpec is the 480 189-user population's core grid: popularity,
// ease, ials, dp-popularity and dp-ease at ε ∈ {1, 8} (same name, split
// and noise seeds as the full grid, so the two share results.csv).
func netflixCoreSpec(paper bool) TopNSpec {
	s := topNSpecs["topn-netflix-480k"](paper)
	s.Methods, s.Epsilons = topNMethods[:5], netflixCoreEps
	return s
}

// populationSpecs are the sweep's specs, each population's full grid
// (the largest one's runs in parts: TopNSpec.Only).
func populationSpecs(paper bool) []TopNSpec {
	var out []TopNSpec
	for _, name := range topNPopulations {
		out = append(out, topNSpecs[name](paper))
	}
	return out
}

// topNPopulation is a population's size after the split, written by
// RunTopN as population.json beside results.csv.
type topNPopulation struct {
	TrainUsers   int    `json:"train_users"`
	Items        int    `json:"items"`
	Interactions int    `json:"train_interactions"`
	Summary      string `json:"summary"`
}

func writeTopNPopulation(out string, d *topNData) error {
	p := topNPopulation{TrainUsers: d.decl.Population, Items: d.decl.Catalogue.Len(), Interactions: d.split.Train.Len(), Summary: d.summary}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding population.json: %w", err)
	}
	return atomicfile.Write(filepath.Join(out, "population.json"), 0o644, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// readTopNPopulation reads dir/population.json (ok false when absent).
func readTopNPopulation(dir string) (p topNPopulation, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "population.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("reading population.json: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, false, fmt.Errorf("%s: %w", filepath.Join(dir, "population.json"), err)
	}
	return p, true, nil
}

// RunTopNPopulations runs the part only of each spec's sweep into
// out/NAME (resuming what is recorded there; each dataset is dropped from
// memory after its sweep; a population that has none of the methods
// asked for is not read), then writes out/report.md and
// out/fig-populations-recall20.png from every population's results.
func RunTopNPopulations(ctx context.Context, specs []TopNSpec, only TopNSubset, dataDir, out string) error {
	if err := only.check(specs...); err != nil {
		return fmt.Errorf("topn-populations: %w", err)
	}
	for _, s := range specs {
		sub, ok := only.within(s)
		if !ok {
			continue
		}
		s.Only = sub
		if err := RunTopN(ctx, s, dataDir, filepath.Join(out, s.Name)); err != nil {
			return err
		}
		forgetCached(resolve(dataDir, s.Path), s.Format, "")
	}
	return writePopulationsReport(out, specs)
}

// WriteTopNPopulationsReport writes out/report.md and the figure from
// the population sweeps recorded under out (out/NAME/results.csv) without
// training anything: a population run elsewhere (the largest on a bigger
// machine, say) or not yet run is reported as it stands.
func WriteTopNPopulationsReport(out string, paper bool) error {
	return writePopulationsReport(out, populationSpecs(paper))
}

// populationResult is one population's recorded sweep.
type populationResult struct {
	spec    TopNSpec
	pop     topNPopulation
	runs    []*topNRun
	ms      []TopNMethod
	private map[string]bool
}

// readPopulation reads the sweep of s in dir (ok false when it has no
// results yet).
func readPopulation(s TopNSpec, dir string) (populationResult, bool, error) {
	s.defaults()
	r := populationResult{spec: s, private: map[string]bool{}}
	pop, ok, err := readTopNPopulation(dir)
	if err != nil || !ok {
		return r, false, err
	}
	r.pop = pop
	if r.runs, err = readTopNResults(filepath.Join(dir, "results.csv"), topNMetricNames(s.Ks)); err != nil {
		return r, false, err
	}
	for _, m := range s.Methods {
		reg, err := methods.Lookup(m.Method)
		if err != nil {
			continue
		}
		r.private[m.label()] = reg.Private
		r.ms = append(r.ms, m)
	}
	return r, len(r.runs) > 0, nil
}

// writePopulationsReport writes report.md and the figure of the
// populations recorded under out.
func writePopulationsReport(out string, specs []TopNSpec) error {
	var pops []populationResult
	var missing []string
	for _, s := range specs {
		p, ok, err := readPopulation(s, filepath.Join(out, s.Name))
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, s.Name)
			continue
		}
		pops = append(pops, p)
	}
	if len(pops) == 0 {
		return fmt.Errorf("no population has results under %s yet", out)
	}
	var b bytes.Buffer
	b.WriteString("## Top-N across populations\n\n")
	if len(missing) > 0 {
		fmt.Fprintf(&b, "Not run yet: %s.\n\n", strings.Join(missing, ", "))
	}
	files, err := populationsFigure(out, pops)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "![Recall@20 vs ε per population](%s)\n\n", filepath.Base(files[0]))
	writeChecks(&b, pops)
	for _, p := range pops {
		writePopulationTable(&b, p)
	}
	fmt.Fprintf(&b, "Written %s.\n", time.Now().UTC().Format(time.RFC3339))
	return atomicfile.Write(filepath.Join(out, "report.md"), 0o644, func(w io.Writer) error {
		_, err := w.Write(b.Bytes())
		return err
	})
}

// populationNames name the populations in the figure.
var populationNames = map[string]string{
	"topn-ml1m": "MovieLens-1M", "topn-jester1": "Jester-1 (≥ 5)", "topn-netflix-50k": "Netflix-shaped, 50 000",
	"topn-netflix-150k": "Netflix-shaped, 150 000", "topn-netflix-480k": "Netflix-shaped, 480 189",
}

// figureMethods are the lines of a population's panel.
var figureMethods = []string{"dp-ease", "dp-ials", "dp-popularity", "ease", "ials", "dp-ease-features"}

// populationsFigure draws one panel per population: Recall@20 on the test
// users against ε.
func populationsFigure(out string, pops []populationResult) ([]string, error) {
	var panels plots.Panels
	for _, p := range pops {
		var ms []TopNMethod
		for _, m := range p.ms {
			if slices.Contains(figureMethods, m.label()) {
				ms = append(ms, m)
			}
		}
		title := fmt.Sprintf("%s: %d training users, %d items", populationNames[p.spec.Name], p.pop.TrainUsers, p.pop.Items)
		if populationNames[p.spec.Name] == "" {
			title = fmt.Sprintf("%s: %d training users, %d items", p.spec.Name, p.pop.TrainUsers, p.pop.Items)
		}
		f := p.spec.recallFigure(title, ms, p.private, p.runs)
		for i, ser := range f.Series { // each method its look in every panel
			f.Series[i].Style = slices.Index(figureMethods, strings.TrimSuffix(ser.Label, " (non-private)")) + 1
		}
		if len(f.Series) > 0 {
			panels.Figures = append(panels.Figures, f)
		}
	}
	if len(panels.Figures) == 0 {
		return nil, errors.New("no population has a Recall@20 to draw")
	}
	return panels.Save(filepath.Join(out, "fig-populations-recall20"))
}

// writePopulationTable writes a population's table: every model's
// Recall@20 and NDCG@100 (mean ± sd over seeds), the first seed's
// training CPU-seconds (run alone) and plan.
func writePopulationTable(b *bytes.Buffer, p populationResult) {
	s := p.spec
	fmt.Fprintf(b, "### %s\n\n%s. Split seed %d; test users; δ = %g; %d noise seed(s) per private cell.\n\n",
		s.Title, p.pop.Summary, s.SplitSeed, s.Delta, s.Seeds)
	b.WriteString("| model | ε | Recall@20 | NDCG@100 | training CPU-s | plan |\n|---|---|---|---|---|---|\n")
	for _, m := range p.ms {
		epss := s.Epsilons
		if !p.private[m.label()] {
			epss = []float64{math.NaN()}
		}
		for _, e := range epss {
			rc, ok := cellOf(p.runs, m.label(), e, "test", "recall@20")
			if !ok {
				continue
			}
			nd, _ := cellOf(p.runs, m.label(), e, "test", "ndcg@100")
			first := firstSeed(p.runs, m.label(), e)
			es := "—"
			if !math.IsNaN(e) {
				es = fmtF(e)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", m.label(), es, rc, nd, cpuText(first.CPUSeconds), planSummary(first.Plan))
		}
	}
	b.WriteString("\n")
	if missing := p.notRun(); len(missing) > 0 {
		fmt.Fprintf(b, "Not run: %s.\n\n", strings.Join(missing, "; "))
	}
}

// notRun names the cells of the grid with no recorded run, by method
// ("ials", "dp-ease at ε = 0.5, 2") and the cells short of their seeds.
func (p populationResult) notRun() []string {
	var out []string
	for _, m := range p.ms {
		if !p.private[m.label()] {
			if _, ok := p.recallMean(m.label(), math.NaN()); !ok {
				out = append(out, m.label())
			}
			continue
		}
		var absent, short []string
		for _, e := range p.spec.Epsilons {
			if _, ok := p.recallMean(m.label(), e); !ok {
				absent = append(absent, fmtF(e))
			} else if note := p.seedsNote(m.label(), e); note != "" {
				short = append(short, fmtF(e)+note)
			}
		}
		switch {
		case len(absent) == len(p.spec.Epsilons):
			out = append(out, m.label())
		case len(absent) > 0:
			out = append(out, fmt.Sprintf("%s at ε = %s", m.label(), strings.Join(absent, ", ")))
		}
		if len(short) > 0 {
			out = append(out, fmt.Sprintf("%s at ε = %s", m.label(), strings.Join(short, ", ")))
		}
	}
	return out
}

// recallMean is the mean test Recall@20 of a cell (ok false when absent).
func (p populationResult) recallMean(label string, eps float64) (float64, bool) {
	c, ok := cellOf(p.runs, label, eps, "test", "recall@20")
	return c.mean, ok
}

// seedsNote names the number of seeds of a cell that has fewer than the
// spec asks for ("" when complete).
func (p populationResult) seedsNote(label string, eps float64) string {
	c, ok := cellOf(p.runs, label, eps, "test", "recall@20")
	if !ok || c.n >= p.spec.Seeds {
		return ""
	}
	return fmt.Sprintf(" (%d of %d seeds)", c.n, p.spec.Seeds)
}

// topNCheck is one of issue 39's must-show checks.
type topNCheck struct {
	what   string
	met    bool
	values string
}

// writeChecks states each check as met or not met, with its numbers.
func writeChecks(b *bytes.Buffer, pops []populationResult) {
	var checks []topNCheck
	for _, p := range pops {
		checks = append(checks, populationChecks(p)...)
	}
	b.WriteString("### Issue 39's checks (test users, Recall@20, means over noise seeds)\n\n| check | met | numbers |\n|---|---|---|\n")
	for _, c := range checks {
		met := "**not met**"
		if c.met {
			met = "met"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", c.what, met, c.values)
	}
	b.WriteString("\n")
}

// populationChecks are the checks of one population: the private top-N
// models (dp-ease, dp-ials) non-decreasing in ε within 0.005 and never
// below dp-popularity at the same ε; the population's own targets.
func populationChecks(p populationResult) []topNCheck {
	var out []topNCheck
	for _, label := range []string{"dp-ease", "dp-ials"} {
		out = append(out, monotoneChecks(p, label)...)
	}
	ease, okE := p.recallMean("ease", math.NaN())
	ratio := func(label string, eps, want, of float64, ofName string) {
		v, ok := p.recallMean(label, eps)
		if !ok || !okE {
			return
		}
		out = append(out, topNCheck{fmt.Sprintf("%s: %s ε = %g ≥ %g × %s", p.spec.Name, label, eps, want, ofName), v >= want*of,
			fmt.Sprintf("%.4f vs %.4f (%.3f ×)%s", v, of, v/of, p.seedsNote(label, eps))})
	}
	atLeast := func(label string, eps, want float64) {
		if v, ok := p.recallMean(label, eps); ok {
			out = append(out, topNCheck{fmt.Sprintf("%s: %s ε = %g ≥ %g", p.spec.Name, label, eps, want), v >= want, fmt.Sprintf("%.4f%s", v, p.seedsNote(label, eps))})
		}
	}
	switch p.spec.Name {
	case "topn-netflix-480k":
		ratio("dp-ease", 1, 0.95, ease, "ease")
		ratio("dp-ease", 8, 0.98, ease, "ease")
		if ials, ok := p.recallMean("ials", math.NaN()); ok && okE {
			out = append(out, topNCheck{p.spec.Name + ": ials ≥ ease", ials >= ease, fmt.Sprintf("%.4f vs %.4f", ials, ease)})
		}
		if r := firstSeed(p.runs, "ials", math.NaN()); !math.IsNaN(r.CPUSeconds) {
			out = append(out, topNCheck{p.spec.Name + ": ials training ≤ 800 CPU-s", r.CPUSeconds <= 800, fmt.Sprintf("%.0f CPU-s", r.CPUSeconds)})
		}
	case "topn-ml1m":
		// The catalogue's genres and years are public here: the
		// recommended private method is dp-ease-features; dp-ease, which
		// reads none, is checked too.
		out = append(out, monotoneChecks(p, "dp-ease-features")...)
		atLeast("dp-ease-features", 1, 0.24)
		atLeast("dp-ease-features", 8, 0.32)
		atLeast("dp-ease", 1, 0.24)
		atLeast("dp-ease", 8, 0.32)
	case "topn-jester1":
		ratio("dp-ease", 1, 0.95, ease, "ease")
	}
	return out
}

// monotoneChecks: label's mean at each ε ≥ its mean at the previous ε −
// 0.005, and ≥ dp-popularity's at the same ε.
func monotoneChecks(p populationResult, label string) []topNCheck {
	var steps, below []string
	var xs []float64
	for _, e := range p.spec.Epsilons {
		v, ok := p.recallMean(label, e)
		if !ok {
			continue
		}
		xs = append(xs, v)
		if len(xs) > 1 && v < xs[len(xs)-2]-0.005 {
			steps = append(steps, fmt.Sprintf("ε = %g: %.4f after %.4f", e, v, xs[len(xs)-2]))
		}
		if dp, ok := p.recallMean("dp-popularity", e); ok && v < dp {
			below = append(below, fmt.Sprintf("ε = %g: %.4f < %.4f", e, v, dp))
		}
	}
	if len(xs) < 2 {
		return nil
	}
	var ms []string
	for _, x := range xs {
		ms = append(ms, fmt.Sprintf("%.4f", x))
	}
	return []topNCheck{
		{fmt.Sprintf("%s: %s non-decreasing in ε within 0.005", p.spec.Name, label), len(steps) == 0, orNone(steps, strings.Join(ms, ", "))},
		{fmt.Sprintf("%s: %s ≥ dp-popularity at every ε", p.spec.Name, label), len(below) == 0, orNone(below, "never below")},
	}
}

func orNone(fails []string, ok string) string {
	if len(fails) == 0 {
		return ok
	}
	return strings.Join(fails, "; ")
}

// addPopulationRepros registers the 480 189-user core grid and the
// populations sweep (after the populations' own reproductions).
func addPopulationRepros() {
	core := topNReproOf("topn-netflix-480k-core", netflixCoreSpec)
	core.Summary = "the 480 189-user Netflix-shaped population's core grid: popularity, ease, ials, dp-popularity and dp-ease at ε ∈ {1, 8} (writes into the same results.csv as topn-netflix-480k)"
	addRepro(core)
	var files []string
	for _, s := range populationSpecs(false) {
		files = append(files, s.Path, s.Items)
	}
	addRepro(&Reproduction{
		Name:    "topn-populations",
		Paper:   "issue 39 (top-N across populations)",
		Summary: "the top-N sweep across populations (MovieLens-1M, Jester-1, Netflix-shaped 50 000, 150 000 and 480 189 users; the largest run in parts, --methods, --epsilons, --seeds): one directory per population, then a panel of Recall@20 vs ε per population, a table per population and issue 39's checks",
		files:   files,
		measure: func(ctx context.Context, paper bool, dataDir, out string, opts MeasureOptions) error {
			return RunTopNPopulations(ctx, populationSpecs(paper), opts.Only, dataDir, out)
		},
		topN: populationSpecs,
	})
}
