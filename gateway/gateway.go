package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/httpserver"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/l4"
	"github.com/spillwayhq/spillway/proxy"
)

// Gateway is one configuration, built and ready to run.
type Gateway struct {
	cfg       *config.Config
	log       *slog.Logger
	clk       clock.Clock
	clusters  map[string]*cluster
	listeners []*listener
	admin     *http.Server
	adminAddr string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ready  atomic.Bool
}

// listener is one configured listener and its engine.
type listener struct {
	cfg  *config.Listener
	ln   net.Listener
	http *proxy.Server // protocol http
	tcp  *l4.Proxy     // protocol tcp
}

// Build makes a Gateway from a loaded configuration. It opens nothing.
func Build(cfg *config.Config, opts Options) (*Gateway, error) {
	g := &Gateway{cfg: cfg, log: opts.Logger, clk: opts.Clock, clusters: map[string]*cluster{}}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.clk == nil {
		g.clk = clock.NewReal()
	}
	connect := connectTimeouts(cfg)
	for i := range cfg.Clusters {
		c := &cfg.Clusters[i]
		cl, err := newCluster(c, connect[c.Name], g.clk, g.log)
		if err != nil {
			return nil, err
		}
		g.clusters[c.Name] = cl
	}
	for i := range cfg.Listeners {
		l, err := g.buildListener(&cfg.Listeners[i])
		if err != nil {
			return nil, err
		}
		g.listeners = append(g.listeners, l)
	}
	return g, nil
}

func (g *Gateway) buildListener(l *config.Listener) (*listener, error) {
	out := &listener{cfg: l}
	if l.Protocol == "tcp" {
		cl := g.clusters[l.Cluster]
		maxConns := l.Limits.MaxConnections
		if maxConns == 0 {
			maxConns = -1 // 0 in the file: unlimited (l4 reads 0 as its default)
		}
		p, err := l4.New(l4.Config{
			Set: cl.px.Set, Picker: cl.px.Picker, Clock: g.clk, Logger: g.log,
			MaxConns: maxConns, // idle: l4's own 1 h (limits.idle_timeout is HTTP keep-alive)
		})
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", l.Name, err)
		}
		out.tcp = p
		return out, nil
	}
	r, err := routerFor(g.cfg, l, g.clusters)
	if err != nil {
		return nil, fmt.Errorf("listener %q: %w", l.Name, err)
	}
	lim := l.Limits
	out.http = proxy.NewServer(proxy.Config{
		HeaderTimeout: lim.HeaderTimeout.D(), IdleTimeout: lim.IdleTimeout.D(),
		BodyTimeout: lim.BodyInactivity.D(), SendTimeout: lim.BodyInactivity.D(),
		Limits:         httpwire.Limits{MaxHeaderBytes: int(lim.MaxHeaderBytes), MaxFields: lim.MaxHeaderCount},
		TrustedProxies: l.TrustedPrefixes(), HTTP2: l.HTTP2, MaxConns: lim.MaxConnections, Clock: g.clk, Logger: g.log,
	}, r)
	return out, nil
}

// Start opens every listener (all or none: a port in use fails Start with
// the listener's name), starts the endpoint sources and health checks, and
// serves until Shutdown. Static endpoints are in their clusters before it
// returns, so the first request finds them.
func (g *Gateway) Start() error {
	for _, l := range g.listeners {
		ln, err := net.Listen("tcp", l.cfg.Address)
		if err != nil {
			g.closeListeners()
			return fmt.Errorf("listener %q: %w", l.cfg.Name, err)
		}
		if t := l.cfg.ServerTLS(); t != nil {
			ln = tls.NewListener(ln, t)
		}
		l.ln = ln
	}
	if err := g.startAdmin(); err != nil {
		g.closeListeners()
		return err
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for _, cl := range g.clusters {
		if cl.static != nil {
			// The source sends the same list again from its goroutine;
			// applying it here first closes the window in which the
			// listeners serve an empty cluster (503, closed connections).
			cl.update(cl.static)
		}
		g.wg.Add(1)
		go func() { defer g.wg.Done(); cl.run(g.ctx) }()
	}
	for _, l := range g.listeners {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			var err error
			if l.tcp != nil {
				err = l.tcp.Serve(l.ln)
			} else {
				err = l.http.Serve(l.ln)
			}
			if err != nil {
				g.log.Error("gateway: listener stopped", "listener", l.cfg.Name, "err", err)
			}
		}()
		g.log.Info("gateway: listening", "listener", l.cfg.Name, "address", l.ln.Addr().String(), "protocol", l.cfg.Protocol, "tls", l.cfg.TLS != nil)
	}
	g.ready.Store(true)
	return nil
}

// Addr returns the bound address of the named listener ("" before Start
// or for an unknown name): useful with port 0.
func (g *Gateway) Addr(name string) string {
	for _, l := range g.listeners {
		if l.cfg.Name == name && l.ln != nil {
			return l.ln.Addr().String()
		}
	}
	return ""
}

// AdminAddr returns the admin endpoint's bound address, "" when off.
func (g *Gateway) AdminAddr() string { return g.adminAddr }

// Shutdown closes the listeners, lets open connections finish until ctx
// ends (then closes them), stops health checks and endpoint sources, and
// closes upstream pools.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.ready.Store(false)
	g.closeListeners()
	var errs []error
	for _, l := range g.listeners {
		switch {
		case l.http != nil:
			errs = append(errs, l.http.Shutdown(ctx))
		case l.tcp != nil:
			errs = append(errs, l.tcp.Shutdown(ctx))
		}
	}
	if g.admin != nil {
		errs = append(errs, g.admin.Shutdown(ctx))
	}
	if g.cancel != nil {
		g.cancel()
	}
	g.wg.Wait()
	for _, cl := range g.clusters {
		cl.close()
	}
	return errors.Join(errs...)
}

func (g *Gateway) closeListeners() {
	for _, l := range g.listeners {
		if l.ln != nil {
			_ = l.ln.Close()
		}
	}
}

// startAdmin serves /ready and /live on the admin address (part 2 adds
// the rest of the admin API).
func (g *Gateway) startAdmin() error {
	addr := g.cfg.Admin.Address
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if !g.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	g.admin = httpserver.New(httpserver.Config{Handler: mux})
	g.adminAddr = ln.Addr().String()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := g.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("gateway: admin stopped", "err", err)
		}
	}()
	return nil
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
