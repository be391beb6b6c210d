// Package ratelimit caps how much one client may do per unit of time: the
// seven algorithms of seed 002 ("Rate limiting: token bucket, leaky bucket,
// sliding window"), each as a pure decision over a small per-key state, with
// time as a parameter.
//
// # Choosing an algorithm
//
//   - [GCRA] (Generic Cell Rate Algorithm, ITU-T I.371 / ATM Forum TM 4.0):
//     token-bucket behaviour with one 8-byte timestamp of state per key, and
//     the Retry-After value falls out directly. The default choice.
//   - [TokenBucket]: Rate units per second accrue up to Burst; a request takes
//     cost units. The same decisions as GCRA, field for field, as long as the
//     clock does not step back (see "Exact arithmetic"), in 16 bytes; it is
//     the form of the seed's Redis script (reference/token_bucket.lua).
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
// of at most Limit (Burst) 8-byte timestamps (the queue also keeps its next
// free instant: 8 bytes). The zero value of every state means
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
// rolls back, nothing panics. A negative or NaN now is treated as 0, and a
// now from 2^62 ns (about 146 years) on as that instant.
//
// # Exact arithmetic
//
// Each decision converts now once to whole nanoseconds (rounded to nearest)
// and then computes in integers only, so that decimal timestamps — k × 0.1,
// or a clock read in nanoseconds — get the decisions of exact arithmetic:
// with Rate 10 and Burst 1, a request every 0.1 s at t = k × 0.1 is always
// allowed, where float64 differences of those timestamps left
// 0.9999999999999998 tokens and refused a third of them. Windows are whole
// nanoseconds (a window of 0.1 s puts 0.7 s in window 7); the sliding
// counter's weight is compared as prev·(W − offset) + (cur + c − 1)·W <
// Limit·W in 128-bit integers.
//
// The bucket algorithms count on a lattice chosen from the rate: a time
// unit of 1/m ns in which the emission interval 1/Rate is a whole number
// of units, a token worth that many units of credit. Rate (a float64, as
// Spec.Limit divides Rate by Per) is read as the simplest fraction p/q that
// rounds to it: 100.0/60 is 5/3 per second, 7/1.5 is 14/3. The lattice is
// exact when m — p with its factors 2 and 5 (up to 10^9) removed — is at
// most 1024 and Burst × interval fits 2^61 units: every whole rate up to
// 1024 per second, and counts per period such as 100 per minute, 7 per
// 1.5 s or 1000 per hour. Any other rate is enforced on a lattice of
// 1/1024 ns (coarser, down to 1 ns, if Burst × interval would not fit) with
// the interval rounded up: slower than Rate by at most one time unit per
// unit, never faster. A bucket that takes longer than about 73 years
// (2^61 ns) to fill counts in units of 2^k ns; one whose interval is longer
// than the whole timeline admits its burst and then refuses with
// RetryAfter +Inf. The integer state of a bucket is therefore in its
// configuration's units: it belongs to the configuration that wrote it, and
// to the ones derived from it with WithLimit (or [ScaledDecider]), which a
// keyed store uses for a scaled limit so that states carry over.
//
// GCRA and the token bucket (and the leaky meter) decide alike, field for
// field, while the clock runs forward. When it steps back, the token bucket
// takes the gap as zero (its tokens stay as they were) and GCRA reads its
// TAT against the earlier now (the refill since then is not there yet): at
// such a step GCRA allows only what the token bucket allows, and if GCRA
// refused what the token bucket allowed, the two hold different states until
// both are full again (TestTokenBucketAndGCRAOnBackwardSteps).
//
// # Answers
//
// A [Decision] carries what the HTTP layer needs: Remaining and Reset for the
// IETF RateLimit header (r= and t=), and RetryAfter for a 429's Retry-After.
// RetryAfter is computed so that the same request retried at now+RetryAfter
// (float64 addition) is allowed, if nothing else arrived meanwhile: the
// first nanosecond at which it is, converted to seconds. It is +Inf when
// cost exceeds the configuration's capacity, so the request can never pass.
package ratelimit
