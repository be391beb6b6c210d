package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/proxy"
)

// RouteInfo names one route of a generation and its cluster.
type RouteInfo struct {
	Name, Cluster string
}

// ClusterInfo names one cluster of a generation and the Set whose
// members' states endpoint_health shows at scrape time.
type ClusterInfo struct {
	Name string
	// Set holds the cluster's endpoints; nil: no endpoint_health series,
	// and the error series of removed endpoints are never pruned (the
	// cap still bounds them).
	Set *balancer.Set
}

// ClusterOf describes a proxy.Cluster.
func ClusterOf(c *proxy.Cluster) ClusterInfo { return ClusterInfo{Name: c.Name, Set: c.Set} }

// Gen is one configuration generation's observers; built by
// Metrics.Generation, immutable.
type Gen struct {
	number   uint64
	routes   map[string]*RouteObserver
	clusters map[string]*ClusterObserver
	infos    []ClusterInfo
}

// Number returns the generation's number: 1 for the first Generation of
// a Metrics, then one more for each (config_generation shows the newest).
func (g *Gen) Number() uint64 { return g.number }

// Route returns the named route's observer, or nil when the generation
// has no such route (check before storing it in a proxy.Route: a nil
// pointer in an interface is not a nil interface).
func (g *Gen) Route(name string) *RouteObserver { return g.routes[name] }

// Cluster returns the named cluster's observer, or nil when the
// generation has no such cluster.
func (g *Gen) Cluster(name string) *ClusterObserver { return g.clusters[name] }

// Generation builds the observers of a new configuration generation: for
// every route, its request counters (every status class and source), its
// histogram and its in-flight gauge are resolved now, so the request path
// does no label lookup; cluster observers are shared with the live
// generations that have a cluster of the same name. A route name listed
// twice keeps its first cluster. The generation counts as live, and as
// the newest, until Retire.
func (m *Metrics) Generation(routes []RouteInfo, clusters []ClusterInfo) *Gen {
	g := &Gen{
		routes:   make(map[string]*RouteObserver, len(routes)),
		clusters: make(map[string]*ClusterObserver, len(clusters)),
		infos:    slices.Clone(clusters),
	}
	for _, r := range routes {
		if _, dup := g.routes[r.Name]; !dup {
			g.routes[r.Name] = m.newRouteObserver(r)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range clusters {
		o := m.clusters[c.Name]
		if o == nil {
			o = newClusterObserver(m, c.Name)
			m.clusters[c.Name] = o
		}
		g.clusters[c.Name] = o
	}
	m.next++
	g.number = m.next
	m.live = append(m.live, g)
	return g
}

// Retire ends old's life once its requests have drained (or at once for
// a generation that never served): the series of routes and clusters that
// no remaining live generation has are deleted, so a route renamed by a
// reload leaves no stale series. Retiring a generation twice, or one of
// another Metrics, does nothing.
func (m *Metrics) Retire(old *Gen) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.Index(m.live, old)
	if i < 0 {
		return
	}
	m.live = slices.Delete(m.live, i, i+1)
	liveRoutes, liveNames, liveClusters := map[RouteInfo]bool{}, map[string]bool{}, map[string]bool{}
	for _, g := range m.live {
		for name, o := range g.routes {
			liveRoutes[o.info], liveNames[name] = true, true
		}
		for name := range g.clusters {
			liveClusters[name] = true
		}
	}
	for name, o := range old.routes {
		if !liveRoutes[o.info] {
			m.deleteRoute(o.info)
		}
		if !liveNames[name] {
			m.inFlight.DeleteLabelValues(name)
			o.refusals.retire(func() { m.refusals.DeletePartialMatch(prometheus.Labels{"route": name}) })
		}
	}
	for name, o := range old.clusters {
		if !liveClusters[name] {
			delete(m.clusters, name)
			o.retire(m)
		}
	}
}

// deleteRoute deletes the request counters and histogram of one route.
func (m *Metrics) deleteRoute(r RouteInfo) {
	for _, class := range classNames {
		for _, src := range sourceNames {
			m.requests.DeleteLabelValues(r.Name, r.Cluster, class, src)
		}
	}
	m.duration.DeleteLabelValues(r.Name, r.Cluster)
}

// liveGens returns the live generations, oldest first.
func (m *Metrics) liveGens() []*Gen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.live)
}
