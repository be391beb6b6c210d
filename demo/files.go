package demo

import (
	"bytes"
	"math"
	"os"
	"path/filepath"

	"github.com/spillwayhq/spillway/chart"
)

// charts draws the report: goodput and critical success against offered
// load, then the dip's offered load and goodput over time; measured lines
// solid, simulated ones dashed in the same colour.
func (r *Report) charts() []*chart.Chart {
	lanes := laneKeys(overloadLanes(r.Plan))
	good := &chart.Chart{Title: "Goodput against offered load", XLabel: "offered load (requests/s)", YLabel: "good answers/s (in time)"}
	crit := &chart.Chart{Title: "Critical requests answered in time", XLabel: "offered load (requests/s)", YLabel: "critical ok (%)"}
	for i, lane := range lanes {
		col := chart.Palette(i)
		for _, src := range []struct {
			rows   []Row
			suffix string
			dashed bool
		}{{r.Overload, "", false}, {r.Predicted, " (sim)", true}} {
			x, g, c := overloadXY(src.rows, lane)
			if len(x) == 0 {
				continue
			}
			good.Add(chart.Series{Name: laneNames[lane] + src.suffix, X: x, Y: g, Dashed: src.dashed, Color: col})
			crit.Add(chart.Series{Name: laneNames[lane] + src.suffix, X: x, Y: c, Dashed: src.dashed, Color: col})
		}
	}
	good.Add(chart.Series{Name: "offered", X: r.Plan.Loads, Y: r.Plan.Loads, Color: "#999999"})
	charts := []*chart.Chart{good, crit}
	if len(r.Dip) > 0 || len(r.DipSim) > 0 {
		charts = append(charts, r.dipCharts()...)
	}
	return charts
}

func overloadXY(rows []Row, lane string) (x, good, crit []float64) {
	for _, row := range rows {
		if row.Lane != lane {
			continue
		}
		c := 100 * row.CriticalOK
		if row.CriticalOK < 0 {
			c = math.NaN() // no critical request: the chart leaves the point out
		}
		x, good, crit = append(x, row.Load), append(good, row.GoodPerSec), append(crit, c)
	}
	return x, good, crit
}

func (r *Report) dipCharts() []*chart.Chart {
	load := &chart.Chart{Title: "Capacity dip: offered load (attempts/s)", XLabel: "time (s)", YLabel: "attempts/s"}
	good := &chart.Chart{Title: "Capacity dip: goodput (calls answered in time/s)", XLabel: "time (s)", YLabel: "good/s"}
	for i, lane := range []string{"immediate", "budget"} {
		col := chart.Palette(i + 4)
		for _, src := range []struct {
			series []Series
			suffix string
			dashed bool
		}{{r.Dip, "", false}, {r.DipSim, " (sim)", true}} {
			for _, s := range src.series {
				if s.Lane != lane {
					continue
				}
				load.Add(chart.Series{Name: laneNames[lane] + src.suffix, X: s.Seconds, Y: s.Attempts, Dashed: src.dashed, Color: col})
				good.Add(chart.Series{Name: laneNames[lane] + src.suffix, X: s.Seconds, Y: s.Good, Dashed: src.dashed, Color: col})
			}
		}
	}
	x, capY := r.capacityOverTime()
	load.Add(chart.Series{Name: "capacity", X: x, Y: capY, Color: "#999999"})
	good.Add(chart.Series{Name: "capacity", X: x, Y: capY, Color: "#999999"})
	return []*chart.Chart{load, good}
}

// capacityOverTime is the backend's capacity each second of the dip run.
func (r *Report) capacityOverTime() (x, y []float64) {
	p := r.Plan
	for t := 0.0; t < p.DipEnd.Seconds(); t++ {
		c := p.Capacity()
		if t >= p.DipFrom.Seconds() && t < p.DipTo.Seconds() {
			c = float64(p.DipWorkers) / p.Service.Seconds()
		}
		x, y = append(x, t), append(y, c)
	}
	return x, y
}

// writeFiles writes the chart and the page into dir.
func (r *Report) writeFiles(dir string) error {
	dir, err := outDir(dir)
	if err != nil {
		return err
	}
	svg, err := chart.SVG(r.charts()...)
	if err != nil {
		return err
	}
	svgPath := filepath.Join(dir, "spillway-demo.svg")
	if err := os.WriteFile(svgPath, svg, 0o644); err != nil {
		return err
	}
	var over, dip bytes.Buffer
	r.WriteOverload(&over, laneKeys(overloadLanes(r.Plan)))
	if len(r.Dip) > 0 {
		r.WriteDip(&dip)
	}
	var page bytes.Buffer
	if err := chart.WriteHTML(&page, "Spillway demo: overload over real HTTP, beside the simulator", svg,
		r.Plan.ScaleNote(), over.String(), dip.String()); err != nil {
		return err
	}
	htmlPath := filepath.Join(dir, "spillway-demo.html")
	if err := os.WriteFile(htmlPath, page.Bytes(), 0o644); err != nil {
		return err
	}
	r.Files = []string{svgPath, htmlPath}
	return nil
}
