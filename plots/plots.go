// Package plots draws privrec's figures with gonum/plot: a metric against a
// swept parameter (usually ε), one line per method with a ±1 standard
// deviation band, the legend beside the plot, written as PNG and SVG.
package plots

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/privrec/privrec/internal/atomicfile"
)

// Series is one line of a figure: the mean of a metric at each x with its
// standard deviation (nil: no band). A series with Flat set (a non-private
// baseline, which does not depend on x) has one point and is drawn as a
// dashed horizontal line with its band across the whole x range.
type Series struct {
	Label string
	X     []float64
	Mean  []float64
	SD    []float64
	Flat  bool
	// Dashed draws a (non-flat) reference line dashed, like a baseline.
	Dashed bool
	// Style picks the series' colour and glyph, 1-based (0: by its
	// position), so a method keeps its look across figures or panels.
	Style int
}

// Figure is a line plot of several series.
type Figure struct {
	Title, XLabel, YLabel string
	// LogX and LogY put an axis on a log scale (all values must be
	// positive); x ticks go at the plotted values, or at powers of two
	// (a log₂ axis) when there are more than ten.
	LogX, LogY bool
	Series     []Series
	// Width and Height of the image (default 18 cm × 10 cm); the legend
	// takes the right quarter.
	Width, Height vg.Length
	// DPI of the PNG (default 120).
	DPI int
}

// palette is the Okabe–Ito colour-blind-safe palette.
var palette = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{213, 94, 0, 255},    // vermillion
	{0, 158, 115, 255},   // green
	{204, 121, 167, 255}, // purple
	{230, 159, 0, 255},   // orange
	{86, 180, 233, 255},  // sky
	{0, 0, 0, 255},       // black
	{150, 130, 0, 255},   // dark yellow (Okabe–Ito's yellow is unreadable on white)
}

// Colour returns the i-th colour of the figure palette.
func Colour(i int) color.RGBA { return palette[i%len(palette)] }

var shapes = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{},
	draw.RingGlyph{}, draw.BoxGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
}

// build makes the plot and, separately, its legend (drawn beside the plot
// so that it hides no curve).
func (f *Figure) build() (*plot.Plot, *plot.Legend, error) {
	if len(f.Series) == 0 {
		return nil, nil, errors.New("plots: figure has no series")
	}
	p := plot.New()
	leg := plot.NewLegend()
	p.Title.Text = f.Title
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	p.Add(plotter.NewGrid())
	xmin, xmax, xset, err := f.xRange()
	if err != nil {
		return nil, nil, err
	}
	for k, s := range f.Series {
		if len(s.X) == 0 {
			continue
		}
		if s.Style > 0 {
			k = s.Style - 1
		}
		if err := f.addSeries(p, &leg, k, s, xmin, xmax); err != nil {
			return nil, nil, err
		}
	}
	f.setAxes(p, xmin, xmax, xset)
	leg.Top, leg.Left = true, true
	leg.ThumbnailWidth = vg.Points(22)
	leg.TextStyle.Font.Size = vg.Points(11)
	leg.Padding = vg.Points(2.5) // entries apart: their glyphs touched
	return p, &leg, nil
}

// xRange is the x range of the whole figure's series that are not flat
// (1 … 10 when all are: the range flat series span), and their x values
// (ticks on a log axis go at the values themselves); it refuses a series
// whose lengths disagree.
func (f *Figure) xRange() (xmin, xmax float64, xset map[float64]bool, err error) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	xset = map[float64]bool{}
	for _, s := range f.Series {
		if len(s.X) != len(s.Mean) || (s.SD != nil && len(s.SD) != len(s.Mean)) {
			return 0, 0, nil, fmt.Errorf("plots: series %q has %d x, %d means, %d sds", s.Label, len(s.X), len(s.Mean), len(s.SD))
		}
		if s.Flat {
			continue
		}
		for _, x := range s.X {
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			xset[x] = true
		}
	}
	if math.IsInf(xmin, 1) { // only flat series
		xmin, xmax = 1, 10
	}
	return xmin, xmax, xset, nil
}

