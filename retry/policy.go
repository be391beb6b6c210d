package retry

import (
	"fmt"
	"math"
	"net/http"
)

// DefaultMaxAttempts is the number of attempts, the first included, that a
// Policy with MaxAttempts 0 allows: the first attempt and two retries.
const DefaultMaxAttempts = 3

// maxServerDelaySeconds bounds Attempt.After, in seconds (MaxServerDelay).
const maxServerDelaySeconds = float64(maxServerSeconds)

// Policy decides, after a failed attempt, whether a call is tried again and
// after how long. It is transport-neutral: which failures are retryable
// (status codes, gRPC codes, errors), whether the request is idempotent (see
// Idempotent) and how the request is replayed (http.Request.GetBody) are the
// adapter's business; the Policy only sees an Attempt.
//
// The zero value is usable: DefaultMaxAttempts attempts, the zero Backoff
// (full jitter, DefaultBase, DefaultCap) and no Budget. A Policy is not
// modified by its methods and is safe for concurrent use once built; the
// Budget it points to is itself safe for concurrent use.
type Policy struct {
	// MaxAttempts is the largest number of attempts of one call, the first
	// included: 1 never retries. Zero means DefaultMaxAttempts; negative is
	// invalid (Next treats it as 1).
	MaxAttempts int
	// Backoff is the delay schedule between attempts.
	Backoff Backoff
	// Budget, when not nil, must pay for every retry (and every hedge; see
	// Hedger). Share one Budget among all the calls a client makes to one
	// dependency, and call RecordRequest for each new call. Nil means
	// retries are limited by MaxAttempts only.
	Budget *Budget
}

// Validate reports the first invalid field, wrapped around ErrConfig and
// naming it ("Policy.MaxAttempts", "Backoff.Cap", …).
func (p *Policy) Validate() error {
	if p.MaxAttempts < 0 {
		return fmt.Errorf("%w: Policy.MaxAttempts = %d, want >= 1 (0 means %d)", ErrConfig, p.MaxAttempts, DefaultMaxAttempts)
	}
	return p.Backoff.Validate()
}

