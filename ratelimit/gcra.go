package ratelimit

import "math"

// GCRA is the Generic Cell Rate Algorithm (ITU-T I.371; the ATM Forum's
// virtual scheduling form), token-bucket maths with one timestamp per key:
// the theoretical arrival time TAT, the instant the key's bucket would be full
// again. With emission interval T = 1/Rate and burst tolerance
// τ = (Burst − 1)·T, a request of cost 1 at now sees tat = max(TAT, now); it
// is refused if tat − now > τ (retry after tat − now − τ), else TAT becomes
// tat + T. A request of cost c is refused if tat − now + (c − 1)·T > τ, else
// TAT becomes tat + c·T. It decides like TokenBucket.
//
// TAT is an absolute time, so each TAT + T rounds to the precision of now
// (2^-52·now): a burst at now = 13.7 with Rate 3 would see its last slot
// refused by 2e-15 s. The comparison therefore allows a slack of
// Burst·tat·2^-52 seconds, about what Burst such roundings add up to (for
// Burst 1000 at now = 10^6 s, 0.2 µs) and far below the 2^-11 s grid on
// which the tests show GCRA and TokenBucket agree bit for bit.
// The configuration is immutable and safe to share.
type GCRA struct {
	rate     float64
	interval float64 // T = 1/Rate, seconds per unit
	tau      float64 // τ = (Burst − 1)·T, seconds
	slack    float64 // Burst·2^-52: times tat, the rounding allowance
	burst    int
}

// GCRAState is one key's theoretical arrival time: 8 bytes. The zero value
// (TAT = 0) is a full bucket for any now ≥ 0. Not safe for concurrent use.
type GCRAState struct {
	tat float64
}

// NewGCRA returns a GCRA limiter for l, or an error wrapping ErrInvalidLimit
// that names the bad field.
func NewGCRA(l Limit) (*GCRA, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	t := 1 / l.Rate
	return &GCRA{rate: l.Rate, interval: t, tau: float64(float64(l.Burst-1) * t),
		slack: float64(l.Burst) * 0x1p-52, burst: l.Burst}, nil
}

// Limit returns the configuration.
func (g *GCRA) Limit() Limit { return Limit{Rate: g.rate, Burst: g.burst} }

// Decide answers a request of cost units at now and updates s (only when the
// request is allowed). A now earlier than an earlier one needs no clamping:
// tat = max(TAT, now) never moves TAT back.
func (g *GCRA) Decide(s *GCRAState, now float64, cost int) Decision {
	now = clampNow(now)
	tat := s.tat
	if now > tat {
		tat = now
	}
	if cost <= 0 {
		return Decision{Allowed: true, Remaining: g.remaining(tat, now), Reset: tat - now}
	}
	extra := float64(float64(cost-1) * g.interval) // 0 for cost 1
	if wait := tat - now + extra; wait > g.limit(tat) {
		retry := never
		if cost <= g.burst {
			retry = g.retry(tat, now, wait, extra)
		}
		return Decision{Remaining: g.remaining(tat, now), RetryAfter: retry, Reset: tat - now}
	}
	tat += float64(float64(cost) * g.interval)
	s.tat = tat
	return Decision{Allowed: true, Remaining: g.remaining(tat, now), Reset: tat - now}
}

// limit is τ plus the rounding slack at tat.
func (g *GCRA) limit(tat float64) float64 { return g.tau + float64(tat*g.slack) }

// remaining is the largest cost k ≤ Burst with ahead + (k − 1)·T ≤ τ, where
// ahead = tat − now: an estimate, then corrected by the rule Decide applies.
func (g *GCRA) remaining(tat, now float64) int {
	ahead, limit := tat-now, g.limit(tat)
	k := math.Floor(float64((limit-ahead)*g.rate)) + 1
	if !(k > 0) {
		return 0
	}
	if k > float64(g.burst) {
		k = float64(g.burst)
	}
	n := int(k)
	if n > 0 && ahead+float64(float64(n-1)*g.interval) > limit {
		n--
	} else if n < g.burst && ahead+float64(float64(n)*g.interval) <= limit {
		n++
	}
	return n
}

// retry starts from tat − now + (c − 1)·T − τ, the seed's tat − now − τ for
// cost 1.
func (g *GCRA) retry(tat, now, wait, extra float64) float64 {
	return retryAfter(now, wait-g.tau, func(t float64) bool {
		x := tat
		if t > x {
			x = t
		}
		return x-t+extra <= g.limit(x)
	})
}
