package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
//
// A reload that changes only a cluster's endpoints keeps the cluster (one
// object in both generations, its source restarted); one that changes
// more builds a new cluster that takes over, by identity, the parts whose
// definition did not change (see carry.go): the pools, the checker, the
// detector, and every endpoint's drain and health state.
type cluster struct {
	name string
	keys clusterKeys
	px   *proxy.Cluster
	clk  clock.Clock
	log  *slog.Logger
	ucfg upstream.Config

	// proxyProto is the PROXY protocol version a tcp listener sends to
	// the endpoints (0: none).
	proxyProto int

	src     discovery.Source
	checker *health.Checker
	// set is the Set the checker reports to, shared with the clusters a
	// carried checker moves to: each successor stores its own Set in it.
	set *atomic.Pointer[balancer.Set]

	// static is the file's endpoint list (nil with discovery), applied by
	// start before any listener serves so a first request finds it.
	static []balancer.Endpoint

	mu    sync.Mutex // serialises endpoint updates (pools are copy on write)
	pools map[string]*upstream.Pool
	// carried is the state of a predecessor's endpoints, applied by the
	// first update (guarded by mu).
	carried map[string]endpointState
	// closing are the pools of removed endpoints, closed later (guarded
	// by mu).
	closing      []*time.Timer
	closingPools []*upstream.Pool

	// Owned by the gateway's mutex: the generations using the cluster,
	// and whether the parts were handed to a successor.
	gens                          int
	gavePools, gaveChecker, moved bool

	stop context.CancelFunc // ends the source's goroutine
	done chan struct{}      // closed when it has ended
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
		name: c.Name, keys: keysOf(c, connect),
		px:  &proxy.Cluster{Name: c.Name, Set: set, Picker: c.NewPicker()},
		src: c.Source(), static: c.StaticEndpoints(), clk: clk, log: log, pools: map[string]*upstream.Pool{},
		ucfg: upstream.Config{
			ConnectTimeout: connect, IdleTimeout: c.Pool.IdleTimeout.D(), MaxIdle: c.Pool.MaxIdlePerEndpoint,
			MaxConns: c.Pool.MaxConnsPerEndpoint, TLS: c.ClientTLS(),
		},
	}
	cl.set = new(atomic.Pointer[balancer.Set])
	cl.set.Store(set)
	switch c.ProxyProtocol {
	case "v1":
		cl.proxyProto = 1
	case "v2":
		cl.proxyProto = 2
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
		ref := cl.set
		ch, err := health.NewChecker(check, acfg, health.CheckerOptions{
			Name: c.Name, Logger: log, Clock: clk,
			OnChange: func(addr string, ok bool, _ string) { ref.Load().SetHealthy(clk.Now(), addr, ok) },
		})
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
		}
		cl.checker = ch
	}
	return cl, nil
}

// start applies the static endpoints at once (closing the window in which
// a listener would serve an empty cluster), starts the checks, and follows
// the endpoint source until stop.
func (cl *cluster) start(parent context.Context) {
	if cl.static != nil {
		cl.update(cl.static)
	}
	if cl.checker != nil && !cl.moved {
		cl.checker.Start()
	}
	cl.startSource(parent)
}

func (cl *cluster) startSource(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	cl.stop, cl.done = cancel, make(chan struct{})
	go func() {
		defer close(cl.done)
		err := cl.src.Run(ctx, cl.update)
		if err != nil && !errors.Is(err, context.Canceled) {
			cl.log.Error("gateway: endpoint source stopped", "cluster", cl.name, "err", err)
		}
	}()
}

// stopSource ends the source's goroutine and waits for it.
func (cl *cluster) stopSource() {
	if cl.stop != nil {
		cl.stop()
		<-cl.done
		cl.stop = nil
	}
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
	cl.applyCarried()
	cl.px.Pools.Store(&next)
	for a, p := range cl.pools {
		if _, ok := next[a]; !ok {
			cl.closeLater(p)
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

// removedGrace is how long the pool of an endpoint removed from the
// cluster stays open: a request that picked the endpoint just before the
// update still reaches it (exchanges in flight finish anyway; Close only
// refuses new ones).
const removedGrace = 5 * time.Second

// closeLater closes a removed endpoint's pool after removedGrace. The
// caller holds cl.mu.
func (cl *cluster) closeLater(p *upstream.Pool) {
	cl.closing = append(cl.closing, time.AfterFunc(removedGrace, p.Close))
	cl.closingPools = append(cl.closingPools, p)
	if len(cl.closing) > 64 { // bounded: the oldest are closed now
		cl.closing[0].Stop()
		cl.closingPools[0].Close()
		cl.closing, cl.closingPools = cl.closing[1:], cl.closingPools[1:]
	}
}

// close stops the source and the checks (unless handed over) and closes
// the pools the cluster still owns.
func (cl *cluster) close() {
	cl.stopSource()
	if cl.checker != nil && !cl.gaveChecker {
		cl.checker.Stop()
	}
	if cl.gavePools {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for i, t := range cl.closing {
		t.Stop()
		cl.closingPools[i].Close()
	}
	cl.closing, cl.closingPools = nil, nil
	for _, p := range cl.pools {
		p.Close()
	}
	if t, ok := cl.px.H2.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}
