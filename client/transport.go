package client

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/deadline"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/throttle"
)

// ErrConfig is the sentinel every configuration error wraps.
var ErrConfig = errors.New("client: invalid configuration")

// Reason says which layer refused a call locally, without sending it.
type Reason uint8

const (
	// Throttled: client-side adaptive throttling dropped the call (the
	// backend has been rejecting most calls recently).
	Throttled Reason = iota + 1
	// BreakerOpen: the circuit breaker is open.
	BreakerOpen
	// BulkheadFull: the dependency's concurrency pool was full and the
	// call could not wait (or waited too long) for a place.
	BulkheadFull
)

// String returns the reason's metric label: "throttled", "breaker_open",
// "bulkhead_full".
func (r Reason) String() string {
	switch r {
	case Throttled:
		return "throttled"
	case BreakerOpen:
		return "breaker_open"
	case BulkheadFull:
		return "bulkhead_full"
	}
	return "reason " + strconv.Itoa(int(r))
}

// Error is returned by RoundTrip for a call refused locally: nothing was
// sent (for the attempt that was refused). errors.Is(err, breaker.ErrOpen)
// holds for BreakerOpen.
type Error struct {
	Reason Reason
	// Attempts is the number of attempts sent before this refusal.
	Attempts int
}

func (e *Error) Error() string {
	return "client: call refused locally (" + e.Reason.String() + ") after " + strconv.Itoa(e.Attempts) + " attempts sent"
}

// Unwrap returns breaker.ErrOpen for BreakerOpen, nil otherwise.
func (e *Error) Unwrap() error {
	if e.Reason == BreakerOpen {
		return breaker.ErrOpen
	}
	return nil
}

// Pre-built local refusals per reason and attempts sent (the common
// counts), so refusing allocates nothing.
var refusals = func() (r [4][4]*Error) {
	for reason := range r {
		for n := range r[reason] {
			r[reason][n] = &Error{Reason: Reason(reason), Attempts: n}
		}
	}
	return r
}()

func refusal(reason Reason, attempts int) error {
	if attempts < len(refusals[reason]) {
		return refusals[reason][attempts]
	}
	return &Error{Reason: reason, Attempts: attempts}
}

// Config configures a Transport. Every layer is optional: the zero Config
// (with a Transport) only forwards class and deadline headers.
type Config struct {
	// Transport sends each attempt; nil means http.DefaultTransport. Put a
	// balancing RoundTripper here so that every attempt, retries included,
	// picks an endpoint afresh.
	Transport http.RoundTripper

	// Clock is where the Transport reads time for the policies; nil means
	// clock.NewReal().
	Clock clock.Clock

	// Throttle, if set, drops calls locally with the probability Google's
	// SRE formula gives (p = max(0, (requests − K·accepts)/(requests+1)))
	// once the backend has been rejecting calls. An accept is an answer
	// other than 429 and 503 (and a transport error).
	Throttle *throttle.Throttle

	// Retry, if set, retries failed attempts (Retryable) by its Policy:
	// attempts cap, backoff with jitter, the budget, Retry-After (never
	// earlier than the server asked), the context's deadline (no retry that
	// cannot finish: the expected attempt time is a moving average of past
	// attempts).
	Retry *retry.Policy

	// Retryable decides whether a failed attempt may be retried (if its
	// request is replayable and the Policy agrees); nil means
	// DefaultRetryable.
	Retryable func(resp *http.Response, err error) bool

	// RetryNonIdempotent allows retrying requests that are not idempotent
	// (POST, PATCH without an Idempotency-Key). Off by default: a retried
	// POST may do its work twice.
	RetryNonIdempotent bool

	// Breaker, if set, is asked before every attempt and told its outcome.
	Breaker *breaker.Breaker

	// Failure decides whether an attempt counts as a failure for the
	// breaker; nil means breaker.HTTPFailure on the status and error (a
	// transport error, a timeout — the caller's deadline passing included —
	// or a 5xx other than 501), except that an attempt the caller cancelled
	// reports nothing: it says nothing of the dependency.
	Failure func(resp *http.Response, err error) bool

	// Bulkhead, if set, bounds the calls in flight to the dependency: a
	// Gate over a fixed limit (NewBulkhead), with an optional bounded wait.
	// A place is held from the attempt's start until its response body is
	// closed (or read to the end).
	Bulkhead *admit.Gate

	// Hedge, if set, races up to MaxHedges copies of a replayable attempt
	// that has not answered within the Hedger's delay (by default the p95
	// of recent latencies), each paid from the Hedger's budget — give it the
	// retry Policy's Budget so hedges and retries share one ratio. The
	// first good answer wins; the others are cancelled.
	Hedge *retry.Hedger

	// DeadlineReserve is kept back from the remaining budget forwarded in
	// the Spillway-Timeout header (network time to the callee and back).
	DeadlineReserve time.Duration
}

// DefaultRetryable retries transport errors that are not the caller's
// context ending, and the answers that say "try again": 502, 503, 504, and
// 429 when it carries Retry-After.
func DefaultRetryable(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusTooManyRequests:
		return resp.Header.Get("Retry-After") != ""
	}
	return false
}

