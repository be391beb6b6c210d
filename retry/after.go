package retry

import (
	"math"
	"net/http"
	"time"
)

// MaxServerDelay is the longest delay ParseRetryAfter returns, and the
// longest Policy.Next honours in Attempt.After: one year (365 days). A
// server asking for more, in a huge delay-seconds or a far-future date,
// gets MaxServerDelay, which no deadline outlives; the value never wraps
// around to a short or negative delay. (A pushback is at most 2^31−1 ms,
// about 24.8 days.)
const MaxServerDelay = 365 * 24 * time.Hour

// PushbackKey is the gRPC trailer (metadata key) in which a server asks a
// retrying client to wait, or not to retry at all (gRPC proposal A6, "gRPC
// Retry Design"). Its value has the syntax ParsePushback reads.
const PushbackKey = "grpc-retry-pushback-ms"

// maxServerSeconds is MaxServerDelay in seconds, the unit of Retry-After.
const maxServerSeconds = int64(MaxServerDelay / time.Second)

// ParseRetryAfter reads the value of a Retry-After response field (RFC 9110,
// section 10.2.3) and returns how long the client should wait, measured from
// now, the instant the response was received (from time.Now in production,
// a fixed instant in tests).
//
// The value is either delay-seconds, one or more ASCII digits (leading zeros
// allowed, no sign, no fraction), or an HTTP-date in any of the three forms
// http.ParseTime accepts: the preferred IMF-fixdate ("Sun, 06 Nov 1994
// 08:49:37 GMT") and the obsolete RFC 850 and asctime forms. A two-digit RFC
// 850 year is read as Go's time package reads "06" (69–99 → 19xx, else
// 20xx). Optional whitespace (spaces, horizontal tabs) around the value is
// ignored.
//
// A date at or before now gives 0 and ok=true: retry without waiting. A
// delay beyond MaxServerDelay (however many digits, or however far the date)
// gives MaxServerDelay. Anything else (empty, negative, fractional, a
// list, an unknown date format) gives 0 and ok=false: the field is ignored,
// as RFC 9110 lets a recipient do with an invalid value.
//
// ParseRetryAfter does not allocate for delay-seconds; parsing a date may.
// It is a pure function, safe for concurrent use.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if n, isNum, ok := parseDigits(v, maxServerSeconds); isNum {
		if !ok {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now) // saturates at the extremes of time.Duration
	return min(max(d, 0), MaxServerDelay), true
}

// ParsePushback reads the value of the grpc-retry-pushback-ms trailer
// (PushbackKey). gRPC proposal A6 ("gRPC Retry Design") gives the server
// three answers:
//
//   - no trailer: the client follows its own retry policy (here ok=false);
//   - a non-negative integer of milliseconds: the client retries (if its
//     policy still allows a retry) after that delay instead of its backoff
//     (here retry=true and d the delay);
//   - a negative or unparseable value: the client must not retry this call,
//     nor send it any further hedge (here retry=false and d = 0).
//
// A6 defines the value as an ASCII signed 32-bit decimal integer, so a
// value is parseable when it is one or more ASCII digits (leading zeros are
// tolerated) of at most 2147483647 (about 24.8 days), with optional
// whitespace around it. Anything else, a sign included (even "+5" or
// "-0"), a fraction, or a number beyond 32 bits, means "do not retry". An
// empty value (or only whitespace) is treated as no trailer: ok=false; the
// adapter should pass the value only when the trailer is present.
//
// ParsePushback does not allocate; it is a pure function, safe for
// concurrent use.
func ParsePushback(v string) (d time.Duration, retry bool, ok bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false, false
	}
	n, _, valid := parseDigits(v, math.MaxInt32+1)
	if !valid || n > math.MaxInt32 {
		return 0, false, true
	}
	return time.Duration(n) * time.Millisecond, true, true
}

// parseDigits reads s as a decimal integer of one or more ASCII digits,
// saturating at limit. isNum reports whether s starts with a digit (so it
// is meant as a number and not as a date); ok whether s is all digits.
func parseDigits(s string, limit int64) (n int64, isNum, ok bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, true, false
		}
		if n < limit { // once at the limit, the rest only needs checking
			n = min(n*10+int64(c-'0'), limit) // n < limit ≤ MaxInt64/10: no overflow
		}
	}
	return n, true, true
}

// trimOWS removes the optional whitespace (spaces and horizontal tabs) HTTP
// allows around a field value.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
