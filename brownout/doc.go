// Package brownout degrades a service gracefully: under load it turns off
// the optional part of some requests (recommendations, thumbnails, related
// items, …) so that the essential part of every request still finishes in
// time, instead of refusing whole requests.
//
// It follows the brownout idea of Klein et al. ("Brownout: building more
// robust cloud applications", ICSE 2014): a controller sets a dimmer
// θ ∈ [0, 1], the probability that a request runs its optional part, from
// measured response times. Here the Dimmer reads two signals over a sliding
// window of finished requests, the mean queue wait and the p99 latency, and
// moves θ once per control Period:
//
//   - down, θ ← θ × Decrease (0.8 by default), while a signal is above its
//     target;
//   - up, θ ← θ + Increase (0.05 by default), while every signal is below
//     (1 − Hysteresis) × its target (80% by default);
//   - not at all in between (the hysteresis band, so the level does not
//     oscillate around the target), nor while the window holds fewer than
//     MinSamples observations.
//
// Decreasing by a factor and increasing by a step (as AIMD does) makes the
// dimmer back off fast when the service is in trouble and give optional work
// back slowly. θ stays in [Min, 1]; it starts at 1.
//
// # Use
//
// Middleware draws a uniform u per request, asks Dimmer.Optional(now, u)
// and stores the answer in the request context with WithOptional; the
// handler asks OptionalFrom(ctx) before doing optional work. When the
// request finishes, the middleware reports its queue wait and latency with
// Dimmer.Observe. A handler in a context without a decision gets true: no
// dimmer means full service.
//
// # Signals and window
//
// Observations go into a ring of sub-windows, one per Period, indexed by
// floor(now/Period) mod N, N = ceil(Window/Period) + 1. A control step at
// now reads the sub-windows of the N−1 whole Periods before the current one
// and the current one: between Window and Window+Period seconds of
// observations. Older observations leave the window without any work: a
// sub-window is zeroed by the first observation of its next Period, and a
// step ignores sub-windows whose Period is out of range.
//
// Latency goes into a log-linear histogram per sub-window: each power of
// two from 1 µs to 2^27 µs (about 134 s) split into 8 buckets, plus one
// bucket below and one above. The p99 is the midpoint of the bucket holding
// the nearest-rank 99th percentile of the merged window, within 6.25% of
// the exact value for latencies between 1 µs and 134 s. Queue waits are
// summed (in integer nanoseconds, each clamped to 134 s) so the step
// computes their mean: the wait signal says whether a queue stands, while
// the p99 watches the tail.
//
// # Memory, concurrency, loss
//
// Memory is fixed when the Dimmer is made: N sub-windows of about 1.8 KB
// (19 KB with the defaults, at most 1.8 MB with the largest Window of 1000
// Periods). Observe is lock-free (atomic additions) and Level takes a step
// under a try-lock that never makes another caller wait; neither allocates.
//
// The reset of a sub-window races with concurrent observations by design
// (atomics only, no lock): observations arriving at a sub-window while it is
// being zeroed are dropped, as are observations older than the Period their
// sub-window now holds. The loss is a few observations per Period at most,
// which the signals, computed over thousands, do not notice.
//
// # Time
//
// No method reads a clock. Observe, Level and Optional take now in float64
// seconds on a monotonic timeline chosen by the caller (package clock in
// servers, virtual time in the simulator); durations in Config are float64
// seconds.
package brownout
