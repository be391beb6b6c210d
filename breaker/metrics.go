package breaker

import "github.com/prometheus/client_golang/prometheus"

// Outcome label values of spillway_breaker_calls_total.
const (
	OutcomeSuccess  = "success"  // reported ok, not slow
	OutcomeSlow     = "slow"     // reported ok, slow
	OutcomeFailure  = "failure"  // reported failed, slow or not
	OutcomeRejected = "rejected" // refused by Allow with ErrOpen
)

var (
	descState = prometheus.NewDesc("spillway_breaker_state",
		"State of the circuit breaker as the last call left it: 0 closed, 1 open, 2 half-open.",
		[]string{"breaker"}, nil)
	descCalls = prometheus.NewDesc("spillway_breaker_calls_total",
		"Calls seen by the circuit breaker, by outcome: success, slow (succeeded slowly), failure (slow or not), rejected (not made: the breaker was open).",
		[]string{"breaker", "outcome"}, nil)
	descTransitions = prometheus.NewDesc("spillway_breaker_transitions_total",
		"State changes of the circuit breaker, by states left and entered.",
		[]string{"breaker", "from", "to"}, nil)
)

// label returns the metric label of a state: closed, open or half_open.
func (s State) label() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	}
	return "half_open"
}

// transitionsSeen are the four state changes a breaker makes.
var transitionsSeen = [...][2]State{{Closed, Open}, {Open, HalfOpen}, {HalfOpen, Closed}, {HalfOpen, Open}}

// Collector returns a prometheus.Collector exporting b's Counters, labelled
// breaker=name:
//
//	spillway_breaker_state                      gauge: 0 closed, 1 open, 2 half-open
//	spillway_breaker_calls_total{outcome}       counter: success, slow, failure, rejected
//	spillway_breaker_transitions_total{from,to} counter: closed→open, open→half_open,
//	                                            half_open→closed, half_open→open
//
// Nine series per breaker, whatever the traffic. Collect reads the atomic
// counters at scrape time: nothing is added to the request path. Register
// one Collector per breaker name on a registry; safe for concurrent use.
func (b *Breaker) Collector(name string) prometheus.Collector {
	return &collector{b: b, name: name}
}

type collector struct {
	b    *Breaker
	name string
}

// Describe sends the three metric descriptions.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descState
	ch <- descCalls
	ch <- descTransitions
}

// Collect sends the current values.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	k := c.b.Counters()
	ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, float64(k.State), c.name)
	for _, o := range []struct {
		label string
		n     uint64
	}{{OutcomeSuccess, k.Successes}, {OutcomeSlow, k.Slow}, {OutcomeFailure, k.Failures}, {OutcomeRejected, k.Rejected}} {
		ch <- prometheus.MustNewConstMetric(descCalls, prometheus.CounterValue, float64(o.n), c.name, o.label)
	}
	for _, t := range transitionsSeen {
		ch <- prometheus.MustNewConstMetric(descTransitions, prometheus.CounterValue,
			float64(k.Transitions[t[0]][t[1]]), c.name, t[0].label(), t[1].label())
	}
}
