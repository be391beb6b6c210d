package ratelimit

import "math/bits"

// Window ids are ⌊now/Window⌋ in whole nanoseconds (exact on decimal
// timestamps: 0.7 s is in window 7 of 0.1 s), kept modulo 2^32 so a state
// stays small. A time whose id is up to stepBack windows before the stored
// id, while the state holds a count, is a clock that stepped back: it counts
// in the stored window (the gap is clamped) instead of resetting it. A key
// idle for 2^32 − stepBack to 2^32 windows would be mistaken for that case
// and keep its old count until the window changes; give keys a TTL of a few
// windows (as the seed's Redis keys have) and it cannot happen.
const stepBack = 1 << 16

// FixedWindow counts units per fixed window [k·Window, (k+1)·Window) and
// allows a request while count + cost ≤ Limit (count < Limit for cost 1). It
// costs one counter per key (one INCR in a store) but admits up to 2·Limit in
// a span shorter than a window across a boundary, and every key's window
// resets at the same instant. Window is taken in whole nanoseconds. The
// configuration is immutable and safe to share.
type FixedWindow struct {
	limit  uint64
	window float64
	w      int64 // Window, nanoseconds
}

// FixedWindowState is one key's window: count and window id, 8 bytes. The
// zero value is an empty window. Not safe for concurrent use.
type FixedWindowState struct {
	count uint32
	win   uint32 // ⌊now/Window⌋ mod 2^32
}

// NewFixedWindow returns a fixed-window counter for q, or an error wrapping
// ErrInvalidLimit that names the bad field.
func NewFixedWindow(q Quota) (*FixedWindow, error) {
	if err := q.validate(MaxBurst); err != nil {
		return nil, err
	}
	return &FixedWindow{limit: uint64(q.Limit), window: q.Window, w: durationNanos(q.Window)}, nil
}

// Quota returns the configuration.
func (fw *FixedWindow) Quota() Quota { return Quota{Limit: int(fw.limit), Window: fw.window} }

// Decide answers a request of cost units at now and updates s. RetryAfter is
// the time left in the window; Reset too, when anything was counted.
func (fw *FixedWindow) Decide(s *FixedWindowState, now float64, cost int) Decision {
	now = clampNow(now)
	ns := toNanos(now)
	id := fw.roll(s, ns/fw.w)
	allowed := cost <= 0 || uint64(s.count)+uint64(cost) <= fw.limit
	if allowed && cost > 0 {
		s.count += uint32(cost)
	}
	var reset, retry float64
	end := (id + 1) * fw.w
	if s.count > 0 {
		reset = nanosSeconds(end - ns)
	}
	if !allowed {
		retry = never
		if uint64(cost) <= fw.limit {
			retry = retryAt(now, ns, end) // the next window starts empty
		}
	}
	return Decision{Allowed: allowed, Remaining: nonNegative(int(fw.limit) - int(s.count)), RetryAfter: retry, Reset: reset}
}

// roll moves s to window id and returns the window in effect (the stored one
// if the clock stepped back).
func (fw *FixedWindow) roll(s *FixedWindowState, id int64) int64 {
	back := int32(uint32(id) - s.win)
	switch {
	case back == 0:
	case back < 0 && back >= -stepBack && s.count > 0:
		return id - int64(back)
	default:
		s.win, s.count = uint32(id), 0
	}
	return id
}

// SlidingCounter is the sliding window counter: the current fixed window's
// count plus the previous window's count weighted by the share of the
// previous window still inside a sliding window of length Window ending now,
//
//	weight = 1 − (now − id·Window)/Window,  allow if prev·weight + cur < Limit
//
// (for cost c: prev·weight + (cur + c − 1) < Limit, the same expression for
// c = 1). Two counters per key, with a small error on real traffic
// (Cloudflare, 2017); it admits a little over Limit when the previous window's
// requests bunched at its start. The weight is exact: the rule is evaluated
// as prev·(W − offset) + (cur + c − 1)·W < Limit·W in integer nanoseconds.
// The configuration is immutable and safe to share.
type SlidingCounter struct {
	limit  uint64
	window float64
	w      int64 // Window, nanoseconds
}

// SlidingCounterState is one key's two counts and window id: 12 bytes. The
// zero value is empty. Not safe for concurrent use.
type SlidingCounterState struct {
	prev, cur uint32
	win       uint32 // ⌊now/Window⌋ mod 2^32 of cur
}

