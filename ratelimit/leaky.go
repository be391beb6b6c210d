package ratelimit

import "fmt"

// LeakyMeter is the leaky bucket as a meter: a bucket of Burst units leaks at
// Rate units per second; a request of cost c is allowed if it fits (level + c
// ≤ Burst) and adds c to the level. It decides like TokenBucket (the level is
// Burst minus the tokens), in the same integer units and two numbers; its
// zero state is naturally an empty bucket. The configuration is immutable and
// safe to share.
type LeakyMeter struct {
	bucketUnits // flow is the leak; the level counts in credit units
}

// LeakyMeterState is one key's water level: 16 bytes. The zero value is an
// empty bucket (full quota). Not safe for concurrent use. A state belongs to
// the configuration that wrote it and to those made from it by WithLimit.
type LeakyMeterState struct {
	level uint64 // in the bucket after the last decision, in level units
	last  int64  // time of the last leak, nanoseconds
}

// NewLeakyMeter returns a leaky-bucket meter for l, or an error wrapping
// ErrInvalidLimit that names the bad field.
func NewLeakyMeter(l Limit) (*LeakyMeter, error) {
	u, err := newBucketUnits(l)
	if err != nil {
		return nil, err
	}
	return &LeakyMeter{u}, nil
}

// WithLimit returns the configuration for l that reads and writes m's
// states (the level carries over), as TokenBucket.WithLimit: its leak is
// l.Rate in m's units, rounded down to whole units at each decision unless
// that rate is a whole number of them.
func (m *LeakyMeter) WithLimit(l Limit) (*LeakyMeter, error) {
	u, err := m.withLimit(l)
	if err != nil {
		return nil, err
	}
	return &LeakyMeter{u}, nil
}

// Limit returns the configuration.
func (m *LeakyMeter) Limit() Limit { return Limit{Rate: m.rate, Burst: m.burst} }

// Decide answers a request of cost units at now and updates s: the level
// leaks to max(0, level − (now − last)·Rate), and the request is allowed if
// cost ≤ Burst − level.
func (m *LeakyMeter) Decide(s *LeakyMeterState, now float64, cost int) Decision {
	now = clampNow(now)
	ns := toNanos(now)
	level := m.leak(s, ns)
	allowed := cost <= 0 || (cost <= m.burst && level <= m.cap && uint64(cost)*m.k <= m.cap-level)
	if allowed && cost > 0 {
		level += uint64(cost) * m.k
	}
	s.level = level
	var retry float64
	if !allowed {
		retry = never
		if cost <= m.burst {
			retry = retryAt(now, ns, m.flow.at(s.last, level+uint64(cost)*m.k-m.cap))
		}
	}
	remaining := 0
	if level < m.cap {
		remaining = int(floorDiv(m.cap-level, m.k, m.inv))
	}
	return Decision{Allowed: allowed, Remaining: remaining, RetryAfter: retry, Reset: float64(level) / m.flow.perSec}
}

// leak brings s's time up to ns (unless ns is before it: a clock that
// stepped back leaks nothing) and returns the level left.
func (m *LeakyMeter) leak(s *LeakyMeterState, ns int64) uint64 {
	level := s.level
	if ns > s.last {
		level -= min(level, m.flow.gain(s.last, ns, max(level, m.cap)))
		s.last = ns
	}
	return level
}

// empty reports whether s has leaked dry at ns.
func (m *LeakyMeter) empty(s *LeakyMeterState, ns int64) bool {
	c := *s
	return m.leak(&c, ns) == 0
}

// LeakyQueue is the leaky bucket as a queue (a shaper): admitted requests
// leave one unit every 1/Rate seconds, in arrival order; up to Burst units may
// wait. A request arriving at t starts at out = max(t, nextFree) and sets
// nextFree = out + cost/Rate (one 1/Rate step per unit); it is refused if the
// units already admitted whose release time is after t, plus its cost, would
// exceed Burst. The admitted request waits Decision.Delay = out − t before it
// proceeds: the output never exceeds Rate per second, at the price of delay
// (at most Burst/Rate seconds). Times are in GCRA's integer units, so the
// release instants are exact. The configuration is immutable and safe to
// share.
type LeakyQueue struct {
	rate     float64
	size     int
	lat      lattice
	interval uint64 // 1/Rate in time units
}

