package ratelimit

// TokenBucket is the token bucket of seed 002 with lazy refill: Rate tokens per
// second accrue up to Burst; a request of cost c is allowed if at least c
// tokens are there, and takes them. Over any span of t seconds it admits at
// most Burst + Rate·t units.
//
// It counts in integers (see the package doc, "Exact arithmetic"): the time
// of the last refill in whole nanoseconds, tokens in credit units of which a
// token is worth T = 1/Rate in GCRA's time units, so that a nanosecond adds a
// whole number of units. It decides exactly like GCRA while the clock does
// not step back. The configuration is immutable and safe to share.
type TokenBucket struct {
	bucketUnits // flow is the refill
}

// TokenBucketState is one key's bucket: 16 bytes. The zero value is a full
// bucket that has never been used. Not safe for concurrent use. A state
// belongs to the configuration that wrote it and to those made from it by
// WithLimit.
type TokenBucketState struct {
	credit uint64 // tokens after the last decision, in credit units
	last   int64  // time of the last refill in nanoseconds, plus 1; 0: never seen
}

// NewTokenBucket returns a token bucket for l, or an error wrapping
// ErrInvalidLimit that names the bad field.
func NewTokenBucket(l Limit) (*TokenBucket, error) {
	u, err := newBucketUnits(l)
	if err != nil {
		return nil, err
	}
	return &TokenBucket{u}, nil
}

// WithLimit returns the configuration for l that reads and writes tb's
// states (tokens carry over as tokens, cut to l.Burst at the next refill),
// so that a store can decide one key's state under tb and under a scaled
// limit in turn (as Memory.SetScale does). Its refill is l.Rate in tb's
// credit units per nanosecond, rounded down to whole units at each decision
// unless that rate is a whole number of them.
func (tb *TokenBucket) WithLimit(l Limit) (*TokenBucket, error) {
	u, err := tb.withLimit(l)
	if err != nil {
		return nil, err
	}
	return &TokenBucket{u}, nil
}

// Limit returns the configuration.
func (tb *TokenBucket) Limit() Limit { return Limit{Rate: tb.rate, Burst: tb.burst} }

// Decide answers a request of cost units at now and updates s.
//
// The refill is tokens = min(Burst, tokens + (now − last)·Rate) (a
// never-seen state is Burst tokens, as the seed's reference starts from
// Burst tokens); then the request is allowed if tokens ≥ cost. Remaining is
// ⌊tokens⌋ as the seed's Redis script returns; RetryAfter is the deficit ÷
// Rate, counted from the last refill.
func (tb *TokenBucket) Decide(s *TokenBucketState, now float64, cost int) Decision {
	now = clampNow(now)
	ns := toNanos(now)
	credit, last := tb.refill(s, ns)
	allowed := cost <= 0 || (cost <= tb.burst && uint64(cost)*tb.k <= credit)
	if allowed && cost > 0 {
		credit -= uint64(cost) * tb.k
	}
	s.credit, s.last = credit, last+1
	var retry float64
	if !allowed {
		retry = never
		if cost <= tb.burst {
			retry = retryAt(now, ns, tb.flow.at(last, uint64(cost)*tb.k-credit))
		}
	}
	return Decision{Allowed: allowed, Remaining: int(floorDiv(credit, tb.k, tb.inv)), RetryAfter: retry,
		Reset: float64(tb.cap-credit) / tb.flow.perSec}
}

// refill returns the credit s holds at ns, at most the cap, and the time of
// that refill: ns, or the stored time if ns is before it (a clock that
// stepped back refills nothing).
func (tb *TokenBucket) refill(s *TokenBucketState, ns int64) (credit uint64, last int64) {
	if s.last == 0 {
		return tb.cap, ns
	}
	credit, last = s.credit, s.last-1
	if ns > last {
		credit += tb.flow.gain(last, ns, tb.cap)
		last = ns
	}
	return min(credit, tb.cap), last
}

// full reports whether s holds a full bucket at ns.
func (tb *TokenBucket) full(s *TokenBucketState, ns int64) bool {
	credit, _ := tb.refill(s, ns)
	return credit >= tb.cap
}