// addSeries draws series s in style k — its ±SD band, its line, its
// points (a flat series: a dashed line over [xmin, xmax]) — and adds it to
// the legend.
func (f *Figure) addSeries(p *plot.Plot, leg *plot.Legend, k int, s Series, xmin, xmax float64) error {
	col := Colour(k)
	xs, ms, sds := sortByX(s)
	if s.Flat {
		m, sd := ms[0], 0.0
		if sds != nil {
			sd = sds[0]
		}
		xs, ms, sds = []float64{xmin, xmax}, []float64{m, m}, []float64{sd, sd}
	}
	for i := range xs {
		if (f.LogX && !(xs[i] > 0)) || (f.LogY && !(ms[i] > 0)) {
			return fmt.Errorf("plots: series %q has a non-positive value on a log axis", s.Label)
		}
	}
	if sds != nil {
		poly, err := f.band(xs, ms, sds, col)
		if err != nil {
			return fmt.Errorf("plots: band of %q: %w", s.Label, err)
		}
		p.Add(poly)
	}
	pts := make(plotter.XYs, len(xs))
	for i := range xs {
		pts[i] = plotter.XY{X: xs[i], Y: ms[i]}
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("plots: line of %q: %w", s.Label, err)
	}
	line.Color = col
	line.Width = vg.Points(1.6)
	if s.Flat || s.Dashed {
		line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	if s.Flat {
		p.Add(line)
		leg.Add(s.Label, line)
		return nil
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return fmt.Errorf("plots: points of %q: %w", s.Label, err)
	}
	sc.Color = col
	sc.Shape = shapes[k%len(shapes)]
	sc.Radius = vg.Points(2.8)
	p.Add(line, sc)
	leg.Add(s.Label, line, sc)
	return nil
}

// band is the translucent ±SD band around the means ms at xs, in colour
// col (its lower edge kept above 0 on a log axis).
func (f *Figure) band(xs, ms, sds []float64, col color.RGBA) (*plotter.Polygon, error) {
	band := make(plotter.XYs, 0, 2*len(xs))
	for i := range xs {
		band = append(band, plotter.XY{X: xs[i], Y: ms[i] + sds[i]})
	}
	for i := len(xs) - 1; i >= 0; i-- {
		lo := ms[i] - sds[i]
		if f.LogY && lo <= 0 {
			lo = ms[i] / 10 // keep the band's lower edge on a log axis
		}
		band = append(band, plotter.XY{X: xs[i], Y: lo})
	}
	poly, err := plotter.NewPolygon(band)
	if err != nil {
		return nil, err
	}
	// color.RGBA is premultiplied: a translucent fill needs NRGBA.
	poly.Color = color.NRGBA{R: col.R, G: col.G, B: col.B, A: 48}
	poly.LineStyle.Width = 0
	return poly, nil
}

// setAxes sets the axes' scales and tick markers: a log x axis ticks at
// the values xset (widened by a factor around a single value), a log y
// axis at powers, a linear axis at distinct labels.
func (f *Figure) setAxes(p *plot.Plot, xmin, xmax float64, xset map[float64]bool) {
	if f.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = valueTicks(xset)
		if xmin == xmax {
			// One x value: gonum widens an empty range by ±1, which
			// reaches 0 on a log axis; widen it by a factor instead.
			p.X.Min, p.X.Max = xmin/2, xmax*2
		}
	}
	if f.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	} else {
		p.Y.Tick.Marker = distinctTicks{}
	}
	if !f.LogX {
		p.X.Tick.Marker = distinctTicks{}
	}
}

func legendLabel(s Series) string { return s.Label }

// valueTicks labels a log axis at the plotted values (a handful of ε
// values reads better than bare powers of ten), falling back to powers of
// two (a log₂ axis: ε doubles from tick to tick) for many values.
func valueTicks(xset map[float64]bool) plot.Ticker {
	if len(xset) == 0 || len(xset) > 10 {
		return log2Ticks{}
	}
	var ticks plot.ConstantTicks
	for x := range xset {
		ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'g', 4, 64)})
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	return ticks
}

