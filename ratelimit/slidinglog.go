package ratelimit

// SlidingLog keeps every admitted timestamp of the last Window seconds and
// allows a request while fewer than Limit are inside: exact (never more than
// Limit in any window of length Window), at Limit timestamps of memory per
// key. Use it for small limits that must be exact (login, OTP). A request of
// cost c is recorded as c timestamps. Timestamps and Window are kept in
// whole nanoseconds. The configuration is immutable and safe to share.
type SlidingLog struct {
	limit  int
	window float64
	w      int64 // Window, nanoseconds
}

// SlidingLogState is one key's log: a ring of at most Limit timestamps
// (nanoseconds), oldest first, grown on demand. The zero value is an empty
// log. Not safe for concurrent use.
type SlidingLogState struct {
	log ring
}

// NewSlidingLog returns a sliding log for q (q.Limit at most MaxLogLimit), or
// an error wrapping ErrInvalidLimit that names the bad field.
func NewSlidingLog(q Quota) (*SlidingLog, error) {
	if err := q.validate(MaxLogLimit); err != nil {
		return nil, err
	}
	return &SlidingLog{limit: q.Limit, window: q.Window, w: durationNanos(q.Window)}, nil
}

// Quota returns the configuration.
func (l *SlidingLog) Quota() Quota { return Quota{Limit: l.limit, Window: l.window} }

// Decide answers a request of cost units at now and updates s: timestamps
// ts ≤ now − Window are dropped, and the request is allowed if the rest plus
// cost is at most Limit. A now earlier than the newest timestamp is taken as
// that timestamp (a negative gap is clamped).
func (l *SlidingLog) Decide(s *SlidingLogState, now float64, cost int) Decision {
	now = clampNow(now)
	ns := toNanos(now)
	at := ns // the time recorded: now, or the newest timestamp if later
	if s.log.n > 0 && at < s.log.back() {
		at = s.log.back()
	}
	cut := at - l.w
	for s.log.n > 0 && s.log.front() <= cut {
		s.log.popFront()
	}
	n := int(s.log.n)
	allowed := cost <= 0 || (cost <= l.limit && n+cost <= l.limit)
	if allowed {
		for range cost {
			s.log.push(at, l.limit)
		}
	}
	var reset, retry float64
	if s.log.n > 0 {
		reset = nanosSeconds(s.log.back() + l.w - ns)
	}
	if !allowed {
		retry = never
		if cost <= l.limit {
			// Until the (n + cost − Limit)-th oldest timestamp has left.
			retry = retryAt(now, ns, s.log.at(uint32(n+cost-l.limit-1))+l.w)
		}
	}
	return Decision{Allowed: allowed, Remaining: nonNegative(l.limit - int(s.log.n)), RetryAfter: retry, Reset: reset}
}

// expired reports whether every timestamp of s has left the window at ns.
func (l *SlidingLog) expired(s *SlidingLogState, ns int64) bool {
	return s.log.n == 0 || s.log.back() <= ns-l.w
}
