package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
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

// Series is one named line.
type Series struct {
	Name string
	X, Y []float64
}

// Chart adds a chart to the report and returns it.
func (r *Report) Chart(title, xLabel, yLabel string) *Chart {
	c := &Chart{Title: title, XLabel: xLabel, YLabel: yLabel}
	r.Charts = append(r.Charts, c)
	return c
}

// Line adds a series.
func (c *Chart) Line(name string, x, y []float64) {
	c.Series = append(c.Series, Series{Name: name, X: x, Y: y})
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

const (
	chartW, chartH         = 720, 400
	padL, padR, padT, padB = 70, 190, 40, 50
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	legendX                = chartW - padR + 15
	svgHeader              = `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">` + "\n"
	svgBackground          = `<rect width="100%%" height="100%%" fill="white"/>` + "\n"
	ticks                  = 5
)

// WriteSVG writes the report's charts one above the other as one SVG image.
func (r *Report) WriteSVG(w io.Writer) error {
	var b strings.Builder
	n := len(r.Charts)
	if n == 0 {
		return fmt.Errorf("sim: this scenario draws no chart")
	}
	fmt.Fprintf(&b, svgHeader, chartW, chartH*n, chartW, chartH*n)
	fmt.Fprintf(&b, svgBackground)
	for i, c := range r.Charts {
		fmt.Fprintf(&b, `<g transform="translate(0,%d)">`+"\n", i*chartH)
		c.draw(&b)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (c *Chart) draw(b *strings.Builder) {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	yv := func(y float64) (float64, bool) {
		if c.LogY {
			if y <= 0 {
				return 0, false
			}
			return math.Log10(y), true
		}
		return y, !math.IsNaN(y) && !math.IsInf(y, 0)
	}
	for _, s := range c.Series {
		for i := range s.X {
			y, ok := yv(s.Y[i])
			if !ok {
				continue
			}
			xmin, xmax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i])
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax, ymin, ymax = 0, 1, 0, 1
	}
	if !c.LogY && ymin > 0 {
		ymin = 0
	}
	var yt []float64
	if c.LogY {
		yt = decadeTicks(ymin, ymax)
	} else {
		yt = niceTicks(ymin, ymax)
	}
	if xmax <= xmin { // one x value: centre it
		pad := math.Max(1, math.Abs(xmin)/2)
		xmin, xmax = xmin-pad, xmax+pad
	}
	// The x axis spans the data; only the ticks inside it are drawn.
	eps := 1e-9 * (xmax - xmin)
	xt := slices.DeleteFunc(niceTicks(xmin, xmax), func(x float64) bool { return x < xmin-eps || x > xmax+eps })
	ymin, ymax = yt[0], yt[len(yt)-1]
	px := func(x float64) float64 { return padL + (x-xmin)/(xmax-xmin)*plotW }
	py := func(y float64) float64 { return padT + plotH - (y-ymin)/(ymax-ymin)*plotH }

	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", padL, esc(c.Title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", padL, padT, plotW, plotH)
	for _, fx := range xt {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", px(fx), padT, px(fx), padT+plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(fx), padT+plotH+16, tick(fx))
	}
	for _, fy := range yt {
		label := fy
		if c.LogY {
			label = math.Pow(10, fy)
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", padL, py(fy), padL+plotW, py(fy))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, py(fy)+4, tick(label))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, padT+plotH+38, esc(c.XLabel))
	fmt.Fprintf(b, `<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, esc(c.YLabel))
	for k, s := range c.Series {
		color := palette[k%len(palette)]
		var pts []string
		for i := range s.X {
			if y, ok := yv(s.Y[i]); ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[i]), py(y)))
			}
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		if len(pts) <= 40 {
			for _, p := range pts {
				x, y, _ := strings.Cut(p, ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", x, y, color)
			}
		}
		ly := padT + 10 + k*20
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", legendX, ly, legendX+20, ly, color)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", legendX+26, ly+4, esc(s.Name))
	}
}

// niceTicks returns about five round tick values (steps of 1, 2 or 5 times
// a power of ten) covering [lo, hi].
func niceTicks(lo, hi float64) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / ticks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var out []float64
	for i := 0; ; i++ {
		v := start + float64(i)*step
		out = append(out, v)
		if v >= hi-step*1e-9 || i > 4*ticks {
			return out
		}
	}
}

// decadeTicks returns the whole decades (log10 values) covering [lo, hi].
func decadeTicks(lo, hi float64) []float64 {
	a, z := math.Floor(lo), math.Ceil(hi)
	if z <= a {
		z = a + 1
	}
	var out []float64
	for v := a; v <= z; v++ {
		out = append(out, v)
	}
	return out
}

func tick(v float64) string {
	if a := math.Abs(v); a != 0 && (a >= 1e7 || a < 1e-4) {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	// Six significant digits hide the float noise of tick arithmetic.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
