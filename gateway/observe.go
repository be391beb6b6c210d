package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/metrics"
	"github.com/spillwayhq/spillway/overload"
	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
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
		Routes:        g.routePolicies,
		Clusters:      g.clusterPolicies,
		Collectors:    g.storeCollectors(),
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

// routePolicies reports the current generation's routes' policy state.
func (g *Gateway) routePolicies(add func(metrics.RoutePolicy)) {
	gen := g.cur.Load()
	if gen == nil || gen.pol == nil {
		return
	}
	for i := range gen.cfg.Routes {
		r := &gen.cfg.Routes[i]
		chains := gen.chainsOf(r.Name)
		if len(chains) == 0 {
			continue
		}
		rp := metrics.RoutePolicy{Route: r.Name, Counts: sumCounts(chains), Bypassed: chains[0].Bypassed(),
			Hedging: r.Policies.Retry.Hedge != nil}
		if bud := gen.pol.budgets[r.Name].v; bud != nil && (r.Policies.Retry.Attempts > 1 || rp.Hedging) {
			rp.Budget, rp.HasBudget = bud.Tokens(), true
		}
		if l := gen.pol.limits.of(r.Name); l != nil {
			rp.Decisions = l.Decisions
			if gen.cfg.RateLimit.HotKeys != nil {
				rp.HotKeys = hotKeysOf(l)
			}
		}
		add(rp)
	}
}

// hotKeysOf reports l's current rules' top keys (at most TopK per rule,
// so a key that left the top set is not reported), shown as httplimit's
// own gauge shows them: "(global)", "(fallback)", valid UTF-8, each
// (rule, key) once.
func hotKeysOf(l *httplimit.Limiter) func(fn func(rule, key string, units uint64)) {
	return func(fn func(rule, key string, units uint64)) {
		for _, rk := range l.HotKeys() {
			seen := make(map[string]bool, len(rk.Keys))
			for _, hk := range rk.Keys {
				k := httplimit.DisplayKey(hk.Key)
				if !seen[k] {
					seen[k] = true
					fn(rk.Rule, k, hk.Count)
				}
			}
		}
	}
}

// clusterPolicies reports the current generation's cluster guards.
func (g *Gateway) clusterPolicies(add func(metrics.ClusterPolicy)) {
	gen := g.cur.Load()
	if gen == nil || gen.pol == nil {
		return
	}
	for name, gd := range gen.pol.guards {
		if gd.v != nil {
			add(metrics.ClusterPolicy{Cluster: name, Guard: gd.v})
		}
	}
}

// storeCollectors returns the source of the Redis rate-limit stores'
// collectors: one per redisstore.Stores (made once, as it keeps counts
// across scrapes), the current generation's only.
func (g *Gateway) storeCollectors() func(add func(prometheus.Collector)) {
	var mu sync.Mutex
	made := map[*redisstore.Stores]prometheus.Collector{}
	return func(add func(prometheus.Collector)) {
		gen := g.cur.Load()
		var st *redisstore.Stores
		if gen != nil && gen.pol != nil && gen.pol.limits != nil {
			st = gen.pol.limits.stores
		}
		mu.Lock()
		defer mu.Unlock()
		for s := range made {
			if s != st {
				delete(made, s)
			}
		}
		if st == nil {
			return
		}
		c := made[st]
		if c == nil {
			c = st.Collector()
			made[st] = c
		}
		add(c)
	}
}

var _ proxy.Observer = (*metrics.RouteObserver)(nil)
