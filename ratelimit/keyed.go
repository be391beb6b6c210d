package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Keyed decides requests for many keys under one rule's limit. The in-memory
// store (NewMemory) and the Redis store (package ratelimit/redisstore)
// implement it, and so do the wrappers that add leasing, fail modes and load
// awareness; the HTTP middleware (package ratelimit/httplimit) calls it.
type Keyed interface {
	// AllowN decides a request of cost units for key at now: seconds on the
	// caller's monotonic timeline (a store with a clock of its own, such as
	// Redis, uses that instead and says so). An error means the store could
	// not decide (timeout, connection refused, cancelled context); the
	// caller then applies the rule's fail mode. AllowN is safe for
	// concurrent use.
	AllowN(ctx context.Context, key string, now float64, cost int) (Decision, error)
}

// ErrStoreUnavailable is wrapped by errors of stores that could not decide
// (unreachable, timed out, or refusing while their circuit breaker is open).
var ErrStoreUnavailable = errors.New("ratelimit: store unavailable")

// Spec is a rule's limit in the seed's terms ({"rate": 100, "per": "1m",
// "burst": 20}): Rate units per Per seconds, enforced by Algorithm.
//
//   - Bucket algorithms (GCRA, token bucket, leaky meter, leaky queue) refill
//     at Rate/Per units per second and hold at most Burst units (for the leaky
//     queue: Burst requests may wait). Burst 0 means ⌈Rate⌉: a full period's
//     quota at once.
//   - Window algorithms (fixed window, sliding log, sliding window counter)
//     allow Rate units per window of Per seconds; Rate must be a whole number
//     and Burst must be 0 (a window has no separate burst).
type Spec struct {
	Algorithm Algorithm // zero means AlgGCRA
	Rate      float64   // units per Per; positive, finite
	Per       float64   // seconds; positive, finite
	Burst     int       // bucket size in units; 0 means ⌈Rate⌉
}

// withDefaults returns s with zero fields filled in.
func (s Spec) withDefaults() Spec {
	if s.Algorithm == 0 {
		s.Algorithm = AlgGCRA
	}
	if s.Burst == 0 && s.Algorithm.Bucket() && s.Rate > 0 && s.Rate <= MaxBurst {
		s.Burst = int(math.Ceil(s.Rate))
	}
	return s
}

// Validate reports the first problem with s as an error wrapping
// ErrInvalidLimit and naming the field.
func (s Spec) Validate() error {
	d := s.withDefaults()
	switch {
	case d.Algorithm < AlgTokenBucket || d.Algorithm > AlgGCRA:
		return fmt.Errorf("%w: Algorithm %d is unknown", ErrInvalidLimit, int(s.Algorithm))
	case !(s.Rate > 0) || math.IsInf(s.Rate, 1):
		return fmt.Errorf("%w: Rate must be a positive finite number of units per Per, got %v", ErrInvalidLimit, s.Rate)
	case !(s.Per > 0) || math.IsInf(s.Per, 1):
		return fmt.Errorf("%w: Per must be a positive finite number of seconds, got %v", ErrInvalidLimit, s.Per)
	case s.Burst < 0:
		return fmt.Errorf("%w: Burst must not be negative, got %d", ErrInvalidLimit, s.Burst)
	}
	if d.Algorithm.Bucket() {
		return d.Limit().validate()
	}
	if s.Burst != 0 {
		return fmt.Errorf("%w: Burst must be 0 for the %s (it allows Rate per window), got %d", ErrInvalidLimit, d.Algorithm, s.Burst)
	}
	if s.Rate != math.Trunc(s.Rate) {
		return fmt.Errorf("%w: Rate must be a whole number of units per window for the %s, got %v", ErrInvalidLimit, d.Algorithm, s.Rate)
	}
	max := MaxBurst
	if d.Algorithm == AlgSlidingLog {
		max = MaxLogLimit
	}
	if s.Rate > float64(max) {
		return fmt.Errorf("%w: Rate must be at most %d units per window for the %s, got %v", ErrInvalidLimit, max, d.Algorithm, s.Rate)
	}
	return d.Quota().validate(max)
}

// Limit is the bucket form of s: Rate/Per units per second, Burst units.
// Meaningful for the bucket algorithms.
func (s Spec) Limit() Limit {
	d := s.withDefaults()
	return Limit{Rate: d.Rate / d.Per, Burst: d.Burst}
}

// Quota is the window form of s: Rate units per window of Per seconds.
// Meaningful for the window algorithms.
func (s Spec) Quota() Quota {
	return Quota{Limit: int(s.Rate), Window: s.Per}
}

// Bucket reports whether a is a bucket algorithm (configured by a Limit)
// rather than a window algorithm (configured by a Quota).
func (a Algorithm) Bucket() bool {
	switch a {
	case AlgTokenBucket, AlgLeakyMeter, AlgLeakyQueue, AlgGCRA:
		return true
	}
	return false
}

var algKeys = [...]string{"", "token-bucket", "leaky-meter", "leaky-queue",
	"fixed-window", "sliding-log", "sliding-window", "gcra"}

// Name returns the algorithm's name in configuration files: "gcra",
// "token-bucket", "leaky-meter", "leaky-queue", "fixed-window",
// "sliding-log" or "sliding-window" (the sliding window counter).
func (a Algorithm) Name() string {
	if a < AlgTokenBucket || a > AlgGCRA {
		return "unknown"
	}
	return algKeys[a]
}

// ParseAlgorithm returns the algorithm with the given configuration name
// (see Algorithm.Name; case-insensitive, "_" and " " read as "-",
// "sliding-counter" and "leaky-bucket" accepted as aliases of
// "sliding-window" and "leaky-meter").
func ParseAlgorithm(name string) (Algorithm, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.NewReplacer("_", "-", " ", "-").Replace(n)
	switch n {
	case "sliding-counter", "sliding-window-counter":
		n = "sliding-window"
	case "leaky-bucket":
		n = "leaky-meter"
	}
	for a := AlgTokenBucket; a <= AlgGCRA; a++ {
		if algKeys[a] == n {
			return a, nil
		}
	}
	return 0, fmt.Errorf("ratelimit: unknown algorithm %q (want one of %s)", name, strings.Join(algKeys[1:], ", "))
}
