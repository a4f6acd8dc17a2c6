// Package plots draws privrec's figures with gonum/plot: a metric against a
// swept parameter (usually ε), one line per method with a ±1 standard
// deviation band, written as PNG and SVG.
package plots

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one line of a figure: the mean of a metric at each x with its
// standard deviation. A series with Flat set (a non-private baseline, which
// does not depend on x) has one point and is drawn as a dashed horizontal
// line with its band across the whole x range.
type Series struct {
	Label string
	X     []float64
	Mean  []float64
	SD    []float64
	Flat  bool
}

// Figure is a line plot of several series.
type Figure struct {
	Title, XLabel, YLabel string
	// LogX and LogY put an axis on a log scale (all values must be positive).
	LogX, LogY bool
	// LegendTop puts the legend at the top right (default bottom right):
	// choose the corner the curves leave empty.
	LegendTop bool
	Series    []Series
	// Width and Height of the image (default 16 cm × 11 cm).
	Width, Height vg.Length
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
	{240, 228, 66, 255},  // yellow
}

// Colour returns the i-th colour of the figure palette.
func Colour(i int) color.RGBA { return palette[i%len(palette)] }

// Plot builds the gonum plot.
func (f *Figure) Plot() (*plot.Plot, error) {
	if len(f.Series) == 0 {
		return nil, errors.New("plots: figure has no series")
	}
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	p.Add(plotter.NewGrid())
	// The x range of the whole figure, for flat series.
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, s := range f.Series {
		if len(s.X) != len(s.Mean) || (s.SD != nil && len(s.SD) != len(s.Mean)) {
			return nil, fmt.Errorf("plots: series %q has %d x, %d means, %d sds", s.Label, len(s.X), len(s.Mean), len(s.SD))
		}
		if s.Flat {
			continue
		}
		for _, x := range s.X {
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
		}
	}
	if math.IsInf(xmin, 1) { // only flat series
		xmin, xmax = 1, 10
	}
	for k, s := range f.Series {
		if len(s.X) == 0 {
			continue
		}
		col := Colour(k)
		xs, ms, sds := sortByX(s)
		if s.Flat {
			m, sd := ms[0], 0.0
			if sds != nil {
				sd = sds[0]
			}
			xs, ms, sds = []float64{xmin, xmax}, []float64{m, m}, []float64{sd, sd}
		}
		if f.LogX || f.LogY {
			for i := range xs {
				if (f.LogX && xs[i] <= 0) || (f.LogY && ms[i] <= 0) {
					return nil, fmt.Errorf("plots: series %q has a non-positive value on a log axis", s.Label)
				}
			}
		}
		if sds != nil {
			band := make(plotter.XYs, 0, 2*len(xs))
			for i := range xs {
				band = append(band, plotter.XY{X: xs[i], Y: clampLog(ms[i]+sds[i], f.LogY, ms[i])})
			}
			for i := len(xs) - 1; i >= 0; i-- {
				band = append(band, plotter.XY{X: xs[i], Y: clampLog(ms[i]-sds[i], f.LogY, ms[i])})
			}
			poly, err := plotter.NewPolygon(band)
			if err != nil {
				return nil, fmt.Errorf("plots: band of %q: %w", s.Label, err)
			}
			// color.RGBA is premultiplied: a translucent fill needs NRGBA.
			poly.Color = color.NRGBA{R: col.R, G: col.G, B: col.B, A: 48}
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
		pts := make(plotter.XYs, len(xs))
		for i := range xs {
			pts[i] = plotter.XY{X: xs[i], Y: ms[i]}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("plots: line of %q: %w", s.Label, err)
		}
		line.Color = col
		line.Width = vg.Points(1.6)
		if s.Flat {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			p.Add(line)
			p.Legend.Add(s.Label, line)
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, fmt.Errorf("plots: points of %q: %w", s.Label, err)
		}
		sc.Color = col
		sc.Shape = shapes[k%len(shapes)]
		sc.Radius = vg.Points(2.8)
		p.Add(line, sc)
		p.Legend.Add(s.Label, line, sc)
	}
	if f.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if f.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = f.LegendTop
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(6)
	if f.LegendTop {
		p.Legend.YOffs = -vg.Points(6)
	} else {
		p.Legend.YOffs = vg.Points(6)
	}
	p.Legend.ThumbnailWidth = vg.Points(22)
	return p, nil
}

var shapes = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{},
	draw.RingGlyph{}, draw.BoxGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
}

// clampLog keeps the lower edge of a band positive on a log axis.
func clampLog(v float64, log bool, mean float64) float64 {
	if log && v <= 0 {
		return mean / 10
	}
	return v
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

// Save writes the figure to base.png and base.svg (or the listed formats,
// given as extensions without the dot) and returns the files written.
func (f *Figure) Save(base string, formats ...string) ([]string, error) {
	if len(formats) == 0 {
		formats = []string{"png", "svg"}
	}
	p, err := f.Plot()
	if err != nil {
		return nil, err
	}
	w, h := f.Width, f.Height
	if w == 0 {
		w = 16 * vg.Centimeter
	}
	if h == 0 {
		h = 11 * vg.Centimeter
	}
	var out []string
	for _, ext := range formats {
		path := base + "." + ext
		if err := p.Save(w, h, path); err != nil {
			return out, fmt.Errorf("plots: writing %s: %w", filepath.Base(path), err)
		}
		out = append(out, path)
	}
	return out, nil
}
