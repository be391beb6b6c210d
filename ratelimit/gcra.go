package ratelimit

// GCRA is the Generic Cell Rate Algorithm (ITU-T I.371; the ATM Forum's
// virtual scheduling form), token-bucket maths with one timestamp per key:
// the theoretical arrival time TAT, the instant the key's bucket would be full
// again. With emission interval T = 1/Rate and burst tolerance
// τ = (Burst − 1)·T, a request of cost 1 at now sees tat = max(TAT, now); it
// is refused if tat − now > τ (retry after tat − now − τ), else TAT becomes
// tat + T. A request of cost c is refused if tat − now + (c − 1)·T > τ, else
// TAT becomes tat + c·T.
//
// The arithmetic is in integers (see the package doc, "Exact arithmetic"):
// now in whole nanoseconds, TAT and T in time units of 1/m ns chosen from the
// rate so that T is a whole number of them. For the rates that covers (every
// whole rate up to 1024 per second, and counts per period such as 100/min or
// 7 per 1.5 s) the decisions are those of exact arithmetic on the callers'
// timestamps. It decides exactly like TokenBucket while the clock does not
// step back. The configuration is immutable and safe to share.
type GCRA struct {
	rate     float64
	burst    int
	lat      lattice
	interval uint64  // T in time units
	full     uint64  // Burst·T: τ + T, the most a TAT may lead now by
	inv      float64 // 1/interval
}

// GCRAState is one key's theoretical arrival time: 8 bytes, in the
// configuration's time units modulo 2^64 (read relative to now, so a state is
// exact while its TAT is within 2^63 units of now: 292 years / m). 0 means
// "never seen", a full bucket; a TAT that falls on 0 is kept one unit later.
// Not safe for concurrent use. A state belongs to the configuration that
// wrote it and to those made from it by WithLimit.
type GCRAState struct {
	tat uint64
}

// NewGCRA returns a GCRA limiter for l, or an error wrapping ErrInvalidLimit
// that names the bad field.
func NewGCRA(l Limit) (*GCRA, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	lat := newLattice(l.Rate, l.Burst)
	return newGCRA(l, lat, lat.interval), nil
}

func newGCRA(l Limit, lat lattice, interval uint64) *GCRA {
	return &GCRA{rate: l.Rate, burst: l.Burst, lat: lat, interval: interval,
		full: uint64(l.Burst) * interval, inv: 1 / float64(interval)}
}

// WithLimit returns the configuration for l in g's units: it reads and
// writes g's states, so that a store can decide one key's state under g and
// under a scaled limit in turn (as Memory.SetScale does). Its emission
// interval is 1/l.Rate rounded up to g's time unit (exact when it is a
// whole number of them).
func (g *GCRA) WithLimit(l Limit) (*GCRA, error) {
	iv, err := g.lat.derive(l)
	if err != nil {
		return nil, err
	}
	return newGCRA(l, g.lat, iv), nil
}

// Limit returns the configuration.
func (g *GCRA) Limit() Limit { return Limit{Rate: g.rate, Burst: g.burst} }

// Decide answers a request of cost units at now and updates s (only when the
// request is allowed). A now earlier than an earlier one needs no clamping:
// tat = max(TAT, now) never moves TAT back; the TAT is then further ahead of
// now, so a clock stepping back only refuses more.
func (g *GCRA) Decide(s *GCRAState, now float64, cost int) Decision {
	now = clampNow(now)
	ns := toNanos(now)
	nowU := g.lat.units(ns) // modulo 2^64, as TAT
	tat, ahead := leadOf(s.tat, nowU)
	if cost <= 0 {
		return Decision{Allowed: true, Remaining: g.remaining(ahead), Reset: float64(ahead) / g.lat.perSec}
	}
	if cost > g.burst || ahead > g.full || uint64(cost)*g.interval > g.full-ahead {
		retry := never
		if cost <= g.burst {
			wait := ahead + uint64(cost)*g.interval - g.full // time units until it fits
			retry = retryAt(now, ns, g.lat.instant(ns, nowU, wait))
		}
		return Decision{Remaining: g.remaining(ahead), RetryAfter: retry, Reset: float64(ahead) / g.lat.perSec}
	}
	step := uint64(cost) * g.interval
	if tat += step; tat == 0 {
		tat = 1 // 0 is "never seen"
	}
	s.tat = tat
	ahead += step
	return Decision{Allowed: true, Remaining: g.remaining(ahead), Reset: float64(ahead) / g.lat.perSec}
}

// leadOf reads a stored instant (0: none) against nowU, both in time units
// modulo 2^64: it returns max(stored, nowU) and how far that is ahead of
// nowU.
func leadOf(stored, nowU uint64) (at, ahead uint64) {
	if d := int64(stored - nowU); stored != 0 && d > 0 {
		return stored, uint64(d)
	}
	return nowU, 0
}

// remaining is the largest cost k ≤ Burst with ahead + k·T ≤ Burst·T.
func (g *GCRA) remaining(ahead uint64) int {
	if ahead >= g.full {
		return 0
	}
	return int(floorDiv(g.full-ahead, g.interval, g.inv))
}

// ceilDiv is ⌈x/d⌉ as nanoseconds, for x below 2^63.
func ceilDiv(x, d uint64) int64 {
	if d == 1 {
		return int64(x)
	}
	return int64((x + d - 1) / d)
}

// laterBy is the instant d ≥ 0 nanoseconds after ns, or maxNanos+1 (beyond
// every instant: retryAt answers +Inf) if that is past maxNanos.
func laterBy(ns, d int64) int64 {
	if d > maxNanos-ns {
		return maxNanos + 1
	}
	return ns + d
}