// LeakyQueueState is one key's queue: the next free release instant (in the
// configuration's time units, modulo 2^64 as GCRAState's TAT; 0: none) and a
// ring of the release instants of the waiting units, in nanoseconds rounded
// up (at most Burst of them, grown on demand). The zero value is an empty
// queue. Not safe for concurrent use. A state belongs to the configuration
// that wrote it and to those made from it by WithLimit.
type LeakyQueueState struct {
	nextFree uint64
	out      ring
}

// NewLeakyQueue returns a leaky-bucket queue releasing l.Rate units per
// second with room for l.Burst waiting units, or an error wrapping
// ErrInvalidLimit that names the bad field.
func NewLeakyQueue(l Limit) (*LeakyQueue, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	lat := newLattice(l.Rate, l.Burst)
	return &LeakyQueue{rate: l.Rate, size: l.Burst, lat: lat, interval: lat.interval}, nil
}

// WithLimit returns the configuration for l in q's units, which reads and
// writes q's states, as GCRA.WithLimit.
func (q *LeakyQueue) WithLimit(l Limit) (*LeakyQueue, error) {
	iv, err := q.lat.derive(l)
	if err != nil {
		return nil, err
	}
	return &LeakyQueue{rate: l.Rate, size: l.Burst, lat: q.lat, interval: iv}, nil
}

// Limit returns the configuration.
func (q *LeakyQueue) Limit() Limit { return Limit{Rate: q.rate, Burst: q.size} }

// Decide answers a request of cost units arriving at now and updates s. The
// count of waiting units is exact: every release instant is kept until it
// has passed (release ≤ now). A now earlier than earlier arrivals sees more
// of them still waiting, so a clock stepping back only refuses more. Start
// is now + Delay.
func (q *LeakyQueue) Decide(s *LeakyQueueState, now float64, cost int) Decision {
	now = clampNow(now)
	ns := toNanos(now)
	s.drop(ns)
	waiting := int(s.out.n)
	if cost <= 0 {
		return Decision{Allowed: true, Remaining: nonNegative(q.size - waiting), Reset: q.reset(s, ns)}
	}
	if cost > q.size || waiting+cost > q.size {
		retry := never
		if cost <= q.size {
			retry = retryAt(now, ns, s.out.at(uint32(waiting+cost-q.size-1)))
		}
		return Decision{Remaining: nonNegative(q.size - waiting), RetryAfter: retry, Reset: q.reset(s, ns)}
	}
	nowU := q.lat.units(ns)
	next, ahead := leadOf(s.nextFree, nowU)
	delay := float64(ahead) / q.lat.perSec
	for range cost {
		s.out.push(q.lat.instant(ns, nowU, ahead), q.size)
		next += q.interval
		ahead += q.interval
	}
	if next == 0 {
		next = 1 // 0 is "none"
	}
	s.nextFree = next
	s.drop(ns) // a unit released at once (out = now) is not waiting
	return Decision{Allowed: true, Remaining: nonNegative(q.size - int(s.out.n)), Reset: q.reset(s, ns), Delay: delay, Start: now + delay}
}

// drop forgets the units released by ns.
func (s *LeakyQueueState) drop(ns int64) {
	for s.out.n > 0 && s.out.front() <= ns {
		s.out.popFront()
	}
}

// reset is the time until the last waiting unit has left.
func (q *LeakyQueue) reset(s *LeakyQueueState, ns int64) float64 {
	if s.out.n == 0 {
		return 0
	}
	return nanosSeconds(s.out.back() - ns)
}

// idle reports whether nothing waits at ns and a new request would start
// at once: the queue decides like a never-seen one.
func (q *LeakyQueue) idle(s *LeakyQueueState, ns int64) bool {
	_, ahead := leadOf(s.nextFree, q.lat.units(ns))
	return ahead == 0
}

// errorfInvalid is an error wrapping ErrInvalidLimit.
func errorfInvalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidLimit}, args...)...)
}
