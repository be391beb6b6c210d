package gateway

import (
	"github.com/spillwayhq/spillway/metrics"
	"github.com/spillwayhq/spillway/overload"
	"github.com/spillwayhq/spillway/proxy"
)

// observe builds gen's metric observers (label children resolved once
// for the generation) and hands them to its routes and clusters.
func (g *Gateway) observe(gen *generation) {
	var routes []metrics.RouteInfo
	for _, rt := range gen.routes {
		routes = append(routes, metrics.RouteInfo{Name: rt.Name, Cluster: rt.Cluster.Name})
	}
	var clusters []metrics.ClusterInfo
	for _, cl := range gen.clusters {
		clusters = append(clusters, metrics.ClusterOf(cl.px))
	}
	gen.obs = g.metrics.Generation(routes, clusters)
	for _, rt := range gen.routes {
		if o := gen.obs.Route(rt.Name); o != nil {
			rt.Observer = o
		}
	}
	for name, cl := range gen.clusters {
		if o := gen.obs.Cluster(name); o != nil {
			cl.px.Observer = o
		}
	}
}

// metricSources gives the metrics what they read at scrape time: the
// guard's actions and state, and the connections open per listener.
func (g *Gateway) metricSources() metrics.Sources {
	return metrics.Sources{
		OverloadActions: func(add func(string, uint64)) {
			st := g.guard.Stats()
			for r, n := range st.Refused {
				if reason := overload.Reason(r); reason != overload.ReasonNone {
					add("refuse-"+reason.String(), n)
				}
			}
			add("keepalive-off", st.Transitions[overload.KeepAliveOff])
			add("refuse-all", st.Transitions[overload.Refuse])
		},
		OverloadState: func() float64 { return float64(g.guard.State()) },
		Connections: func(add func(string, int)) {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, s := range g.socks {
				if s.http != nil {
					add(s.cfg.Name, s.http.Stats().Active)
				} else if s.tcp != nil {
					add(s.cfg.Name, int(s.tcp.Stats().Active))
				}
			}
		},
	}
}

var _ proxy.Observer = (*metrics.RouteObserver)(nil)
