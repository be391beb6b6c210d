package deadline

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// HTTPHeader is the HTTP request header carrying the caller's remaining
// budget, in grpc-timeout syntax (for example "250m" for 250 ms). It is
// written in canonical form, so it may index an http.Header directly.
const HTTPHeader = "Spillway-Timeout"

// GRPCKey is gRPC's timeout header (HTTP/2 header grpc-timeout), also the
// metadata key under which gRPC libraries expose it. Its value has the
// syntax ParseTimeout reads.
const GRPCKey = "grpc-timeout"

// MaxValue is the largest number a timeout value may carry: grpc-timeout
// allows at most 8 digits before the unit.
const MaxValue = 99999999

// maxDigits is the length of MaxValue in decimal digits.
const maxDigits = 8

// envoyHeader is Envoy's x-envoy-expected-rq-timeout-ms in canonical form.
const envoyHeader = "X-Envoy-Expected-Rq-Timeout-Ms"

// maxEnvoyDigits bounds the milliseconds FromEnvoyHeader accepts
// (9999999999 ms is about 115 days, far below time.Duration's range).
const maxEnvoyDigits = 10

// ErrSyntax is the sentinel every parse error wraps:
// errors.Is(err, deadline.ErrSyntax) tells a malformed budget from other
// errors.
var ErrSyntax = errors.New("deadline: invalid timeout")

// SyntaxError reports a malformed timeout value.
type SyntaxError struct {
	Value  string // the value as received (may be long; Error shortens it)
	Reason string // what is wrong, short enough to answer a client with: "empty", "more than 8 digits", …
}

// maxQuoted is how many bytes of a bad value Error quotes, so an attacker's
// megabyte header does not become a megabyte log line.
const maxQuoted = 32

// Error returns "deadline: bad timeout "VALUE": REASON", quoting at most the
// first 32 bytes of the value.
func (e *SyntaxError) Error() string {
	v := e.Value
	cut := ""
	if len(v) > maxQuoted {
		v, cut = v[:maxQuoted], "…"
	}
	return "deadline: bad timeout " + strconv.Quote(v) + cut + ": " + e.Reason
}

// Unwrap returns ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

func bad(value, reason string) error { return &SyntaxError{Value: value, Reason: reason} }

// unitNanos returns the length of one grpc-timeout unit, or 0 for a byte
// that is not a unit. Units are case-sensitive: M is minutes, m milliseconds.
func unitNanos(u byte) time.Duration {
	switch u {
	case 'H':
		return time.Hour
	case 'M':
		return time.Minute
	case 'S':
		return time.Second
	case 'm':
		return time.Millisecond
	case 'u':
		return time.Microsecond
	case 'n':
		return time.Nanosecond
	}
	return 0
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

// quoteByte renders one byte of input for an error reason: 'x' for a
// printable ASCII byte, an escape such as '\t' or '\xb5' otherwise (a byte,
// not a character, since the input need not be UTF-8).
func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRuneToASCII(rune(c))
	}
	return `'\x` + strconv.FormatUint(uint64(c)>>4, 16) + strconv.FormatUint(uint64(c)&15, 16) + `'`
}

// digitsReason returns why digits (the bytes before the unit, or a whole
// millisecond count) is not 1 to maxLen ASCII digits, or "" when it is.
func digitsReason(digits string, maxLen int) string {
	if digits == "" {
		return "no digits"
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '+' || c == '-':
			return "sign not allowed"
		case c == ' ' || c == '\t':
			return "space inside the value"
		default:
			return "invalid character " + quoteByte(c)
		}
	}
	if len(digits) > maxLen {
		return "more than " + strconv.Itoa(maxLen) + " digits"
	}
	return ""
}

// atoi converts a string of at most 18 ASCII digits, already checked.
func atoi(digits string) int64 {
	var v int64
	for i := 0; i < len(digits); i++ {
		v = v*10 + int64(digits[i]-'0')
	}
	return v
}

