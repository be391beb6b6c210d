package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"

	"github.com/spillwayhq/spillway/admin"
	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/httpserver"
)

// startAdmin serves the admin API on its own listener (package admin:
// /live, /ready, /metrics, /config, /clusters, endpoint drain, /reload).
// Its address and token are read at start only.
func (g *Gateway) startAdmin(cfg *config.Config) error {
	addr := cfg.Admin.Address
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return cfg.Errorf(&cfg.Admin.Address, "admin: %v", err)
	}
	opts := admin.Options{Token: cfg.Admin.Token, Address: ln.Addr().String(), Hosts: cfg.Admin.Hosts, Logger: g.log}
	if g.metrics != nil {
		opts.Metrics = g.metrics.Handler()
	}
	g.admin = httpserver.New(httpserver.Config{Handler: admin.New(adminBackend{g}, opts)})
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

// adminBackend is the gateway as the admin API sees it.
type adminBackend struct{ g *Gateway }

func (b adminBackend) Ready() bool { return b.g.ready.Load() }

func (b adminBackend) Config() any { return b.g.cur.Load().cfg.Redacted() }

func (b adminBackend) Reload() error { return b.g.Reload("admin") }

func (b adminBackend) LastReload() admin.ReloadStatus {
	st := b.g.LastReload()
	return admin.ReloadStatus{At: st.At, OK: st.OK, Generation: st.Generation, Errors: st.Errors, Trigger: st.Trigger}
}

// Drain turns draining of one endpoint on or off in the current
// generation's cluster (a reload carries it over).
func (b adminBackend) Drain(cluster, endpoint string, on bool) error {
	b.g.mu.Lock() // not during a reload: its snapshot of drains would miss this one
	defer b.g.mu.Unlock()
	cl := b.g.cur.Load().clusters[cluster]
	if cl == nil {
		return fmt.Errorf("%w: no cluster %q", admin.ErrNotFound, cluster)
	}
	if !cl.px.Set.Drain(b.g.clk.Now(), endpoint, on) {
		return fmt.Errorf("%w: cluster %q has no endpoint %q", admin.ErrNotFound, cluster, endpoint)
	}
	b.g.log.Info("gateway: endpoint drain", "cluster", cluster, "endpoint", endpoint, "draining", on)
	return nil
}

// Clusters lists the current generation's clusters and every endpoint.
func (b adminBackend) Clusters() []admin.ClusterStatus {
	gen := b.g.cur.Load()
	now := b.g.clk.Now()
	out := make([]admin.ClusterStatus, 0, len(gen.clusters))
	for i := range gen.cfg.Clusters {
		c := &gen.cfg.Clusters[i]
		cl := gen.clusters[c.Name]
		cs := admin.ClusterStatus{Name: c.Name, Picker: c.Picker}
		for _, m := range cl.px.Set.Members(now) {
			cs.Endpoints = append(cs.Endpoints, endpointStatus(m, now))
		}
		out = append(out, cs)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func endpointStatus(m balancer.Member, now float64) admin.EndpointStatus {
	return admin.EndpointStatus{
		Address: m.Addr(), State: m.State.String(), Weight: m.Endpoint().Weight,
		InFlight: m.InFlight(), LatencyEWMAms: m.Latency(now) * 1000,
	}
}
