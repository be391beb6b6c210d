package chain

import (
	"math"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/shed"
)

// Pass is one request's way through a Chain: what it holds (an admission
// place, a bulkhead place, a breaker trial) and what it learned (its
// deadline, class, the rate limit's fields). The engine keeps one per
// connection or stream and reuses it; Admit resets it.
type Pass struct {
	state
	// rl is the rate limit's verdict. Admit keeps it (Check resets it):
	// its client-address cache spares formatting the address of the same
	// client again. rlOn (in state) says it is this request's.
	rl httplimit.Verdict

	// RetryAfter is the Retry-After, in seconds, of the refusal Admit or
	// Attempt returned (-1: none).
	RetryAfter int64
}

// state is what a Pass holds for one request only: Admit zeroes it.
type state struct {
	c          *Chain
	start      float64
	deadline   float64 // absolute, seconds; 0: none
	class      shed.Class
	client     uint64
	idempotent bool
	bulk       bool // holds a bulkhead place
	optional   bool // brownout: the request may run optional work

	slot   limit.Ticket
	ticket *limit.Ticket // the admission place; nil: none
	wait   float64       // time spent in the admission queue

	brk   breaker.Ticket
	brkOn bool // brk is an attempt not yet reported

	attempts int
	hedges   int     // hedges sent (TryHedge)
	prev     float64 // the last backoff delay
	tried    [maxTried]string
	nTried   int

	rlOn  bool // rl is the verdict of this request's rate limit
	rlRef Refusal
}

// Clear drops what the Pass holds of its last request — its chain, and
// with it the generation — keeping the rate limit's client-address cache
// (httplimit.Verdict.Forget). The engines call it before pooling a Pass.
func (p *Pass) Clear() {
	p.state = state{}
	p.rl.Forget()
	p.RetryAfter = 0
}

// maxTried bounds the endpoints a Pass remembers for retries.
const maxTried = 8

// Outcome is how a request ended, for admission's sample.
type Outcome = limit.Outcome

// Outcomes: Success feeds a latency sample, Dropped says the cluster was
// overloaded (a timeout, a 503), Ignore says nothing (the client left).
const (
	Success = limit.Success
	Dropped = limit.Dropped
	Ignore  = limit.Ignore
)

// Attempt is called before each upstream attempt: a request whose budget
// is spent by now is refused (deadline); then it asks the cluster's
// breaker. nil lets the attempt go; otherwise the answer to give (the
// fallback's or breaker-open, p.RetryAfter set). useFallback reports that
// the request goes to the fallback cluster instead.
func (p *Pass) Attempt(now float64) (ref *Refusal, useFallback bool) {
	p.attempts++
	if p.c == nil {
		return nil, false
	}
	if p.deadline > 0 && now >= p.deadline { // spent since admission (a stall, a backoff)
		p.RetryAfter = -1
		return p.c.deadlineRef, false
	}
	if p.c.cfg.Guard == nil {
		return nil, false
	}
	g := p.c.cfg.Guard
	ref, useFallback = g.allow(now, p)
	if ref != nil && ref.Retry {
		p.RetryAfter = breakerWait(g, now)
	}
	return ref, useFallback
}

// breakerWait is the Retry-After of a breaker refusal at now, in whole
// seconds, at least 1: the time left before the open breaker lets a trial
// through; the whole open time when it is forced open (no end to wait for).
func breakerWait(g *Guard, now float64) int64 {
	s := g.Breaker.Snapshot()
	left := s.OpenFor
	if g.ForcedBreaker() != "open" {
		left = s.OpenedAt + s.OpenFor - now
	}
	return max(1, int64(math.Ceil(left)))
}

// AttemptDone reports the attempt's result to the breaker: failed is the
// upstream's failure (breaker.HTTPFailure: a 5xx or a transport error).
func (p *Pass) AttemptDone(now float64, failed bool) {
	if p.brkOn {
		p.brk.Done(now, !failed)
		p.brkOn = false
	}
}

// Tried records that an attempt went to addr; Untried reports whether
// addr has not been tried yet.
func (p *Pass) Tried(addr string) {
	if p.nTried < maxTried {
		p.tried[p.nTried] = addr
		p.nTried++
	}
}

// Untried reports whether no attempt of the request went to addr.
func (p *Pass) Untried(addr string) bool {
	for _, a := range p.tried[:p.nTried] {
		if a == addr {
			return false
		}
	}
	return true
}

// NTried is the number of endpoints tried so far.
func (p *Pass) NTried() int { return p.nTried }

// End ends the request at now: its admission place with outcome o (the
// latency sample from Admit's now), its bulkhead place, and a breaker
// trial the engine did not report (cancelled). Call it once per admitted
// request; more calls do nothing.
func (p *Pass) End(now float64, o Outcome) {
	if p.brkOn {
		p.brk.Cancel()
		p.brkOn = false
	}
	p.release(now, o)
}

func (p *Pass) release(now float64, o Outcome) {
	if p.ticket != nil {
		if g := p.c.cfg.Guard; g != nil && g.Gate != nil && !g.AdmitShadow {
			g.Gate.Exit(p.ticket, p.start, p.wait, o)
		} else {
			p.ticket.Done(now, o)
		}
		p.ticket = nil
	}
	if p.bulk {
		p.c.inFlight.Add(-1)
		p.bulk = false
	}
}

// Deadline is the request's absolute deadline in seconds (0: none).
func (p *Pass) Deadline() float64 { return p.deadline }

// Remaining is the budget left at now, in seconds; ok false when the
// request has none or the route does not forward it.
func (p *Pass) Remaining(now float64) (secs float64, ok bool) {
	if p.c == nil || p.deadline == 0 || !p.c.cfg.Deadline.Forward {
		return 0, false
	}
	return max(0, p.deadline-now), true
}

// Class is the request's class.
func (p *Pass) Class() shed.Class { return p.class }

// Optional is the brownout decision: whether the request may run
// optional work (true without a dimmer).
func (p *Pass) Optional() bool { return p.optional || p.ticket == nil }

// RateLimitFields returns the IETF RateLimit-Policy and RateLimit values
// the rate limit reported for the request (nil when none).
func (p *Pass) RateLimitFields() (policy, limit []byte) {
	if !p.rlOn {
		return nil, nil
	}
	return p.rl.Policy, p.rl.Limit
}

// Brownout returns the field that carries the request's brownout
// decision upstream and the decision (Optional's: a request that holds no
// admission place drew none and runs its optional work); ok false without
// a dimmer.
func (p *Pass) Brownout() (header string, optional, ok bool) {
	if p.c == nil || p.c.cfg.Guard == nil || p.c.cfg.Guard.Gate == nil || p.c.cfg.Guard.Gate.Dimmer() == nil {
		return "", false, false
	}
	return p.c.cfg.Guard.BrownoutHeader, p.Optional(), p.c.cfg.Guard.BrownoutHeader != ""
}
