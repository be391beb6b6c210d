package gateway

import (
	"fmt"
	"sync/atomic"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/metrics"
	"github.com/spillwayhq/spillway/proxy"
)

// generation is one configuration at work: its clusters and the routers of
// its http listeners. A reload builds the next generation; the previous one
// serves the requests it already took (counted in live) and is retired
// when they are done.
type generation struct {
	id       int64
	cfg      *config.Config
	clusters map[string]*cluster
	routers  map[string]router // by listener name (http listeners)
	routes   []*proxy.Route
	obs      *metrics.Gen // nil with metrics off
	pol      *policyState // the routes' policy state (some of it carried)

	// live counts the requests and upgraded connections in flight on the
	// generation's routes (proxy.Route.Live).
	live atomic.Int64

	released bool // guarded by the gateway's mutex
}

// buildGeneration builds the clusters and routes of cfg. Clusters of prev
// (nil at start) whose definition differs only in endpoints are reused;
// others are built new and take over prev's parts by identity when the
// generation is committed (commitClusters). Nothing runs yet.
func (g *Gateway) buildGeneration(cfg *config.Config, prev *generation) (*generation, error) {
	gen := &generation{cfg: cfg, clusters: map[string]*cluster{}, routers: map[string]router{}}
	connect := connectTimeouts(cfg)
	for i := range cfg.Clusters {
		c := &cfg.Clusters[i]
		if prev != nil {
			if old := prev.clusters[c.Name]; old != nil && old.keys.same(keysOf(c, connect[c.Name])) {
				gen.clusters[c.Name] = old
				continue
			}
		}
		cl, err := newCluster(c, connect[c.Name], g.clk, g.log)
		if err != nil {
			return nil, err
		}
		gen.clusters[c.Name] = cl
	}
	var prevPol *policyState
	if prev != nil {
		prevPol = prev.pol
	}
	pol, err := g.buildPolicies(gen, prevPol)
	if err != nil {
		return nil, err
	}
	gen.pol = pol
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		if l.Protocol == "tcp" {
			continue
		}
		r, err := routerFor(cfg, l, gen.clusters, &gen.live, pol)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", l.Name, err)
		}
		gen.routers[l.Name] = r
		gen.routes = append(gen.routes, r.routes...)
	}
	return gen, nil
}

// commitClusters starts what the new generation needs, with prev (nil at
// start) still serving: reused clusters follow their new endpoint source,
// new ones take over prev's parts and start. The caller holds g.mu.
func (g *Gateway) commitClusters(gen, prev *generation) {
	for name, cl := range gen.clusters {
		cl.gens++
		var old *cluster
		if prev != nil {
			old = prev.clusters[name]
		}
		switch {
		case old == cl:
			c := gen.cfg.Cluster(name)
			if fingerprint(c.Endpoints, c.Discovery) != cl.keys.source {
				cl.stopSource()
				cl.src, cl.static, cl.keys.source = c.Source(), c.StaticEndpoints(), fingerprint(c.Endpoints, c.Discovery)
				if cl.static != nil {
					cl.update(cl.static)
				}
				cl.startSource(g.ctx)
			}
		case old != nil:
			old.stopSource() // cl follows the source from now
			takeOver(cl, old)
			cl.start(g.ctx)
		default:
			cl.start(g.ctx)
		}
	}
}

// release drops gen's hold on its clusters, closing those no generation
// uses any more. The caller holds g.mu.
func (g *Gateway) release(gen *generation) {
	for _, cl := range gen.clusters {
		cl.gens--
		if cl.gens == 0 {
			cl.close()
		}
	}
}

// releaseOnce releases gen unless it was released already. The caller
// holds g.mu.
func (g *Gateway) releaseOnce(gen *generation) {
	if gen == nil || gen.released {
		return
	}
	gen.released = true
	g.release(gen)
	if cur := g.cur.Load(); gen.pol != nil && (cur == nil || cur == gen || cur.pol == nil || cur.pol.limits != gen.pol.limits) {
		gen.pol.limits.close()
	}
	if g.metrics != nil && gen.obs != nil {
		g.metrics.Retire(gen.obs)
	}
}
