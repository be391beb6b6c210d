// Package chain is a gateway route's overload policies, run in one order
// on every request the route takes, by every engine (the HTTP/1.1 engine,
// the HTTP/2 engine, the simulator):
//
//	deadline   the request's budget (a trusted peer's Spillway-Timeout, grpc-timeout or
//	           x-envoy-expected-rq-timeout-ms, else the route's default; capped by its
//	           maximum): a request already out of time is refused before it costs a token
//	rate limit the route's rules (ratelimit/httplimit over the request's View)
//	admission  the cluster's adaptive concurrency limit (admit.Gate): class shares, a queue
//	           sized in time whose wait spends the budget, fairness; or the route's bulkhead
//	retry      after a failed attempt: attempts, backoff with jitter, a retry budget, an
//	           endpoint not tried yet, idempotent requests only (or one with Idempotency-Key);
//	           hedges of a slow attempt, paid from the same budget (hedge.go)
//	breaker    the cluster's circuit breaker before every attempt, with its fallback
//	pick       the balancer, over healthy endpoints (the engine's part)
//
// Each stage is a library policy; this package only orders them and turns
// their refusals into pre-built answers. A Chain is built once per
// generation and read concurrently; a Pass is one request's way through
// it, kept in the engine's per-request scratch space so that a request
// that passes costs no allocation.
//
// Every verdict has one reason code — "deadline", "ratelimit:<rule>",
// "ratelimit-unavailable:<rule>", "admit:limit", "admit:queue",
// "admit:codel", "admit:fairness", "bulkhead", "breaker-open", and the
// engine's own "no-healthy-endpoint", "upstream-reset", … — which is the
// access log's reason field, the metrics' reason label and the
// Spillway-Reason response field.
//
// Time is a parameter: every method takes now (seconds on the clock the
// route's engine reads) and none reads a clock, except that waiting in the
// admission queue is done by the admit.Gate, which owns its timer.
package chain
