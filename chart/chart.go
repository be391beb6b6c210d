// Package chart draws line charts as self-contained SVG images, and wraps
// them with text tables in a self-contained HTML page: the charts of
// `spillway sim`, `spillway load` and `spillway demo`.
//
// A Chart is a title, axis labels and named series over a shared x axis;
// WriteSVG stacks several charts one above the other in one image. The
// output depends only on the input (no clock, no randomness), so a chart
// can be compared byte for byte.
package chart

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Chart is a line chart: one or more series over a shared x axis.
type Chart struct {
	Title  string
	XLabel string
	YLabel string
	LogY   bool // logarithmic y axis (values <= 0 are left out)
	Series []Series
}

// Series is one named line. X and Y have the same length; a point whose Y
// is NaN or infinite (or <= 0 on a log axis) is left out.
type Series struct {
	Name string
	X, Y []float64
	// Dashed draws a dashed line with hollow markers: a prediction or a
	// simulation next to a measurement drawn solid.
	Dashed bool
	// Color is the line's CSS colour; "" takes Palette(i) for the i-th
	// series of the chart.
	Color string
}

// Line adds a solid series in the next palette colour.
func (c *Chart) Line(name string, x, y []float64) {
	c.Series = append(c.Series, Series{Name: name, X: x, Y: y})
}

