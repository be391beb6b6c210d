// Package deadline carries a request's time budget across service
// boundaries, so that work nobody will wait for is dropped before it starts.
//
// A caller that will give up after 300 ms should not have its request
// queued for 400 ms and then served: the answer would arrive to nobody, and
// the work would delay requests that could still be answered in time. The
// budget therefore travels with the request. At the edge of a service an
// adapter (HTTP middleware, gRPC interceptor, proxy) does four things with
// the helpers here:
//
//  1. read the incoming budget: FromHeader for HTTP, ParseTimeout for gRPC's
//     grpc-timeout (GRPCKey), FromEnvoyHeader behind Envoy;
//  2. make it the request context's deadline: WithBudget, from the instant
//     the request arrived;
//  3. drop the request before any work when the budget is spent, or cannot
//     be met given the expected queue wait and service time: Remaining and
//     Feasible;
//  4. pass what is left to the calls it makes downstream: SetHeader for HTTP
//     (AppendTimeout or FormatTimeout for grpc-timeout), keeping a reserve
//     for its own network time and post-processing.
//
// # The Spillway-Timeout header
//
// An HTTP request carries its budget in Spillway-Timeout (HTTPHeader). Its
// value is relative, an amount of time ("250m" is 250 ms from when the
// request is received), not an absolute instant: an absolute deadline would
// be misread by every host whose clock is off from the caller's, while a
// relative one is off only by the time the request spent on the wire, which
// the caller's reserve covers. The syntax is gRPC's grpc-timeout syntax (1 to
// 8 digits and a unit, H M S m u n), so one parser serves HTTP and gRPC, a
// value can be copied from one to the other without conversion, and users of
// gRPC-Web and Envoy recognise it. A present but malformed value is an error,
// never silently ignored here; whether it earns a 400 or is ignored is the
// adapter's configuration. Two values for one request are refused as
// malformed too.
//
// Envoy's router announces its own budget in x-envoy-expected-rq-timeout-ms
// (an integer count of milliseconds); FromEnvoyHeader reads it, for a
// service whose callers reach it through Envoy.
//
// # Rounding
//
// A budget is never rounded up. AppendTimeout writes a duration in the
// finest unit in which it fits in 8 digits, rounding down, so a callee never
// believes it has more time than its caller will wait. SetHeader, in the same
// spirit, subtracts the caller's reserve, and writes a spent budget as "0n"
// rather than omitting the header, so the callee refuses the request at once
// instead of treating it as unbounded.
//
// # Time
//
// These are edge helpers: they take time.Time and time.Duration and work with
// context deadlines, which is where real time meets a request. They never
// read the clock themselves; the caller passes now (time.Now at the edge, a
// fixed instant in tests). Policy packages (shed, limit) keep taking float64
// seconds, and the adapter converts with package clock.
//
// All functions are safe for concurrent use; none keeps state. ParseTimeout,
// AppendTimeout (given capacity), FromHeader, Remaining and Feasible do not
// allocate on success.
package deadline
