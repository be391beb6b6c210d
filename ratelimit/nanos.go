package ratelimit

// Time in whole nanoseconds. The API takes float64 seconds; every decision
// converts now once, at its start, to int64 nanoseconds rounded to nearest,
// and does all its time arithmetic in integers from there. A caller passing
// decimal timestamps (k × 0.1, a clock read in nanoseconds) therefore gets
// the decisions of exact arithmetic: the float64 error of k × 0.1 is far
// below half a nanosecond, and no difference of two such floats enters a
// decision.

const (
	nanosPerSecond = 1e9
	// maxNanos is the latest instant: times from 2^62 ns (about 146 years)
	// on are read as that instant.
	maxNanos = 1 << 62
)

// toNanos converts seconds to whole nanoseconds, rounded to nearest (halves
// up), clamped to [0, maxNanos]; NaN is 0. It is the one conversion of a
// decision's now, and it is the nanosecond nearest now's exact value: below
// 2^52 ns (52 days) the product x = now × 10^9 is within x·2^-53 of that
// value, and x rounded (by adding and taking away 2^52, exact there)
// decides, unless x's fraction is that close to one half; then, and above
// 2^52 ns, where the product rounds to multiples of up to 256 ns, the whole
// seconds and the fraction are converted apart.
func toNanos(now float64) int64 {
	if x := now * nanosPerSecond; x >= 0 && x < 1<<52 {
		r := x + 0x1p52 - 0x1p52 // x rounded to an integer
		if d, e := x-r, 0.5-x*0x1p-52; d < e && d > -e {
			return int64(r)
		}
	}
	return toNanosApart(now)
}

// toNanosApart is toNanos converting the whole seconds and the fraction
// apart (out of line, so that toNanos inlines).
//
//go:noinline
func toNanosApart(now float64) int64 {
	if !(now > 0) {
		return 0
	}
	if now >= maxNanos/nanosPerSecond {
		return maxNanos
	}
	s := int64(now)
	f := (now - float64(s)) * nanosPerSecond // now − s is exact
	n := int64(f)
	if f-float64(n) >= 0.5 {
		n++
	}
	return min(s*nanosPerSecond+n, maxNanos)
}

// durationNanos converts a positive duration in seconds (a window, a TTL,
// an interval) to whole nanoseconds as toNanos does, at least 1.
func durationNanos(d float64) int64 { return max(toNanos(d), 1) }

// nanosSeconds converts nanoseconds to float64 seconds: one correctly
// rounded division (exact for |ns| < 2^53, about 104 days).
func nanosSeconds(ns int64) float64 { return float64(ns) / nanosPerSecond }

// retryAt is the RetryAfter of a request at now (seconds; nowNs is
// toNanos(now)) that the state allows from the instant atNs on: a value ra
// with toNanos(now+ra) ≥ atNs, the first such float64 at or above
// (atNs − nowNs)/1e9, so that the request retried at now+RetryAfter (float64
// addition) is allowed; for an atNs beyond maxNanos, the wait to maxNanos.
func retryAt(now float64, nowNs, atNs int64) float64 {
	if atNs <= nowNs {
		return 0
	}
	if atNs > maxNanos {
		// Past the last instant this package counts (2^62 ns, about 146
		// years): the wait to that instant, a lower bound that stays finite,
		// so that a request that fits the configuration is not taken for
		// one that can never pass (RetryAfter +Inf). A retry then is told
		// to wait again.
		return nanosSeconds(maxNanos - nowNs)
	}
	ra := nanosSeconds(atNs - nowNs)
	// The usual case, without a call: (now+ra)·10^9 is within x·2^-53 of
	// the exact value, which rounds to atNs or later if it is ≥ atNs − ½
	// (x − atNs is exact: the two are within a few units).
	if x := (now + ra) * nanosPerSecond; x < 1<<52 && x-float64(atNs) >= x*0x1p-52-0.5 {
		return ra
	}
	if toNanos(now+ra) >= atNs {
		return ra
	}
	return retryAfter(now, ra, func(t float64) bool { return toNanos(t) >= atNs })
}
