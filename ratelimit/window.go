package ratelimit

import "math"

// Window ids are floor(now/Window), kept modulo 2^32 so a state stays small.
// A time whose id is up to stepBack windows before the stored id, while the
// state holds a count, is a clock that stepped back: it counts in the stored
// window (the gap is clamped) instead of resetting it. A key idle for
// 2^32 − stepBack to 2^32 windows would be mistaken for that case and keep
// its old count until the window changes; give keys a TTL of a few windows
// (as the seed's Redis keys have) and it cannot happen.
const stepBack = 1 << 16

// windowID returns floor(now/w) and its low 32 bits.
func windowID(now, w float64) (float64, uint32) {
	wf := math.Floor(now / w)
	return wf, uint32(int64(wf))
}

// FixedWindow counts units per fixed window [k·Window, (k+1)·Window) and
// allows a request while count + cost ≤ Limit (count < Limit for cost 1). It
// costs one counter per key (one INCR in a store) but admits up to 2·Limit in
// a span shorter than a window across a boundary, and every key's window
// resets at the same instant. The configuration is immutable and safe to
// share.
type FixedWindow struct {
	limit  uint64
	window float64
}

// FixedWindowState is one key's window: count and window id, 8 bytes. The
// zero value is an empty window. Not safe for concurrent use.
type FixedWindowState struct {
	count uint32
	win   uint32 // floor(now/Window) mod 2^32
}

// NewFixedWindow returns a fixed-window counter for q, or an error wrapping
// ErrInvalidLimit that names the bad field.
func NewFixedWindow(q Quota) (*FixedWindow, error) {
	if err := q.validate(MaxBurst); err != nil {
		return nil, err
	}
	return &FixedWindow{limit: uint64(q.Limit), window: q.Window}, nil
}

// Quota returns the configuration.
func (fw *FixedWindow) Quota() Quota { return Quota{Limit: int(fw.limit), Window: fw.window} }

// Decide answers a request of cost units at now and updates s. RetryAfter is
// the time left in the window; Reset too, when anything was counted.
func (fw *FixedWindow) Decide(s *FixedWindowState, now float64, cost int) Decision {
	now = clampNow(now)
	wf := fw.roll(s, now)
	allowed := cost <= 0 || uint64(s.count)+uint64(cost) <= fw.limit
	if allowed && cost > 0 {
		s.count += uint32(cost)
	}
	var reset, retry float64
	end := float64((wf + 1) * fw.window)
	if s.count > 0 {
		reset = end - now
	}
	if !allowed {
		retry = never
		if uint64(cost) <= fw.limit {
			retry = fw.retry(*s, now, end-now, uint64(cost))
		}
	}
	return Decision{Allowed: allowed, Remaining: nonNegative(int(fw.limit) - int(s.count)), RetryAfter: retry, Reset: reset}
}

// roll moves s to the window of now and returns that window's number (the
// stored one if the clock stepped back).
func (fw *FixedWindow) roll(s *FixedWindowState, now float64) float64 {
	wf, id := windowID(now, fw.window)
	back := int32(id - s.win)
	switch {
	case back == 0:
	case back < 0 && back >= -stepBack && s.count > 0:
		wf -= float64(back)
	default:
		s.win, s.count = id, 0
	}
	return wf
}

