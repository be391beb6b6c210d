// Package clientgrpc is package client's resilience stack as gRPC client
// interceptors: client-side adaptive throttling, retries under a budget, a
// circuit breaker and a bulkhead around each call to one dependency, and
// the caller's criticality class forwarded in metadata.
//
// Install both interceptors on the connection to the dependency:
//
//	ic, err := clientgrpc.New(clientgrpc.Config{Throttle: th, Retry: pol, Breaker: br, Bulkhead: bh,
//		Idempotent: func(m string) bool { return m == "/inventory.Stock/Get" }})
//	conn, err := grpc.NewClient(target, creds,
//		grpc.WithChainUnaryInterceptor(ic.Unary()), grpc.WithChainStreamInterceptor(ic.Stream()))
//
// The layers run in the order of client.Transport (see its documentation
// for why): throttle → retry loop → breaker → bulkhead → the call. A call
// one of them refuses is not sent; it ends with an *Error, which is a gRPC
// status error (status.Code and status.FromError read it):
//
//	reason          code               message names
//	throttled       Unavailable        "throttled"
//	breaker_open    Unavailable        "breaker_open"  (errors.Is(err, breaker.ErrOpen))
//	bulkhead_full   ResourceExhausted  "bulkhead_full"
//
// A local refusal is never retried here. An outer layer that retries
// Unavailable (gRPC's own retry policy, another interceptor) would retry it:
// enable one retry layer only, this one.
//
// # Retries
//
// gRPC has no method semantics, so nothing says which calls are safe to
// send twice: by default no call is retried. Config.Idempotent names the
// methods that may be; Config.RetryNonIdempotent retries every method. A
// retried call follows its retry.Policy (attempts, backoff with jitter, the
// budget, the context's deadline) and the server's pushback, the trailer
// retry.PushbackKey (gRPC retry design A6): a retry is never sent earlier
// than the server asked, and never at all when the server said not to (a
// negative pushback). Streams are never retried: a stream cannot be
// replayed.
//
// # Deadlines and class
//
// gRPC sends the context's deadline itself (grpc-timeout). The class the
// context carries (shed.ClassFrom) is sent as the metadata
// shed.ClassMetadataKey unless the outgoing metadata already has one, so
// the callee (admit/admitgrpc) sheds the call with the priority it has
// here.
package clientgrpc
