package chain

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// Guard is a cluster's share of the chain, used by every route that sends
// to it: the adaptive admission limit (the capacity is the cluster's) and
// the circuit breaker with its fallback. Built once per generation (its
// policies may be carried from the last one), read concurrently.
type Guard struct {
	// Gate, when set, admits requests into the cluster's adaptive limit.
	Gate *admit.Gate
	// AdmitShadow counts the requests the Gate would refuse and lets them
	// through (holding no place).
	AdmitShadow bool
	// Breaker, when set, is asked before every attempt.
	Breaker *breaker.Breaker
	// BreakerShadow counts the attempts an open breaker would refuse and
	// lets them through.
	BreakerShadow bool
	// Fallback answers while the breaker is open: a static answer, or
	// (FallbackCluster) the engine sends the request to another cluster.
	// Both nil/false: the refusal breaker-open.
	Fallback        *Refusal
	FallbackCluster bool
	// BrownoutHeader is the request field that carries the Gate's
	// brownout decision upstream ("1": run optional work, "0": skip it).
	BrownoutHeader string

	refusals    [limit.NumReasons]*Refusal
	breakerOpen *Refusal
	// Shadow would-refusals: admission by class, breaker in total.
	shadowAdmit   [shed.MaxClasses]atomic.Uint64
	shadowBreaker atomic.Uint64
	// Overrides set through the admin API (see override.go).
	override overrides
}

// Init builds the guard's refusals; call it once before use.
func (g *Guard) Init() {
	for r := limit.Reason(1); int(r) < limit.NumReasons; r++ {
		g.refusals[r] = AdmitRefusal(r)
	}
	g.breakerOpen = NewRefusal(http.StatusServiceUnavailable, ReasonBreakerOpen, "the cluster's circuit breaker is open", true)
}

// AdmitRefusal is the answer for one admission refusal reason: 503 with
// Retry-After when the cluster is over its limit, 429 when the client is
// over its fair share, 503 without Retry-After when the request's own
// time ran out. It builds a new Refusal: a Guard builds its own once, and
// the simulator (sim config) answers as the gateway does from these.
func AdmitRefusal(r limit.Reason) *Refusal {
	switch r {
	case limit.ReasonFairness:
		return NewRefusal(http.StatusTooManyRequests, ReasonAdmitFairness, r.Detail(), true)
	case limit.ReasonDeadline, limit.ReasonCancelled:
		return NewRefusal(http.StatusServiceUnavailable, ReasonDeadline, r.Detail(), false)
	case limit.ReasonCoDel:
		return NewRefusal(http.StatusServiceUnavailable, ReasonAdmitCoDel, r.Detail(), true)
	case limit.ReasonQueueFull, limit.ReasonExpired:
		return NewRefusal(http.StatusServiceUnavailable, ReasonAdmitQueue, r.Detail(), true)
	default:
		return NewRefusal(http.StatusServiceUnavailable, ReasonAdmitLimit, r.Detail(), true)
	}
}

// admit asks the Gate for a place for p's request; nil means admitted (or
// no Gate, or a shadow refusal).
func (g *Guard) admit(ctx context.Context, now float64, p *Pass) *Refusal {
	if g.override.bypass.Load() {
		return nil
	}
	r := limit.Request{Class: p.class, Cost: 1, Client: p.client, Deadline: p.deadline}
	if g.AdmitShadow {
		var why limit.Reason
		if p.slot, why = g.Gate.Limiter().Admit(now, r); why != limit.Admitted {
			g.shadowAdmit[classIndex(p.class)].Add(1)
			p.c.stats.shadow.admit[classIndex(p.class)][why].Add(1)
			return nil
		}
		p.ticket = &p.slot
		return nil
	}
	t, wait, why := g.Gate.Enter(ctx, now, r, &p.slot)
	if why != limit.Admitted {
		return g.refusals[why]
	}
	p.ticket, p.wait = t, wait
	return nil
}

// allow asks the breaker before one attempt: nil lets it go, else the
// answer (the fallback's, or breaker-open); useCluster reports that the
// fallback is another cluster.
func (g *Guard) allow(now float64, p *Pass) (ref *Refusal, useCluster bool) {
	t, on, refused := g.permit(now, p)
	if refused {
		return g.fallback()
	}
	p.brk, p.brkOn = t, on
	return nil, false
}

// permit asks the breaker (and the operator's override) whether one
// attempt of p's request may go: a ticket to report when on, refused when
// it may not (a shadow breaker counts it and lets it go).
func (g *Guard) permit(now float64, p *Pass) (t breaker.Ticket, on, refused bool) {
	if g.Breaker == nil {
		return t, false, false
	}
	if f := g.override.forced.Load(); f != forceNone {
		return t, false, f != forceClosed
	}
	t, err := g.Breaker.Allow(now)
	if err == nil {
		return t, true, false
	}
	if g.BreakerShadow {
		g.shadowBreaker.Add(1)
		p.c.stats.shadow.breaker[classIndex(p.class)].Add(1)
		return breaker.Ticket{}, false, false
	}
	return breaker.Ticket{}, false, true
}

func (g *Guard) fallback() (*Refusal, bool) {
	switch {
	case g.FallbackCluster:
		return nil, true
	case g.Fallback != nil:
		return g.Fallback, false
	}
	return g.breakerOpen, false
}

// ShadowAdmissions returns the requests of class c that admission would
// have refused in shadow mode.
func (g *Guard) ShadowAdmissions(c shed.Class) uint64 {
	return g.shadowAdmit[classIndex(c)].Load()
}

// ShadowBreaker returns the attempts an open breaker would have refused in
// shadow mode.
func (g *Guard) ShadowBreaker() uint64 { return g.shadowBreaker.Load() }