func (fw *FixedWindow) retry(s FixedWindowState, now, guess float64, cost uint64) float64 {
	return retryAfter(now, guess, func(t float64) bool {
		c := s
		fw.roll(&c, t)
		return uint64(c.count)+cost <= fw.limit
	})
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
// requests bunched at its start. The configuration is immutable and safe to
// share.
type SlidingCounter struct {
	limit  uint64
	window float64
}

// SlidingCounterState is one key's two counts and window id: 12 bytes. The
// zero value is empty. Not safe for concurrent use.
type SlidingCounterState struct {
	prev, cur uint32
	win       uint32 // floor(now/Window) mod 2^32 of cur
}

// NewSlidingCounter returns a sliding window counter for q, or an error
// wrapping ErrInvalidLimit that names the bad field.
func NewSlidingCounter(q Quota) (*SlidingCounter, error) {
	if err := q.validate(MaxBurst); err != nil {
		return nil, err
	}
	return &SlidingCounter{limit: uint64(q.Limit), window: q.Window}, nil
}

// Quota returns the configuration.
func (sc *SlidingCounter) Quota() Quota { return Quota{Limit: int(sc.limit), Window: sc.window} }

// Decide answers a request of cost units at now and updates s. On a window
// change prev becomes cur if the new window is the next one, else 0, and cur
// becomes 0. A clock that stepped back into an earlier window counts at the
// start of the stored window (weight 1).
func (sc *SlidingCounter) Decide(s *SlidingCounterState, now float64, cost int) Decision {
	now = clampNow(now)
	wf, weight := sc.roll(s, now)
	base := float64(float64(s.prev) * weight)
	allowed := cost <= 0 || sc.fits(base, s.cur, uint64(cost))
	if allowed && cost > 0 {
		s.cur += uint32(cost)
	}
	var reset, retry float64
	switch {
	case s.cur > 0:
		reset = float64((wf+2)*sc.window) - now
	case s.prev > 0:
		reset = float64((wf+1)*sc.window) - now
	}
	if !allowed {
		retry = never
		if uint64(cost) <= sc.limit {
			retry = sc.retry(*s, now, wf, uint64(cost))
		}
	}
	return Decision{Allowed: allowed, Remaining: sc.remaining(base, s.cur), RetryAfter: retry, Reset: reset}
}

// fits is the admission rule: prev·weight + (cur + cost − 1) < Limit.
func (sc *SlidingCounter) fits(base float64, cur uint32, cost uint64) bool {
	return base+float64(uint64(cur)+cost-1) < float64(sc.limit)
}

// remaining is the largest cost that fits, at most Limit.
func (sc *SlidingCounter) remaining(base float64, cur uint32) int {
	k := math.Ceil(float64(sc.limit) - base - float64(cur))
	if !(k > 0) {
		k = 0
	}
	if k > float64(sc.limit) {
		k = float64(sc.limit)
	}
	n := uint64(k)
	if n > 0 && !sc.fits(base, cur, n) {
		n--
	} else if n < sc.limit && sc.fits(base, cur, n+1) {
		n++
	}
	return int(n)
}

// roll moves s to the window of now and returns the window number and the
// previous window's weight.
func (sc *SlidingCounter) roll(s *SlidingCounterState, now float64) (wf, weight float64) {
	wf, id := windowID(now, sc.window)
	back := int32(id - s.win)
	switch {
	case back == 0:
	case back < 0 && back >= -stepBack && s.prev|s.cur != 0:
		return wf - float64(back), 1
	default:
		if back == 1 {
			s.prev = s.cur
		} else {
			s.prev = 0
		}
		s.cur, s.win = 0, id
	}
	return wf, 1 - (now-float64(wf*sc.window))/sc.window
}

// retry searches upward from the instant the weighted previous count has
// decayed enough (in this window, or in the next when cur alone is too many).
func (sc *SlidingCounter) retry(s SlidingCounterState, now, wf float64, cost uint64) float64 {
	limit := float64(sc.limit)
	room := limit - float64(uint64(s.cur)+cost-1) // what prev·weight must fall below
	var at float64
	switch {
	case room > 0 && s.prev > 0:
		at = float64(wf*sc.window) + float64(sc.window*(1-room/float64(s.prev)))
	default: // next window: prev' = cur, need cur·weight' < Limit − (cost − 1)
		at = float64((wf + 1) * sc.window)
		if q := (limit - float64(cost-1)) / float64(s.cur); s.cur > 0 && q < 1 {
			at += float64(sc.window * (1 - q))
		}
	}
	// The rule is strict (<), so the boundary itself is refused: start one
	// ulp above it and save a call of the predicate (two divisions).
	at = math.Nextafter(at, never)
	return retryAfter(now, at-now, func(t float64) bool {
		c := s
		_, w := sc.roll(&c, t)
		return sc.fits(float64(float64(c.prev)*w), c.cur, cost)
	})
}
