package chain

import (
	"math"

	"github.com/spillwayhq/spillway/breaker"
)

// Hedging (Config.Hedger): while an attempt has no response head after
// HedgeDelay, the engine may send a hedge — another attempt of the same
// request, to an endpoint not tried yet — if TryHedge lets it; the first
// good answer wins (HedgeWon when it is a hedge's) and the others are
// cancelled. A hedge is paid from the route's retry budget (the Hedger's
// Budget is the retry policy's), so hedges and retries together stay
// within it; it asks the cluster's breaker like any attempt, holding its
// own ticket (HedgeTicket), so that several attempts are in flight at
// once. Only idempotent requests are hedged; the engine hedges only those
// without a body.
//
// Concurrency: HedgeDelay, TryHedge, HedgeWon and RecordLatency are not
// safe for concurrent use with each other or with the Pass's other
// methods; the engine serialises them (a hedge's timer and the request's
// goroutine under one lock). A HedgeTicket is the hedge's own, used by
// one goroutine.

// HedgeTicket is one hedge's breaker permission (the zero value holds
// none): report it with Done, or Cancel it when the hedge lost or was cut
// (it then says nothing about the cluster). Only the first report counts.
type HedgeTicket struct {
	brk breaker.Ticket
	on  bool
}

// Done reports the hedge's result to the breaker: failed as for
// Pass.AttemptDone.
func (t *HedgeTicket) Done(now float64, failed bool) {
	if t.on {
		t.brk.Done(now, !failed)
		t.on = false
	}
}

// Cancel releases the hedge's breaker permission without an outcome.
func (t *HedgeTicket) Cancel() {
	if t.on {
		t.brk.Cancel()
		t.on = false
	}
}

// hedgeable reports whether the request may get another hedge.
func (p *Pass) hedgeable() bool {
	c := p.c
	return c != nil && c.cfg.Hedger != nil && !c.Bypassed() && p.idempotent && p.hedges < c.cfg.Hedger.MaxHedges()
}

// HedgeDelay returns how many seconds after an attempt sent at now a hedge
// may follow it: the Hedger's delay; +Inf when the request gets no (more)
// hedges — the route does not hedge or is bypassed, the request is not
// idempotent, it had all its hedges, or its deadline comes first.
func (p *Pass) HedgeDelay(now float64) float64 {
	if !p.hedgeable() {
		return math.Inf(1)
	}
	d := p.c.cfg.Hedger.Delay(now)
	if p.deadline > 0 && now+d >= p.deadline {
		return math.Inf(1)
	}
	return d
}

// TryHedge decides, at now, after the delay, whether a hedge goes: the
// request may still be hedged, its deadline is not spent, the cluster's
// breaker lets an attempt through (a hedge takes no fallback), and the
// retry budget pays for it. ok true: the hedge is counted and t is its
// breaker permission, to be reported.
func (p *Pass) TryHedge(now float64) (t HedgeTicket, ok bool) {
	if !p.hedgeable() || (p.deadline > 0 && now >= p.deadline) {
		return t, false
	}
	c := p.c
	if g := c.cfg.Guard; g != nil {
		var refused bool
		if t.brk, t.on, refused = g.permit(now, p); refused {
			c.stats.hedgesRefused.Add(1)
			return HedgeTicket{}, false
		}
	}
	if !c.cfg.Hedger.TryHedge(now) {
		t.Cancel()
		c.stats.hedgesRefused.Add(1)
		return HedgeTicket{}, false
	}
	p.hedges++
	c.stats.hedges.Add(1)
	return t, true
}

// HedgeWon says that the hedge holding t answered first: its breaker
// permission becomes the request's (reported by AttemptDone, or End),
// the losing attempt's is cancelled.
func (p *Pass) HedgeWon(t *HedgeTicket) {
	if p.brkOn {
		p.brk.Cancel()
	}
	p.brk, p.brkOn = t.brk, t.on
	t.on = false
	if p.c != nil {
		p.c.stats.hedgesWon.Add(1)
	}
}

// Hedges is the number of hedges the request sent.
func (p *Pass) Hedges() int { return p.hedges }

// Hedging reports whether the route hedges (a tracked delay needs every
// successful attempt's latency: RecordLatency).
func (p *Pass) Hedging() bool {
	return p.c != nil && p.c.cfg.Hedger != nil
}

// RecordLatency adds the latency, in seconds, of an attempt that got a
// good answer at now to the route's hedging delay tracker (nothing
// without hedging, or with a fixed delay). The engine calls it for the
// winning attempt only: a cancelled one measured nothing.
func (p *Pass) RecordLatency(now, latency float64) {
	if p.Hedging() {
		p.c.cfg.Hedger.Record(now, latency)
	}
}
