package ratelimit

import "math"

// TokenBucket is the token bucket of seed 002 with lazy refill: Rate tokens per
// second accrue up to Burst; a request of cost c is allowed if at least c
// tokens are there, and takes them. Over any span of t seconds it admits at
// most Burst + Rate·t units. The configuration is immutable and safe to share.
type TokenBucket struct {
	rate    float64
	burst   float64
	maxCost int
}

// TokenBucketState is one key's bucket: 16 bytes. The zero value is a full
// bucket that has never been used. Not safe for concurrent use.
type TokenBucketState struct {
	// tokens after the last decision. +0 (all bits zero) means "never
	// seen"; an empty bucket is stored as −0, which compares and adds like
	// +0, so the arithmetic is the seed's.
	tokens float64
	last   float64 // time of the last refill, seconds
}

// negZero is −0, the stored form of an empty bucket.
var negZero = math.Copysign(0, -1)

// NewTokenBucket returns a token bucket for l, or an error wrapping
// ErrInvalidLimit that names the bad field.
func NewTokenBucket(l Limit) (*TokenBucket, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &TokenBucket{rate: l.Rate, burst: float64(l.Burst), maxCost: l.Burst}, nil
}

// Limit returns the configuration.
func (tb *TokenBucket) Limit() Limit { return Limit{Rate: tb.rate, Burst: tb.maxCost} }

// Decide answers a request of cost units at now and updates s.
//
// The refill is tokens = min(Burst, tokens + (now − last)·Rate), in that
// order of float64 operations (a never-seen state is Burst tokens, which is
// what the seed's reference gets from its start of Burst tokens at time 0);
// then the request is allowed if tokens ≥ cost. Remaining is floor(tokens)
// as the seed's Redis script returns; RetryAfter is the deficit ÷ Rate.
func (tb *TokenBucket) Decide(s *TokenBucketState, now float64, cost int) Decision {
	now = clampNow(now)
	tokens := tb.refill(s, now)
	c := float64(cost)
	allowed := cost <= 0 || tokens >= c
	if allowed && cost > 0 {
		tokens -= c
	}
	s.store(tokens)
	var retry float64
	if !allowed {
		retry = tb.retry(tokens, s.last, now, cost)
	}
	return Decision{Allowed: allowed, Remaining: int(tokens), RetryAfter: retry, Reset: (tb.burst - tokens) / tb.rate}
}

// refill brings s up to now and returns the tokens it holds. A now before
// the stored time adds nothing and keeps the stored time.
func (tb *TokenBucket) refill(s *TokenBucketState, now float64) float64 {
	if math.Float64bits(s.tokens) == 0 {
		s.last = now
		return tb.burst
	}
	elapsed := now - s.last
	if elapsed < 0 {
		elapsed = 0
	} else {
		s.last = now
	}
	tokens := s.tokens + float64(elapsed*tb.rate)
	if tokens > tb.burst {
		tokens = tb.burst
	}
	return tokens
}

func (s *TokenBucketState) store(tokens float64) {
	if tokens == 0 {
		tokens = negZero
	}
	s.tokens = tokens
}

// retry is the wait until tokens, refilled from last, reach cost.
func (tb *TokenBucket) retry(tokens, last, now float64, cost int) float64 {
	if cost > tb.maxCost {
		return never
	}
	c := float64(cost)
	guess := last + (c-tokens)/tb.rate - now
	return retryAfter(now, guess, func(t float64) bool {
		elapsed := t - last
		if elapsed < 0 {
			elapsed = 0
		}
		v := tokens + float64(elapsed*tb.rate)
		if v > tb.burst {
			v = tb.burst
		}
		return v >= c
	})
}
