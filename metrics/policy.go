package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/spillwayhq/spillway/chain"
)

// RoutePolicy is one route's policy state, read at scrape time
// (Sources.Routes).
type RoutePolicy struct {
	Route string
	// Counts are the route's chain counters (summed over its listeners).
	Counts chain.Counts
	// Bypassed: an operator turned the route's own policies off.
	Bypassed bool
	// Budget is the tokens left in the route's retry budget; HasBudget
	// false: it has none.
	Budget    float64
	HasBudget bool
	// Hedging: the route hedges (its hedge counters are reported).
	Hedging bool
	// Decisions reports the route's rate-limit decisions by rule and
	// outcome (httplimit.Limiter.Decisions); nil: no rules.
	Decisions func(fn func(rule, outcome string, n uint64))
	// HotKeys reports the heaviest keys of the route's rules and their
	// estimated units (httplimit.Limiter.HotKeys: at most TopK per rule,
	// each (rule, key) once); nil: no hot-key tracking.
	HotKeys func(fn func(rule, key string, units uint64))
}

// ClusterPolicy is one cluster's guard (admission, breaker), read at
// scrape time (Sources.Clusters).
type ClusterPolicy struct {
	Cluster string
	Guard   *chain.Guard
}

var (
	retriesDesc = prometheus.NewDesc("spillway_route_retries_total",
		"Retries the route's policy chain sent.", []string{"route"}, nil)
	retryStopDesc = prometheus.NewDesc("spillway_route_retries_stopped_total",
		"Failed attempts the route did not retry, by the retry policy's verdict (attempts, budget, deadline, server).",
		[]string{"route", "verdict"}, nil)
	hedgesDesc = prometheus.NewDesc("spillway_route_hedges_total",
		"Hedged requests of the route: hedges sent, won (their answer was forwarded) and refused (due, but the breaker or the retry budget did not let them go).",
		[]string{"route", "outcome"}, nil)
	budgetDesc = prometheus.NewDesc("spillway_route_retry_budget_tokens",
		"Tokens left in the route's retry budget (a retry spends one).", []string{"route"}, nil)
	bypassDesc = prometheus.NewDesc("spillway_route_policies_bypassed",
		"1 while an operator has turned the route's own policies off (deadline, rate limits, bulkhead, retries).",
		[]string{"route"}, nil)
	decisionsDesc = prometheus.NewDesc("spillway_route_ratelimit_decisions_total",
		"Rate-limit decisions of the route's rules, by rule and outcome (allowed, denied, shadow_denied, store_error, queue_abandoned).",
		[]string{"route", "rule", "outcome"}, nil)
	hotKeyDesc = prometheus.NewDesc("spillway_route_ratelimit_hot_key_units",
		"Estimated units (requests × cost) of the heaviest keys of the route's rules in the hot-key tracker's interval (ratelimit.hot_keys); at most top keys per rule.",
		[]string{"route", "rule", "key"}, nil)
	pinnedDesc = prometheus.NewDesc("spillway_admission_pinned_limit",
		"The admission limit an operator pinned (0: the adaptive algorithm's applies); gate is the cluster.",
		[]string{"gate"}, nil)
	admitBypassDesc = prometheus.NewDesc("spillway_admission_bypassed",
		"1 while an operator has turned the cluster's admission off.", []string{"gate"}, nil)
	shadowAdmitDesc = prometheus.NewDesc("spillway_admission_shadow_refusals_total",
		"Requests a shadow admission would have refused (and let through), by class.", []string{"gate", "class"}, nil)
	forcedLevelDesc = prometheus.NewDesc("spillway_admission_brownout_forced_level",
		"The brownout level an operator forced (present only while forced; spillway_admission_brownout_level is the dimmer's own).",
		[]string{"gate"}, nil)
	forcedBreakerDesc = prometheus.NewDesc("spillway_breaker_forced",
		"1 for the state an operator forced the cluster's breaker to (open or closed), 0 for the other; both 0: not forced.",
		[]string{"breaker", "state"}, nil)
	shadowBreakerDesc = prometheus.NewDesc("spillway_breaker_shadow_refusals_total",
		"Attempts a shadow breaker would have refused while open (and let through).", []string{"breaker"}, nil)
)

// policyCollector reads the Sources' routes, clusters and collectors. It
// describes nothing (an unchecked collector): the admission and breaker
// families it forwards are those of packages admit and breaker, whose
// descriptions are theirs.
type policyCollector Metrics

func (c *policyCollector) Describe(chan<- *prometheus.Desc) {}

