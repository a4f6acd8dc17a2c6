package experiment

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/plots"
)

// Cell is the summary of the runs of one dataset × method × sweep value × ε.
type Cell struct {
	Dataset, Method, Label string
	Value, Epsilon         float64 // NaN when not swept / non-private
	// Mean, SD (sample standard deviation) and N per metric.
	Mean, SD map[string]float64
	N        map[string]int
	Seconds  float64 // mean training time
	// The guarantee reported by the method (its numbers from the first
	// run; they are the same for every run of a cell).
	GEpsilon, GDelta, GClaimed float64
	GUnit, GNotion, GStatus    string
	GNote                      string
}

// Summarise groups rows into cells in a stable order (dataset, label in
// config order, value, ε).
func Summarise(c *Config, rows []*Row) []*Cell {
	byKey := map[string]*Cell{}
	vals := map[string]map[string][]float64{}
	var order []string
	for _, r := range rows {
		k := strings.Join([]string{r.Dataset, r.Label, fmtF(r.Value), fmtF(r.Epsilon)}, "|")
		cell := byKey[k]
		if cell == nil {
			cell = &Cell{Dataset: r.Dataset, Method: r.Method, Label: r.Label, Value: r.Value, Epsilon: r.Epsilon,
				Mean: map[string]float64{}, SD: map[string]float64{}, N: map[string]int{},
				GEpsilon: r.GEpsilon, GDelta: r.GDelta, GClaimed: r.GClaimed, GUnit: r.GUnit, GNotion: r.GNotion,
				GStatus: r.GStatus, GNote: r.GNote}
			byKey[k] = cell
			vals[k] = map[string][]float64{}
			order = append(order, k)
		}
		for m, v := range r.Metrics {
			vals[k][m] = append(vals[k][m], v)
		}
		vals[k]["seconds"] = append(vals[k]["seconds"], r.Seconds)
	}
	out := make([]*Cell, 0, len(order))
	for _, k := range order {
		cell := byKey[k]
		for m, xs := range vals[k] {
			mean, sd := meanSD(xs)
			if m == "seconds" {
				cell.Seconds = mean
				continue
			}
			cell.Mean[m], cell.SD[m], cell.N[m] = mean, sd, len(xs)
		}
		out = append(out, cell)
	}
	dsIdx, mIdx := map[string]int{}, map[string]int{}
	for i, d := range c.Datasets {
		dsIdx[d.Name] = i
	}
	for i, m := range c.Methods {
		mIdx[m.LabelOf()] = i
	}
	less := func(a, b float64) bool { // NaN first
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.IsNaN(a) && !math.IsNaN(b)
		}
		return a < b
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Dataset != b.Dataset {
			return dsIdx[a.Dataset] < dsIdx[b.Dataset]
		}
		if a.Label != b.Label {
			return mIdx[a.Label] < mIdx[b.Label]
		}
		if a.Value != b.Value && !(math.IsNaN(a.Value) && math.IsNaN(b.Value)) {
			return less(a.Value, b.Value)
		}
		return less(a.Epsilon, b.Epsilon)
	})
	return out
}

