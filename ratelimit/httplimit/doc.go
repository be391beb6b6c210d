// Package httplimit enforces rate-limit rules (package ratelimit/rules) on
// net/http servers, and through Check on any engine that fills a
// request.View: it finds who is asking, asks each matching rule's keyed
// store, and answers refusals the way the standards say (seed 002, "where
// and what to answer").
//
//	set, err := rules.Load("rules.yaml")
//	lim, err := httplimit.New(set, httplimit.Config{})
//	http.ListenAndServe(addr, lim.Handler(mux))
//
// # A request's path through the limiter
//
// Every rule whose Match selects the request is checked, in file order —
// all of them, not the first match. For each: the key is built from the
// rule's key parts (a missing part skips the rule or uses
// rules.FallbackKey, per OnMissing); the cost is the rule's (or
// Config.Cost's); the rule's store decides at the clock's now. Then:
//
//	store error, fail open     the rule is passed over (counted, logged)
//	store error, fail closed   503, problem+json, Retry-After; next not called
//	refused, shadow rule       counted and logged (rate-limited); nothing else
//	refused                    429 naming the rule; next not called; later rules unchecked
//	cost beyond the capacity   400 (the request can never pass; retrying is futile)
//	allowed                    go on to the next rule
//
// A refused request stops the walk, so rules after the refusing one do not
// count it; rules before it have counted it (as in Envoy's rate limit
// service), so order cheap, broad rules after narrow, strict ones if that
// matters. When every rule allows, the response carries the RateLimit
// fields of the enforcing rule with the least remaining, and next runs.
//
// # Answers
//
// A refusal (RFC 6585 429; RFC 9110 Retry-After; RFC 9457 problem details;
// draft-ietf-httpapi-ratelimit-headers fields):
//
//	HTTP/1.1 429 Too Many Requests
//	Retry-After: 20
//	Ratelimit-Policy: "user-default";q=100;w=60
//	Ratelimit: "user-default";r=0;t=20
//	Content-Type: application/problem+json
//	Cache-Control: no-store
//
//	{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"Rule \"user-default\"
//	 allows 100 requests per minute. Try again in about 20 seconds.","rule":"user-default"}
//
// Retry-After is ⌈RetryAfter + jitter⌉ whole seconds, at least 1, where
// RetryAfter is the algorithm's own answer (GCRA: tat − now − τ; fixed
// window: the time left in it) and the jitter is uniform in [0,
// Config.Jitter). RateLimit gives r, the units remaining, and t, the seconds
// until the quota is available again (on a refusal, the Retry-After; on an
// allowed response, until the bucket is full). The body is pre-built per
// rule with the number appended, and the headers take one allocation.
//
// # RateLimit-Policy: q and w
//
// RateLimit-Policy gives the rule's quota q per window w whole seconds
// (ratelimit.Spec.Policy), chosen so that the fields agree with each other
// and never promise more than the rule allows:
//
//   - q is at least the rule's capacity — the bucket's burst (token bucket,
//     GCRA, leaky meter), the queue size (leaky queue) or the limit per
//     window (fixed window, sliding log, sliding window counter) — and r is
//     at most that capacity, so r ≤ q on every response;
//   - q ÷ w is the rule's rate exactly when 15-digit integers can say it
//     (structured-field integers, RFC 9651), with the smallest such q, and
//     otherwise the nearest ratio below it; it is never above the rate;
//   - a rule slower than one capacity per 10¹⁵ s states q alone (no w).
//
// For example:
//
//	rule                                    RateLimit-Policy
//	rate 3, per 1m (burst 3)                q=3;w=60
//	rate 100, per 1m, burst 20              q=20;w=12       (20 per 12 s = 100 a minute)
//	rate 2, per 1s, burst 4                 q=4;w=2
//	rate 1, per 1.5s                        q=2;w=3
//	rate 4000000000, per 1m                 q=4000000000;w=60
//	rate 10, per 15m, sliding-log           q=10;w=900
//	rate 5, per 2.5s, leaky-queue, burst 10 q=10;w=5
//
// For a window algorithm with a whole period, that is the rule as written.
// For a bucket, q per w is the long-run rate and q is the burst rounded up
// to a multiple of the rate's lowest terms: a full bucket admits its burst
// at once, and a window of w seconds may then admit about q more as it
// refills — the policy states the sustained rate, not the most a window can
// hold after a quiet period.
//
// # Client IP
//
// The "ip" key part is the connection's peer address, unless the peer is
// in the set's trustedProxies: then its forwarding header (X-Forwarded-For
// or Forwarded, one of them, by the set's forwardedHeader) is walked from
// the right past trusted proxies to the first untrusted address (see
// ClientIP). A client that sends the header itself, directly, changes
// nothing. IPv6 clients are keyed by their /64 (rules.Set.IPv6Prefix).
// Check trusts as the listener does instead (see below).
//
// # Shadow rules
//
// A shadow rule is decided and counted like any other, but its refusals
// refuse nothing: they increment the shadow_denied counter and are logged
// with the rule, key, method and path. Logging is gated per rule to
// Config.LogsPerSecond lines per second (a GCRA limiter of its own); each
// line says how many were suppressed since the previous one. A shadow
// leaky-queue rule delays nothing.
//
// # Leaky queue
//
// A leaky-queue rule (algorithm leaky-queue) delays instead of refusing: an
// admitted request waits Decision.Delay on a timer (stopped on exit) before
// next runs; with several, the longest delay. If the request's context ends
// first, next is not called and the answer is 503 with a problem body
// (outcome queue_abandoned; the queue slot stays taken until it drains). A
// full queue (burst requests waiting) refuses with 429 as usual.
//
// # Engines that are not net/http
//
// An engine with its own request type (the gateway's HTTP/1.1 and HTTP/2
// engines, which fill a request.View) calls Check instead of Handler:
//
//	var v httplimit.Verdict // one per connection: Check resets it
//	lim.Check(ctx, now, view, routeName, &v)
//	switch {
//	case !v.Allowed: // send v.Status, v.Body (problem+json, no-store),
//		// Retry-After v.RetryAfter (when ≥ 0), and Policy/Limit (when not nil)
//	case v.Delay > 0: // wait v.Delay seconds, or lim.Abandon(&v) and refuse
//	}
//
// Check is Handler's decision core itself: the same rules, stores,
// counters, shadow logs, hot keys, fail modes and Joint decisions, and the
// Verdict holds the status, Retry-After, reason code ("ratelimit:<id>",
// "ratelimit-unavailable:<id>"), problem body and RateLimit field values
// Handler would send, formatted into the Verdict's own buffer: on the
// in-memory store a Check allocates nothing. It takes now from the caller
// and never sleeps: a leaky queue's wait is the caller's, and Abandon
// gives (and counts) the answer for a request that stops waiting.
//
// For a View the listener, not the rules file, says who is trusted: the
// "ip" part is View.Client unless View.Trusted, and then the set's
// forwarding header is walked past View.Proxies; the set's trustedProxies
// is not used. The "route" part of a rule without path patterns is the
// route name passed to Check, identity parts come from
// Config.IdentityView (or the header), and Config.Cost is not called.
//
// # Stores
//
// Config.Store makes each rule's store (in memory by default; on Redis with
// redisstore.Stores, whose ForRule wraps each rule's fail mode, breaker,
// floor and leasing). Update keeps a rule's store while its id, Spec and
// FailMode stay the same. A store that implements io.Closer belongs to the
// Limiter: one that Update stops using is closed Config.RetireAfter
// seconds later (requests already under way finish with it), and Close
// closes the rest.
//
// # Metrics and hot keys
//
// The Limiter is a prometheus.Collector of
// spillway_ratelimit_http_decisions_total{rule, outcome}, outcome one of
// allowed, denied, shadow_denied, store_error, queue_abandoned. Counters are
// curried once per rule, so counting allocates nothing.
//
// With Config.HotKeys set, each rule has a heavy-hitter tracker (a
// count-min sketch with a top-k set, ratelimit.HeavyHitters) that every
// decision feeds with the rule's key and the request's cost; a key already
// in the top set costs no allocation, a key entering it one copy. The
// Limiter then also exports the gauge
// spillway_ratelimit_http_hot_key_units{rule, key}: the estimated units of
// each rule's top keys, at most TopK series per rule (series of keys that
// leave the top set disappear), so the cardinality is bounded by rules ×
// TopK. HotKeys returns the same lists and HotKeysHandler serves them as
// JSON (the example serves it at /debug/hotkeys). Keys appear as they are:
// a rule keyed by API key or phone number exposes those.
package httplimit
