// Package metrics is the gateway's Prometheus instrumentation, built on
// client_golang with one Registry per process (never the global default).
//
// The request path touches only label children resolved in advance: a
// configuration generation (Metrics.Generation) resolves, per route, the
// counters of every status class and source, the latency histogram and
// the in-flight gauge, so RouteObserver.End costs atomic adds and one
// histogram Observe and allocates nothing. A cluster's upstream errors and
// a route's answers by reason and class are resolved lazily, once per
// endpoint and kind or reason and class, into a copy-on-write map that the
// request path reads without a lock. Endpoint states are not
// counted on the request path at all: a Collector reads them from the
// clusters' balancer.Sets when Prometheus scrapes.
//
// Series, all prefixed spillway_:
//
//	requests_total{route, cluster, code_class, source}   counter; code_class 1xx…5xx, source gateway|upstream
//	request_duration_seconds{route, cluster}             histogram, DefaultBuckets (0.5 ms … 30 s)
//	requests_in_flight{route}                            gauge
//	upstream_errors_total{cluster, endpoint, kind}       counter; kind: refused, timeout, reset, bad_response, canceled, pool_full, request_body
//	endpoint_health{cluster, endpoint, state}            gauge 1 for the current state, 0 for the others; state: healthy, unhealthy, slow_start, draining, ejected
//	config_generation                                    gauge: the newest generation's number
//	generations_live                                     gauge: generations not yet retired, the newest included
//	reloads_total{result}                                counter; result ok|error
//	overload_actions_total{action}, overload_state        from Sources.OverloadActions and OverloadState
//	connections_open{listener}                           gauge, from Sources.Connections
//	refusals_total{route, reason, class}                 counter: the gateway's own answers by reason code
//	                                                     (proxy.Ending.Reason; "other" past MaxReasons per route)
//	                                                     and class (the chain's; "none" without one)
//
// The policy chain's state is read at scrape time from Sources.Routes and
// Sources.Clusters, nothing being counted on the request path for it:
//
//	route_retries_total{route}, route_retries_stopped_total{route, verdict}
//	route_retry_budget_tokens{route}, route_policies_bypassed{route}
//	route_ratelimit_decisions_total{route, rule, outcome}   httplimit's decisions, per route
//	route_ratelimit_hot_key_units{route, rule, key}      gauge, with ratelimit.hot_keys: each rule's top keys
//	                                                     (httplimit's hot keys, at most top per rule; a key that
//	                                                     left the top set has no series)
//	admission_*{gate}                                    package admit's series (limit, in flight, queue length and
//	                                                     wait, admitted, rejected and goodput by class, brownout level),
//	                                                     gate being the cluster's name
//	admission_pinned_limit{gate}, admission_bypassed{gate}, admission_brownout_forced_level{gate}
//	admission_shadow_refusals_total{gate, class}         with admission.shadow
//	breaker_*{breaker}                                   package breaker's series (state, calls, transitions)
//	breaker_forced{breaker, state}, breaker_shadow_refusals_total{breaker}
//	ratelimit_redis_*{rule}                              package redisstore's series (Sources.Collectors)
//
// Cardinality is bounded by the configuration: label values come from
// route, cluster and listener names and from endpoint addresses, never
// from request data, except the hot keys' key label, which is request
// data bounded by routes × rules × hot_keys.top. A cluster has at most Options.MaxEndpoints endpoints
// with series of their own (1,000 by default); further endpoints share the
// endpoint value "other" (for endpoint_health, the number of those
// endpoints in each state). Series of routes and clusters that no live
// generation has are deleted when the last generation that had them is
// retired (Metrics.Retire); error series of endpoints that discovery
// removed are deleted at the next scrape.
package metrics