// NewBulkhead returns a Gate to use as Config.Bulkhead: at most n calls in
// flight, and, with maxWait > 0, a FIFO wait of at most maxWait for a place
// (the queue holds at most 1024 waiters per class).
func NewBulkhead(n int, maxWait time.Duration) (*admit.Gate, error) {
	alg, err := limit.NewFixed(n)
	if err != nil {
		return nil, err
	}
	cfg := limit.LimiterConfig{Shares: []float64{1}}
	if maxWait > 0 {
		cfg.Queue = limit.QueueConfig{Discipline: limit.FIFO, MaxWait: maxWait.Seconds()}
	}
	l, err := limit.NewLimiter(alg, cfg)
	if err != nil {
		return nil, err
	}
	return admit.New(admit.Config{Name: "bulkhead", Limiter: l, DefaultClass: "critical"})
}

// Transport is an http.RoundTripper that makes calls to one dependency
// survive its failures without making them worse. Per call, in this order:
//
//  1. Throttle: drop the call locally while the backend rejects most calls.
//     It comes first because it is the cheapest answer and must see every
//     call the application makes.
//  2. Retry loop (Policy: attempts, backoff, budget, Retry-After, deadline),
//     around each attempt:
//  3. Breaker: refuse the attempt while the dependency is known to be
//     failing. Inside the retry loop, so each attempt asks it and a retry
//     never hammers an open circuit: a refused attempt costs the
//     dependency nothing, and is retried after the backoff (when the
//     Policy allows), by which time the breaker may let a trial through.
//  4. Bulkhead: hold one of the dependency's places for the attempt.
//     Inside the breaker, so waiting for a place (or being refused one) is
//     not counted as the dependency failing.
//  5. Transport: send, with the class (Spillway-Criticality) and the
//     remaining budget (Spillway-Timeout) of the caller's context. When the
//     transport balances (balancerhttp.Transport), a call that may be
//     retried or hedged carries a balancer.Tried, so each retry goes to an
//     endpoint the call has not tried yet.
//
// Responses that end a call are returned as they are (a 503 after the last
// retry is the caller's 503); a locally refused call returns *Error.
// Transport is safe for concurrent use.
type Transport struct {
	next      http.RoundTripper
	clk       clock.Clock
	throttle  *throttle.Throttle
	policy    *retry.Policy
	retryable func(*http.Response, error) bool
	anyMethod bool
	breaker   *breaker.Breaker
	failure   func(*http.Response, error) bool
	bulkhead  *admit.Gate
	hedger    *retry.Hedger
	reserve   time.Duration
	tried     bool // next avoids the endpoints a call has tried (balancer.Tried)

	counters Counters
}

// New returns a Transport.
func New(cfg Config) (*Transport, error) {
	if cfg.DeadlineReserve < 0 {
		return nil, errors.Join(ErrConfig, errors.New("client: DeadlineReserve must not be negative"))
	}
	t := &Transport{
		next: cfg.Transport, clk: cfg.Clock, throttle: cfg.Throttle, policy: cfg.Retry,
		retryable: cfg.Retryable, anyMethod: cfg.RetryNonIdempotent, breaker: cfg.Breaker,
		failure: cfg.Failure, bulkhead: cfg.Bulkhead, hedger: cfg.Hedge, reserve: cfg.DeadlineReserve,
	}
	if t.next == nil {
		t.next = http.DefaultTransport
	}
	if a, ok := t.next.(interface{ AvoidsTried() bool }); ok {
		t.tried = a.AvoidsTried()
	}
	if t.clk == nil {
		t.clk = clock.NewReal()
	}
	if t.retryable == nil {
		t.retryable = DefaultRetryable
	}
	return t, nil
}

