package redisstore

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/breaker"
)

// The values of the metrics' outcome, cause and tier labels.
const (
	// OutcomeDecided, OutcomeError, OutcomeAbandoned and OutcomeQueueFull
	// split spillway_ratelimit_redis_decisions_total (see Stats).
	OutcomeDecided   = "decided"    // Redis answered
	OutcomeError     = "error"      // answered with an error: Redis, network, store closed
	OutcomeAbandoned = "abandoned"  // the caller's Timeout or ctx ended first
	OutcomeQueueFull = "queue_full" // refused at once with ErrQueueFull
	// CauseStoreFailed and CauseBreakerOpen split
	// spillway_ratelimit_redis_fail_mode_decisions_total.
	CauseStoreFailed = "store_failed" // the store was called and failed
	CauseBreakerOpen = "breaker_open" // the breaker was open: no call
	// TierFloor and TierLocal name the in-memory stores of a rule.
	TierFloor = "floor" // the fail-open floor
	TierLocal = "local" // the local tier in front of the fail mode
)

// Descriptions of the metrics; label "rule" is the rule's id.
var (
	metricDecisions = prometheus.NewDesc("spillway_ratelimit_redis_decisions_total",
		"Decisions asked of the rule's Redis store, by outcome: decided (Redis answered), error (Redis or network error, store closed), abandoned (the caller's timeout or context ended first), queue_full (refused at once).",
		[]string{"rule", "outcome"}, nil)
	metricRoundTrips = prometheus.NewDesc("spillway_ratelimit_redis_round_trips_total",
		"Pipelines that carried decisions of the rule's store to Redis (each carries a batch of decisions, of any rules of one Stores), NOSCRIPT retries included.",
		[]string{"rule"}, nil)
	metricReloads = prometheus.NewDesc("spillway_ratelimit_redis_script_reloads_total",
		"Pipelines re-sent with EVAL after a NOSCRIPT reply (Redis restarted, failed over, or flushed its scripts).",
		[]string{"rule"}, nil)
	metricQueue = prometheus.NewDesc("spillway_ratelimit_redis_queue_length",
		"Decisions of the rule waiting for a pipeline now (the queue, bounded by Config.QueueSize, is shared by the rules of one Stores).",
		[]string{"rule"}, nil)
	metricGuardCalls = prometheus.NewDesc("spillway_ratelimit_redis_guard_calls_total",
		"Requests the rule's fail-mode layer passed on to Redis (or to its leases): breaker closed, or a trial.",
		[]string{"rule"}, nil)
	metricFailMode = prometheus.NewDesc("spillway_ratelimit_redis_fail_mode_decisions_total",
		"Requests decided by the rule's fail mode (served within the floor if fail-open, refused if fail-closed), by cause: store_failed (the call failed), breaker_open (no call made).",
		[]string{"rule", "cause"}, nil)
	metricBreakerState = prometheus.NewDesc("spillway_ratelimit_redis_breaker_state",
		"State of the rule's circuit breaker around Redis: 0 closed, 1 open, 2 half-open (as left by the last request).",
		[]string{"rule"}, nil)
	metricBreakerTransitions = prometheus.NewDesc("spillway_ratelimit_redis_breaker_transitions_total",
		"State changes of the rule's circuit breaker (and trial rounds presumed lost).",
		[]string{"rule"}, nil)
	metricLeases = prometheus.NewDesc("spillway_ratelimit_redis_leases",
		"Token leases the rule holds on this node now (leased rules only).",
		[]string{"rule"}, nil)
	metricLeaseLocal = prometheus.NewDesc("spillway_ratelimit_redis_lease_local_decisions_total",
		"Decisions served from a lease on this node, without a round trip (leased rules only).",
		[]string{"rule"}, nil)
	metricLeaseWaited = prometheus.NewDesc("spillway_ratelimit_redis_lease_waited_decisions_total",
		"Decisions that waited for another request's lease fetch (leased rules only).",
		[]string{"rule"}, nil)
	metricLeaseRoundTrips = prometheus.NewDesc("spillway_ratelimit_redis_lease_round_trips_total",
		"Calls of Redis made by the lease layer for leased keys (leased rules only).",
		[]string{"rule"}, nil)
	metricLeasedUnits = prometheus.NewDesc("spillway_ratelimit_redis_lease_leased_units_total",
		"Units taken from Redis by leases (leased rules only).",
		[]string{"rule"}, nil)
	metricStrandedUnits = prometheus.NewDesc("spillway_ratelimit_redis_lease_stranded_units_total",
		"Leased units that expired or were dropped unspent (leased rules only).",
		[]string{"rule"}, nil)
	metricMemoryKeys = prometheus.NewDesc("spillway_ratelimit_redis_memory_keys",
		"Keys held now by the rule's in-memory stores, by tier: floor (fail-open floor), local (local tier).",
		[]string{"rule", "tier"}, nil)
	metricMemoryEvictions = prometheus.NewDesc("spillway_ratelimit_redis_memory_evictions_total",
		"Keys evicted to make room (at MaxKeys) in the rule's in-memory stores, by tier: floor, local.",
		[]string{"rule", "tier"}, nil)

	allMetrics = []*prometheus.Desc{metricDecisions, metricRoundTrips, metricReloads, metricQueue,
		metricGuardCalls, metricFailMode, metricBreakerState, metricBreakerTransitions,
		metricLeases, metricLeaseLocal, metricLeaseWaited, metricLeaseRoundTrips, metricLeasedUnits,
		metricStrandedUnits, metricMemoryKeys, metricMemoryEvictions}
)

