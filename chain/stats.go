package chain

import (
	"sync/atomic"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
)

// Stats counts what a route's chain did.
type Stats struct {
	refused       atomic.Uint64
	retries       atomic.Uint64
	retryStopped  [retry.StopServer + 1]atomic.Uint64
	hedges        atomic.Uint64
	hedgesWon     atomic.Uint64
	hedgesRefused atomic.Uint64
	shadow        shadowCounts // see ShadowReport
}

// Counts is a copy of a chain's counters.
type Counts struct {
	// Refused: requests answered by the chain's own stages (deadline,
	// rate limits, bulkhead, admission).
	Refused uint64
	// Retries sent; RetriesStopped by the retry policy's verdict
	// ("attempts", "budget", "deadline", "server").
	Retries        uint64
	RetriesStopped map[string]uint64
	// Hedges sent; HedgesWon: of those, the ones whose answer was
	// forwarded; HedgesRefused: hedges due that the breaker or the retry
	// budget did not let go.
	Hedges, HedgesWon, HedgesRefused uint64
}

// Counts returns the chain's counters.
func (c *Chain) Counts() Counts {
	out := Counts{Refused: c.stats.refused.Load(), Retries: c.stats.retries.Load(), RetriesStopped: map[string]uint64{},
		Hedges: c.stats.hedges.Load(), HedgesWon: c.stats.hedgesWon.Load(), HedgesRefused: c.stats.hedgesRefused.Load()}
	for v := retry.StopAttempts; v <= retry.StopServer; v++ {
		out.RetriesStopped[v.String()] = c.stats.retryStopped[v].Load()
	}
	return out
}

// InFlight is the number of the route's requests holding a bulkhead place.
func (c *Chain) InFlight() int64 { return c.inFlight.Load() }

// GuardState is a copy of a cluster guard's state, for the admin API and
// metrics; nil parts are policies the cluster does not have.
type GuardState struct {
	Admission *AdmissionState `json:"admission"`
	Breaker   *BreakerState   `json:"breaker"`
}

// AdmissionState is the cluster's admission.
type AdmissionState struct {
	// Limit is the limit applied now (the pinned one while Pinned > 0).
	Limit    int `json:"limit"`
	InFlight int `json:"in_flight"`
	Pinned   int `json:"pinned"` // 0: the adaptive algorithm's limit applies
	// QueueLength is the requests waiting; QueueWait the moving average
	// of the granted ones' waits, in seconds.
	QueueLength int     `json:"queue_length"`
	QueueWait   float64 `json:"queue_wait_seconds"`
	Bypassed    bool    `json:"bypassed"`
	// Shadow: nothing is refused; ShadowRefused counts, by class name
	// (each of the limiter's classes), the requests that would have been.
	Shadow        bool              `json:"shadow"`
	ShadowRefused map[string]uint64 `json:"shadow_refused"`
	// Brownout is the dimmer's state (nil: none).
	Brownout *BrownoutState `json:"brownout"`
}

// BrownoutState is a dimmer's level and whether an operator forced it.
type BrownoutState struct {
	Level  float64 `json:"level"` // share of requests that run optional work
	Forced bool    `json:"forced"`
}

// BreakerState is the cluster's breaker.
type BreakerState struct {
	// State is "closed", "open" or "half-open", as the last call left it.
	State string `json:"state"`
	// Forced is the operator's "open" or "closed" ("": none).
	Forced string `json:"forced"`
	// Shadow: nothing is refused; ShadowRefused counts the attempts an
	// open breaker would have refused.
	Shadow        bool   `json:"shadow"`
	ShadowRefused uint64 `json:"shadow_refused"`
}

// State returns a copy of the guard's state.
func (g *Guard) State() GuardState {
	var st GuardState
	if gt := g.Gate; gt != nil {
		l := gt.Limiter()
		a := &AdmissionState{
			Limit: l.Limit(), InFlight: l.InFlight(), Pinned: l.Pinned(), QueueLength: l.QueueLen(),
			QueueWait: l.QueueWait(), Bypassed: g.AdmissionBypassed(), Shadow: g.AdmitShadow,
			ShadowRefused: make(map[string]uint64, l.Classes()),
		}
		for c := range l.Classes() {
			a.ShadowRefused[shed.Class(c).String()] = g.ShadowAdmissions(shed.Class(c))
		}
		if d := gt.Dimmer(); d != nil {
			a.Brownout = &BrownoutState{Level: d.Stats().Level}
			if lv, ok := g.ForcedBrownout(); ok {
				a.Brownout.Level, a.Brownout.Forced = lv, true
			}
		}
		st.Admission = a
	}
	if b := g.Breaker; b != nil {
		st.Breaker = &BreakerState{State: breakerState(b.Counters().State), Forced: g.ForcedBreaker(),
			Shadow: g.BreakerShadow, ShadowRefused: g.ShadowBreaker()}
	}
	return st
}

func breakerState(s breaker.State) string {
	switch s {
	case breaker.Closed:
		return "closed"
	case breaker.Open:
		return "open"
	}
	return "half-open"
}

// Class is the class the route gives its requests (a trusted peer's
// Spillway-Criticality may replace it, see Config.ClassHeader).
func (c *Chain) Class() shed.Class { return c.cfg.Class }