// meanSD returns the mean and the sample standard deviation (NaN for one value).
func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, math.NaN()
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// WriteSummary writes summary.csv: one line per cell and metric.
func WriteSummary(w io.Writer, c *Config, cells []*Cell) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"dataset", "method", "label", "param", "value", "epsilon", "metric", "mean", "sd", "n", "seconds",
		"g_epsilon", "g_delta", "g_unit", "g_notion", "g_status", "g_claimed_epsilon"})
	for _, cell := range cells {
		ms := make([]string, 0, len(cell.Mean))
		for m := range cell.Mean {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		for _, m := range ms {
			cw.Write([]string{cell.Dataset, cell.Method, cell.Label, c.paramName(), fmtF(cell.Value), fmtF(cell.Epsilon), m,
				fmtF(cell.Mean[m]), fmtF(cell.SD[m]), fmt.Sprint(cell.N[m]), fmtF(cell.Seconds),
				fmtF(cell.GEpsilon), fmtF(cell.GDelta), cell.GUnit, cell.GNotion, cell.GStatus, fmtF(cell.GClaimed)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// recordedMetric is the metric of the config copy in dir ("" when there
// is none): the metric the directory's figures and report.md are for.
func recordedMetric(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return ""
	}
	var c struct {
		Metric string `json:"metric"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Metric
}

func writeConfigCopy(c *Config, dir string) error {
	return atomicfile.Write(filepath.Join(dir, "config.json"), 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(c)
	})
}

// WriteOutputs reads dir/results.csv and writes summary.csv, the figures
// (PNG and SVG) and report.md for the runs of config c.
func WriteOutputs(c *Config, dir string) error {
	rows, _, err := ReadResults(filepath.Join(dir, "results.csv"))
	if err != nil {
		return err
	}
	jobs, err := Plan(c)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, j := range jobs {
		want[j.key] = true
	}
	var mine []*Row
	for _, r := range rows {
		if want[r.Key] {
			mine = append(mine, r)
		}
	}
	cells := Summarise(c, mine)
	if err := atomicfile.Write(filepath.Join(dir, "summary.csv"), 0o644, func(w io.Writer) error {
		return WriteSummary(w, c, cells)
	}); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	// A report in another metric than the one the directory's runs were
	// made for (--report-only after changing "metric") gets figures and a
	// report of its own, named after the metric, beside the first ones.
	suffix := ""
	if first := recordedMetric(dir); first != "" && first != c.Metric {
		suffix = "-" + sanitize(c.Metric)
	}
	figs, err := writeFigures(c, cells, dir, suffix)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	writeReport(&buf, c, cells, figs, len(mine), len(jobs))
	if err := atomicfile.Write(filepath.Join(dir, "report"+suffix+".md"), 0o644, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	}); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// metricName is how a metric is called on axes and in tables: in words,
// with the cut-off of the top-k metrics (NDCG@10, not ndcg_at_k).
func (c *Config) metricName(m string) string {
	k := "k"
	if c != nil && c.K > 0 {
		k = strconv.Itoa(c.K)
	}
	switch m {
	case "rmse":
		return "RMSE"
	case "mae":
		return "MAE"
	case "accuracy":
		return "sign accuracy"
	case "are":
		return "ARE = ‖M̂−M‖²_F / ‖M‖²_F"
	case "precision_at_k":
		return "Precision@" + k
	case "recall_at_k":
		return "Recall@" + k
	case "ndcg_at_k":
		return "NDCG@" + k
	}
	return m
}

// higherBetter says which way a metric improves (for legend placement).
func higherBetter(m string) bool {
	return m == "accuracy" || strings.HasSuffix(m, "_at_k")
}

// figure is a written figure for the report.
type figure struct {
	file, caption string
}

// privacyLabel names the unit and notion of the private methods in cells,
// and says when a method's calibration is the paper's rather than a proof.
func privacyLabel(cells []*Cell) string {
	set := map[string]bool{}
	var out []string
	// The ratio of the per-user guarantee to the per-rating ε on the axis,
	// over the cells of each notion: constant for cells alone, varying
	// when a fixed part (a local-DP client's mean report, capped) is
	// composed with them — then its range is printed once.
	lo, hi := map[string]float64{}, map[string]float64{}
	for _, cell := range cells {
		if r := cell.GEpsilon / cell.Epsilon; cell.GUnit == "user" && r > 1.001 && !math.IsInf(r, 0) && !math.IsNaN(r) {
			if v, ok := lo[cell.GNotion]; !ok || r < v {
				lo[cell.GNotion] = r
			}
			hi[cell.GNotion] = math.Max(hi[cell.GNotion], r)
		}
	}
	for _, cell := range cells {
		if cell.GUnit == "" || math.IsNaN(cell.Epsilon) {
			continue
		}
		unit := map[string]string{"entry": "per-rating", "user": "per-user"}[cell.GUnit]
		if unit == "" {
			unit = cell.GUnit
		}
		s := unit + " " + cell.GNotion + " DP"
		if r := cell.GEpsilon / cell.Epsilon; cell.GUnit == "user" && r > 1.001 && !math.IsInf(r, 0) {
			// The ε asked of the method (the x-axis) is per rating; the
			// per-user guarantee composes it over her ratings.
			f := strconv.FormatFloat(r, 'g', 4, 64)
			if a, b := lo[cell.GNotion], hi[cell.GNotion]; b > a*1.0001 {
				// Both ends to the same three digits: "132–149", not
				// "132–148.6".
				f = strconv.FormatFloat(a, 'g', 3, 64) + "–" + strconv.FormatFloat(b, 'g', 3, 64)
			}
			s = fmt.Sprintf("per-user %s DP at %s × the per-rating ε on the axis", cell.GNotion, f)
		}
		switch cell.GStatus {
		case "none":
			s = "paper's " + unit + " calibration, no proven guarantee"
		case "as-claimed":
			s += " (as claimed)"
		}
		if !set[s] {
			set[s] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return "no private method"
	}
	return strings.Join(out, "; ")
}

// epsilonAxis labels an ε axis: per rating when the private methods' ε
// is composed into a larger per-user guarantee (local DP over a
// catalogue), and always on a log₂ scale (ε values double from tick to
// tick, and a linear axis crowds the small ε where accuracy changes).
func epsilonAxis(cells []*Cell) string {
	for _, cell := range cells {
		if r := cell.GEpsilon / cell.Epsilon; cell.GUnit == "user" && r > 1.001 && !math.IsInf(r, 0) {
			return "privacy parameter ε per rating (log₂ scale)"
		}
	}
	return "privacy parameter ε (log₂ scale)"
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// writeFigures draws, for each dataset, the metric against ε (one figure
// per swept value) and, with a swept parameter, the metric against it for
// each private method.
func writeFigures(c *Config, cells []*Cell, dir, suffix string) ([]figure, error) {
	var figs []figure
	for _, d := range c.Datasets {
		for _, v := range c.sweepValues() {
			fig, err := epsFigure(c, cells, d.Name, v, dir, suffix)
			if err != nil {
				return nil, err
			}
			if fig != nil {
				figs = append(figs, *fig)
			}
		}
		if c.Sweep == nil || len(c.Sweep.Values) <= 1 {
			continue
		}
		for _, m := range c.Methods {
			fig, err := sweepFigure(c, cells, d.Name, m, dir)
			if err != nil {
				return nil, err
			}
			if fig != nil {
				figs = append(figs, *fig)
			}
		}
	}
	return figs, nil
}

// sweepLabel names the swept parameter on an axis ("" when nothing is
// swept).
func (c *Config) sweepLabel() string {
	if c.Sweep == nil {
		return ""
	}
	if c.Sweep.Label != "" {
		return c.Sweep.Label
	}
	return c.Sweep.Name
}

// versus titles a plot of the metric against x ("ARE vs x" for ARE).
func (c *Config) versus(x string) string {
	if c.Metric == "are" {
		return "ARE vs " + x
	}
	return c.metricName(c.Metric) + " vs " + x
}

// addPoint adds the cell's mean and SD of metric at x to s.
func addPoint(s *plots.Series, x float64, cell *Cell, mean float64, metric string) {
	s.X = append(s.X, x)
	s.Mean = append(s.Mean, mean)
	s.SD = append(s.SD, cell.SD[metric])
}

// saveFigure writes f as dir/base and returns it for the report.
func saveFigure(f plots.Figure, dir, base, caption string) (*figure, error) {
	if _, err := f.Save(filepath.Join(dir, base)); err != nil {
		return nil, err
	}
	return &figure{file: base, caption: caption}, nil
}

// epsFigure draws the metric against ε on dataset at swept value v (NaN:
// nothing swept), one line per method; nil when no method has a cell.
func epsFigure(c *Config, cells []*Cell, dataset string, v float64, dir, suffix string) (*figure, error) {
	metric := c.Metric
	var sel []*Cell
	for _, cell := range cells {
		if cell.Dataset == dataset && sameValue(cell.Value, v) {
			sel = append(sel, cell)
		}
	}
	f := plots.Figure{
		XLabel: epsilonAxis(sel), YLabel: c.metricName(metric), LogX: true, LogY: c.LogY,
	}
	title := dataset + ": " + c.versus("ε")
	if !math.IsNaN(v) {
		title += fmt.Sprintf(" (%s = %g)", c.sweepLabel(), v)
	}
	f.Title = title + "\n" + privacyLabel(sel)
	for _, m := range c.Methods {
		s := plots.Series{Label: m.LabelOf()}
		for _, cell := range sel {
			mean, ok := cell.Mean[metric]
			if cell.Label != m.LabelOf() || !ok {
				continue
			}
			s.Flat = math.IsNaN(cell.Epsilon)
			if s.Flat && !strings.Contains(s.Label, "non-private") {
				s.Label = m.LabelOf() + " (non-private)"
			}
			addPoint(&s, cell.Epsilon, cell, mean, metric)
		}
		if len(s.X) > 0 {
			f.Series = append(f.Series, s)
		}
	}
	if len(f.Series) == 0 {
		return nil, nil
	}
	base := "fig-" + sanitize(dataset)
	if !math.IsNaN(v) {
		base += "-" + sanitize(c.Sweep.Name) + "-" + sanitize(fmtF(v))
	}
	return saveFigure(f, dir, base+suffix, title)
}

// sweepFigure draws private method m's metric against the swept
// parameter on dataset, one line per ε (at most five), with the
// non-private methods' lines for reference; nil for a non-private method
// or one without cells.
func sweepFigure(c *Config, cells []*Cell, dataset string, m MethodSpec, dir string) (*figure, error) {
	metric := c.Metric
	var sel []*Cell
	for _, cell := range cells {
		if cell.Dataset == dataset && cell.Label == m.LabelOf() {
			sel = append(sel, cell)
		}
	}
	if len(sel) == 0 || math.IsNaN(sel[0].Epsilon) {
		return nil, nil
	}
	title := fmt.Sprintf("%s, %s: %s", dataset, m.LabelOf(), c.versus(c.sweepLabel()))
	f := plots.Figure{Title: title + "\n" + privacyLabel(sel), XLabel: c.sweepLabel(), YLabel: c.metricName(metric),
		LogY: c.LogY}
	for _, e := range cellEpsilons(sel) {
		s := plots.Series{Label: fmt.Sprintf("ε = %g", e)}
		for _, cell := range sel {
			if mean, ok := cell.Mean[metric]; ok && cell.Epsilon == e {
				addPoint(&s, cell.Value, cell, mean, metric)
			}
		}
		f.Series = append(f.Series, s)
	}
	f.Series = append(f.Series, nonPrivateSeries(c, cells, dataset)...)
	base := "fig-" + sanitize(dataset) + "-" + sanitize(m.LabelOf()) + "-vs-" + sanitize(c.Sweep.Name)
	return saveFigure(f, dir, base, title)
}

// cellEpsilons lists the ε of cells, ascending, thinned to five.
func cellEpsilons(cells []*Cell) []float64 {
	epsSet := map[float64]bool{}
	var epss []float64
	for _, cell := range cells {
		if !epsSet[cell.Epsilon] {
			epsSet[cell.Epsilon] = true
			epss = append(epss, cell.Epsilon)
		}
	}
	sort.Float64s(epss)
	return thin(epss, 5)
}

// nonPrivateSeries are the dashed reference lines against the swept
// parameter: every method's non-private cells on dataset.
func nonPrivateSeries(c *Config, cells []*Cell, dataset string) []plots.Series {
	metric := c.Metric
	var out []plots.Series
	for _, nm := range c.Methods {
		s := plots.Series{Label: nm.LabelOf(), Dashed: true}
		if !strings.Contains(s.Label, "non-private") {
			s.Label += " (non-private)"
		}
		for _, cell := range cells {
			if mean, ok := cell.Mean[metric]; ok && cell.Dataset == dataset && cell.Label == nm.LabelOf() && math.IsNaN(cell.Epsilon) {
				addPoint(&s, cell.Value, cell, mean, metric)
			}
		}
		if len(s.X) > 0 {
			out = append(out, s)
		}
	}
	return out
}

func sameValue(a, b float64) bool {
	return a == b || (math.IsNaN(a) && math.IsNaN(b))
}

// thin keeps at most n values spread over xs (first and last included).
func thin(xs []float64, n int) []float64 {
	if len(xs) <= n {
		return xs
	}
	out := make([]float64, 0, n)
	for i := range n {
		out = append(out, xs[i*(len(xs)-1)/(n-1)])
	}
	return out
}

func fmtMetric(mean, sd float64, n int) string {
	if math.IsNaN(sd) {
		return fmt.Sprintf("%.4f (n=%d)", mean, n)
	}
	return fmt.Sprintf("%.4f ± %.4f (n=%d)", mean, sd, n)
}

// writeReport writes report.md: what was run, the figures, the guarantees
// and the numbers.
func writeReport(w io.Writer, c *Config, cells []*Cell, figs []figure, have, want int) {
	writeReportHead(w, c, have, want)
	fmt.Fprint(w, "## Figures\n\n")
	for _, f := range figs {
		fmt.Fprintf(w, "![%s](%s.png)\n\n([SVG](%s.svg))\n\n", strings.ReplaceAll(f.caption, "\n", " "), f.file, f.file)
	}
	writeGuarantees(w, c, cells)
	writeNumbers(w, c, cells)
	fmt.Fprint(w, "Files: results.csv (one row per run, with each run's seed and guarantee), summary.csv (mean, sd, n per cell), config.json.\n")
}

// writeReportHead writes the report's title, source, description, what
// was run and the paper's claims.
func writeReportHead(w io.Writer, c *Config, have, want int) {
	title := c.Title
	if title == "" {
		title = "Experiment " + c.Name
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	if c.Paper != "" {
		fmt.Fprintf(w, "Source: %s.\n\n", c.Paper)
	}
	if c.Description != "" {
		fmt.Fprintf(w, "%s\n\n", c.Description)
	}
	fmt.Fprintf(w, "Runs recorded: %d of %d; %d run(s) per cell; δ = %g; metric: %s. ", have, want, c.Runs, c.Delta, c.metricName(c.Metric))
	fmt.Fprint(w, "Privacy noise came from a seeded stream (an experiment, not a release). ")
	fmt.Fprint(w, "Mean ± sample standard deviation over runs; bands in the figures are ±1 sd.\n\n")
	if len(c.Claims) > 0 {
		fmt.Fprint(w, "## The paper's claims\n\n")
		for _, cl := range c.Claims {
			fmt.Fprintf(w, "> %s\n\n", cl)
		}
		fmt.Fprint(w, "\n")
	}
}

// writeGuarantees writes each method's guarantee at the first and the
// last ε of the grid, and the methods' notes.
func writeGuarantees(w io.Writer, c *Config, cells []*Cell) {
	fmt.Fprint(w, "## Guarantees\n\n")
	fmt.Fprint(w, "What each method's released model provably gives at the requested ε (first ε of the grid and last).\n\n")
	fmt.Fprint(w, "| method | requested ε | provable ε | δ | unit | notion | status | paper's ε |\n|---|---|---|---|---|---|---|---|\n")
	for _, cell := range guaranteeCells(c, cells) {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", cell.Label, orDash(cell.Epsilon), orDash(cell.GEpsilon),
			orDash(cell.GDelta), cell.GUnit, cell.GNotion, cell.GStatus, orDash(cell.GClaimed))
	}
	notes := map[string]string{}
	for _, cell := range cells {
		if cell.GNote != "" {
			notes[cell.Label] = cell.GNote
		}
	}
	if len(notes) > 0 {
		fmt.Fprint(w, "\nNotes:\n\n")
		for _, m := range c.Methods {
			if n := notes[m.LabelOf()]; n != "" {
				fmt.Fprintf(w, "- **%s**: %s\n", m.LabelOf(), n)
			}
		}
	}
}

// guaranteeCells picks one cell per method at the smallest and one at the
// largest ε (the numbers do not depend on the dataset or the swept value
// for these methods), in the config's method order.
func guaranteeCells(c *Config, cells []*Cell) []*Cell {
	lo, hi := map[string]*Cell{}, map[string]*Cell{}
	for _, cell := range cells {
		if l := lo[cell.Label]; l == nil || cell.Epsilon < l.Epsilon {
			lo[cell.Label] = cell
		}
		if h := hi[cell.Label]; h == nil || cell.Epsilon > h.Epsilon {
			hi[cell.Label] = cell
		}
	}
	var gcells []*Cell
	for _, m := range c.Methods {
		l := m.LabelOf()
		if lo[l] != nil {
			gcells = append(gcells, lo[l])
		}
		if hi[l] != nil && hi[l] != lo[l] && hi[l].Epsilon != lo[l].Epsilon {
			gcells = append(gcells, hi[l])
		}
	}
	return gcells
}

// writeNumbers writes a table of the metric and the seconds per run for
// each dataset and swept value.
func writeNumbers(w io.Writer, c *Config, cells []*Cell) {
	fmt.Fprintf(w, "\n## Numbers (%s)\n\n", c.metricName(c.Metric))
	for _, d := range c.Datasets {
		for _, v := range c.sweepValues() {
			head := "### " + d.Name
			if !math.IsNaN(v) {
				head += fmt.Sprintf(", %s = %g", c.paramName(), v)
			}
			fmt.Fprintf(w, "%s\n\n| method | ε | %s | seconds/run |\n|---|---|---|---|\n", head, c.metricName(c.Metric))
			for _, cell := range cells {
				if cell.Dataset == d.Name && sameValue(cell.Value, v) {
					writeNumberRow(w, c, cell)
				}
			}
			fmt.Fprint(w, "\n")
		}
	}
}

// writeNumberRow writes one cell's row of a numbers table.
func writeNumberRow(w io.Writer, c *Config, cell *Cell) {
	mean, ok := cell.Mean[c.Metric]
	val := "—"
	if ok {
		val = fmtMetric(mean, cell.SD[c.Metric], cell.N[c.Metric])
	}
	eps := orDash(cell.Epsilon)
	if math.IsNaN(cell.Epsilon) {
		eps = "non-private"
	}
	fmt.Fprintf(w, "| %s | %s | %s | %.3g |\n", cell.Label, eps, val, cell.Seconds)
}

func orDash(x float64) string {
	if math.IsNaN(x) || x == 0 {
		return "—"
	}
	if math.IsInf(x, 1) {
		return "∞"
	}
	return fmt.Sprintf("%.4g", x)
}
