package metrics

import (
	"testing"

	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/shed"
)

// TestTotals: the dashboard's per-route sums of the request series.
func TestTotals(t *testing.T) {
	m := newMetrics(t, Options{Buckets: []float64{0.1, 1}})
	g := m.Generation([]RouteInfo{{"api", "app"}, {"web", "app"}}, nil)
	api := g.Route("api")
	for _, e := range []proxy.Ending{
		{Status: 200, FromUpstream: true, Seconds: 0.05},
		{Status: 304, FromUpstream: true, Seconds: 0.5},
		{Status: 503, FromUpstream: true, Seconds: 0.05},
		{Status: 200, FromUpstream: false, Seconds: 2}, // not the upstream's: not goodput
		refused(503, "admit:limit", int(shed.Sheddable)),
	} {
		api.Begin()
		api.End(e)
	}
	got := m.Totals()
	a := got["api"]
	if a == nil || a.Requests != 5 || a.Good != 2 {
		t.Fatalf("api totals %+v, want 5 requests, 2 good", a)
	}
	// At or below 0.1 s: the two of 0.05 s and the refusal (1 ms); below 1 s, the 0.5 s one too.
	if len(a.Bounds) != 2 || a.Bounds[1] != 1 || len(a.Latency) != 3 || a.Latency[0] != 3 || a.Latency[1] != 4 || a.Latency[2] != 5 {
		t.Errorf("latency bounds %v counts %v, want [0.1 1] [3 4 5]", a.Bounds, a.Latency)
	}
	if len(a.Refusals) != 1 || a.Refusals["admit:limit sheddable"] != 1 {
		t.Errorf("refusals %v, want admit:limit sheddable: 1", a.Refusals)
	}
	if w := got["web"]; w == nil || w.Requests != 0 {
		t.Errorf("web totals %+v, want none counted", w)
	}
}
