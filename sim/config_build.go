package sim

import (
	"fmt"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/shed"
)

// The policy objects of `spillway sim config`, built from the config's
// sections with the same library constructors (and the config package's
// own mappings) as package gateway builds them: per route its rate
// limiter (httplimit over memory stores), bulkhead, retry policy with its
// budget; per cluster its admission Limiter, breaker, balancer Set and
// picker, and a simulated backend per endpoint.

// cfgRoute is one route's policies.
type cfgRoute struct {
	r        *config.Route
	cl       *cfgCluster
	class    shed.Class
	lim      *httplimit.Limiter // nil: no rules
	retry    *retry.Policy      // nil: one attempt
	budget   *retry.Budget
	bulk     int     // max_concurrent; 0: none
	inFlight int     // the bulkhead's count
	perTry   float64 // the attempt's bound: response_header and request timeouts, seconds
}

// cfgCluster is one cluster's policies and endpoints.
type cfgCluster struct {
	c         *config.Cluster
	gate      *predGate // nil: no admission
	brk       *breaker.Breaker
	brkShadow bool
	fallback  string // a static fallback's reason code ("" : breaker-open)
	fbStatus  int
	set       *balancer.Set
	picker    balancer.SetPicker
	eps       map[string]*cfgEndpoint // by address
	order     []*cfgEndpoint          // in the file's order
	health    *cfgHealth              // nil: no active checks
}

// cfgEndpoint is an endpoint's simulated backend and its checks' counts.
type cfgEndpoint struct {
	addr         string
	srv          *predServer
	fails, rises int
	healthy      bool
}

// cfgHealth is a cluster's active checks: every Interval each endpoint
// passes when its backend has a worker, fails when it has none (a dead
// or stopped process); Fall failures in a row take it out, Rise passes
// bring it back (balancer.Set.SetHealthy).
type cfgHealth struct {
	interval   float64
	fall, rise int
}

func (s *configSim) build() error {
	cfg := s.m.Config
	s.clusters = map[string]*cfgCluster{}
	for i := range cfg.Clusters {
		cl, err := s.buildCluster(&cfg.Clusters[i])
		if err != nil {
			return fmt.Errorf("%w: cluster %q: %v", ErrModel, cfg.Clusters[i].Name, err)
		}
		s.clusters[cl.c.Name] = cl
	}
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		if s.m.Route != "" && r.Name != s.m.Route {
			continue
		}
		rt, err := s.buildRoute(cfg, r)
		if err != nil {
			return fmt.Errorf("%w: route %q: %v", ErrModel, r.Name, err)
		}
		s.routes = append(s.routes, rt)
	}
	return nil
}

func (s *configSim) buildRoute(cfg *config.Config, r *config.Route) (*cfgRoute, error) {
	p := &r.Policies
	rt := &cfgRoute{r: r, cl: s.clusters[r.Cluster], class: p.ClassOf(), bulk: p.MaxConcurrent}
	if rt.cl == nil {
		return nil, fmt.Errorf("cluster %q not found", r.Cluster)
	}
	rt.perTry = r.Timeouts.ResponseHeader.D().Seconds()
	if d := r.Timeouts.Request.D().Seconds(); d > 0 && (rt.perTry <= 0 || d < rt.perTry) && !r.Streaming {
		rt.perTry = d
	}
	if rl := p.RateLimit; rl != nil {
		mc := cfg.RateLimit.MemoryConfig()
		lim, err := httplimit.New(rl.RuleSet(), httplimit.Config{
			Store: func(ru rules.Rule) (ratelimit.Keyed, error) { return ratelimit.NewMemory(ru.Spec, mc) },
		})
		if err != nil {
			return nil, fmt.Errorf("ratelimit: %v", err)
		}
		rt.lim = lim
	}
	if p.Retry.Attempts > 1 {
		b, err := retry.NewBudget(p.Retry.BudgetConfig())
		if err != nil {
			return nil, err
		}
		pol := p.Retry.Policy()
		pol.Budget = b
		if rt.retry, err = retry.NewPolicy(pol); err != nil {
			return nil, err
		}
		rt.budget = b
	}
	return rt, nil
}

func (s *configSim) buildCluster(c *config.Cluster) (*cfgCluster, error) {
	cl := &cfgCluster{c: c, eps: map[string]*cfgEndpoint{}}
	if a := c.Admission; a != nil {
		g, err := newPredGate(a, s.ev)
		if err != nil {
			return nil, err
		}
		cl.gate = g
	}
	if b := c.Breaker; b != nil {
		br, err := breaker.New(b.BreakerConfig())
		if err != nil {
			return nil, err
		}
		cl.brk, cl.brkShadow = br, b.Shadow
		if f := b.Fallback; f != nil && f.Cluster == "" {
			cl.fallback, cl.fbStatus = "breaker-fallback", f.Status
		}
	}
	set, err := balancer.NewSet(c.SetConfig())
	if err != nil {
		return nil, err
	}
	cl.set, cl.picker = set, seeded(c.NewPicker(), s.pick)
	eps := c.StaticEndpoints()
	if len(eps) == 0 {
		return nil, fmt.Errorf("no static endpoints (discovery is not simulated)")
	}
	set.Update(0, eps)
	for i, e := range eps {
		ep := &cfgEndpoint{addr: e.Addr, healthy: true}
		ep.srv = s.newServer(i)
		cl.eps[e.Addr] = ep
		cl.order = append(cl.order, ep)
	}
	if ac, ok := c.ActiveConfig(); ok && c.Health.Active.Type != "" {
		cl.health = &cfgHealth{interval: ac.Interval, fall: max(1, ac.Fall), rise: max(1, ac.Rise)}
		if !ac.InitiallyHealthy {
			for _, ep := range cl.order {
				set.SetHealthy(0, ep.addr, true) // the first checks pass at once: a backend starts with its workers
			}
		}
	}
	return cl, nil
}

// seeded gives p the run's random source, so picks are deterministic.
func seeded(p balancer.SetPicker, r *rng.Mulberry32) balancer.SetPicker {
	switch q := p.(type) {
	case *balancer.WeightedRandom:
		q.Rand = r
	case *balancer.LeastRequest:
		q.Rand = r
	case *balancer.PeakEWMA:
		q.Rand = r
	case balancer.Loaded:
		if rp, ok := q.Picker.(*balancer.Random); ok {
			rp.Rand = r
		}
	}
	return p
}

// newServer is endpoint i's backend: the spec's workers, changed by the
// schedule's entries for every endpoint or for i (the last listed wins).
func (s *configSim) newServer(i int) *predServer {
	b := s.m.Backend
	var changes []CapacityChange
	for _, c := range s.m.Schedule {
		if c.Endpoint < 0 || c.Endpoint == i {
			changes = append(changes, c)
		}
	}
	workers := func(now float64) int {
		w := b.Workers
		for _, c := range changes {
			if now >= c.From.Seconds() && now < c.To.Seconds() {
				w = c.Workers
			}
		}
		return w
	}
	srv := &predServer{workers: workers, queueMax: b.Queue, honor: b.Honor, service: b.Service.Seconds(), src: s.svc, ev: s.ev}
	if b.Dist == "const" {
		srv.draw = func(mean float64) float64 { return mean }
	}
	return srv
}
