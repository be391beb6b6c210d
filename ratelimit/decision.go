package ratelimit

import (
	"errors"
	"fmt"
	"math"
)

// Decision is the answer to one request.
type Decision struct {
	// Allowed reports whether the request may proceed. A denied request
	// consumes nothing.
	Allowed bool
	// Remaining is the whole units left after this decision: the largest
	// cost a request at the same instant would be allowed (the IETF
	// RateLimit header's r=). For LeakyQueue it is the free queue space.
	// It is never negative, even when a state holds more than a (scaled)
	// configuration allows.
	Remaining int
	// RetryAfter is 0 when the request is allowed. When it is denied, it is
	// the seconds from now until the earliest instant at which the same
	// request would be allowed if nothing else arrives: a retry at
	// now+RetryAfter is allowed. It is +Inf (math.IsInf(x, 1)) when the cost
	// exceeds the configuration's capacity (Burst, or Limit for windows), so
	// the request can never pass; answer such a request with a 4xx that is
	// not 429, or clamp before formatting a header.
	RetryAfter float64
	// Reset is the seconds until the limiter is back to its full quota if
	// nothing else arrives (the RateLimit header's t=); 0 when it is full.
	Reset float64
	// Delay is, for LeakyQueue, the seconds the admitted request must wait
	// before it proceeds; 0 for every other algorithm and for denials.
	Delay float64
	// Start is, for LeakyQueue, the instant on now's timeline at which the
	// admitted request proceeds, max(now, next free slot): now+Delay
	// (float64 addition; now itself when the request need not wait); 0 for
	// every other algorithm and for denials.
	Start float64
}

// Limit configures the bucket algorithms (TokenBucket, LeakyMeter,
// LeakyQueue, GCRA): Rate units per second on average, at most Burst at once.
type Limit struct {
	// Rate is the sustained rate in units per second; it must be positive
	// and finite (per minute: divide by 60).
	Rate float64
	// Burst is the bucket size in units: how many units may pass at once
	// after a quiet period (for LeakyQueue: how many may wait in the queue).
	// It must be from 1 to MaxBurst.
	Burst int
}

// Quota configures the window algorithms (FixedWindow, SlidingLog,
// SlidingCounter): at most Limit units per Window seconds. With a whole
// Window the pair is the IETF RateLimit-Policy's q= and w= (Spec.Policy).
type Quota struct {
	// Limit is the units allowed per window, from 1 to MaxBurst
	// (SlidingLog: to MaxLogLimit).
	Limit int
	// Window is the window length in seconds; it must be positive and finite.
	Window float64
}

const (
	// MaxBurst is the largest Burst or Limit: counts are kept in 32 bits.
	MaxBurst = math.MaxUint32
	// MaxLogLimit is the largest SlidingLog limit: each key may hold that
	// many timestamps (8 MiB).
	MaxLogLimit = 1 << 20
)

// ErrInvalidLimit is returned (wrapped, naming the field) by the
// constructors for a Limit or Quota that cannot be enforced.
var ErrInvalidLimit = errors.New("ratelimit: invalid limit")

func (l Limit) validate() error {
	switch {
	case !(l.Rate > 0) || math.IsInf(l.Rate, 1):
		return fmt.Errorf("%w: Rate must be a positive finite number of units per second, got %v", ErrInvalidLimit, l.Rate)
	case math.IsInf(1/l.Rate, 1):
		return fmt.Errorf("%w: Rate %v is too small: 1/Rate overflows", ErrInvalidLimit, l.Rate)
	case l.Burst < 1 || l.Burst > MaxBurst:
		return fmt.Errorf("%w: Burst must be from 1 to %d units, got %d", ErrInvalidLimit, MaxBurst, l.Burst)
	case math.IsInf(float64(l.Burst)/l.Rate, 1):
		return fmt.Errorf("%w: Burst/Rate overflows (Rate %v, Burst %d)", ErrInvalidLimit, l.Rate, l.Burst)
	}
	return nil
}

