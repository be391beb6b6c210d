// Package admit puts adaptive admission control in front of a service: a
// Gate over a limit.Limiter, as net/http middleware (Gate.Handler) and as
// gRPC server interceptors (package admit/admitgrpc).
//
//	alg, err := limit.NewGradient(limit.GradientConfig{})          // the limit, learned from latency
//	lim, err := limit.NewLimiter(alg, limit.LimiterConfig{
//		Queue: limit.QueueConfig{Discipline: limit.CoDel, MaxWait: 0.1}, // bursts wait up to 100 ms
//	})
//	gate, err := admit.New(admit.Config{Limiter: lim})
//	http.Handle("/", gate.Handler(app, admit.HTTPOptions{}))       // 503 + Retry-After when full
//	prometheus.MustRegister(gate.Collector())
//
// Per request the Gate reads the criticality class (route, header
// Spillway-Criticality or gRPC metadata spillway-criticality, default
// class) and the caller's deadline (context deadline; HTTP header
// Spillway-Timeout, a relative budget in grpc-timeout syntax), then asks the
// Limiter for a place: at once, or after a bounded wait in the Limiter's
// queue (FIFO, adaptive LIFO or CoDel). A request that cannot get one is
// refused before any work — HTTP 503 (429 when its client holds its fair
// share) with Retry-After and an RFC 9457 problem+json body, all pre-built;
// gRPC UNAVAILABLE / RESOURCE_EXHAUSTED with retry pushback. An admitted
// request runs with its class, deadline and brownout decision in its
// context (shed.ClassFrom, ctx.Deadline, brownout.OptionalFrom), so calls it
// makes downstream carry them on (shed.SetClassHeader, deadline.SetHeader),
// and its outcome and latency teach the Limiter's algorithm the service's
// capacity.
//
// Real time enters here: the Gate reads its clock.Clock and hands the
// Limiter and the Dimmer plain float64 seconds, so the same policies run
// under virtual time in the simulator.
package admit
