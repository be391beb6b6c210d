package chain

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
)

// Config is one route's policies. The zero Config runs no policy.
type Config struct {
	// Route names the route (the "route" key part of rate-limit rules).
	Route string
	// Guard is the route's cluster's admission and breaker; nil: none.
	Guard *Guard
	// Class is the class of the route's requests; with ClassHeader a
	// trusted peer's Spillway-Criticality replaces it.
	Class       shed.Class
	ClassHeader bool
	// Deadline is the request budget.
	Deadline Deadline
	// Limits, when set, decides the route's rate-limit rules.
	Limits Limits
	// Bulkhead bounds the route's requests in flight (0: no bound).
	Bulkhead int
	// Streaming routes (long-lived exchanges) are kept out of the
	// cluster's adaptive admission: their length says nothing about the
	// cluster's capacity. Bound them with Bulkhead.
	Streaming bool
	// Retry, when set, decides retries; RetryOn what is retried.
	Retry   *retry.Policy
	RetryOn RetryOn
	// Hedger, when set, hedges the route's idempotent requests (see
	// HedgeDelay); its Budget should be Retry's, so that hedges and
	// retries share one.
	Hedger *retry.Hedger
	// Budget is the budget Hedger pays from when there is no Retry
	// (retries off, hedging on): each request let through fills it, as
	// Retry fills its own.
	Budget *retry.Budget
	// Rand draws the backoff jitter; nil: math/rand/v2's.
	Rand retry.Rand
}

// Limits decides a request's rate-limit rules: *httplimit.Limiter.
type Limits interface {
	Check(ctx context.Context, now float64, v *request.View, route string, out *httplimit.Verdict)
	// Abandon counts a delayed request that gave up its wait.
	Abandon(out *httplimit.Verdict)
}

// Chain is one route's compiled policies. Read concurrently; built once
// per generation.
type Chain struct {
	cfg      Config
	inFlight atomic.Int64 // the bulkhead's count
	override overrides
	stats    Stats

	deadlineRef, badTimeout, bulkheadRef *Refusal
}

// New compiles cfg.
func New(cfg Config) *Chain {
	c := &Chain{cfg: cfg}
	c.deadlineRef = NewRefusal(http.StatusServiceUnavailable, ReasonDeadline, "the request's time budget ran out before it could be served", false)
	c.badTimeout = NewRefusal(http.StatusBadRequest, ReasonBadHeader, "malformed time budget (Spillway-Timeout, grpc-timeout or x-envoy-expected-rq-timeout-ms)", false)
	c.bulkheadRef = NewRefusal(http.StatusServiceUnavailable, ReasonBulkhead, "the route has as many requests in flight as it allows", true)
	return c
}

// Guard returns the route's cluster guard (nil: none).
func (c *Chain) Guard() *Guard { return c.cfg.Guard }

// Admit runs the stages before the upstream for the request v that
// arrived at now: deadline, rate limits, bulkhead, admission. It fills p
// (which it resets) and returns nil when the request may go on — the
// caller then owes p.End — or the refusal to answer, having released
// whatever p held. ctx ends the waits (a rate-limit queue, the admission
// queue) when the client leaves; clk is read after a wait.
func (c *Chain) Admit(ctx context.Context, clk clock.Clock, now float64, v *request.View, p *Pass) *Refusal {
	p.state = state{c: c, start: now, class: c.cfg.Class}
	p.RetryAfter = -1
	p.idempotent = idempotent(v)
	if !c.Bypassed() {
		if ref := c.route(ctx, clk, &now, v, p); ref != nil {
			c.stats.refused.Add(1)
			return ref
		}
	}
	if ref := c.admit(ctx, clk, now, v, p); ref != nil {
		c.stats.refused.Add(1)
		return ref
	}
	if !c.Bypassed() {
		// Only a request let through earns retries: a refused one never
		// reaches the cluster.
		switch {
		case c.cfg.Retry != nil:
			c.cfg.Retry.RecordRequest(now)
		case c.cfg.Budget != nil:
			c.cfg.Budget.RecordRequest(now)
		}
	}
	return nil
}

