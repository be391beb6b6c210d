package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/spillwayhq/spillway/admin"
	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/httpserver"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/timeline"
)

// startAdmin serves the admin API on its own listener (package admin:
// /live, /ready, /metrics, /config, /clusters, endpoint drain, /reload,
// /dashboard) and samples the dashboard's timeline once a second.
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
	g.timeline = timeline.New()
	opts.Dashboard = func(since int64) any { return g.timeline.Data(since) }
	g.admin = httpserver.New(httpserver.Config{Handler: admin.New(adminBackend{g}, opts)})
	g.adminAddr = ln.Addr().String()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := g.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("gateway: admin stopped", "err", err)
		}
	}()
	g.wg.Add(1)
	go func() { defer g.wg.Done(); g.runTimeline(g.ctx) }()
	return nil
}

// adminBackend is the gateway as the admin API sees it.
type adminBackend struct{ g *Gateway }

func (b adminBackend) Ready() bool { return b.g.ready.Load() }

// Config is the running configuration, redacted, with the operator
// overrides in force (Overrides; what a reload does to them is in
// docs/CONFIG.md).
func (b adminBackend) Config() any {
	gen := b.g.cur.Load()
	return struct {
		*config.Config
		Overrides []admin.Override
	}{gen.cfg.Redacted(), gen.overrides()}
}

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

// Policies is the current generation's policy state (GET /policies).
func (b adminBackend) Policies() admin.PolicyStatus {
	gen := b.g.cur.Load()
	var st admin.PolicyStatus
	for i := range gen.cfg.Routes {
		r := &gen.cfg.Routes[i]
		chains := gen.chainsOf(r.Name)
		if len(chains) == 0 {
			continue // on no http listener
		}
		rp := admin.RoutePolicy{Name: r.Name, Cluster: r.Cluster, Class: chains[0].Class().String(), Bypassed: chains[0].Bypassed()}
		k := sumCounts(chains)
		rp.Retries, rp.RetriesStopped = k.Retries, k.RetriesStopped
		for _, c := range chains {
			rp.BulkheadInFlight += c.InFlight()
		}
		if bud := gen.pol.budgets[r.Name].v; bud != nil && r.Policies.Retry.Attempts > 1 {
			tokens := bud.Tokens()
			rp.RetryBudget = &tokens
		}
		if b.g.metrics != nil {
			rp.Refusals = b.g.metrics.Refusals(r.Name)
		}
		if rp.Refusals == nil {
			rp.Refusals = map[string]map[string]uint64{}
		}
		rp.RateLimit = rulePolicies(gen.pol.limits.of(r.Name))
		st.Routes = append(st.Routes, rp)
	}
	for i := range gen.cfg.Clusters {
		c := &gen.cfg.Clusters[i]
		gd := gen.pol.guards[c.Name].v
		if gd == nil {
			continue
		}
		gs := gd.State()
		cp := admin.ClusterPolicy{Name: c.Name, Admission: gs.Admission, Breaker: gs.Breaker}
		if c.Admission != nil {
			cp.Algorithm = c.Admission.AlgorithmName
		}
		st.Clusters = append(st.Clusters, cp)
	}
	return st
}

// rulePolicies lists a route limiter's rules: decisions and hot keys.
func rulePolicies(l *httplimit.Limiter) []admin.RulePolicy {
	out := []admin.RulePolicy{}
	if l == nil {
		return out
	}
	idx := map[string]int{}
	l.Decisions(func(rule, outcome string, n uint64) {
		i, ok := idx[rule]
		if !ok {
			i = len(out)
			idx[rule] = i
			out = append(out, admin.RulePolicy{Rule: rule, Decisions: map[string]uint64{}, HotKeys: []admin.HotKey{}})
		}
		out[i].Decisions[outcome] = n
	})
	for _, rk := range l.HotKeys() {
		if i, ok := idx[rk.Rule]; ok {
			for _, k := range rk.Keys {
				out[i].HotKeys = append(out[i].HotKeys, admin.HotKey{Key: k.Key, Count: k.Count})
			}
		}
	}
	return out
}

