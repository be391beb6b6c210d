package httplimit

import (
	"context"
	"net/http"

	"github.com/spillwayhq/spillway/request"
)

// Verdict is what Check decided about one request, ready to be sent by an
// engine that is not net/http: the same decision, status, fields and body
// Handler answers with. Reuse one Verdict (per connection, say): Check
// resets it, and its buffer holds the formatted fields and body, so a
// Check allocates nothing on the in-memory store. The byte slices are
// valid until the Verdict's next Check and must not be modified. Do not
// copy a Verdict that is in use.
type Verdict struct {
	// Allowed means serve the request, after Delay if there is one.
	Allowed bool
	// Delay is the wait, in seconds, a leaky-queue rule puts before the
	// request is served (the longest when several match); 0 means none.
	// Check never sleeps: the caller waits, and calls Abandon if the
	// request ends (or would pass its deadline) first.
	Delay float64
	// Status, when !Allowed: 429 (over a limit), 503 (a fail-closed
	// rule's store failed, or Abandon), 400 (a cost the rule can never
	// allow). 0 when allowed.
	Status int
	// Rule is the id of the refusing rule; when allowed, of the rule whose
	// RateLimit fields Policy and Limit are ("" when none: no enforcing
	// rule matched).
	Rule string
	// Reason is the refusal's reason code: "ratelimit:<id>" for a 429 or
	// 400, "ratelimit-unavailable:<id>" for a fail-closed 503 and
	// "ratelimit-abandoned:<id>" after Abandon; "" when allowed.
	// Pre-built per rule.
	Reason string
	// RetryAfter is the Retry-After field in seconds; -1 means none (an
	// allowed request, a 400, an abandoned wait).
	RetryAfter int64
	// Body is the refusal's application/problem+json body (RFC 9457),
	// exactly Handler's: for a 429 and a 503 it says "Try again in about
	// N seconds." with N = RetryAfter. A refusal also carries the fields
	// Content-Type: application/problem+json and Cache-Control: no-store.
	Body []byte
	// Policy and Limit are the values of the RateLimit-Policy and
	// RateLimit fields (draft-ietf-httpapi-ratelimit-headers), exactly as
	// Handler sends them; nil when there are none (nothing enforced, a 503
	// or a 400). A 429 carries its rule's.
	Policy, Limit []byte

	ru     *rule   // the rule named by Rule
	queued *rule   // the leaky-queue rule whose wait is Delay
	ip     ipCache // the last client address's key part, kept across Checks
	buf    [768]byte
}

// Check decides request v at now, under every matching rule, as Handler
// decides an *http.Request, and fills out: the same stores, counters,
// shadow logs, hot keys and fail modes. route is the engine's name for
// the route v took: the "route" key part of rules whose match names no
// path pattern ("" leaves that part missing).
//
// The "ip" key part is v.Client's address; when v.Trusted, the rule set's
// forwarding header (X-Forwarded-For, or Forwarded) is walked from the
// right while its hops are in v.Proxies, as ClientIP walks the set's
// trusted proxies. The listener decides who is trusted: for a View,
// v.Trusted and v.Proxies replace the set's trustedProxies, which Check
// ignores. Header key parts read v's header, identity parts
// Config.IdentityView; Config.Cost is not called (no *http.Request), so
// requests take their rules' costs. Paths are percent-decoded before they
// are matched, as net/http decodes them (a malformed escape is matched as
// received).
//
// Keys may point into the engine's buffers, as v does: stores must copy a
// key they keep (the in-memory store and hot-key trackers do).
func (l *Limiter) Check(ctx context.Context, now float64, v *request.View, route string, out *Verdict) {
	out.reset()
	s := l.state.Load()
	ds := l.decisions.get()
	defer l.decisions.put(ds)
	ds.in.fromView(v, route, &out.ip)
	l.run(ctx, now, s, ds, out)
}

// Abandon turns out, an allowed verdict with a Delay, into the answer
// Handler gives a request whose context ends while it waits in a leaky
// queue — 503, problem type queue-abandoned, no Retry-After, Policy and
// Limit kept — and counts it as queue_abandoned for the queue's rule.
// Call it when the request ends (or cannot wait) before Delay has passed;
// the queue slot stays taken until it drains. Without a Delay it does
// nothing.
func (l *Limiter) Abandon(out *Verdict) {
	ru := out.queued
	if !out.Allowed || ru == nil {
		return
	}
	ru.c.abandoned.Inc()
	out.refuse(ru, http.StatusServiceUnavailable, ru.reasonAbandon, -1)
	out.Body, out.Delay, out.queued = ru.abandon.fixed, 0, nil
}

// reset clears v for a new decision, keeping its buffer and address cache.
func (v *Verdict) reset() {
	v.Allowed, v.Delay, v.Status, v.Rule, v.Reason, v.RetryAfter = false, 0, 0, "", "", -1
	v.Body, v.Policy, v.Limit, v.ru, v.queued = nil, nil, nil, nil, nil
}

// fields sets v's RateLimit fields to rule ru's, with remaining units and t
// seconds to reset, at the start of v's buffer, and returns the buffer
// used so far.
func (v *Verdict) fields(ru *rule, remaining int, t int64) []byte {
	v.ru, v.Rule = ru, ru.ID
	b := append(v.buf[:0], ru.policy...)
	n := len(b)
	b = appendLimit(b, ru, remaining, t)
	v.Policy, v.Limit = b[:n:n], b[n:len(b):len(b)]
	return b
}

// refuse makes v a refusal by rule ru.
func (v *Verdict) refuse(ru *rule, status int, reason string, retryAfter int64) {
	v.Allowed, v.Status, v.ru, v.Rule, v.Reason, v.RetryAfter = false, status, ru, ru.ID, reason, retryAfter
}

// body sets v's body to p with secs filled in, appended to b (v's buffer
// as used so far).
func (v *Verdict) body(b []byte, p *problem, secs int64) {
	n := len(b)
	b = p.append(b, secs)
	v.Body = b[n:len(b):len(b)]
}
