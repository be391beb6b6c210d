// Package client makes calls to a dependency survive its failures without
// making them worse: an http.RoundTripper (Transport) that stacks
// client-side adaptive throttling, retries under a budget, a circuit
// breaker and a bulkhead around an inner transport, and forwards the
// caller's criticality class and remaining deadline; and the same stack as
// gRPC client interceptors (package client/clientgrpc).
//
//	budget, err := retry.NewBudget(retry.BudgetConfig{Ratio: 0.2, MinPerSecond: 5}) // retries ≤ 20% of calls (+5/s)
//	policy, err := retry.NewPolicy(retry.Policy{MaxAttempts: 3, Backoff: retry.Backoff{Base: 0.05, Cap: 1}, Budget: budget})
//	brk, err := breaker.New(breaker.Config{Threshold: 5, Recovery: 1})
//	thr, err := throttle.New(throttle.Config{})
//	bulk, err := client.NewBulkhead(64, 20*time.Millisecond) // 64 calls in flight, wait ≤ 20 ms for a place
//	tr, err := client.New(client.Config{Throttle: thr, Retry: policy, Breaker: brk, Bulkhead: bulk})
//	orders := &http.Client{Transport: tr}
//
// The policies are the library's own (throttle, retry, breaker, limit via
// admit); this package owns the wiring: the order of the layers, what
// counts as a failure or a retryable answer, replaying bodies, reading
// Retry-After, and where real time enters.
package client
