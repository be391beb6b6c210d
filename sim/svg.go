package sim

import (
	"errors"
	"fmt"
	"io"

	"github.com/spillwayhq/spillway/chart"
)

// Chart is a line chart: one or more series over a shared x axis (package
// chart draws it).
type Chart = chart.Chart

// Series is one named line.
type Series = chart.Series

// Chart adds a chart to the report and returns it.
func (r *Report) Chart(title, xLabel, yLabel string) *Chart {
	c := &Chart{Title: title, XLabel: xLabel, YLabel: yLabel}
	r.Charts = append(r.Charts, c)
	return c
}

// WriteSVG writes the report's charts one above the other as one SVG image.
func (r *Report) WriteSVG(w io.Writer) error {
	err := chart.WriteSVG(w, r.Charts...)
	if errors.Is(err, chart.ErrNoChart) {
		return fmt.Errorf("sim: this scenario draws no chart")
	}
	return err
}
