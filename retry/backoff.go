package retry

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// ErrConfig is wrapped by every configuration error of this package.
var ErrConfig = errors.New("retry: invalid configuration")

// Rand is a source of uniform numbers in [0, 1). *rng.Mulberry32 and
// *math/rand/v2.Rand satisfy it. A nil Rand means math/rand/v2's top-level
// Float64, which is safe for concurrent use.
type Rand interface {
	Float64() float64
}

var _ Rand = (*rand.Rand)(nil)

// Jitter selects how Backoff.Delay randomises the exponential ceiling.
type Jitter uint8

const (
	// FullJitter waits u·ceiling(n): the least total work for competing
	// clients in Brooker's comparison, and the default.
	FullJitter Jitter = iota
	// EqualJitter waits ceiling(n)/2 + u·ceiling(n)/2: never less than half
	// the ceiling, at the cost of more clustering.
	EqualJitter
	// DecorrelatedJitter waits min(Cap, Base + u·(3·prev − Base)), growing
	// from the previous delay rather than from the attempt number.
	DecorrelatedJitter
	// NoJitter waits exactly ceiling(n). Clients that failed together retry
	// together; use it only when there is a single client.
	NoJitter
)

// String returns the jitter's name.
func (j Jitter) String() string {
	switch j {
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case DecorrelatedJitter:
		return "decorrelated"
	case NoJitter:
		return "none"
	}
	return fmt.Sprintf("Jitter(%d)", uint8(j))
}

// Defaults used for zero Backoff fields.
const (
	DefaultBase = 0.5 // seconds; the seed experiment's base: the first retry waits below 1 s
	DefaultCap  = 30  // seconds
)

// maxExponent bounds n so that Base·2^n is computed without looping into
// huge exponents; any n beyond it hits Cap anyway for every finite Cap.
const maxExponent = 2100

// Backoff is an exponential backoff schedule with jitter. The zero value is
// usable: full jitter, Base DefaultBase, Cap DefaultCap. A Backoff is a plain
// value and safe for concurrent use; randomness comes from the Rand passed to
// Delay.
type Backoff struct {
	// Base is the scale of the schedule, in seconds: the ceiling for
	// attempt n is Base·2^n (so the first retry, n = 1, waits below 2·Base).
	// For DecorrelatedJitter it is also the smallest delay. Zero means
	// DefaultBase; negative, NaN or infinite is invalid.
	Base float64
	// Cap is the largest delay, in seconds. Zero means DefaultCap; it must
	// be finite and at least Base.
	Cap float64
	// Jitter selects the randomisation; the zero value is FullJitter.
	Jitter Jitter
}

// Validate reports the first invalid field, wrapped around ErrConfig.
func (b Backoff) Validate() error {
	if math.IsNaN(b.Base) || math.IsInf(b.Base, 0) || b.Base < 0 {
		return fmt.Errorf("%w: Backoff.Base = %v seconds, want a finite number >= 0 (0 means %v)", ErrConfig, b.Base, DefaultBase)
	}
	if math.IsNaN(b.Cap) || math.IsInf(b.Cap, 0) || b.Cap < 0 {
		return fmt.Errorf("%w: Backoff.Cap = %v seconds, want a finite number >= 0 (0 means %v)", ErrConfig, b.Cap, DefaultCap)
	}
	base, capacity := b.Base, b.Cap
	if base == 0 {
		base = DefaultBase
	}
	if capacity == 0 {
		capacity = DefaultCap
	}
	if capacity < base {
		return fmt.Errorf("%w: Backoff.Cap = %v seconds is below Base = %v", ErrConfig, capacity, base)
	}
	if b.Jitter > NoJitter {
		return fmt.Errorf("%w: Backoff.Jitter = %d is not a known jitter", ErrConfig, uint8(b.Jitter))
	}
	return nil
}

// withDefaults replaces zero and invalid fields by their defaults, so that
// Delay returns a finite, non-negative number even for a Backoff that fails
// Validate.
func (b Backoff) withDefaults() Backoff {
	if !(b.Base > 0) || math.IsInf(b.Base, 0) {
		b.Base = DefaultBase
	}
	if !(b.Cap > 0) || math.IsInf(b.Cap, 0) {
		b.Cap = DefaultCap
	}
	if b.Cap < b.Base {
		b.Cap = b.Base
	}
	return b
}

// Ceiling returns min(Cap, Base·2^attempt), the largest delay FullJitter can
// return for attempt; attempt < 0 counts as 0.
func (b Backoff) Ceiling(attempt int) float64 {
	b = b.withDefaults()
	return b.ceiling(attempt)
}

func (b Backoff) ceiling(attempt int) float64 {
	attempt = max(0, min(attempt, maxExponent))
	// Ldexp scales by a power of two exactly (it overflows to +Inf, which
	// min turns into Cap), so this equals the reference's base·2**n.
	return math.Min(b.Cap, math.Ldexp(b.Base, attempt))
}

// Delay returns how many seconds to wait before the next attempt of a call,
// given attempt, the number of attempts already made (1 before the first
// retry; values below 0 count as 0), and prev, the delay Delay returned
// before the previous attempt of the same call (0 before the first retry;
// only DecorrelatedJitter reads it). It draws at most one number from r
// (none for NoJitter); a nil r means math/rand/v2. The result is finite and
// in the ranges given in the package documentation.
func (b Backoff) Delay(attempt int, prev float64, r Rand) float64 {
	b = b.withDefaults()
	switch b.Jitter {
	case NoJitter:
		return b.ceiling(attempt)
	case EqualJitter:
		half := b.ceiling(attempt) / 2
		return half + float64(uniform(r)*half)
	case DecorrelatedJitter:
		// A previous delay outside [Base, Cap] (or NaN) cannot have come
		// from Delay; bring it back into range.
		if !(prev >= b.Base) {
			prev = b.Base
		}
		prev = math.Min(prev, b.Cap)
		span := float64(3*prev) - b.Base
		if span > math.MaxFloat64 { // 3·prev overflowed: keep u·span finite
			span = math.MaxFloat64
		}
		return math.Min(b.Cap, b.Base+float64(uniform(r)*span))
	default: // FullJitter
		return uniform(r) * b.ceiling(attempt)
	}
}

func uniform(r Rand) float64 {
	if r == nil {
		return rand.Float64()
	}
	return r.Float64()
}
