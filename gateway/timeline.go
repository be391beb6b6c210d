package gateway

import (
	"context"
	"time"

	"github.com/spillwayhq/spillway/metrics"
	"github.com/spillwayhq/spillway/timeline"
)

// runTimeline samples the gateway's state into g.timeline once a second
// until ctx ends: real time enters here.
func (g *Gateway) runTimeline(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	g.timeline.Sample(time.Now(), g.snapshot())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			g.timeline.Sample(now, g.snapshot())
		}
	}
}

// snapshot reads what the metrics and the admin API read: the request
// series (with metrics on), the chains' counts, the guards' state and
// the endpoints' health, of the current generation.
func (g *Gateway) snapshot() timeline.Snapshot {
	gen := g.cur.Load()
	var s timeline.Snapshot
	if gen == nil || gen.pol == nil {
		return s
	}
	var totals map[string]*metrics.RouteTotals
	if g.metrics != nil {
		s.Metrics, totals = true, g.metrics.Totals()
	}
	clusterOf := map[string]string{}
	for i := range gen.cfg.Routes {
		clusterOf[gen.cfg.Routes[i].Name] = gen.cfg.Routes[i].Cluster
	}
	g.routePolicies(func(rp metrics.RoutePolicy) {
		r := timeline.RouteSnap{Name: rp.Route, Cluster: clusterOf[rp.Route], Refused: rp.Counts.Refused,
			Retries: rp.Counts.Retries, Budget: rp.Budget, HasBudget: rp.HasBudget}
		if t := totals[rp.Route]; t != nil {
			r.Requests, r.Good, r.Bounds, r.Latency, r.Rejects = t.Requests, t.Good, t.Bounds, t.Latency, t.Refusals
		}
		s.Routes = append(s.Routes, r)
	})
	now := g.clk.Now()
	for i := range gen.cfg.Clusters {
		name := gen.cfg.Clusters[i].Name
		c := timeline.ClusterSnap{Name: name}
		if gd := gen.pol.guards[name].v; gd != nil {
			st := gd.State()
			if a := st.Admission; a != nil {
				c.HasAdmission, c.Limit, c.InFlight, c.QueueLength, c.QueueWait = true, a.Limit, a.InFlight, a.QueueLength, a.QueueWait
				if b := a.Brownout; b != nil {
					c.HasBrownout, c.Brownout = true, b.Level
				}
			}
			if b := st.Breaker; b != nil {
				c.Breaker = b.State
			}
		}
		if cl := gen.clusters[name]; cl != nil {
			for _, m := range cl.px.Set.Members(now) {
				c.Endpoints = append(c.Endpoints, timeline.EndpointSnap{Address: m.Addr(), State: m.State.String()})
			}
		}
		s.Clusters = append(s.Clusters, c)
	}
	return s
}
