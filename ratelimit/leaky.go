package ratelimit

// LeakyMeter is the leaky bucket as a meter: a bucket of Burst units leaks at
// Rate units per second; a request of cost c is allowed if it fits (level + c
// ≤ Burst) and adds c to the level. It decides like TokenBucket (the level is
// Burst minus the tokens) and keeps the same two numbers; its zero state is
// naturally an empty bucket. The configuration is immutable and safe to share.
type LeakyMeter struct {
	rate    float64
	burst   float64
	maxCost int
}

// LeakyMeterState is one key's water level: 16 bytes. The zero value is an
// empty bucket (full quota). Not safe for concurrent use.
type LeakyMeterState struct {
	level float64 // units in the bucket after the last decision
	last  float64 // time of the last leak, seconds
}

// NewLeakyMeter returns a leaky-bucket meter for l, or an error wrapping
// ErrInvalidLimit that names the bad field.
func NewLeakyMeter(l Limit) (*LeakyMeter, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &LeakyMeter{rate: l.Rate, burst: float64(l.Burst), maxCost: l.Burst}, nil
}

// Limit returns the configuration.
func (m *LeakyMeter) Limit() Limit { return Limit{Rate: m.rate, Burst: m.maxCost} }

// Decide answers a request of cost units at now and updates s: the level
// leaks to max(0, level − (now − last)·Rate), and the request is allowed if
// cost ≤ Burst − level.
func (m *LeakyMeter) Decide(s *LeakyMeterState, now float64, cost int) Decision {
	now = clampNow(now)
	elapsed := now - s.last
	if elapsed < 0 {
		elapsed = 0
	} else {
		s.last = now
	}
	level := s.level - float64(elapsed*m.rate)
	if level < 0 {
		level = 0
	}
	c := float64(cost)
	allowed := cost <= 0 || c <= m.burst-level
	if allowed && cost > 0 {
		level += c
	}
	s.level = level
	var retry float64
	if !allowed {
		retry = m.retry(level, s.last, now, cost)
	}
	return Decision{Allowed: allowed, Remaining: nonNegative(int(m.burst - level)), RetryAfter: retry, Reset: level / m.rate}
}

func (m *LeakyMeter) retry(level, last, now float64, cost int) float64 {
	if cost > m.maxCost {
		return never
	}
	c := float64(cost)
	guess := last + (level+c-m.burst)/m.rate - now
	return retryAfter(now, guess, func(t float64) bool {
		elapsed := t - last
		if elapsed < 0 {
			elapsed = 0
		}
		v := level - float64(elapsed*m.rate)
		if v < 0 {
			v = 0
		}
		return c <= m.burst-v
	})
}

// LeakyQueue is the leaky bucket as a queue (a shaper): admitted requests
// leave one unit every 1/Rate seconds, in arrival order; up to Burst units may
// wait. A request arriving at t starts at out = max(t, nextFree) and sets
// nextFree = out + cost/Rate (one 1/Rate step per unit); it is refused if the
// units already admitted whose release time is after t, plus its cost, would
// exceed Burst. The admitted request waits Decision.Delay = out − t before it
// proceeds: the output never exceeds Rate per second, at the price of delay
// (at most Burst/Rate seconds). The configuration is immutable and safe to
// share.
type LeakyQueue struct {
	rate     float64
	interval float64 // 1/Rate
	size     int
}

// LeakyQueueState is one key's queue: the next free release time and a ring
// of the release times of the waiting units (at most Burst float64s, grown on
// demand). The zero value is an empty queue. Not safe for concurrent use.
type LeakyQueueState struct {
	nextFree float64
	out      ring
}

// NewLeakyQueue returns a leaky-bucket queue releasing l.Rate units per
// second with room for l.Burst waiting units, or an error wrapping
// ErrInvalidLimit that names the bad field.
func NewLeakyQueue(l Limit) (*LeakyQueue, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &LeakyQueue{rate: l.Rate, interval: 1 / l.Rate, size: l.Burst}, nil
}

// Limit returns the configuration.
func (q *LeakyQueue) Limit() Limit { return Limit{Rate: q.rate, Burst: q.size} }

// Decide answers a request of cost units arriving at now and updates s. The
// count of waiting units is exact: every release time is kept until it has
// passed (release time ≤ now). A now earlier than earlier arrivals sees more
// of them still waiting, so a clock stepping back only refuses more.
func (q *LeakyQueue) Decide(s *LeakyQueueState, now float64, cost int) Decision {
	now = clampNow(now)
	s.drop(now)
	waiting := int(s.out.n)
	if cost <= 0 {
		return Decision{Allowed: true, Remaining: nonNegative(q.size - waiting), Reset: q.reset(s, now)}
	}
	if waiting+cost > q.size {
		retry := never
		if cost <= q.size {
			retry = q.retry(s, now, waiting+cost-q.size)
		}
		return Decision{Remaining: nonNegative(q.size - waiting), RetryAfter: retry, Reset: q.reset(s, now)}
	}
	out := s.nextFree
	if now > out {
		out = now
	}
	next := out
	for range cost {
		s.out.push(next, q.size)
		next += q.interval
	}
	s.nextFree = next
	s.drop(now) // a unit released at once (out = now) is not waiting
	return Decision{Allowed: true, Remaining: nonNegative(q.size - int(s.out.n)), Reset: q.reset(s, now), Delay: out - now, Start: out}
}

// drop forgets the units released by now.
func (s *LeakyQueueState) drop(now float64) {
	for s.out.n > 0 && s.out.front() <= now {
		s.out.popFront()
	}
}

// reset is the time until the last waiting unit has left.
func (q *LeakyQueue) reset(s *LeakyQueueState, now float64) float64 {
	if s.out.n == 0 {
		return 0
	}
	return s.out.back() - now
}

// retry is the wait until the k-th waiting unit has left.
func (q *LeakyQueue) retry(s *LeakyQueueState, now float64, k int) float64 {
	release := s.out.at(uint32(k - 1))
	return retryAfter(now, release-now, func(t float64) bool { return release <= t })
}