// Collector returns a prometheus.Collector of the rule stores s has made
// and not closed (see Stores.Close and RuleStore.Close), labelled by rule
// id. Every rule has the store, fail-mode and breaker series; leased rules
// add the lease series, and rules with a floor or a local tier their
// memory series: at most 22 series per rule, whatever the traffic and the
// keys. One histogram, spillway_ratelimit_redis_round_trip_seconds (no
// labels; present while a rule store is open), times every pipeline sent
// to Redis: the store's latency, answered or failed.
//
// Collect reads the layers' counters (atomics; the lease and memory
// tables sum their shards, each under its lock) at scrape time: nothing is
// added to the request path. While a replaced store is still open
// (httplimit keeps it for its RetireAfter), a rule's counters are the sum
// of its stores and its gauges the sum, except the breaker state, which is
// the state of the store the collector saw first most recently. Counters
// stay monotonic across replacements: a store that closes is read once
// more at the next scrape and its counts are kept while the rule has
// another open store (a store opened and closed between two scrapes is
// not seen). A rule with no open store drops its series. Register one
// Collector per Stores on a registry (use prometheus.WrapRegistererWith
// to tell several Stores apart). Safe for concurrent use.
func (s *Stores) Collector() prometheus.Collector {
	return &storesCollector{stores: s, seen: map[*RuleStore]seenStore{}, retired: map[string]*ruleCounts{}}
}

// storesCollector is the Collector of a Stores.
type storesCollector struct {
	stores *Stores // immutable

	mu      sync.Mutex               // serializes Collect
	seq     uint64                   // guarded by mu; stores seen so far
	seen    map[*RuleStore]seenStore // guarded by mu; the open stores of the last scrape
	retired map[string]*ruleCounts   // guarded by mu; counters of closed stores, by rule
}

// seenStore is what the collector remembers of an open store.
type seenStore struct {
	rule string
	seq  uint64 // order in which the collector first saw the stores
}

// ruleCounts are one rule's figures.
type ruleCounts struct {
	// counters (summed over stores, closed ones included)
	decided, errs, abandoned, queueFull, roundTrips, reloads uint64
	guardCalls, failed, skipped, transitions                 uint64
	leaseLocal, leaseWaited, leaseTrips, leased, stranded    uint64
	floorEvicted, localEvicted                               uint64
	// gauges (summed over open stores)
	queue, leases, floorKeys, localKeys int
	// the newest store's breaker state, and its seq
	state    breaker.State
	stateSeq uint64
	// which layers the rule's open stores have
	hasLease, hasFloor, hasLocal bool
}

// ruleIDOf returns the id of the rule of rs (its Store's Config.Rule).
func ruleIDOf(rs *RuleStore) string { return rs.redis.Rule() }

// addCounters adds the counters of rs to c.
func (c *ruleCounts) addCounters(rs *RuleStore) {
	st := rs.redis.Stats()
	c.decided += st.Decisions
	c.errs += st.Errors
	c.abandoned += st.Abandoned
	c.queueFull += st.QueueFull
	c.roundTrips += st.RoundTrips
	c.reloads += st.Reloads
	gs := rs.guard.Stats()
	c.guardCalls += gs.Calls
	c.failed += gs.Failures
	c.skipped += gs.Skipped
	c.transitions += rs.guard.Breaker().Generation
	if rs.lease != nil {
		ls := rs.lease.Stats()
		c.leaseLocal += ls.Local
		c.leaseWaited += ls.Waited
		c.leaseTrips += ls.RoundTrips
		c.leased += ls.LeasedUnits
		c.stranded += ls.StrandedUnits
	}
	if rs.floor != nil {
		c.floorEvicted += rs.floor.Stats().Evicted
	}
	if rs.local != nil {
		c.localEvicted += rs.local.Stats().Evicted
	}
}

