// Package client makes calls to a dependency survive its failures without
// making them worse: an http.RoundTripper (Transport) that stacks
// client-side adaptive throttling, retries under a budget, a circuit
// breaker and a bulkhead around an inner transport, and forwards the
// caller's criticality class and remaining deadline; and the same stack as
// gRPC client interceptors (package client/clientgrpc).
//
// The policies are the library's own (throttle, retry, breaker, limit via
// admit); this package owns the wiring: the order of the layers, what
// counts as a failure or a retryable answer, replaying bodies, reading
// Retry-After, and where real time enters.
package client
