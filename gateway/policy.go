package gateway

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/retry"
)

// The policy chain's state lives across generations, by identity: a
// cluster's guard (admission, breaker) while its definition is the same, a
// route's rate limiter by route name (its rules updated in place, so an
// unchanged rule keeps its counts), a route's retry budget while its
// definition is the same. A changed adaptive limit starts from the old
// current limit, clamped to its new bounds; an unchanged admission keeps
// its gate (limiter state, pinned limit, admission overrides) when only
// the breaker changed.
type policyState struct {
	guards  map[string]keyed[*chain.Guard]  // by cluster name
	budgets map[string]keyed[*retry.Budget] // by route name
	hedgers map[string]keyed[*retry.Hedger] // by route name; nil value: no hedging
	limits  *routeLimits
	// chains holds the generation's compiled chains by route name: a
	// route on several listeners has one chain (one bulkhead, one set of
	// counters, one bypass).
	chains map[string]compiledChain
}

// compiledChain is a route's chain and its breaker's fallback cluster.
type compiledChain struct {
	ch       *chain.Chain
	fallback *proxy.Cluster
}

// keyed is a policy object and the definition it was built from.
type keyed[T any] struct {
	key string
	v   T
}

// buildPolicies compiles the chains of gen's routes, reusing prev's state
// (nil at start) by identity. Nothing of prev changes unless it returns
// nil: rate limiters are updated last.
func (g *Gateway) buildPolicies(gen *generation, prev *policyState) (*policyState, error) {
	cfg := gen.cfg
	next := &policyState{guards: map[string]keyed[*chain.Guard]{}, budgets: map[string]keyed[*retry.Budget]{},
		hedgers: map[string]keyed[*retry.Hedger]{}, chains: map[string]compiledChain{}}
	for i := range cfg.Clusters {
		c := &cfg.Clusters[i]
		var old keyed[*chain.Guard]
		if prev != nil {
			old = prev.guards[c.Name]
		}
		gd, err := g.guardFor(c, old)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
		}
		next.guards[c.Name] = gd
	}
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		var old keyed[*retry.Budget]
		var oldHedger keyed[*retry.Hedger]
		if prev != nil {
			old, oldHedger = prev.budgets[r.Name], prev.hedgers[r.Name]
		}
		b, err := budgetFor(r, old)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r.Name, err)
		}
		next.budgets[r.Name] = b
		h, err := g.hedgerFor(r, b, oldHedger)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r.Name, err)
		}
		next.hedgers[r.Name] = h
	}
	var oldLimits *routeLimits
	if prev != nil {
		oldLimits = prev.limits
	}
	lims, err := g.limitsFor(cfg, oldLimits)
	if err != nil {
		return nil, err
	}
	next.limits = lims
	return next, nil
}

// guardFor returns cluster c's guard: old's when its definition is the
// same, else a new one (nil value when c has neither admission nor a
// breaker).
func (g *Gateway) guardFor(c *config.Cluster, old keyed[*chain.Guard]) (keyed[*chain.Guard], error) {
	admission := fingerprint(c.Admission)
	key := admission + "\n" + fingerprint(c.Breaker) // JSON has no raw newline
	if old.v != nil && old.key == key {
		return old, nil
	}
	if c.Admission == nil && c.Breaker == nil {
		return keyed[*chain.Guard]{key: key}, nil
	}
	gd := &chain.Guard{}
	if c.Admission != nil {
		if err := g.guardAdmission(gd, c, admission, old); err != nil {
			return keyed[*chain.Guard]{}, err
		}
	}
	if b := c.Breaker; b != nil {
		br, err := breaker.New(b.BreakerConfig())
		if err != nil {
			return keyed[*chain.Guard]{}, err
		}
		gd.Breaker, gd.BreakerShadow = br, b.Shadow
		if f := b.Fallback; f != nil {
			gd.FallbackCluster = f.Cluster != ""
			if !gd.FallbackCluster {
				gd.Fallback = staticFallback(f)
			}
		}
	}
	gd.Init()
	if old.v != nil {
		g.log.Info("policies: cluster guard changed; starting fresh", slog.String("cluster", c.Name))
	}
	return keyed[*chain.Guard]{key: key, v: gd}, nil
}

