package plots

import (
	"errors"
	"io"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Panels is several figures tiled in a grid, row by row: one panel per
// population, say, each with its own axes and legend.
type Panels struct {
	Figures []Figure
	// Cols is the number of panels per row (default 2).
	Cols int
	// PanelWidth and PanelHeight are one panel's size (default 18 cm ×
	// 10 cm); DPI of the PNG (default 120).
	PanelWidth, PanelHeight vg.Length
	DPI                     int
}

func (p *Panels) grid() (cols, rows int) {
	cols = p.Cols
	if cols <= 0 {
		cols = 2
	}
	cols = min(cols, len(p.Figures))
	return cols, (len(p.Figures) + cols - 1) / max(cols, 1)
}

func (p *Panels) size() (vg.Length, vg.Length, int) {
	f := Figure{Width: p.PanelWidth, Height: p.PanelHeight, DPI: p.DPI}
	w, h, dpi := f.size()
	cols, rows := p.grid()
	return w * vg.Length(cols), h * vg.Length(rows), dpi
}

// Draw renders the panels onto a canvas.
func (p *Panels) Draw(c draw.Canvas) error {
	if len(p.Figures) == 0 {
		return errNoPanels
	}
	cols, rows := p.grid()
	w := (c.Max.X - c.Min.X) / vg.Length(cols)
	h := (c.Max.Y - c.Min.Y) / vg.Length(rows)
	for i := range p.Figures {
		col, row := i%cols, i/cols
		min := vg.Point{X: c.Min.X + w*vg.Length(col), Y: c.Max.Y - h*vg.Length(row+1)}
		sub := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: min, Max: vg.Point{X: min.X + w, Y: min.Y + h}}}
		if err := p.Figures[i].Draw(sub); err != nil {
			return err
		}
	}
	return nil
}

var errNoPanels = errors.New("plots: no panels")

// WritePNG writes the panels as PNG.
func (p *Panels) WritePNG(out io.Writer) error {
	if len(p.Figures) == 0 {
		return errNoPanels
	}
	w, h, dpi := p.size()
	return writePNG(out, w, h, dpi, p.Draw)
}

// WriteSVG writes the panels as SVG.
func (p *Panels) WriteSVG(out io.Writer) error {
	if len(p.Figures) == 0 {
		return errNoPanels
	}
	w, h, _ := p.size()
	return writeSVG(out, w, h, p.Draw)
}

// Save writes the panels to base.png and base.svg (or the listed
// formats) and returns the files written.
func (p *Panels) Save(base string, formats ...string) ([]string, error) {
	return save(base, formats, p.WritePNG, p.WriteSVG)
}
