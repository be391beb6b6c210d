package httplimit

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Decisions calls fn once per current rule, in rule order, and outcome
// (OutcomeAllowed, OutcomeDenied, OutcomeShadowDenied, OutcomeStoreError,
// OutcomeQueueAbandoned) with the decisions counted so far — the values of
// spillway_ratelimit_http_decisions_total, for callers that show them
// elsewhere (an admin API, a collector with more labels). Read at call
// time; the request path is not touched.
func (l *Limiter) Decisions(fn func(rule, outcome string, n uint64)) {
	for _, ru := range l.state.Load().rules {
		c := ru.c
		for _, o := range [...]struct {
			name string
			c    prometheus.Counter
		}{{OutcomeAllowed, c.allowed}, {OutcomeDenied, c.denied}, {OutcomeShadowDenied, c.shadowDenied},
			{OutcomeStoreError, c.storeError}, {OutcomeQueueAbandoned, c.abandoned}} {
			var m dto.Metric
			if o.c.Write(&m) == nil {
				fn(ru.ID, o.name, uint64(m.GetCounter().GetValue()))
			}
		}
	}
}