// Override applies an operator override to the current generation's
// policy objects: a cluster's guard (kept by a reload that carries the
// guard) or a route's chains (rebuilt, so dropped, by every reload).
func (b adminBackend) Override(o admin.Override) error {
	b.g.mu.Lock() // not during a reload: the override goes to the generation that serves
	defer b.g.mu.Unlock()
	gen := b.g.cur.Load()
	if o.What == "bypass" {
		chains := gen.chainsOf(o.Target)
		if len(chains) == 0 {
			return fmt.Errorf("%w: no route %q", admin.ErrNotFound, o.Target)
		}
		for _, c := range chains {
			c.Bypass(o.On)
		}
		return nil
	}
	if gen.clusters[o.Target] == nil {
		return fmt.Errorf("%w: no cluster %q", admin.ErrNotFound, o.Target)
	}
	gd := gen.pol.guards[o.Target].v
	ok := false
	switch o.What {
	case "breaker":
		if gd != nil && gd.Breaker != nil {
			ok = gd.ForceBreaker(strings.TrimSuffix(o.Value, "auto"))
		}
	case "limit":
		ok = gd != nil && gd.PinLimit(b.g.clk.Now(), o.Limit)
	case "brownout":
		ok = gd != nil && gd.ForceBrownout(o.Level)
	}
	if !ok {
		return fmt.Errorf("%w: cluster %q has no %s", admin.ErrBadValue, o.Target, policyOf(o.What))
	}
	return nil
}

// policyOf names the policy an override needs.
func policyOf(what string) string {
	switch what {
	case "breaker":
		return "breaker"
	case "limit":
		return "admission"
	}
	return "brownout (admission.brownout)"
}

// chainsOf returns the chain of route name in gen (none, or one: the
// listeners that have the route share it).
func (gen *generation) chainsOf(name string) []*chain.Chain {
	for _, rt := range gen.routes {
		if rt.Name == name && rt.Policy != nil {
			return []*chain.Chain{rt.Policy}
		}
	}
	return nil
}

// sumCounts adds up the counters of a route's chains.
func sumCounts(chains []*chain.Chain) chain.Counts {
	out := chain.Counts{RetriesStopped: map[string]uint64{}}
	for _, c := range chains {
		k := c.Counts()
		out.Refused += k.Refused
		out.Retries += k.Retries
		out.Hedges += k.Hedges
		out.HedgesWon += k.HedgesWon
		out.HedgesRefused += k.HedgesRefused
		for v, n := range k.RetriesStopped {
			out.RetriesStopped[v] += n
		}
	}
	return out
}

// overrides lists the operator overrides in force in gen, clusters then
// routes, in configuration order.
func (gen *generation) overrides() []admin.Override {
	out := []admin.Override{}
	for i := range gen.cfg.Clusters {
		name := gen.cfg.Clusters[i].Name
		gd := gen.pol.guards[name].v
		if gd == nil {
			continue
		}
		if f := gd.ForcedBreaker(); f != "" {
			out = append(out, admin.Override{What: "breaker", Target: name, Value: f})
		}
		if n := gd.PinnedLimit(); n > 0 {
			out = append(out, admin.Override{What: "limit", Target: name, Value: strconv.Itoa(n)})
		}
		if lv, ok := gd.ForcedBrownout(); ok {
			out = append(out, admin.Override{What: "brownout", Target: name, Value: strconv.FormatFloat(lv, 'g', -1, 64)})
		}
	}
	for i := range gen.cfg.Routes {
		name := gen.cfg.Routes[i].Name
		if chains := gen.chainsOf(name); len(chains) > 0 && chains[0].Bypassed() {
			out = append(out, admin.Override{What: "bypass", Target: name, Value: "on"})
		}
	}
	return out
}
