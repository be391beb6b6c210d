package httplimit

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes counted by the decisions metric.
const (
	OutcomeAllowed        = "allowed"         // the rule allowed the request
	OutcomeDenied         = "denied"          // the rule refused it (429, or 400 when it can never pass)
	OutcomeShadowDenied   = "shadow_denied"   // a shadow rule would have refused it
	OutcomeStoreError     = "store_error"     // the rule's store could not decide; the fail mode applied
	OutcomeQueueAbandoned = "queue_abandoned" // the request's context ended while it waited in a leaky queue
)

// ruleCounters are a rule's pre-curried counters: no label lookup and no
// allocation per request.
type ruleCounters struct {
	allowed, denied, shadowDenied, storeError, abandoned prometheus.Counter
}

// metrics is the Limiter's collector: spillway_ratelimit_http_decisions_total
// by rule and outcome.
type metrics struct {
	vec *prometheus.CounterVec

	mu     sync.Mutex               // guards byRule
	byRule map[string]*ruleCounters // curried counters, shared across rule updates
}

func newMetrics() *metrics {
	return &metrics{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "spillway",
			Subsystem: "ratelimit",
			Name:      "http_decisions_total",
			Help:      "Rate-limit decisions of the HTTP middleware, by rule and outcome (allowed, denied, shadow_denied, store_error, queue_abandoned).",
		}, []string{"rule", "outcome"}),
		byRule: make(map[string]*ruleCounters),
	}
}

// counters returns the counters of rule id, creating them on first use.
func (m *metrics) counters(id string) *ruleCounters {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.byRule[id]; ok {
		return c
	}
	c := &ruleCounters{
		allowed:      m.vec.WithLabelValues(id, OutcomeAllowed),
		denied:       m.vec.WithLabelValues(id, OutcomeDenied),
		shadowDenied: m.vec.WithLabelValues(id, OutcomeShadowDenied),
		storeError:   m.vec.WithLabelValues(id, OutcomeStoreError),
		abandoned:    m.vec.WithLabelValues(id, OutcomeQueueAbandoned),
	}
	m.byRule[id] = c
	return c
}

// forget drops the series of rules no longer in use.
func (m *metrics) forget(keep map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.byRule {
		if !keep[id] {
			delete(m.byRule, id)
			m.vec.DeletePartialMatch(prometheus.Labels{"rule": id})
		}
	}
}