func (q Quota) validate(max int) error {
	switch {
	case q.Limit < 1 || q.Limit > max:
		return fmt.Errorf("%w: Limit must be from 1 to %d units, got %d", ErrInvalidLimit, max, q.Limit)
	case !(q.Window > 0) || math.IsInf(q.Window, 1):
		return fmt.Errorf("%w: Window must be a positive finite number of seconds, got %v", ErrInvalidLimit, q.Window)
	}
	return nil
}

// Decider is implemented by every algorithm's configuration: Decide answers a
// request of cost units at time now (seconds) and updates the per-key state s.
type Decider[S any] interface {
	Decide(s *S, now float64, cost int) Decision
}

var (
	_ Decider[TokenBucketState]    = (*TokenBucket)(nil)
	_ Decider[LeakyMeterState]     = (*LeakyMeter)(nil)
	_ Decider[LeakyQueueState]     = (*LeakyQueue)(nil)
	_ Decider[FixedWindowState]    = (*FixedWindow)(nil)
	_ Decider[SlidingLogState]     = (*SlidingLog)(nil)
	_ Decider[SlidingCounterState] = (*SlidingCounter)(nil)
	_ Decider[GCRAState]           = (*GCRA)(nil)
)

// nonNegative is n, or 0 when n is negative: Remaining after a scale cut
// left a state above the configuration's capacity.
func nonNegative(n int) int { return max(n, 0) }

// clampNow maps a negative or NaN time to 0.
func clampNow(now float64) float64 {
	if !(now >= 0) {
		return 0
	}
	return now
}

// never is the RetryAfter of a request that can never pass.
var never = math.Inf(1)

// retryAfter returns the smallest ra ≥ guess (searching upward from guess,
// the algebraic answer) with ok(now+ra), where ok is monotone: false up to
// some instant, true from then on. The search is exact in float64 and runs
// over the instants t = now+ra, so it needs a few calls of ok when guess is
// within a few ulps of the answer (the usual case), at most ~130 otherwise.
// A guess below 0 starts at 0. When no instant of the nanosecond range
// passes, the guess itself is returned (see below); callers answer a request
// that can never pass with never before calling.
func retryAfter(now, guess float64, ok func(t float64) bool) float64 {
	if !(guess > 0) {
		guess = 0
	}
	t := now + guess
	if ok(t) {
		return guess
	}
	if t = firstAbove(t, ok); math.IsInf(t, 1) {
		// No instant in the nanosecond range passes, although the request fits the configuration: the wait
		// is the algebraic one, finite, so that it is not mistaken for a
		// request that can never pass.
		return guess
	}
	// The smallest ra with now+ra ≥ t.
	ra := t - now
	if now+ra >= t {
		return ra
	}
	lo, hi := floatOrder(ra), floatOrder(ra)
	for step := uint64(1); now+floatFromOrder(hi) < t; step *= 2 {
		lo, hi = hi, hi+step
	}
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; now+floatFromOrder(mid) >= t {
			hi = mid
		} else {
			lo = mid
		}
	}
	return floatFromOrder(hi)
}

// firstAbove returns the smallest float64 above x with ok, given !ok(x) and
// ok monotone, galloping up in steps of 1, 2, 4, ... ulps and then bisecting;
// +Inf if ok holds for no finite number.
func firstAbove(x float64, ok func(float64) bool) float64 {
	lo, top := floatOrder(x), floatOrder(math.Inf(1))
	var hi uint64
	for step := uint64(1); ; step *= 2 {
		if top-lo <= step {
			return never
		}
		if hi = lo + step; ok(floatFromOrder(hi)) {
			break
		}
		lo = hi
	}
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; ok(floatFromOrder(mid)) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return floatFromOrder(hi)
}

// floatOrder maps a float64 to a uint64 in the same order (−0 just below +0).
func floatOrder(x float64) uint64 {
	b := math.Float64bits(x)
	if b>>63 == 0 {
		return b | 1<<63
	}
	return ^b
}

func floatFromOrder(u uint64) float64 {
	if u>>63 == 1 {
		return math.Float64frombits(u &^ (1 << 63))
	}
	return math.Float64frombits(^u)
}