// route runs the route's own stages; a rate limit's wait moves now.
func (c *Chain) route(ctx context.Context, clk clock.Clock, now *float64, v *request.View, p *Pass) *Refusal {
	d, ok, err := c.cfg.Deadline.budget(v)
	switch {
	case err != nil:
		return c.badTimeout
	case ok && d <= 0:
		return c.deadlineRef
	case ok:
		p.deadline = *now + d
	}
	if c.cfg.ClassHeader && v.Trusted {
		if s, ok := v.Get(shed.ClassHeader); ok {
			if cl, ok := shed.ParseClass(s); ok {
				p.class = cl
			}
		}
	}
	if c.infeasible(*now, p) {
		return c.deadlineRef
	}
	if c.cfg.Limits != nil {
		if ref := c.rateLimit(ctx, clk, now, v, p); ref != nil {
			return ref
		}
	}
	if n := c.cfg.Bulkhead; n > 0 {
		if c.inFlight.Add(1) > int64(n) {
			c.inFlight.Add(-1)
			return c.bulkheadRef
		}
		p.bulk = true
	}
	return nil
}

// infeasible reports whether p's deadline falls within the current wait
// of the cluster's admission queue: the Gate would refuse the request
// (limit.ReasonDeadline), and the chain does first, before it costs a
// rate-limit token or a place, counting it as the Gate would.
func (c *Chain) infeasible(now float64, p *Pass) bool {
	g := c.cfg.Guard
	if p.deadline == 0 || g == nil || g.Gate == nil || c.cfg.Streaming || g.AdmitShadow || g.AdmissionBypassed() {
		return false
	}
	l := g.Gate.Limiter()
	if p.deadline > now+l.QueueWait() {
		return false
	}
	l.Refused(p.class, limit.ReasonDeadline)
	return true
}

// rateLimit decides the rules; a leaky-queue rule's wait is slept here,
// unless it would pass the deadline.
func (c *Chain) rateLimit(ctx context.Context, clk clock.Clock, now *float64, v *request.View, p *Pass) *Refusal {
	vd := &p.rl
	p.rlOn = true
	c.cfg.Limits.Check(ctx, *now, v, c.cfg.Route, vd)
	if !vd.Allowed {
		p.RetryAfter = vd.RetryAfter
		p.rlRef = Refusal{Status: vd.Status, Reason: vd.Reason, Body: vd.Body, Retry: vd.RetryAfter >= 0,
			GRPC: grpcCode(vd.Status), GRPCMessage: vd.Reason}
		return &p.rlRef
	}
	if vd.Delay <= 0 {
		return nil
	}
	if p.deadline > 0 && *now+vd.Delay >= p.deadline {
		c.cfg.Limits.Abandon(vd)
		return c.deadlineRef
	}
	t := time.NewTimer(clock.Duration(vd.Delay))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		c.cfg.Limits.Abandon(vd)
		return c.deadlineRef
	}
	*now = clk.Now()
	return nil
}

// admit asks the cluster's admission for a place.
func (c *Chain) admit(ctx context.Context, clk clock.Clock, now float64, v *request.View, p *Pass) *Refusal {
	g := c.cfg.Guard
	if g == nil || g.Gate == nil || c.cfg.Streaming {
		return nil
	}
	if g.Gate.Limiter().Fair() { // else the limiter never reads it
		p.client = clientHash(v)
	}
	if ref := g.admit(ctx, now, p); ref != nil {
		p.release(now, 0)
		if ref.Retry {
			p.RetryAfter = int64(g.Gate.RetryAfterSeconds())
		}
		return ref
	}
	if p.ticket == nil {
		return nil // shadow refusal, or bypassed
	}
	if p.wait > 0 && p.deadline > 0 && now+p.wait >= p.deadline {
		p.End(now+p.wait, Ignore)
		return c.deadlineRef
	}
	p.optional = g.optional(now + p.wait)
	return nil
}

func grpcCode(status int) int {
	if status == http.StatusTooManyRequests {
		return GRPCResourceExhausted
	}
	return GRPCUnavailable
}

// idempotent reports whether v may be sent twice: its method is
// idempotent (RFC 9110 section 9.2.2), or it carries a non-empty
// Idempotency-Key (an empty one names nothing the server could
// deduplicate; retry.Idempotent's rule).
func idempotent(v *request.View) bool {
	switch v.Method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	k, ok := v.Get("Idempotency-Key")
	return ok && k != ""
}

// clientHash identifies the client for fairness: its address (FNV-1a).
func clientHash(v *request.View) uint64 {
	a := v.Client.Addr().As16()
	h := uint64(14695981039346656037)
	for _, b := range a {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return h | 1
}
