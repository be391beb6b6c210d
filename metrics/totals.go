package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RouteTotals are one route's request series summed since the start, for
// the dashboard's timeline.
type RouteTotals struct {
	// Requests finished; Good those answered 2xx or 3xx by the upstream.
	Requests, Good uint64
	// Bounds are the duration histogram's upper bounds (seconds); Latency
	// its cumulative counts per bound, then the total count.
	Bounds  []float64
	Latency []uint64
	// Refusals are the gateway's own answers by "reason class".
	Refusals map[string]uint64
}

// Totals reads every route's request series (spillway_requests_total,
// spillway_request_duration_seconds, spillway_refusals_total), by route
// name. It reads what the request path counted, adding nothing to it.
func (m *Metrics) Totals() map[string]*RouteTotals {
	out := map[string]*RouteTotals{}
	of := func(route string) *RouteTotals {
		t := out[route]
		if t == nil {
			t = &RouteTotals{Refusals: map[string]uint64{}}
			out[route] = t
		}
		return t
	}
	each(m.requests, func(l map[string]string, d *dto.Metric) {
		t, n := of(l["route"]), uint64(d.GetCounter().GetValue())
		t.Requests += n
		if l["source"] == "upstream" && (l["code_class"] == "2xx" || l["code_class"] == "3xx") {
			t.Good += n
		}
	})
	each(m.duration, func(l map[string]string, d *dto.Metric) {
		t, h := of(l["route"]), d.GetHistogram()
		bs := h.GetBucket()
		if len(t.Latency) != len(bs)+1 {
			t.Bounds, t.Latency = make([]float64, len(bs)), make([]uint64, len(bs)+1)
		}
		for i, b := range bs {
			t.Bounds[i] = b.GetUpperBound()
			t.Latency[i] += b.GetCumulativeCount()
		}
		t.Latency[len(bs)] += h.GetSampleCount()
	})
	each(m.refusals, func(l map[string]string, d *dto.Metric) {
		of(l["route"]).Refusals[l["reason"]+" "+l["class"]] += uint64(d.GetCounter().GetValue())
	})
	return out
}

// each calls fn with the labels and value of every series of c.
func each(c prometheus.Collector, fn func(labels map[string]string, d *dto.Metric)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for met := range ch {
		var d dto.Metric
		if met.Write(&d) != nil {
			continue
		}
		l := make(map[string]string, len(d.GetLabel()))
		for _, lp := range d.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		fn(l, &d)
	}
}