// guardAdmission gives gd cluster c's admission: old's gate and admission
// overrides when c's admission, whose fingerprint is admission, is the
// one old was built from (only the breaker changed), else a new gate.
func (g *Gateway) guardAdmission(gd *chain.Guard, c *config.Cluster, admission string, old keyed[*chain.Guard]) error {
	a := c.Admission
	if was, _, _ := strings.Cut(old.key, "\n"); old.v != nil && old.v.Gate != nil && was == admission {
		gd.KeepAdmission(old.v)
		g.log.Info("policies: cluster breaker changed; its admission kept", slog.String("cluster", c.Name))
	} else {
		gate, err := g.gateFor(c.Name, a, old.v)
		if err != nil {
			return err
		}
		gd.Gate = gate
	}
	gd.AdmitShadow = a.Shadow
	if a.Brownout != nil {
		gd.BrownoutHeader = a.Brownout.Header
	}
	return nil
}

// gateFor builds cluster name's admission gate; a changed one starts from
// the previous guard's current limit, clamped to the new bounds.
func (g *Gateway) gateFor(name string, a *config.Admission, prev *chain.Guard) (*admit.Gate, error) {
	ac := *a
	if prev != nil && prev.Gate != nil {
		was := prev.Gate.Limiter().Limit()
		ac.InitialLimit = min(max(was, ac.MinLimit), ac.MaxLimit)
		if ac.AlgorithmName == "fixed" {
			ac.InitialLimit = a.InitialLimit
		}
		g.log.Info("policies: admission changed; the limit starts from the old one",
			slog.String("cluster", name), slog.Int("was", was), slog.Int("initial", ac.InitialLimit))
	}
	alg, err := ac.Algorithm()
	if err != nil {
		return nil, err
	}
	lim, err := limit.NewLimiter(alg, ac.LimiterConfig())
	if err != nil {
		return nil, err
	}
	var dim *brownout.Dimmer
	if dc, ok := ac.DimmerConfig(); ok {
		if dim, err = brownout.New(dc); err != nil {
			return nil, err
		}
	}
	return admit.New(admit.Config{Name: name, Limiter: lim, Clock: g.clk, Dimmer: dim, IgnoreClassHeader: true, IgnoreDeadlineHeader: true})
}

// staticFallback is a breaker fallback's static answer.
func staticFallback(f *config.Fallback) *chain.Refusal {
	ref := &chain.Refusal{Status: f.Status, Reason: chain.ReasonFallback, Body: []byte(f.Body), ContentType: f.ContentType,
		GRPC: chain.GRPCUnavailable, GRPCMessage: "breaker-fallback"}
	if f.Body == "" {
		ref.ContentType = "text/plain; charset=utf-8"
	}
	for _, k := range sortedKeys(f.Headers) {
		ref.Fields = append(ref.Fields, chain.Field{Name: k, Value: f.Headers[k]})
	}
	return ref
}

// budgetFor returns route r's retry budget: old's when its definition is
// the same.
func budgetFor(r *config.Route, old keyed[*retry.Budget]) (keyed[*retry.Budget], error) {
	key := fingerprint(r.Policies.Retry.Budget)
	if old.v != nil && old.key == key {
		return old, nil
	}
	b, err := retry.NewBudget(r.Policies.Retry.BudgetConfig())
	if err != nil {
		return keyed[*retry.Budget]{}, err
	}
	return keyed[*retry.Budget]{key: key, v: b}, nil
}

