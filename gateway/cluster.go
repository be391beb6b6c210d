package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/discovery"
	"github.com/spillwayhq/spillway/health"
	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/upstream"
)

// cluster is a proxy.Cluster and what keeps it current: its endpoint
// source, active checker and passive detector, and the pools per endpoint.
type cluster struct {
	px      *proxy.Cluster
	src     discovery.Source
	checker *health.Checker
	ucfg    upstream.Config
	clk     clock.Clock
	log     *slog.Logger

	// static is the file's endpoint list (nil with discovery), applied by
	// Start before any listener serves so a first request finds it.
	static []balancer.Endpoint

	mu    sync.Mutex // serialises endpoint updates (pools are copy on write)
	pools map[string]*upstream.Pool
}

// newCluster builds a cluster from its configuration; nothing runs yet.
//
// Pools are per cluster and endpoint, connect timeouts per route: the
// pools' dial bound is the longest connect timeout of the routes that use
// the cluster (connect), and each route's request timeout still bounds
// its whole exchange.
func newCluster(c *config.Cluster, connect time.Duration, clk clock.Clock, log *slog.Logger) (*cluster, error) {
	set, err := balancer.NewSet(c.SetConfig())
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	cl := &cluster{
		px:  &proxy.Cluster{Name: c.Name, Set: set, Picker: c.NewPicker()},
		src: c.Source(), static: c.StaticEndpoints(), clk: clk, log: log, pools: map[string]*upstream.Pool{},
		ucfg: upstream.Config{
			ConnectTimeout: connect, IdleTimeout: c.Pool.IdleTimeout.D(), MaxIdle: c.Pool.MaxIdlePerEndpoint,
			MaxConns: c.Pool.MaxConnsPerEndpoint, TLS: c.ClientTLS(),
		},
	}
	if cl.ucfg.MaxIdle == 0 {
		cl.ucfg.MaxIdle = -1 // 0 in the file: keep none (the library reads 0 as its default)
	}
	if hp, ok := c.HashPolicy(); ok && c.TableBuilder() != nil {
		cl.px.Hash, cl.px.Table = &hp, c.TableBuilder()
	}
	cl.px.Init()
	empty := map[string]*upstream.Pool{}
	cl.px.Pools.Store(&empty)
	switch c.Protocol {
	case "h2c":
		cl.px.H2 = upstream.NewH2Transport(cl.ucfg, true)
	case "http2":
		cl.px.H2 = upstream.NewH2Transport(cl.ucfg, false)
	}
	if ocfg, ok := c.OutlierConfig(); ok {
		d, err := health.NewDetector(ocfg)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
		}
		cl.px.Outlier = &proxy.Outlier{Detector: d}
	}
	if check := c.HealthCheck(); check != nil {
		acfg, _ := c.ActiveConfig()
		ch, err := health.NewChecker(check, acfg, health.CheckerOptions{
			Name: c.Name, Logger: log, Clock: clk,
			OnChange: func(addr string, ok bool, _ string) { set.SetHealthy(clk.Now(), addr, ok) },
		})
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
		}
		cl.checker = ch
	}
	return cl, nil
}

// run follows the endpoint source until ctx ends: the Set, the pools and
// the checker's targets follow every list it sends.
func (cl *cluster) run(ctx context.Context) {
	if cl.checker != nil {
		cl.checker.Start()
		defer cl.checker.Stop()
	}
	err := cl.src.Run(ctx, cl.update)
	if err != nil && !errors.Is(err, context.Canceled) {
		cl.log.Error("gateway: endpoint source stopped", "cluster", cl.px.Name, "err", err)
	}
	<-ctx.Done()
}

// update applies one endpoint list.
func (cl *cluster) update(eps []balancer.Endpoint) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	next := make(map[string]*upstream.Pool, len(eps))
	addrs := make([]string, len(eps))
	for i, e := range eps {
		addrs[i] = e.Addr
		if p, ok := cl.pools[e.Addr]; ok {
			next[e.Addr] = p
		} else {
			next[e.Addr] = upstream.NewPool(e.Addr, cl.ucfg)
		}
	}
	cl.px.Set.Update(cl.clk.Now(), eps)
	cl.px.Pools.Store(&next)
	for a, p := range cl.pools {
		if _, ok := next[a]; !ok {
			p.Close()
		}
	}
	cl.pools = next
	if o := cl.px.Outlier; o != nil {
		o.Detector.SetHosts(addrs)
	}
	if cl.checker != nil {
		cl.checker.SetTargets(addrs)
	}
}

// close closes every pool.
func (cl *cluster) close() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, p := range cl.pools {
		p.Close()
	}
	if t, ok := cl.px.H2.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}
