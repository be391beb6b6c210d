package loadgen

import (
	"cmp"
	"io"
	"slices"

	"github.com/spillwayhq/spillway/chart"
)

// WriteSVG draws two charts against the asked rate, one above the other:
// goodput and throughput (with the offered rate as a reference line), and
// the p99 latency of every arrival and of the good ones. The steps and
// knee's probes and confirmations (knee may be nil) are drawn in order of
// rate (a confirmed rate has two points, the line joining them showing
// how far apart its measurements were); invalid
// steps are drawn apart, as dashed lines, since the generator, not the
// service, may have shaped them. A vertical line marks the knee.
func WriteSVG(w io.Writer, res Result, knee *Knee) error {
	all := slices.Clone(res.Steps)
	if knee != nil {
		all = append(all, knee.Probes...)
		for _, cf := range knee.Confirmations {
			all = append(all, cf.Step)
		}
	}
	slices.SortStableFunc(all, func(a, b StepResult) int { return cmp.Compare(a.Rate, b.Rate) })
	var ok, bad []StepResult
	for _, s := range all {
		if s.Invalid {
			bad = append(bad, s)
		} else {
			ok = append(ok, s)
		}
	}
	rates := &chart.Chart{Title: "Goodput and throughput against offered load", XLabel: "offered load (requests/s)", YLabel: "requests/s"}
	p99 := &chart.Chart{Title: "p99 latency against offered load", XLabel: "offered load (requests/s)", YLabel: "p99 (ms)"}
	lines := []struct {
		c    *chart.Chart
		name string
		y    func(StepResult) float64
	}{
		{rates, "goodput", func(s StepResult) float64 { return s.Goodput }},
		{rates, "throughput", func(s StepResult) float64 { return s.Throughput }},
		{p99, "p99, every call", func(s StepResult) float64 { return float64(s.Latency.P99.Microseconds()) / 1000 }},
		{p99, "p99, good calls", func(s StepResult) float64 { return float64(s.GoodLatency.P99.Microseconds()) / 1000 }},
	}
	for i, l := range lines {
		color := chart.Palette(i)
		l.c.Add(chart.Series{Name: l.name, X: xs(ok), Y: ys(ok, l.y), Color: color})
		if len(bad) > 0 {
			l.c.Add(chart.Series{Name: l.name + " (invalid)", X: xs(bad), Y: ys(bad, l.y), Color: color, Dashed: true})
		}
	}
	if len(all) > 0 {
		lo, hi := all[0].Rate, all[len(all)-1].Rate
		rates.Add(chart.Series{Name: "offered", X: []float64{lo, hi}, Y: []float64{lo, hi}, Color: "#999999"})
	}
	if knee != nil && knee.Rate > 0 {
		for _, c := range []*chart.Chart{rates, p99} {
			c.Add(chart.Series{Name: "knee " + formatRate(knee.Rate), X: []float64{knee.Rate, knee.Rate}, Y: []float64{0, top(c)}, Color: "#000000", Dashed: true})
		}
	}
	return chart.WriteSVG(w, rates, p99)
}

func xs(steps []StepResult) []float64 {
	return ys(steps, func(s StepResult) float64 { return s.Rate })
}

func ys(steps []StepResult, f func(StepResult) float64) []float64 {
	out := make([]float64, len(steps))
	for i, s := range steps {
		out[i] = f(s)
	}
	return out
}

// top is the highest y value in c's series (0 when it has none).
func top(c *chart.Chart) float64 {
	t := 0.0
	for _, s := range c.Series {
		for _, y := range s.Y {
			t = max(t, y)
		}
	}
	return t
}
