// Package admitgrpc puts an admit.Gate in front of a gRPC server: a unary
// and a stream server interceptor that give each call a place in the Gate's
// limit.Limiter, or refuse it before the handler runs.
//
// The interceptors are the gRPC face of admit.Gate.Handler and decide the
// same way: the call's class comes from route configuration
// (Options.Classify) or from the caller's metadata (shed.ClassMetadataKey,
// "spillway-criticality"), the call's deadline from its context (gRPC turns
// the grpc-timeout header into the context deadline before any interceptor
// runs), and the Gate decides whether the call gets a place now, waits in
// the Limiter's queue, or is refused.
//
// # Refusals
//
// A refused call ends with a status built once, when the interceptor is
// made, whose message names the reason:
//
//	reason                                  code               pushback
//	limit, queue_full, expired, codel       Unavailable        yes
//	fairness                                ResourceExhausted  yes
//	deadline, cancelled                     DeadlineExceeded   no
//
// Unavailable says the server is overloaded for now: a client with a retry
// policy may retry, on another backend. ResourceExhausted says this client
// holds its fair share: it is the client that should slow down. Both carry
// the trailer PushbackKey ("grpc-retry-pushback-ms", gRPC retry design A6):
// the Gate's Retry-After with its jitter, in milliseconds, which gRPC
// clients with a retry policy wait before their next attempt.
//
// # Admitted calls
//
// The handler runs with a context carrying the call's class (shed.ClassFrom;
// forward it downstream in outgoing metadata) and, when the Gate has a
// brownout.Dimmer, the decision whether to do optional work
// (brownout.OptionalFrom). When it returns, its error is mapped to an
// outcome (Options.Outcome, DefaultOutcome by default) fed to the Limiter's
// algorithm and the Dimmer: overload answers and missed deadlines shrink the
// limit, a caller that went away says nothing, other errors are served
// requests. A stream holds its place from its start until its handler
// returns.
//
// # Cost
//
// The admission decision takes no lock (the Limiter's mutex is taken once
// per admitted call, when it ends, to update the algorithm). A refused call
// allocates nothing of the interceptors' own, except a 16-byte copy of the
// class metadata when the caller sends it; gRPC then copies the pushback
// trailer. An admitted call allocates the context value carrying its class
// (and one for the brownout decision with a Dimmer), a stream also its
// wrapper; a call that waits in the queue allocates its Waiter and a timer.
// Nothing is logged. The package benchmarks measure both paths.
package admitgrpc
