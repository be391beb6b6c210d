package chain

import (
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/upstream"
)

// RetryOn says which failed attempts are retried.
type RetryOn struct {
	// ConnectFailure: the connection could not be made (refused, no
	// route, TLS refused); the request never left, so it is retried
	// whatever its method.
	ConnectFailure bool
	// Reset: the connection broke before a whole response head; Timeout:
	// no response in time. Retried only when the request is idempotent.
	Reset, Timeout bool
	// Statuses are the upstream statuses retried (idempotent requests
	// only), e.g. 502, 503.
	Statuses []int
}

// Failure is one failed attempt, as the engine saw it.
type Failure struct {
	// Status is the upstream's status (0: it sent none; Kind says why).
	Status int
	Kind   upstream.Kind
	// Replayable: the engine can send the request again (no body, or a
	// body it kept whole).
	Replayable bool
	// After is the least wait the upstream asked for (Retry-After), in
	// seconds; negative: none.
	After float64
}

// retryable reports whether f may be retried at all.
func (o *RetryOn) retryable(f Failure, idempotent bool) bool {
	if !f.Replayable {
		return false
	}
	if f.Status == 0 {
		switch f.Kind {
		case upstream.KindRefused:
			return o.ConnectFailure
		case upstream.KindReset:
			return o.Reset && idempotent
		case upstream.KindTimeout:
			return o.Timeout && idempotent
		}
		return false
	}
	if !idempotent {
		return false
	}
	for _, s := range o.Statuses {
		if s == f.Status {
			return true
		}
	}
	return false
}

// Retry decides, after the failed attempt f, whether the request is sent
// again and after how long (the caller waits, then calls Attempt again).
func (p *Pass) Retry(now float64, f Failure) (delay float64, ok bool) {
	c := p.c
	if c == nil || c.cfg.Retry == nil || c.Bypassed() || !c.cfg.RetryOn.retryable(f, p.idempotent) {
		return 0, false
	}
	delay, v := c.cfg.Retry.Next(retry.Attempt{
		N: p.attempts, Now: now, Prev: p.prev, Deadline: p.deadline, After: f.After,
	}, c.cfg.Rand)
	if v != retry.Retry {
		c.stats.retryStopped[v].Add(1)
		return 0, false
	}
	c.stats.retries.Add(1)
	p.prev = delay
	return delay, true
}

// Retryable reports whether the failed attempt f is one the route retries
// (what RetryOn lists, for this request's idempotence), whatever the retry
// policy and budget would say: an engine racing a hedge against an
// attempt lets neither win with such a failure. It reads only the route's
// configuration and the request's idempotence, so a hedge's goroutine may
// call it beside TryHedge.
func (p *Pass) Retryable(f Failure) bool {
	return p.c != nil && p.c.cfg.RetryOn.retryable(f, p.idempotent)
}