// addOpen adds an open store's counters and gauges to c.
func (c *ruleCounts) addOpen(rs *RuleStore, seq uint64) {
	c.addCounters(rs)
	c.queue += int(max(rs.redis.queued.Load(), 0))
	if b := rs.guard.Breaker(); c.stateSeq == 0 || seq > c.stateSeq {
		c.state, c.stateSeq = b.State, seq
	}
	if rs.lease != nil {
		c.hasLease = true
		c.leases += rs.lease.Stats().Leases
	}
	if rs.floor != nil {
		c.hasFloor = true
		c.floorKeys += rs.floor.Len()
	}
	if rs.local != nil {
		c.hasLocal = true
		c.localKeys += rs.local.Len()
	}
}

// Describe sends the descriptions of every metric.
func (sc *storesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allMetrics {
		ch <- d
	}
	ch <- metricTripLatency
}

// Collect sends every open rule store's figures; see Stores.Collector.
func (sc *storesCollector) Collect(ch chan<- prometheus.Metric) {
	s := sc.stores
	s.mu.Lock()
	open := make([]*RuleStore, 0, len(s.open))
	for rs := range s.open {
		open = append(open, rs)
	}
	s.mu.Unlock()

	sc.mu.Lock()
	defer sc.mu.Unlock()
	isOpen := make(map[*RuleStore]bool, len(open))
	for _, rs := range open {
		isOpen[rs] = true
	}
	// Fold the stores closed since the last scrape into their rules'
	// retired counts: their counters stay in the sums.
	for rs, info := range sc.seen {
		if isOpen[rs] {
			continue
		}
		c := sc.retired[info.rule]
		if c == nil {
			c = &ruleCounts{}
			sc.retired[info.rule] = c
		}
		c.addCounters(rs)
		delete(sc.seen, rs)
	}
	byRule := make(map[string]*ruleCounts, len(open))
	for _, rs := range open {
		info, ok := sc.seen[rs]
		if !ok {
			sc.seq++
			info = seenStore{rule: ruleIDOf(rs), seq: sc.seq}
			sc.seen[rs] = info
		}
		c := byRule[info.rule]
		if c == nil {
			c = &ruleCounts{}
			if r := sc.retired[info.rule]; r != nil {
				*c = *r
			}
			byRule[info.rule] = c
		}
		c.addOpen(rs, info.seq)
	}
	// A rule without an open store is gone: so are its series.
	for rule := range sc.retired {
		if byRule[rule] == nil {
			delete(sc.retired, rule)
		}
	}
	for rule, c := range byRule {
		c.send(ch, rule)
	}
	if len(byRule) > 0 { // with the rules' series: none while no store is open
		ch <- s.eng.latency.histogram()
	}
}

// send sends the series of one rule.
func (c *ruleCounts) send(ch chan<- prometheus.Metric, rule string) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- constMetric(d, prometheus.CounterValue, float64(v), append([]string{rule}, labels...))
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- constMetric(d, prometheus.GaugeValue, v, append([]string{rule}, labels...))
	}
	counter(metricDecisions, c.decided, OutcomeDecided)
	counter(metricDecisions, c.errs, OutcomeError)
	counter(metricDecisions, c.abandoned, OutcomeAbandoned)
	counter(metricDecisions, c.queueFull, OutcomeQueueFull)
	counter(metricRoundTrips, c.roundTrips)
	counter(metricReloads, c.reloads)
	gauge(metricQueue, float64(c.queue))
	counter(metricGuardCalls, c.guardCalls)
	counter(metricFailMode, c.failed, CauseStoreFailed)
	counter(metricFailMode, c.skipped, CauseBreakerOpen)
	gauge(metricBreakerState, float64(c.state))
	counter(metricBreakerTransitions, c.transitions)
	if c.hasLease {
		gauge(metricLeases, float64(c.leases))
		counter(metricLeaseLocal, c.leaseLocal)
		counter(metricLeaseWaited, c.leaseWaited)
		counter(metricLeaseRoundTrips, c.leaseTrips)
		counter(metricLeasedUnits, c.leased)
		counter(metricStrandedUnits, c.stranded)
	}
	if c.hasFloor {
		gauge(metricMemoryKeys, float64(c.floorKeys), TierFloor)
		counter(metricMemoryEvictions, c.floorEvicted, TierFloor)
	}
	if c.hasLocal {
		gauge(metricMemoryKeys, float64(c.localKeys), TierLocal)
		counter(metricMemoryEvictions, c.localEvicted, TierLocal)
	}
}

// constMetric is prometheus.NewConstMetric, or an invalid metric (which
// fails the scrape's gathering of that one series) instead of a panic.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