// NewSlidingCounter returns a sliding window counter for q, or an error
// wrapping ErrInvalidLimit that names the bad field.
func NewSlidingCounter(q Quota) (*SlidingCounter, error) {
	if err := q.validate(MaxBurst); err != nil {
		return nil, err
	}
	return &SlidingCounter{limit: uint64(q.Limit), window: q.Window, w: durationNanos(q.Window)}, nil
}

// Quota returns the configuration.
func (sc *SlidingCounter) Quota() Quota { return Quota{Limit: int(sc.limit), Window: sc.window} }

// Decide answers a request of cost units at now and updates s. On a window
// change prev becomes cur if the new window is the next one, else 0, and cur
// becomes 0. A clock that stepped back into an earlier window counts at the
// start of the stored window (weight 1).
func (sc *SlidingCounter) Decide(s *SlidingCounterState, now float64, cost int) Decision {
	now = clampNow(now)
	ns := toNanos(now)
	id, off := sc.roll(s, ns)
	room := sc.room(s, off) // the largest cost that fits
	allowed := cost <= 0 || uint64(cost) <= room
	if allowed && cost > 0 {
		s.cur += uint32(cost)
		room -= uint64(cost)
	}
	var reset, retry float64
	switch {
	case s.cur > 0:
		reset = nanosSeconds((id+2)*sc.w - ns)
	case s.prev > 0:
		reset = nanosSeconds((id+1)*sc.w - ns)
	}
	if !allowed {
		retry = never
		if uint64(cost) <= sc.limit {
			retry = retryAt(now, ns, sc.retryAt(s, id, uint64(cost)))
		}
	}
	return Decision{Allowed: allowed, Remaining: int(room), RetryAfter: retry, Reset: reset}
}

// roll moves s to the window of ns and returns the window in effect and the
// offset of ns in it (0 when the clock stepped back: weight 1).
func (sc *SlidingCounter) roll(s *SlidingCounterState, ns int64) (id, off int64) {
	id = ns / sc.w
	back := int32(uint32(id) - s.win)
	switch {
	case back == 0:
	case back < 0 && back >= -stepBack && s.prev|s.cur != 0:
		return id - int64(back), 0
	default:
		if back == 1 {
			s.prev = s.cur
		} else {
			s.prev = 0
		}
		s.cur, s.win = 0, uint32(id)
	}
	return id, ns - id*sc.w
}

// room is the largest cost c ≤ Limit with prev·(W − off)/W + cur + c − 1 <
// Limit: Limit − cur − ⌊prev·(W − off)/W⌋, at least 0.
func (sc *SlidingCounter) room(s *SlidingCounterState, off int64) uint64 {
	used := uint64(s.cur) + weighted(uint64(s.prev), uint64(sc.w-off), uint64(sc.w))
	if used >= sc.limit {
		return 0
	}
	return sc.limit - used
}

// weighted is ⌊n·part/whole⌋ for part ≤ whole.
func weighted(n, part, whole uint64) uint64 {
	if n == 0 || part == whole {
		return n
	}
	hi, lo := bits.Mul64(n, part)
	q, _ := bits.Div64(hi, lo, whole)
	return q
}

// retryAt is the first instant (ns) at which a request of cost units fits
// (cost ≤ Limit): later in window id, once the previous count has decayed
// enough, or else in the next window, once cur (then the previous count)
// has; two windows on, both counts have left.
func (sc *SlidingCounter) retryAt(s *SlidingCounterState, id int64, cost uint64) int64 {
	if a := int64(sc.limit) - int64(s.cur) - int64(cost); a >= 0 {
		if off := decayedBy(uint64(s.prev), uint64(a), uint64(sc.w)); off < uint64(sc.w) {
			return id*sc.w + int64(off)
		}
	}
	return (id+1)*sc.w + int64(decayedBy(uint64(s.cur), sc.limit-cost, uint64(sc.w)))
}

// decayedBy is the smallest offset off in a window of w with
// ⌊n·(w − off)/w⌋ ≤ a: 0 if n ≤ a, else ⌊w·(n − a − 1)/n⌋ + 1.
func decayedBy(n, a, w uint64) uint64 {
	if n <= a {
		return 0
	}
	hi, lo := bits.Mul64(w, n-a-1)
	q, _ := bits.Div64(hi, lo, n)
	return q + 1
}
