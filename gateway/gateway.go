package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/metrics"
	"github.com/spillwayhq/spillway/overload"
	"github.com/spillwayhq/spillway/timeline"
)

// Gateway is a running configuration and its successors: the sockets,
// which outlive reloads, and the generations of routes and clusters that
// serve them.
type Gateway struct {
	opts Options
	log  *slog.Logger
	clk  clock.Clock

	reloadMu sync.Mutex // one Reload at a time, from reading the file to applying it
	mu       sync.Mutex // serialises Start, reloads, drain, endpoint drains and Shutdown
	cur      atomic.Pointer[generation]
	old      []*generation    // replaced, still serving requests they took; guarded by mu
	socks    map[string]*sock // by identity (socketID); guarded by mu
	nextID   int64            // guarded by mu
	last     atomic.Pointer[ReloadStatus]
	started  bool // guarded by mu
	stopping bool // guarded by mu: Shutdown began; reloads are refused

	guard     *overload.Guard
	metrics   *metrics.Metrics // nil with admin.metrics false
	admin     *http.Server
	adminAddr string
	timeline  *timeline.Timeline // the dashboard's; nil with the admin listener off
	watch     *watcher

	ctx    context.Context // ends at Shutdown: sources, checks, sampler
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ready  atomic.Bool
	drain  atomic.Bool // the drain began (SIGTERM): readiness fails
	keepOn atomic.Bool // the guard's last keep-alive decision
}

// Build makes a Gateway from a loaded configuration. It opens nothing.
func Build(cfg *config.Config, opts Options) (*Gateway, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.NewReal()
	}
	if opts.AccessLog == nil {
		opts.AccessLog = opts.Logger
	}
	g := &Gateway{opts: opts, log: opts.Logger, clk: opts.Clock, socks: map[string]*sock{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if cfg.Admin.Metrics {
		m, err := metrics.New(metrics.Options{Clock: g.clk})
		if err != nil {
			g.cancel()
			return nil, err
		}
		g.metrics = m
	}
	guard, err := overload.New(overloadConfig(cfg, g.clk, g.log))
	if err != nil {
		g.cancel()
		return nil, err
	}
	g.guard = guard
	g.keepOn.Store(true)
	guard.OnKeepAlive(g.keepAlive)
	gen, err := g.buildGeneration(cfg, nil)
	if err != nil {
		g.cancel()
		return nil, err
	}
	g.nextID = 1
	gen.id = 1
	g.cur.Store(gen)
	if g.metrics != nil {
		g.observe(gen)
		g.metrics.SetSources(g.metricSources())
	}
	return g, nil
}

// Start opens every listener (all or none: a port in use fails Start with
// the listener's name), starts the endpoint sources and health checks, and
// serves until Shutdown. Static endpoints are in their clusters before it
// returns, so the first request finds them.
func (g *Gateway) Start() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	gen := g.cur.Load()
	opened, err := g.openSockets(gen.cfg)
	if err != nil {
		return err
	}
	if err := g.startAdmin(gen.cfg); err != nil {
		closeAll(opened)
		return err
	}
	g.commitClusters(gen, nil)
	g.applySockets(gen, opened)
	g.wg.Add(1)
	go func() { defer g.wg.Done(); g.guard.Run(g.ctx) }()
	g.wg.Add(1)
	go func() { defer g.wg.Done(); g.runShadowLog(g.ctx) }()
	if err := g.startWatch(gen.cfg); err != nil {
		g.log.Warn("gateway: config watch off", "err", err)
	}
	g.started = true
	g.ready.Store(true)
	g.setStatus(gen, nil, "start")
	return nil
}

// Addr returns the bound address of the named listener ("" before Start
// or for an unknown name): useful with port 0.
func (g *Gateway) Addr(name string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.socks {
		if s.cfg.Name == name {
			return s.addr()
		}
	}
	return ""
}

// AdminAddr returns the admin endpoint's bound address, "" when off.
func (g *Gateway) AdminAddr() string { return g.adminAddr }

// Generation returns the number of the configuration serving new
// requests: 1 at Build, one more per successful reload.
func (g *Gateway) Generation() int64 { return g.cur.Load().id }

// GenerationsLive returns the generations still serving requests: the
// current one and those replaced whose requests are not all done.
func (g *Gateway) GenerationsLive() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return 1 + len(g.old)
}

// Shutdown closes the listeners and the idle connections, lets requests in
// flight finish until ctx ends (then closes their connections), stops
// health checks and endpoint sources, and closes upstream pools. See
// Terminate for the whole SIGTERM sequence.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.stopping = true
	g.ready.Store(false)
	socks := g.socks
	g.socks = map[string]*sock{}
	g.mu.Unlock()
	if g.watch != nil {
		g.watch.stop()
	}
	var errs []error
	for _, s := range socks {
		s.closeSocket()
	}
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, s := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.shutdown(ctx); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	if g.admin != nil {
		errs = append(errs, g.admin.Shutdown(ctx))
	}
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	for _, gen := range append(g.old, g.cur.Load()) {
		g.releaseOnce(gen)
	}
	g.old = nil
	g.mu.Unlock()
	return errors.Join(errs...)
}

func lower(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = strings.ToLower(s)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