// log2Ticks labels a log axis at the powers of two in its range, every
// second or fourth one when there are many.
type log2Ticks struct{}

func (log2Ticks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	}
	k0, k1 := int(math.Ceil(math.Log2(lo)-1e-9)), int(math.Floor(math.Log2(hi)+1e-9))
	step := 1
	for (k1-k0)/step > 8 {
		step *= 2
	}
	var ticks []plot.Tick
	for k := k0; k <= k1; k++ {
		t := plot.Tick{Value: math.Ldexp(1, k)}
		if (k-k0)%step == 0 {
			t.Label = strconv.FormatFloat(t.Value, 'g', 4, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// distinctTicks is gonum's default linear ticker with the labels given
// as many decimals as they need to be told apart: the default formats
// ticks 0.05 apart with one decimal, so a narrow range (RMSE 1.15–1.25)
// got every label "1.2".
type distinctTicks struct{}

func (distinctTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	var major []int
	for i, t := range ticks {
		if t.Label != "" {
			major = append(major, i)
		}
	}
	for prec := 0; prec <= 10; prec++ {
		seen := map[string]bool{}
		labels := make([]string, len(major))
		ok := true
		for k, i := range major {
			v := ticks[i].Value
			l := strconv.FormatFloat(v, 'f', prec, 64)
			back, _ := strconv.ParseFloat(l, 64)
			if seen[l] || math.Abs(back-v) > 1e-9*math.Max(1, math.Abs(v)) {
				ok = false
				break
			}
			seen[l], labels[k] = true, l
		}
		if ok {
			for k, i := range major {
				ticks[i].Label = labels[k]
			}
			break
		}
	}
	return ticks
}

// logTicks labels a log axis at 1, 2, 5 (or 1, 2, 3, 5, or more) times
// powers of ten, as many as needed for at least three labels: gonum's
// LogTicks labels only powers of ten, so an axis from 0.25 to 2 had the
// single label "1".
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) || math.Log10(hi/lo) > 3 {
		return plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	}
	k0, k1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	in := func(v float64) bool { return v >= lo*(1-1e-9) && v <= hi*(1+1e-9) }
	var labelled []float64
	for _, ms := range [][]float64{{1}, {1, 2, 5}, {1, 2, 3, 5}, {1, 1.5, 2, 3, 4, 5, 7}} {
		labelled = labelled[:0]
		for k := k0; k <= k1; k++ {
			for _, m := range ms {
				if v := m * math.Pow10(k); in(v) {
					labelled = append(labelled, v)
				}
			}
		}
		if len(labelled) >= 3 {
			break
		}
	}
	var ticks []plot.Tick
	isLabel := map[float64]bool{}
	for _, v := range labelled {
		isLabel[v] = true
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
	}
	for k := k0; k <= k1; k++ {
		for m := 1; m <= 9; m++ {
			if v := float64(m) * math.Pow10(k); in(v) && !isLabel[v] {
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	return ticks
}

// Plot returns the gonum plot with the legend inside it (for callers that
// compose their own figures).
func (f *Figure) Plot() (*plot.Plot, error) {
	p, leg, err := f.build()
	if err != nil {
		return nil, err
	}
	p.Legend = *leg
	p.Legend.Left = false
	return p, nil
}

func sortByX(s Series) (xs, ms, sds []float64) {
	idx := make([]int, len(s.X))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return s.X[idx[a]] < s.X[idx[b]] })
	xs = make([]float64, len(idx))
	ms = make([]float64, len(idx))
	if s.SD != nil {
		sds = make([]float64, len(idx))
	}
	for j, i := range idx {
		xs[j], ms[j] = s.X[i], s.Mean[i]
		if sds != nil {
			sds[j] = s.SD[i]
			if math.IsNaN(sds[j]) {
				sds[j] = 0
			}
		}
	}
	return xs, ms, sds
}

// Draw renders the figure onto a canvas: the plot on the left three
// quarters, the legend at the top of the right quarter.
func (f *Figure) Draw(c draw.Canvas) error {
	p, leg, err := f.build()
	if err != nil {
		return err
	}
	w := c.Max.X - c.Min.X
	// The legend column is as wide as its longest label (at most half).
	var widest vg.Length
	for _, s := range f.Series {
		widest = max(widest, leg.TextStyle.Width(legendLabel(s)))
	}
	legendW := min(widest+leg.ThumbnailWidth+vg.Points(24), w/2)
	p.Title.Text = fitTitle(p.Title.Text, p.Title.TextStyle, w-legendW-vg.Points(8))
	p.Draw(draw.Crop(c, 0, -legendW, 0, 0))
	// Align the legend's top with the plot area (below the title).
	top := p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding + vg.Points(8)
	leg.Draw(draw.Crop(c, w-legendW+vg.Points(8), 0, 0, -top))
	return nil
}

// fitTitle breaks title lines wider than width after "; " or ", " (a
// long privacy subtitle was cut off at both sides of the plot).
func fitTitle(title string, sty text.Style, width vg.Length) string {
	var out []string
	for _, line := range strings.Split(title, "\n") {
		for sty.Width(line) > width {
			cut := -1
			for _, sep := range []string{"; ", ", "} {
				// the last separator that leaves a head that fits
				for i := strings.LastIndex(line, sep); i > 0; i = strings.LastIndex(line[:i], sep) {
					if sty.Width(line[:i+len(sep)-1]) <= width {
						cut = i + len(sep) - 1
						break
					}
				}
				if cut > 0 {
					break
				}
			}
			if cut <= 0 {
				break
			}
			out = append(out, line[:cut])
			line = strings.TrimLeft(line[cut:], " ")
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func (f *Figure) size() (vg.Length, vg.Length, int) {
	w, h, dpi := f.Width, f.Height, f.DPI
	if w == 0 {
		w = 18 * vg.Centimeter
	}
	if h == 0 {
		h = 10 * vg.Centimeter
	}
	if dpi == 0 {
		dpi = 120
	}
	return w, h, dpi
}

// WritePNG writes the figure as PNG.
func (f *Figure) WritePNG(out io.Writer) error {
	w, h, dpi := f.size()
	return writePNG(out, w, h, dpi, f.Draw)
}

// WriteSVG writes the figure as SVG.
func (f *Figure) WriteSVG(out io.Writer) error {
	w, h, _ := f.size()
	return writeSVG(out, w, h, f.Draw)
}

// Save writes the figure to base.png and base.svg (or the listed formats,
// "png" and "svg") and returns the files written.
func (f *Figure) Save(base string, formats ...string) ([]string, error) {
	return save(base, formats, f.WritePNG, f.WriteSVG)
}

// writePNG renders drawFn on a w × h canvas at dpi as PNG.
func writePNG(out io.Writer, w, h vg.Length, dpi int, drawFn func(draw.Canvas) error) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	// A white background: transparent PNGs read badly in dark viewers.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	if err := drawFn(dc); err != nil {
		return err
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(out)
	return err
}

// writeSVG renders drawFn on a w × h canvas as SVG.
func writeSVG(out io.Writer, w, h vg.Length, drawFn func(draw.Canvas) error) error {
	svg := vgsvg.New(w, h)
	if err := drawFn(draw.New(svg)); err != nil {
		return err
	}
	_, err := svg.WriteTo(out)
	return err
}

// save writes base.png and base.svg (or the listed formats) with the
// writers given.
func save(base string, formats []string, png, svg func(io.Writer) error) ([]string, error) {
	if len(formats) == 0 {
		formats = []string{"png", "svg"}
	}
	var out []string
	for _, ext := range formats {
		path := base + "." + ext
		var write func(io.Writer) error
		switch ext {
		case "png":
			write = png
		case "svg":
			write = svg
		default:
			return out, fmt.Errorf("plots: unknown format %q (want png or svg)", ext)
		}
		if err := writeFile(path, write); err != nil {
			return out, err
		}
		out = append(out, path)
	}
	return out, nil
}

func writeFile(path string, write func(io.Writer) error) error {
	if err := atomicfile.Write(path, 0o644, write); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}