// ParseTimeout parses a budget in grpc-timeout syntax: 1 to 8 ASCII digits
// (leading zeros allowed) then one case-sensitive unit, H (hours), M
// (minutes), S (seconds), m (milliseconds), u (microseconds) or n
// (nanoseconds). Optional whitespace (spaces, tabs) around the value is
// ignored; none is allowed inside, nor a sign. Zero ("0S", "0n") is valid and
// means the budget is already spent: the request should be dropped at once.
//
// A value larger than time.Duration can hold (above 2562047H) saturates to
// the largest time.Duration, about 292 years, instead of wrapping.
//
// A malformed value returns 0 and a *SyntaxError wrapping ErrSyntax whose
// Reason says what is wrong ("empty", "missing unit", "unknown unit 'x'",
// "no digits", "sign not allowed", "more than 8 digits", …).
// ParseTimeout does not allocate unless it returns an error.
func ParseTimeout(s string) (time.Duration, error) {
	t := trimOWS(s)
	if t == "" {
		return 0, bad(s, "empty")
	}
	u := t[len(t)-1]
	unit := unitNanos(u)
	if unit == 0 {
		if u >= '0' && u <= '9' {
			return 0, bad(s, "missing unit")
		}
		return 0, bad(s, "unknown unit "+quoteByte(u))
	}
	digits := t[:len(t)-1]
	if r := digitsReason(digits, maxDigits); r != "" {
		return 0, bad(s, r)
	}
	v := atoi(digits)
	if v > math.MaxInt64/int64(unit) {
		return math.MaxInt64, nil
	}
	return time.Duration(v) * unit, nil
}

// units lists the grpc-timeout units from the finest to the coarsest.
var units = [...]struct {
	sym byte
	len time.Duration
}{
	{'n', time.Nanosecond},
	{'u', time.Microsecond},
	{'m', time.Millisecond},
	{'S', time.Second},
	{'M', time.Minute},
	{'H', time.Hour},
}

// encode returns d in the finest unit whose value, rounded down, is at most
// MaxValue. Every d fits: the largest time.Duration is 2562047H.
func encode(d time.Duration) (v int64, sym byte, unit time.Duration) {
	if d <= 0 {
		return 0, 'n', time.Nanosecond
	}
	for _, u := range units {
		if v = int64(d / u.len); v <= MaxValue {
			return v, u.sym, u.len
		}
	}
	panic("unreachable: a time.Duration fits in hours")
}

// AppendTimeout appends d to b in grpc-timeout syntax and returns the
// extended slice. It picks the finest unit (n, u, m, S, M, H) in which d fits
// in 8 digits, and rounds down to that unit: the callee is never told it has
// more time than the caller has, at the cost of losing less than one unit
// (relatively, less than 1 part in 10^5 once d no longer fits in nanoseconds).
// A d of zero or less appends "0n", a spent budget.
//
// AppendTimeout does not allocate when b has room for 9 more bytes.
func AppendTimeout(b []byte, d time.Duration) []byte {
	v, sym, _ := encode(d)
	b = strconv.AppendInt(b, v, 10)
	return append(b, sym)
}

// FormatTimeout returns d in grpc-timeout syntax, as AppendTimeout writes it.
func FormatTimeout(d time.Duration) string {
	var buf [maxDigits + 1]byte
	return string(AppendTimeout(buf[:0], d))
}

// single returns the one value of a header that must not repeat: ok=false
// when absent, an error "repeated" when it has several field lines or a
// comma-separated list.
func single(h http.Header, key string) (v string, ok bool, err error) {
	vs := h[key]
	switch {
	case len(vs) == 0:
		return "", false, nil
	case len(vs) > 1:
		return "", true, bad(strings.Join(vs, ", "), "repeated")
	case strings.IndexByte(vs[0], ',') >= 0:
		return "", true, bad(vs[0], "repeated")
	}
	return vs[0], true, nil
}

// FromHeader reads the caller's budget from h[HTTPHeader]. It returns ok=false
// and a nil error when the header is absent. A present value that is not
// valid grpc-timeout syntax (see ParseTimeout), including an empty one,
// returns ok=true and a *SyntaxError: the middleware answers 400 with its
// Reason, or ignores the header, as it is configured to.
//
// The header must appear once. Several field lines, or a comma-separated
// list in one line, are refused with the Reason "repeated" rather than
// resolved (by taking the smallest, say): two budgets for one request mean a
// confused or forging client, and guessing would hide it.
//
// h is read with its canonical key, as net/http stores incoming headers.
// FromHeader does not allocate unless it returns an error.
func FromHeader(h http.Header) (d time.Duration, ok bool, err error) {
	v, ok, err := single(h, HTTPHeader)
	if !ok || err != nil {
		return 0, ok, err
	}
	d, err = ParseTimeout(v)
	return d, true, err
}

