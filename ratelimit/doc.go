// Package ratelimit caps how much one client may do per unit of time: the
// seven algorithms of seed 002 ("Rate limiting: token bucket, leaky bucket,
// sliding window"), each as a pure decision over a small per-key state, with
// time as a parameter.
//
// # Choosing an algorithm
//
//   - [GCRA] (Generic Cell Rate Algorithm, ITU-T I.371 / ATM Forum TM 4.0):
//     token-bucket behaviour with one float64 of state per key, and the
//     Retry-After value falls out directly. The default choice.
//   - [TokenBucket]: Rate units per second accrue up to Burst; a request takes
//     cost units. The same decisions as GCRA in two float64s; it is the form of
//     the seed's Redis script (reference/token_bucket.lua).
//   - [LeakyMeter]: the leaky bucket as a meter (water level drains at Rate,
//     a request that would overflow Burst is refused); equivalent to the
//     token bucket.
//   - [LeakyQueue]: the leaky bucket as a queue (shaper): excess waits and is
//     released at Rate; a full queue refuses. It smooths output to at most
//     Rate per second at the cost of delay (Decision.Delay), like Nginx
//     limit_req with burst and without nodelay.
//   - [FixedWindow]: a counter per window of Window seconds; cheap (one
//     INCR in a store) but admits up to twice the limit across a boundary.
//   - [SlidingLog]: every admitted timestamp of the last Window seconds;
//     exact, but Limit timestamps per key. For small security limits (OTP,
//     login).
//   - [SlidingCounter]: the sliding window counter (Cloudflare, 2017): the
//     previous window's count weighted by the share of it still inside the
//     sliding window, plus the current count.
//
// # Formulas (seed 002)
//
//	token bucket:   tokens = min(b, tokens + (now − last)·r); allow if tokens ≥ cost
//	leaky queue:    out = max(now, nextFree); nextFree = out + 1/r;
//	                refuse if the admitted requests with out > now fill the queue
//	fixed window:   id = floor(now/W); count resets when id changes; allow if count < limit
//	sliding log:    drop entries ≤ now − W; allow if entries < limit
//	sliding counter: weight = 1 − (now − id·W)/W; allow if prev·weight + cur < limit
//	GCRA:           T = 1/r, τ = (b − 1)·T; tat = max(TAT, now);
//	                refuse if tat − now > τ (retry after tat − now − τ), else TAT = tat + T
//
// Every decision takes a cost in whole units (an int, as the seed's "a plain
// GET 1 token, a big search 5, an export 50"): cost c behaves like c requests
// of cost 1 arriving at once, and each formula above is exactly the c = 1
// case. A denied request consumes nothing. A cost of zero or less is a query:
// it is allowed, consumes nothing, and reports Remaining and Reset.
//
// # Configuration, state, decision
//
// Each algorithm is split into an immutable, validated configuration (built by
// NewGCRA, NewTokenBucket, ... from a [Limit] or [Quota]; safe to share
// between goroutines) and a per-key state type (GCRAState, ...) that is as
// small as the algorithm allows: GCRA 8 bytes, token bucket and leaky meter
// 16, fixed window 8, sliding counter 12, sliding log and leaky queue a ring
// of at most Limit (Burst) float64s. The zero value of every state means
// "never seen": a full bucket, an empty window, an empty queue — as in the
// seed's Redis script, where a missing key equals a full bucket. A keyed
// store can therefore keep states in a slice or map and drop idle ones.
//
// Decide(state, now, cost) is pure with respect to the configuration and
// mutates only the state; it does not allocate (the two ring-based states
// grow their ring, doubling, until it holds the limit, and never allocate
// again). States are not safe for concurrent use: guard each with a lock, or
// use [Limiter], a mutex-protected single-key wrapper.
//
// # Time
//
// now is seconds on a monotonic timeline chosen by the caller (see package
// clock); nothing here reads a clock. A now earlier than the state's stored
// time is a negative gap and is clamped to zero: nothing refills, no window
// rolls back, nothing panics. A negative or NaN now is treated as 0.
//
// # Answers
//
// A [Decision] carries what the HTTP layer needs: Remaining and Reset for the
// IETF RateLimit header (r= and t=), and RetryAfter for a 429's Retry-After.
// RetryAfter is computed so that the same request retried at now+RetryAfter
// (float64 addition) is allowed, if nothing else arrived meanwhile; it is
// +Inf when cost exceeds the configuration's capacity, so the request can
// never pass.
package ratelimit