// hedgerFor returns route r's hedger, paid from its budget b: old's (its
// latency tracker kept) when the hedge section and the budget are the
// ones old was built from, else a new one; a nil value without hedging.
func (g *Gateway) hedgerFor(r *config.Route, b keyed[*retry.Budget], old keyed[*retry.Hedger]) (keyed[*retry.Hedger], error) {
	hc, ok := r.Policies.Retry.HedgeConfig()
	if !ok {
		return keyed[*retry.Hedger]{}, nil
	}
	key := fingerprint(r.Policies.Retry.Hedge) + "\n" + b.key
	if old.v != nil && old.key == key {
		return old, nil
	}
	hc.Budget = b.v
	h, err := retry.NewHedger(hc)
	if err != nil {
		return keyed[*retry.Hedger]{}, err
	}
	if old.v != nil {
		g.log.Info("policies: route hedging changed; starting fresh", slog.String("route", r.Name))
	}
	return keyed[*retry.Hedger]{key: key, v: h}, nil
}

// chainFor returns route r's chain over the generation's policy state,
// compiled the first time a listener asks for it.
func (st *policyState) chainFor(cfgFile *config.Config, r *config.Route, clusters map[string]*cluster) (*chain.Chain, *proxy.Cluster, error) {
	if c, ok := st.chains[r.Name]; ok {
		return c.ch, c.fallback, nil
	}
	ch, fallback, err := st.compile(cfgFile, r, clusters)
	if err == nil && st.chains != nil {
		st.chains[r.Name] = compiledChain{ch, fallback}
	}
	return ch, fallback, err
}

// compile builds route r's chain.
func (st *policyState) compile(cfgFile *config.Config, r *config.Route, clusters map[string]*cluster) (*chain.Chain, *proxy.Cluster, error) {
	p := &r.Policies
	cfg := chain.Config{
		Route: r.Name, Guard: st.guards[r.Cluster].v, Class: p.ClassOf(), ClassHeader: p.ClassHeader,
		Deadline: chain.Deadline{
			Default: p.Deadline.Default.D().Seconds(), Max: p.Deadline.Max.D().Seconds(),
			Headers: p.Deadline.Headers, Forward: p.Deadline.Forward,
		},
		Bulkhead: p.MaxConcurrent, Streaming: r.Streaming,
	}
	if l := st.limits.of(r.Name); l != nil {
		cfg.Limits = l
	}
	if p.Retry.Attempts > 1 {
		pol := p.Retry.Policy()
		pol.Budget = st.budgets[r.Name].v
		rp, err := retry.NewPolicy(pol)
		if err != nil {
			return nil, nil, fmt.Errorf("route %q: %w", r.Name, err)
		}
		cfg.Retry, cfg.RetryOn = rp, retryOn(&p.Retry)
	}
	if h := st.hedgers[r.Name].v; h != nil {
		cfg.Hedger, cfg.RetryOn = h, retryOn(&p.Retry) // a retryable failure does not win the race
		if cfg.Retry == nil {
			cfg.Budget = st.budgets[r.Name].v // retries off: the chain fills the hedges' budget
		}
	}
	var fallback *proxy.Cluster
	if gd := cfg.Guard; gd != nil && gd.FallbackCluster {
		if b := cfgFile.Cluster(r.Cluster).Breaker; b != nil && b.Fallback != nil {
			if c := clusters[b.Fallback.Cluster]; c != nil {
				fallback = c.px
			}
		}
	}
	return chain.New(cfg), fallback, nil
}

// retryOn maps a route's retry on list onto the chain's.
func retryOn(r *config.Retry) chain.RetryOn {
	on := chain.RetryOn{ConnectFailure: r.RetryKind("connect-failure"), Reset: r.RetryKind("reset"), Timeout: r.RetryKind("timeout")}
	for s := 100; s < 600; s++ {
		if r.RetryStatus(s) {
			on.Statuses = append(on.Statuses, s)
		}
	}
	return on
}