// FromEnvoyHeader reads the budget Envoy's router puts in
// x-envoy-expected-rq-timeout-ms, so a service behind Envoy can honour it:
// a non-negative decimal integer of 1 to 10 digits, in milliseconds, with
// optional whitespace around it. Absence, repetition and errors are treated
// as in FromHeader; "0" is a spent budget.
func FromEnvoyHeader(h http.Header) (time.Duration, bool, error) {
	v, ok, err := single(h, envoyHeader)
	if !ok || err != nil {
		return 0, ok, err
	}
	t := trimOWS(v)
	if t == "" {
		return 0, true, bad(v, "empty")
	}
	if r := digitsReason(t, maxEnvoyDigits); r != "" {
		return 0, true, bad(v, r)
	}
	return time.Duration(atoi(t)) * time.Millisecond, true, nil
}

// Remaining returns the budget left in ctx at now: its deadline minus now,
// negative once the deadline has passed; ok=false (and 0) when ctx has no
// deadline. Pass a time from time.Now, whose monotonic reading makes the
// difference immune to wall-clock steps, or a fixed instant in tests.
func Remaining(ctx context.Context, now time.Time) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return dl.Sub(now), true
}

// SetHeader writes the budget left in ctx at now, less reserve, into
// h[HTTPHeader] of an outgoing request, replacing any value there. reserve is
// the time the caller keeps back for itself, such as the network round trip
// and the work it does after the call returns; 0 keeps nothing back and a
// negative reserve counts as 0, so the callee is never promised more than the
// caller has.
//
// When ctx has no deadline SetHeader removes the header and returns 0, false.
// Otherwise it returns the budget written, as the callee will parse it (that
// is, rounded down by AppendTimeout), and true. A budget already spent (at or
// below zero after the reserve) is written as "0n", so the callee drops the
// request at once instead of working for nobody. h must not be nil.
func SetHeader(h http.Header, ctx context.Context, now time.Time, reserve time.Duration) (time.Duration, bool) {
	rem, ok := Remaining(ctx, now)
	if !ok {
		delete(h, HTTPHeader)
		return 0, false
	}
	if reserve < 0 {
		reserve = 0
	}
	var d time.Duration
	if rem > reserve { // compare before subtracting: rem may be near MinInt64
		d = rem - reserve
	}
	v, sym, unit := encode(d)
	var buf [maxDigits + 1]byte
	b := append(strconv.AppendInt(buf[:0], v, 10), sym)
	h[HTTPHeader] = []string{string(b)}
	return time.Duration(v) * unit, true
}

// WithBudget returns a copy of ctx whose deadline is now+d, and its cancel
// function, which the caller must call when the work is done (as for
// context.WithDeadline, which it calls). A deadline already on ctx that is
// earlier stays in force: context never extends a parent's deadline, so a
// caller cannot buy more time than its own caller gave it. A d of zero or
// less returns a context that is already done with
// context.DeadlineExceeded. An overlarge d saturates (see time.Time.Add).
//
// now should be the instant the request arrived, read once at the edge with
// time.Now, so time spent before WithBudget is counted. The deadline is
// absolute; the context's own timer measures it against the real clock.
func WithBudget(ctx context.Context, now time.Time, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, now.Add(d))
}

// addSat returns a+b for non-negative a and b, saturating at the largest
// time.Duration instead of wrapping.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Feasible reports whether work that is expected to wait wait in a queue and
// then take service to run can finish within remaining: remaining > wait +
// service, strictly, so work that would finish exactly at the deadline is
// refused (its answer would arrive too late to use). A remaining of zero or
// less is never feasible. Negative estimates count as 0 and the sum
// saturates rather than wrapping. Feasible is a pure function.
func Feasible(remaining, wait, service time.Duration) bool {
	if remaining <= 0 {
		return false
	}
	return remaining > addSat(max(wait, 0), max(service, 0))
}