// NewPolicy returns a copy of p after checking it with Validate, or nil and
// the error.
func NewPolicy(p Policy) (*Policy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// RecordRequest tells the Budget, if any, that a new call starts at now
// (seconds): call it once per call, before or at its first attempt, never
// for a retry or a hedge.
func (p *Policy) RecordRequest(now float64) {
	if p.Budget != nil {
		p.Budget.RecordRequest(now)
	}
}

// Attempt describes a call whose latest attempt has just failed, for
// Policy.Next. All times are float64 seconds on the caller's monotonic
// timeline (see package clock).
type Attempt struct {
	// N is the number of attempts made so far: 1 after the first attempt
	// failed. It is also the exponent Backoff.Delay uses.
	N int
	// Now is the current time, in seconds.
	Now float64
	// Prev is the delay Next returned before the latest attempt (0 before
	// the first retry), in seconds. Only DecorrelatedJitter reads it.
	Prev float64
	// Deadline is the call's absolute deadline, in seconds on the same
	// timeline as Now. 0 (or NaN) means the call has none.
	Deadline float64
	// Expected is how long one attempt is expected to take, in seconds (for
	// example a smoothed latency of successful attempts). 0, negative or NaN
	// means unknown and counts as 0.
	Expected float64
	// After is the least delay the server asked for, in seconds (from
	// Retry-After or a gRPC pushback; ParseRetryAfter and ParsePushback
	// return a time.Duration, whose Seconds method gives it). Negative or
	// NaN means the server asked for none; above MaxServerDelay (or +Inf)
	// counts as MaxServerDelay.
	After float64
	// NoRetry reports that the server said not to retry this call (a gRPC
	// pushback that was negative or malformed; see ParsePushback).
	NoRetry bool
	// Unsent reports that the failed attempt never reached the dependency
	// (a circuit breaker refused it locally): retrying it adds no load, so
	// the retry is not paid from the Budget. Attempts, deadline and the
	// server's delay still apply.
	Unsent bool
}

// Verdict is Policy.Next's decision.
type Verdict uint8

const (
	// Retry: try again after the delay Next returned.
	Retry Verdict = iota
	// StopAttempts: the call has made MaxAttempts attempts.
	StopAttempts
	// StopBudget: the Budget refused to pay for the retry.
	StopBudget
	// StopDeadline: the retry could not finish before the call's deadline.
	StopDeadline
	// StopServer: the server said not to retry (Attempt.NoRetry).
	StopServer
)

// String returns a short lower-case name fit for a metric label: "retry",
// "attempts", "budget", "deadline" or "server".
func (v Verdict) String() string {
	switch v {
	case Retry:
		return "retry"
	case StopAttempts:
		return "attempts"
	case StopBudget:
		return "budget"
	case StopDeadline:
		return "deadline"
	case StopServer:
		return "server"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Next decides whether the call described by a may be tried again, and
// returns the delay in seconds before the retry (0 unless v is Retry). The
// rules apply in this order; the first that stops the call gives the
// verdict:
//
//  1. a.NoRetry → StopServer.
//  2. a.N ≥ MaxAttempts → StopAttempts.
//  3. delay = max(Backoff.Delay(a.N, a.Prev, r), a.After): never earlier
//     than the server asked.
//  4. With a deadline, the retry must finish strictly before it:
//     a.Now + delay + a.Expected < a.Deadline, else StopDeadline (as in
//     deadline.Feasible, an answer arriving exactly at the deadline is
//     already too late).
//  5. With a Budget, Budget.TryRetry(a.Now) must pay for it, else
//     StopBudget — unless a.Unsent (the failed attempt added no load). The
//     budget is asked last, so a retry refused for another reason does not
//     spend a token.
//
// A server's delay replaces a shorter backoff but does not reset the
// schedule: the next retry's backoff still grows with N, where gRPC
// clients restart from the initial backoff after a pushback, so later
// waits here tend to be longer than theirs.
//
// Next draws at most one number from r (none when it stops before rule 3,
// or for NoJitter); a nil r means math/rand/v2. Apart from the Budget's
// token it changes nothing, and it does not allocate.
func (p *Policy) Next(a Attempt, r Rand) (delay float64, v Verdict) {
	if a.NoRetry {
		return 0, StopServer
	}
	maxAttempts := p.MaxAttempts
	switch {
	case maxAttempts == 0:
		maxAttempts = DefaultMaxAttempts
	case maxAttempts < 0:
		maxAttempts = 1
	}
	if a.N >= maxAttempts {
		return 0, StopAttempts
	}
	delay = p.Backoff.Delay(a.N, a.Prev, r)
	if a.After > delay { // false for NaN and for "none" (negative)
		delay = math.Min(a.After, maxServerDelaySeconds)
	}
	if a.Deadline != 0 && !math.IsNaN(a.Deadline) {
		expected := a.Expected
		if !(expected > 0) {
			expected = 0
		}
		if !(a.Now+delay+expected < a.Deadline) {
			return 0, StopDeadline
		}
	}
	if p.Budget != nil && !a.Unsent && !p.Budget.TryRetry(a.Now) {
		return 0, StopBudget
	}
	return delay, Retry
}

// Idempotent reports whether a request may be retried by default: its
// method is idempotent (RFC 9110, section 9.2.2: GET, HEAD, OPTIONS, TRACE,
// PUT, DELETE; the empty method, which net/http sends as GET, counts as
// GET), or it carries a non-empty Idempotency-Key (or X-Idempotency-Key, as
// net/http's Transport also honours) header, by which the client promises
// that the server deduplicates it. POST, PATCH, CONNECT and any other method
// without such a key are not retried.
//
// Methods are case-sensitive, as in HTTP: "get" is not GET. header is read
// with canonical keys, as net/http stores them; it may be nil. Idempotent
// does not allocate and is safe for concurrent use.
func Idempotent(method string, header http.Header) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	for _, key := range [...]string{"Idempotency-Key", "X-Idempotency-Key"} {
		if vs := header[key]; len(vs) > 0 && vs[0] != "" {
			return true
		}
	}
	return false
}
