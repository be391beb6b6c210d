// Package admin is the gateway's admin API, an http.Handler served on its
// own listener (127.0.0.1:9901 by default):
//
//	GET  /live                                   200 "ok" while the process runs
//	GET  /ready                                  200 "ready", or 503 "not ready" (starting, draining)
//	GET  /metrics                                Options.Metrics (404 when nil)
//	GET  /config                                 the running configuration, redacted (JSON)
//	GET  /clusters                               clusters and every endpoint: state, weight, in flight, latency EWMA (JSON)
//	POST /clusters/{cluster}/endpoints/{endpoint}/drain     stop sending new requests to the endpoint
//	POST /clusters/{cluster}/endpoints/{endpoint}/undrain   send them again
//	POST /reload                                 reload the file: 200 with the new status, 422 problem+json listing the problems
//	GET  /reload                                 the last load's or reload's status (JSON)
//	GET  /policies                               the policy chain's state (JSON): per route its class, bypass, bulkhead,
//	                                             the gateway's answers by reason code and class, retries and stops by
//	                                             verdict, retry budget left, rate-limit rules with decisions by outcome
//	                                             and hot keys; per cluster admission (algorithm, limit, in flight,
//	                                             pinned, queue length and wait, shadow refusals by class, brownout
//	                                             level and whether forced) and breaker (state, forced, shadow refusals)
//	POST /clusters/{cluster}/breaker/{open|closed|auto}    force the cluster's breaker, or let it decide again
//	POST /clusters/{cluster}/limit/{n|auto}                pin the admission limit to n ≥ 1, or back to the adaptive one
//	POST /clusters/{cluster}/brownout/{level|auto}         force the share (0 to 1) of requests given optional work
//	POST /routes/{route}/bypass/{on|off}                   turn the route's own policies (deadline, rate limits,
//	                                                       bulkhead, retries) off or on again
//
// An override answers 200 with what it did ({"what","target","value"}),
// 404 for an unknown cluster or route, 400 for a value the path or the
// target cannot take (a limit on a cluster without admission, a brownout
// level without a dimmer, a level outside [0, 1]); each one applied is
// logged once at Info with the remote address and how it was authorised.
// The overrides in force are listed in GET /config (Overrides). They live
// in the running generation's policy objects: a reload keeps a cluster's
// breaker override while the cluster's admission and breaker definitions
// are unchanged (the guard is carried), its limit, brownout and admission
// bypass overrides while its admission definition is unchanged (a new
// guard for a changed breaker keeps the admission's gate), drops each
// otherwise, and drops every route bypass (routes' chains are rebuilt by
// every reload). A pinned limit is the limit the class shares
// apply to, as the adaptive one is.
//
// Any other method on these paths is answered 405 with Allow, any other
// path 404. Answers carry Cache-Control: no-store; JSON ones
// Content-Type application/json, refusals application/problem+json (RFC
// 9457).
//
// # Security
//
// The admin API changes what the gateway does, so it defends against the
// browser tabs on the same machine as well as against the network:
//
//   - Token. With Options.Token set, every request but GET /live and GET
//     /ready must carry "Authorization: Bearer <token>"; otherwise 401 with
//     WWW-Authenticate: Bearer. Tokens are compared in constant time (their
//     SHA-256 digests, so not even the length leaks).
//   - Cross-site requests. Every POST needs the token or, without a
//     configured token, the header "X-Spillway-Admin: 1"; otherwise 403. A
//     page in a browser cannot send either to another origin without a
//     CORS preflight, and the preflight is never granted: no response
//     carries an Access-Control-* field, and OPTIONS is answered 405.
//   - DNS rebinding. The Host of every request but GET /live and /ready
//     must name localhost, a loopback address, the bound address's host or
//     one of Options.Hosts (exact names, IP addresses or *.wildcards; the
//     port is ignored); otherwise 421 Misdirected Request. A page whose
//     name was re-pointed at 127.0.0.1 still sends its own name as Host.
//
// GET /live and /ready are exempt from the token and the Host check:
// probes (a kubelet's Host is the pod's IP) must reach them, and they
// disclose nothing.
package admin