// replayable reports whether req may be sent again: its method is
// idempotent (or non-idempotent retries are allowed) and its body, if any,
// can be produced again.
func (t *Transport) replayable(req *http.Request) bool {
	if !t.anyMethod && !retry.Idempotent(req.Method, req.Header) {
		return false
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	now := t.clk.Now()
	if t.throttle != nil && !t.throttle.Allow(now, rand.Float64()) {
		t.counters.Refused()
		return nil, refusal(Throttled, 0)
	}
	replayable := t.replayable(req)
	canRetry := t.policy != nil && replayable
	if t.policy != nil {
		t.policy.RecordRequest(now)
	}
	if t.tried && (canRetry || (t.hedger != nil && replayable)) {
		// Let the balancer send retries and hedges to other endpoints.
		ctx, _ = balancer.WithTried(ctx)
		req = req.WithContext(ctx)
	}
	a := retry.Attempt{N: 1, After: -1}
	sent := 0 // attempts that reached the dependency
	for {
		r := req
		if a.N > 1 {
			r = req.Clone(ctx)
			if req.Body != nil && req.Body != http.NoBody {
				body, err := req.GetBody() // replayable: GetBody is set
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		var resp *http.Response
		var err error
		if t.hedger != nil && replayable {
			resp, err = t.hedged(ctx, r, a.N, now)
		} else {
			resp, err = t.attempt(ctx, r, a.N, now)
		}
		local, isLocal := err.(*Error) // attempt returns *Error unwrapped
		if !isLocal {
			sent++
		}
		switch {
		case isLocal && (local.Reason != BreakerOpen || !canRetry):
			return nil, refusal(local.Reason, sent)
		case isLocal:
			// An open breaker: try again after the backoff, by which time
			// it may let a trial through; the attempts cap, the deadline and
			// the budget still apply.
			err = refusal(BreakerOpen, sent)
			a.Unsent = true
		case !canRetry || !t.retryable(resp, err):
			return resp, err
		}
		a.Now = t.clk.Now()
		a.After, a.NoRetry = -1, false
		if !isLocal {
			a.Unsent = false
		}
		if resp != nil {
			if d, ok := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				a.After = d.Seconds()
			}
		}
		a.Deadline = 0
		if dl, ok := ctx.Deadline(); ok {
			a.Deadline = math.Max(a.Now+time.Until(dl).Seconds(), math.SmallestNonzeroFloat64)
		}
		a.Expected = t.counters.Expected()
		delay, v := t.policy.Next(a, nil)
		if v != retry.Retry {
			t.counters.Stopped(v)
			return resp, err
		}
		if resp != nil { // let the connection be reused
			_, _ = io.CopyN(io.Discard, resp.Body, 4096)
			resp.Body.Close()
		}
		t.counters.Retried()
		if delay > 0 {
			timer := time.NewTimer(clock.Duration(delay))
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return nil, ctx.Err()
			}
		}
		a.Prev = delay
		a.N++
		now = t.clk.Now()
	}
}

// attempt sends one attempt, starting at now, through the breaker and the
// bulkhead.
func (t *Transport) attempt(ctx context.Context, req *http.Request, n int, now float64) (*http.Response, error) {
	var bt breaker.Ticket
	if t.breaker != nil {
		var err error
		if bt, err = t.breaker.Allow(now); err != nil {
			t.counters.Refused()
			return nil, refusal(BreakerOpen, 0)
		}
	}
	var rb *releaseBody // holds the bulkhead place (one allocation)
	var place *limit.Ticket
	if t.bulkhead != nil {
		var why limit.Reason
		rb = &releaseBody{g: t.bulkhead, start: now}
		place, _, why = t.bulkhead.Enter(ctx, now, limit.Request{Class: shed.Critical}, &rb.slot)
		if why != limit.Admitted {
			bt.Cancel()
			t.counters.Refused()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, refusal(BulkheadFull, 0)
		}
	}
	req = t.forward(ctx, req, n)
	t.counters.Sent()
	resp, err := t.next.RoundTrip(req)
	end := t.clk.Now()
	if err == nil {
		t.counters.Observe(end - now)
		if t.hedger != nil {
			t.hedger.Record(end, end-now)
		}
	}
	failed := false
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		// The caller gave up (or a hedge lost): says nothing of the
		// dependency. A deadline that passed does: it was too slow.
		bt.Cancel()
	default:
		if t.failure != nil {
			failed = t.failure(resp, err)
		} else {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			failed = breaker.HTTPFailure(status, err)
		}
		bt.Done(end, !failed)
	}
	if t.throttle != nil {
		t.throttle.Record(end, err == nil && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable)
	}
	if place != nil {
		o := limit.Success
		if failed {
			o = limit.Dropped
		}
		rb.t, rb.o = place, o
		if err != nil || resp.Body == nil || resp.Body == http.NoBody {
			rb.release()
		} else {
			rb.ReadCloser = resp.Body
			resp.Body = rb
		}
	}
	return resp, err
}

// forward returns req carrying the class and remaining budget of ctx, a
// shallow copy when there is anything to add (the caller's request is never
// modified).
func (t *Transport) forward(ctx context.Context, req *http.Request, n int) *http.Request {
	_, hasClass := shed.ClassFrom(ctx)
	_, hasDeadline := ctx.Deadline()
	if !hasClass && !hasDeadline {
		return req
	}
	if n == 1 { // later attempts are clones already
		r := *req
		r.Header = req.Header.Clone()
		if r.Header == nil {
			r.Header = make(http.Header)
		}
		req = &r
	}
	if hasClass {
		shed.SetClassHeader(req.Header, ctx)
	}
	if hasDeadline {
		deadline.SetHeader(req.Header, ctx, time.Now(), t.reserve)
	}
	return req
}

// Stats returns the Transport's counters.
func (t *Transport) Stats() Stats { return t.counters.Stats() }

// releaseBody gives the bulkhead place back when the body is closed or
// read to its end, once.
type releaseBody struct {
	io.ReadCloser
	g     *admit.Gate
	slot  limit.Ticket  // the place, when admitted at once
	t     *limit.Ticket // the place held: &slot, or a queued waiter's
	start float64
	o     limit.Outcome
	done  atomic.Bool
}

func (b *releaseBody) release() {
	if b.done.CompareAndSwap(false, true) {
		b.g.Exit(b.t, b.start, 0, b.o)
	}
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