func (c *policyCollector) Collect(ch chan<- prometheus.Metric) {
	s := (*Metrics)(c).sources.Load()
	if s == nil {
		return
	}
	if s.Routes != nil {
		seen := map[string]bool{}
		s.Routes(func(r RoutePolicy) {
			if !seen[r.Route] {
				seen[r.Route] = true
				collectRoute(ch, &r)
			}
		})
	}
	if s.Clusters != nil {
		seen := map[string]bool{}
		s.Clusters(func(cp ClusterPolicy) {
			if !seen[cp.Cluster] && cp.Guard != nil {
				seen[cp.Cluster] = true
				collectGuard(ch, cp.Cluster, cp.Guard)
			}
		})
	}
	if s.Collectors != nil {
		s.Collectors(func(col prometheus.Collector) { col.Collect(ch) })
	}
}

func collectRoute(ch chan<- prometheus.Metric, r *RoutePolicy) {
	ch <- prometheus.MustNewConstMetric(retriesDesc, prometheus.CounterValue, float64(r.Counts.Retries), r.Route)
	for v, n := range r.Counts.RetriesStopped {
		ch <- prometheus.MustNewConstMetric(retryStopDesc, prometheus.CounterValue, float64(n), r.Route, v)
	}
	if r.Hedging {
		k := &r.Counts
		ch <- prometheus.MustNewConstMetric(hedgesDesc, prometheus.CounterValue, float64(k.Hedges), r.Route, "sent")
		ch <- prometheus.MustNewConstMetric(hedgesDesc, prometheus.CounterValue, float64(k.HedgesWon), r.Route, "won")
		ch <- prometheus.MustNewConstMetric(hedgesDesc, prometheus.CounterValue, float64(k.HedgesRefused), r.Route, "refused")
	}
	if r.HasBudget {
		ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, r.Budget, r.Route)
	}
	ch <- prometheus.MustNewConstMetric(bypassDesc, prometheus.GaugeValue, b2f(r.Bypassed), r.Route)
	if r.Decisions != nil {
		r.Decisions(func(rule, outcome string, n uint64) {
			ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(n), r.Route, rule, outcome)
		})
	}
	if r.HotKeys != nil {
		r.HotKeys(func(rule, key string, units uint64) {
			ch <- prometheus.MustNewConstMetric(hotKeyDesc, prometheus.GaugeValue, float64(units), r.Route, rule, key)
		})
	}
}

// collectGuard sends a cluster's admission (admit's collector and the
// overrides) and breaker (breaker's collector and the overrides) series.
func collectGuard(ch chan<- prometheus.Metric, name string, g *chain.Guard) {
	st := g.State()
	if a := st.Admission; a != nil {
		g.Gate.Collector().Collect(ch)
		ch <- prometheus.MustNewConstMetric(pinnedDesc, prometheus.GaugeValue, float64(a.Pinned), name)
		ch <- prometheus.MustNewConstMetric(admitBypassDesc, prometheus.GaugeValue, b2f(a.Bypassed), name)
		if a.Shadow {
			for class, n := range a.ShadowRefused {
				ch <- prometheus.MustNewConstMetric(shadowAdmitDesc, prometheus.CounterValue, float64(n), name, class)
			}
		}
		if b := a.Brownout; b != nil && b.Forced {
			ch <- prometheus.MustNewConstMetric(forcedLevelDesc, prometheus.GaugeValue, b.Level, name)
		}
	}
	if b := st.Breaker; b != nil {
		g.Breaker.Collector(name).Collect(ch)
		for _, s := range [...]string{"open", "closed"} {
			ch <- prometheus.MustNewConstMetric(forcedBreakerDesc, prometheus.GaugeValue, b2f(b.Forced == s), name, s)
		}
		if b.Shadow {
			ch <- prometheus.MustNewConstMetric(shadowBreakerDesc, prometheus.CounterValue, float64(b.ShadowRefused), name)
		}
	}
}

// Refusals returns the gateway's own answers to route's requests counted
// so far (spillway_refusals_total), by reason code and class, for the
// admin API; nil when there are none.
func (m *Metrics) Refusals(route string) map[string]map[string]uint64 {
	var out map[string]map[string]uint64
	each(m.refusals, func(l map[string]string, d *dto.Metric) {
		if l["route"] != route {
			return
		}
		if out == nil {
			out = map[string]map[string]uint64{}
		}
		reason := l["reason"]
		if out[reason] == nil {
			out[reason] = map[string]uint64{}
		}
		out[reason][l["class"]] = uint64(d.GetCounter().GetValue())
	})
	return out
}
