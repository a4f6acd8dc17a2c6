package plots

import (
	"bytes"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
)

func sample() *Figure {
	return &Figure{
		Title: "toy: RMSE vs ε", XLabel: "ε", YLabel: "RMSE", LogX: true,
		Series: []Series{
			{Label: "baseline (non-private)", X: []float64{math.NaN()}, Mean: []float64{0.8}, SD: []float64{0.01}, Flat: true},
			{Label: "private", X: []float64{4, 0.5, 1}, Mean: []float64{0.9, 1.5, 1.1}, SD: []float64{0.02, math.NaN(), 0.05}},
		},
	}
}

func TestSave(t *testing.T) {
	base := filepath.Join(t.TempDir(), "fig")
	files, err := sample().Save(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("wrote %v", files)
	}
	b, err := os.ReadFile(base + ".png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if w := img.Bounds().Dx(); w < 800 {
		t.Errorf("PNG is %d px wide, want ≥ 800 (18 cm at 120 dpi)", w)
	}
	svg, _ := os.ReadFile(base + ".svg")
	for _, want := range []string{"<svg", "private", "baseline (non-private)"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		fig  *Figure
		want string
	}{
		{"empty", &Figure{}, "no series"},
		{"log of zero", &Figure{LogX: true, Series: []Series{{Label: "a", X: []float64{0, 1}, Mean: []float64{1, 2}}}}, "log axis"},
		{"ragged", &Figure{Series: []Series{{Label: "a", X: []float64{1, 2}, Mean: []float64{1}}}}, "series"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := tc.fig.WritePNG(&buf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := sample().Save(filepath.Join(t.TempDir(), "x"), "gif"); err == nil {
		t.Fatal("gif accepted")
	}
}

func ExampleFigure_Save() {
	f := &Figure{
		Title: "RMSE vs ε", XLabel: "privacy parameter ε", YLabel: "RMSE", LogX: true,
		Series: []Series{{Label: "private FW", X: []float64{0.5, 2, 10}, Mean: []float64{1.2, 1.0, 0.9}, SD: []float64{0.1, 0.05, 0.02}}},
	}
	dir, _ := os.MkdirTemp("", "plots")
	defer os.RemoveAll(dir)
	files, err := f.Save(filepath.Join(dir, "rmse"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range files {
		fmt.Println(filepath.Base(p))
	}
	// Output:
	// rmse.png
	// rmse.svg
}

// A narrow linear range (RMSE 1.146–1.26, as on ML-100K) must not label
// every tick "1.2": labels get the decimals they need to differ.
func TestDistinctTickLabels(t *testing.T) {
	for _, r := range [][2]float64{{1.146, 1.26}, {0.0251, 0.0262}, {0, 1}, {0.1, 0.5}, {100, 2500}} {
		seen := map[string]bool{}
		n := 0
		for _, tk := range (distinctTicks{}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			n++
			if seen[tk.Label] {
				t.Errorf("range %v: label %q twice", r, tk.Label)
			}
			seen[tk.Label] = true
			if v, err := strconv.ParseFloat(tk.Label, 64); err != nil || math.Abs(v-tk.Value) > 1e-9*math.Max(1, math.Abs(tk.Value)) {
				t.Errorf("range %v: label %q for tick %g", r, tk.Label, tk.Value)
			}
		}
		if n < 2 {
			t.Errorf("range %v: %d labelled ticks", r, n)
		}
	}
}

func TestFitTitle(t *testing.T) {
	p := sample()
	pl, _, err := p.build()
	if err != nil {
		t.Fatal(err)
	}
	sty := pl.Title.TextStyle
	long := "synthetic-cp: RMSE vs ε\nper-rating central DP; paper's per-rating calibration, no proven guarantee"
	w := sty.Width("per-rating central DP; paper's per-rating")
	got := fitTitle(long, sty, w)
	for _, line := range strings.Split(got, "\n") {
		if sty.Width(line) > w {
			t.Errorf("line %q wider than %v", line, w)
		}
	}
	if strings.ReplaceAll(got, "\n", " ") != strings.ReplaceAll(long, "\n", " ") {
		t.Errorf("text changed: %q", got)
	}
	if short := "a: b"; fitTitle(short, sty, w) != short {
		t.Errorf("a short title was changed")
	}
}

// A log axis spanning less than a decade still gets several labels.
func TestLogTicks(t *testing.T) {
	for _, r := range [][2]float64{{0.25, 2.1}, {0.28, 0.47}, {0.01, 50}, {1e-4, 1e4}} {
		var labels []string
		for _, tk := range (logTicks{}).Ticks(r[0], r[1]) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < 2 {
			t.Errorf("range %v: labels %q", r, labels)
		}
	}
}

// An ε axis with many values is a log₂ axis: labels at powers of two.
func TestLog2Ticks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0.25, 16, []string{"0.25", "0.5", "1", "2", "4", "8", "16"}},
		{0.3, 3, []string{"0.5", "1", "2"}},
		{1.0 / 1024, 1024, []string{"0.0009766", "0.01562", "0.25", "4", "64", "1024"}},
	} {
		var labels []string
		for _, tk := range (log2Ticks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if strings.Join(labels, " ") != strings.Join(tc.want, " ") {
			t.Errorf("[%g, %g]: labels %q, want %q", tc.lo, tc.hi, labels, tc.want)
		}
	}
	xs := map[float64]bool{}
	for k := range 12 {
		xs[math.Ldexp(1, k-4)] = true
	}
	if _, ok := valueTicks(xs).(log2Ticks); !ok {
		t.Errorf("12 ε values: ticks %T, want log2Ticks", valueTicks(xs))
	}
}

// A log x axis with a single x value draws (gonum would widen the range to
// [x−1, x+1], reaching 0).
func TestLogXSingleValue(t *testing.T) {
	f := &Figure{Title: "one ε", XLabel: "ε", YLabel: "RMSE", LogX: true, Series: []Series{
		{Label: "baseline", X: []float64{math.NaN()}, Mean: []float64{0.8}, Flat: true},
		{Label: "private", X: []float64{1}, Mean: []float64{0.9}, SD: []float64{0.1}},
	}}
	var b bytes.Buffer
	if err := f.WritePNG(&b); err != nil || b.Len() == 0 {
		t.Fatalf("WritePNG: %v", err)
	}
}

func TestPanels(t *testing.T) {
	f := Figure{Title: "a", XLabel: "x", YLabel: "y", Series: []Series{{Label: "s", X: []float64{1, 2}, Mean: []float64{1, 2}}}}
	p := Panels{Figures: []Figure{f, f, f}}
	base := filepath.Join(t.TempDir(), "panels")
	files, err := p.Save(base)
	if err != nil || len(files) != 2 {
		t.Fatalf("files %v, err %v", files, err)
	}
	if w, h, _ := p.size(); w != 2*18*vg.Centimeter || h != 2*10*vg.Centimeter {
		t.Errorf("three panels in two columns: %v × %v", w, h)
	}
	empty := Panels{}
	if err := empty.WritePNG(io.Discard); err == nil {
		t.Error("no panels drawn without an error")
	}
}

// TestStyle: a series' Style fixes its colour whatever its position.
func TestStyle(t *testing.T) {
	one := func(series ...Series) []byte {
		f := Figure{Title: "t", XLabel: "x", YLabel: "y", Series: series}
		var b bytes.Buffer
		if err := f.WritePNG(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a := Series{Label: "a", X: []float64{1, 2}, Mean: []float64{1, 2}, Style: 3}
	if !bytes.Equal(one(a), one(Series{Label: "a", X: []float64{1, 2}, Mean: []float64{1, 2}, Style: 3})) {
		t.Fatal("the same figure drew differently")
	}
	b := a
	b.Style = 1
	if bytes.Equal(one(a), one(b)) {
		t.Error("Style 3 and Style 1 drew the same colour")
	}
}
