package metrics

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/balancer"
)

// collector is the part of Metrics read at scrape time: endpoint states,
// generations and the Sources.
type collector Metrics

var (
	healthDesc = prometheus.NewDesc("spillway_endpoint_health",
		"1 for the endpoint's current state, 0 for the others; endpoint=\"other\" counts the endpoints beyond the per-cluster cap in each state.",
		[]string{"cluster", "endpoint", "state"}, nil)
	generationDesc = prometheus.NewDesc("spillway_config_generation",
		"Number of the newest configuration generation (1 for the first).", nil, nil)
	liveDesc = prometheus.NewDesc("spillway_generations_live",
		"Configuration generations not yet retired (requests still in flight on them), the newest included.", nil, nil)
	actionsDesc = prometheus.NewDesc("spillway_overload_actions_total",
		"Self-protection actions taken, by action.", []string{"action"}, nil)
	overloadDesc = prometheus.NewDesc("spillway_overload_state",
		"Self-protection's current level (0: normal).", nil, nil)
	connsDesc = prometheus.NewDesc("spillway_connections_open",
		"Client connections open, by listener.", []string{"listener"}, nil)
)

// stateNames are endpoint_health's state values, indexed by stateIndex.
var stateNames = [...]string{"healthy", "slow_start", "draining", "ejected", "unhealthy"}

// stateIndex maps a balancer.State onto stateNames (an unknown state
// reads as unhealthy).
func stateIndex(st balancer.State) int {
	switch st {
	case balancer.Healthy:
		return 0
	case balancer.SlowStarting:
		return 1
	case balancer.Draining:
		return 2
	case balancer.Ejected:
		return 3
	}
	return 4
}

// Describe sends the descriptions of every series Collect may send.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{healthDesc, generationDesc, liveDesc, actionsDesc, overloadDesc, connsDesc} {
		ch <- d
	}
}

// Collect reads the generations, the endpoint states of the newest
// generation's clusters and the Sources; it also prunes the error series
// of endpoints no live generation's cluster has any more.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(c)
	gens := m.liveGens()
	var number uint64
	if len(gens) > 0 {
		number = gens[len(gens)-1].number
	}
	ch <- prometheus.MustNewConstMetric(generationDesc, prometheus.GaugeValue, float64(number))
	ch <- prometheus.MustNewConstMetric(liveDesc, prometheus.GaugeValue, float64(len(gens)))
	m.collectEndpoints(ch, gens)
	m.collectSources(ch)
}

// collectEndpoints sends endpoint_health for each cluster name as the
// newest generation that has it describes it, and prunes error series.
func (m *Metrics) collectEndpoints(ch chan<- prometheus.Metric, gens []*Gen) {
	now := m.clk.Now()
	shown := map[string]bool{}
	members := map[string]map[string]bool{} // cluster → addresses in any live generation; nil: unknown
	for i := len(gens) - 1; i >= 0; i-- {
		for _, info := range gens[i].infos {
			var list []balancer.Member
			if info.Set != nil {
				list = info.Set.Members(now)
			}
			set, seen := members[info.Name]
			switch {
			case info.Set == nil:
				members[info.Name], set = nil, nil
			case !seen:
				set = map[string]bool{}
				members[info.Name] = set
			}
			if set != nil {
				for _, e := range list {
					set[e.Addr()] = true
				}
			}
			if !shown[info.Name] {
				shown[info.Name] = true
				m.collectHealth(ch, info.Name, list)
			}
		}
	}
	m.prune(members)
}

// collectHealth sends one cluster's endpoint_health series: the first
// MaxEndpoints members in address order one by one, the rest as "other".
func (m *Metrics) collectHealth(ch chan<- prometheus.Metric, cluster string, list []balancer.Member) {
	list = slices.Clone(list)
	slices.SortFunc(list, func(a, b balancer.Member) int { return cmp.Compare(a.Addr(), b.Addr()) })
	var other [len(stateNames)]float64
	for i, e := range list {
		st := stateIndex(e.State)
		if i >= m.maxEps {
			other[st]++
			continue
		}
		for s, name := range stateNames {
			ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, b2f(s == st), cluster, e.Addr(), name)
		}
	}
	if len(list) > m.maxEps {
		for s, name := range stateNames {
			ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, other[s], cluster, "other", name)
		}
	}
}

// prune drops, in each cluster observer whose members are known, the
// endpoints that are no longer members.
func (m *Metrics) prune(members map[string]map[string]bool) {
	m.mu.Lock()
	obs := make(map[string]*ClusterObserver, len(members))
	for name, set := range members {
		if o := m.clusters[name]; o != nil && set != nil {
			obs[name] = o
		}
	}
	m.mu.Unlock()
	for name, o := range obs {
		set := members[name]
		o.prune(m, func(a string) bool { return set[a] })
	}
}

// collectSources sends what the Sources report, each name once.
func (m *Metrics) collectSources(ch chan<- prometheus.Metric) {
	s := m.sources.Load()
	if s == nil {
		return
	}
	if s.OverloadActions != nil {
		seen := map[string]bool{}
		s.OverloadActions(func(action string, n uint64) {
			if !seen[action] {
				seen[action] = true
				ch <- prometheus.MustNewConstMetric(actionsDesc, prometheus.CounterValue, float64(n), action)
			}
		})
	}
	if s.OverloadState != nil {
		ch <- prometheus.MustNewConstMetric(overloadDesc, prometheus.GaugeValue, s.OverloadState())
	}
	if s.Connections != nil {
		seen := map[string]bool{}
		s.Connections(func(listener string, open int) {
			if !seen[listener] {
				seen[listener] = true
				ch <- prometheus.MustNewConstMetric(connsDesc, prometheus.GaugeValue, float64(open), listener)
			}
		})
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