// Add adds a series as given (dashed, coloured).
func (c *Chart) Add(s Series) {
	c.Series = append(c.Series, s)
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// Palette is the colour a chart gives its i-th series when the series
// names none; it repeats after eight.
func Palette(i int) string {
	return palette[((i%len(palette))+len(palette))%len(palette)]
}

const (
	chartW, chartH         = 720, 400
	padL, padR, padT, padB = 70, 190, 40, 50
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	legendX                = chartW - padR + 15
	svgHeader              = `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">` + "\n"
	svgBackground          = `<rect width="100%%" height="100%%" fill="white"/>` + "\n"
	maxMarkers             = 40 // a series with more points is drawn without markers
)

// ErrNoChart is WriteSVG's error when it is given no chart.
var ErrNoChart = errors.New("chart: no chart to draw")

// WriteSVG writes the charts one above the other as one SVG image, each
// 720 × 400 pixels.
func WriteSVG(w io.Writer, charts ...*Chart) error {
	n := len(charts)
	if n == 0 {
		return ErrNoChart
	}
	var b strings.Builder
	fmt.Fprintf(&b, svgHeader, chartW, chartH*n, chartW, chartH*n)
	fmt.Fprintf(&b, svgBackground)
	for i, c := range charts {
		if err := c.check(); err != nil {
			return err
		}
		fmt.Fprintf(&b, `<g transform="translate(0,%d)">`+"\n", i*chartH)
		c.draw(&b)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// SVG returns the charts as one SVG image (see WriteSVG).
func SVG(charts ...*Chart) ([]byte, error) {
	var b strings.Builder
	if err := WriteSVG(&b, charts...); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func (c *Chart) check() error {
	if c == nil {
		return errors.New("chart: nil chart")
	}
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("chart: %q: series %q has %d x values and %d y values", c.Title, s.Name, len(s.X), len(s.Y))
		}
	}
	return nil
}

func (c *Chart) draw(b *strings.Builder) {
	f := c.frame()
	f.axes(b, c)
	for k, s := range c.Series {
		f.series(b, k, s)
	}
}

// frame maps data to pixels: the ranges of both axes and their ticks.
type frame struct {
	logY                   bool
	xmin, xmax, ymin, ymax float64
	xt, yt                 []float64 // ticks (log10 values on a log axis)
}

// yv is y on the axis's scale, and whether it can be drawn.
func (f *frame) yv(y float64) (float64, bool) {
	if f.logY {
		if y <= 0 {
			return 0, false
		}
		return math.Log10(y), true
	}
	return y, !math.IsNaN(y) && !math.IsInf(y, 0)
}

func (f *frame) px(x float64) float64 { return padL + (x-f.xmin)/(f.xmax-f.xmin)*plotW }
func (f *frame) py(y float64) float64 { return padT + plotH - (y-f.ymin)/(f.ymax-f.ymin)*plotH }

// frame spans the data of every series; a linear y axis starts at 0 or
// below, and ends on a round tick.
func (c *Chart) frame() *frame {
	f := &frame{logY: c.LogY, xmin: math.Inf(1), xmax: math.Inf(-1), ymin: math.Inf(1), ymax: math.Inf(-1)}
	for _, s := range c.Series {
		for i := range s.X {
			y, ok := f.yv(s.Y[i])
			if !ok || math.IsNaN(s.X[i]) || math.IsInf(s.X[i], 0) {
				continue
			}
			f.xmin, f.xmax = math.Min(f.xmin, s.X[i]), math.Max(f.xmax, s.X[i])
			f.ymin, f.ymax = math.Min(f.ymin, y), math.Max(f.ymax, y)
		}
	}
	if math.IsInf(f.xmin, 0) {
		f.xmin, f.xmax, f.ymin, f.ymax = 0, 1, 0, 1
	}
	if !c.LogY && f.ymin > 0 {
		f.ymin = 0
	}
	if c.LogY {
		f.yt = decadeTicks(f.ymin, f.ymax)
	} else {
		f.yt = niceTicks(f.ymin, f.ymax)
	}
	if f.xmax <= f.xmin { // one x value: centre it
		pad := math.Max(1, math.Abs(f.xmin)/2)
		f.xmin, f.xmax = f.xmin-pad, f.xmax+pad
	}
	// The x axis spans the data; only the ticks inside it are drawn.
	eps := 1e-9 * (f.xmax - f.xmin)
	f.xt = slices.DeleteFunc(niceTicks(f.xmin, f.xmax), func(x float64) bool { return x < f.xmin-eps || x > f.xmax+eps })
	f.ymin, f.ymax = f.yt[0], f.yt[len(f.yt)-1]
	return f
}

// axes draws the title, the plot's box, the grid, the ticks and the labels.
func (f *frame) axes(b *strings.Builder, c *Chart) {
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", padL, esc(c.Title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", padL, padT, plotW, plotH)
	for _, fx := range f.xt {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", f.px(fx), padT, f.px(fx), padT+plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", f.px(fx), padT+plotH+16, tick(fx))
	}
	for _, fy := range f.yt {
		label := fy
		if f.logY {
			label = math.Pow(10, fy)
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", padL, f.py(fy), padL+plotW, f.py(fy))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, f.py(fy)+4, tick(label))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, padT+plotH+38, esc(c.XLabel))
	fmt.Fprintf(b, `<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, esc(c.YLabel))
}

// series draws the k-th series: its line, its markers when it has few
// points, and its legend entry.
func (f *frame) series(b *strings.Builder, k int, s Series) {
	color := s.Color
	if color == "" {
		color = Palette(k)
	}
	dash, fill := "", color
	if s.Dashed {
		dash, fill = ` stroke-dasharray="6,4"`, "white"
	}
	var pts []string
	for i := range s.X {
		if y, ok := f.yv(s.Y[i]); ok && !math.IsNaN(s.X[i]) && !math.IsInf(s.X[i], 0) {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", f.px(s.X[i]), f.py(y)))
		}
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", esc(color), dash, strings.Join(pts, " "))
	if len(pts) <= maxMarkers {
		for _, p := range pts {
			x, y, _ := strings.Cut(p, ",")
			if s.Dashed {
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s" stroke="%s"/>`+"\n", x, y, fill, esc(color))
			} else {
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", x, y, esc(color))
			}
		}
	}
	ly := padT + 10 + k*20
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/>`+"\n", legendX, ly, legendX+20, ly, esc(color), dash)
	fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", legendX+26, ly+4, esc(s.Name))
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
