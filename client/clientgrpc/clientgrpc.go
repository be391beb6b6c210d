package clientgrpc

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/throttle"
)

// ErrConfig is the sentinel every configuration error wraps:
// errors.Is(err, clientgrpc.ErrConfig) tells a bad Config from other errors.
var ErrConfig = errors.New("clientgrpc: invalid configuration")

// ConfigError reports a bad Config field.
type ConfigError struct {
	Field  string // the field, e.g. "Retry"
	Reason string // what is wrong with it
}

// Error names the field and what is wrong with it.
func (e *ConfigError) Error() string { return "clientgrpc: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// Error is a call refused locally, without being sent (for the attempt that
// was refused). It is a gRPC status error: status.Code(err) and
// status.FromError(err) see its code, Unavailable for client.Throttled and
// client.BreakerOpen, ResourceExhausted for client.BulkheadFull, and its
// message names the reason (client.Reason.String). errors.Is(err,
// breaker.ErrOpen) holds for BreakerOpen.
//
// The interceptors return shared, pre-built values: treat them as read-only.
type Error struct {
	Reason client.Reason
	// Attempts is the number of attempts sent before this refusal.
	Attempts int

	st  *status.Status // built once; nil in an Error made by hand
	msg string         // st.Err().Error()
}

// Error returns the text a status error with the same code and message
// would: "rpc error: code = … desc = clientgrpc: call refused locally (…)".
func (e *Error) Error() string {
	if e.st == nil {
		return e.GRPCStatus().Err().Error()
	}
	return e.msg
}

// GRPCStatus returns the refusal's status, for package status.
func (e *Error) GRPCStatus() *status.Status {
	if e.st != nil {
		return e.st
	}
	return newRefusalStatus(e.Reason, e.Attempts)
}

// Unwrap returns breaker.ErrOpen for BreakerOpen, nil otherwise.
func (e *Error) Unwrap() error {
	if e.Reason == client.BreakerOpen {
		return breaker.ErrOpen
	}
	return nil
}

func newRefusalStatus(r client.Reason, attempts int) *status.Status {
	code := codes.Unavailable
	if r == client.BulkheadFull {
		code = codes.ResourceExhausted
	}
	return status.New(code, "clientgrpc: call refused locally ("+r.String()+") after "+strconv.Itoa(attempts)+" attempts sent")
}

func newRefusal(r client.Reason, attempts int) *Error {
	st := newRefusalStatus(r, attempts)
	return &Error{Reason: r, Attempts: attempts, st: st, msg: st.Err().Error()}
}

// Pre-built local refusals per reason and attempts sent (the common
// counts), so refusing allocates nothing.
var refusals = func() (r [4][4]*Error) {
	for reason := 1; reason < len(r); reason++ {
		for n := range r[reason] {
			r[reason][n] = newRefusal(client.Reason(reason), n)
		}
	}
	return r
}()

func refusal(reason client.Reason, attempts int) error {
	if attempts < len(refusals[reason]) {
		return refusals[reason][attempts]
	}
	return newRefusal(reason, attempts)
}

// classNames are the metadata values of the classes, made once.
var classNames = func() (n [shed.MaxClasses]string) {
	for c := range n {
		n[c] = shed.Class(c).String()
	}
	return n
}()

// Config configures the interceptors; it mirrors client.Config. Every layer
// is optional: the zero Config only forwards the class.
type Config struct {
	// Clock is where the interceptors read time for the policies; nil
	// means clock.NewReal().
	Clock clock.Clock

	// Throttle, if set, drops calls and streams locally with the
	// probability Google's SRE formula gives once the backend has been
	// refusing calls. An accept is an answer whose code is neither
	// ResourceExhausted nor Unavailable.
	Throttle *throttle.Throttle

	// Retry, if set, retries failed unary calls (Retryable) of the methods
	// that may be retried (Idempotent, RetryNonIdempotent) by its Policy:
	// attempts cap, backoff with jitter, the budget, the server's pushback
	// (never earlier than asked, never when told not to), the context's
	// deadline (no retry that cannot finish: the expected attempt time is a
	// moving average of past successful attempts). Streams are not retried.
	Retry *retry.Policy

	// Retryable decides whether a failed attempt may be retried; nil means
	// DefaultRetryable, and then also a ResourceExhausted answer whose
	// trailer carries a non-negative pushback (the server said when to come
	// back). It must be safe for concurrent use.
	Retryable func(err error) bool

	// Breaker, if set, is asked before every attempt (and stream) and told
	// its outcome. A stream's outcome is its final status, reported when it
	// ends, and its duration is the stream's: give long-lived streams a
	// breaker without SlowCall.
	Breaker *breaker.Breaker

	// Failure decides whether an attempt's error counts as a failure for
	// the breaker; nil means DefaultFailure. An attempt ended by the
	// caller's own context (cancelled, or its deadline passed) reports
	// nothing: it says nothing of the dependency. It must be safe for
	// concurrent use.
	Failure func(err error) bool

	// Bulkhead, if set, bounds the calls in flight to the dependency: a
	// Gate over a fixed limit (client.NewBulkhead), with an optional bounded
	// wait. A unary attempt holds a place while it runs; a stream holds one
	// from its start until it ends (see Interceptors.Stream).
	Bulkhead *admit.Gate

	// RetryNonIdempotent allows retrying every method. Off by default: a
	// retried call may do its work twice.
	RetryNonIdempotent bool

	// Idempotent reports whether a method ("/package.Service/Method") may
	// be sent again. nil means no method may (unless RetryNonIdempotent).
	// It is called once per unary call when Retry is set, and must be safe
	// for concurrent use.
	Idempotent func(fullMethod string) bool
}

// DefaultRetryable retries codes.Unavailable, the code that says "try
// again" (the server is overloaded, shutting down, or was unreachable),
// unless err is the caller's own context ending. Every other code is not
// retried: the interceptor, with Config.Retryable nil, also retries
// ResourceExhausted when the server sent a pushback, which
// DefaultRetryable cannot see. It does not allocate for status errors.
func DefaultRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return status.Code(err) == codes.Unavailable
}

// DefaultFailure is the default rule for what an attempt's error tells the
// breaker about the dependency:
//
//   - Unavailable, DeadlineExceeded, Internal, Unknown, DataLoss → true:
//     the dependency is failing or too slow (an error that is not a status
//     error has code Unknown);
//   - ResourceExhausted → true: the dependency is overloaded;
//   - nil (OK) and the codes that say the call itself was wrong or
//     unwelcome (Canceled, InvalidArgument, NotFound, AlreadyExists,
//     PermissionDenied, Unauthenticated, FailedPrecondition, Aborted,
//     OutOfRange, Unimplemented) → false, as are codes outside 0–16.
//
// A DeadlineExceeded caused by the caller's own context never reaches it:
// the interceptors report nothing to the breaker then. It is a pure
// function, safe for concurrent use, and does not allocate for status
// errors.
func DefaultFailure(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.DataLoss, codes.ResourceExhausted:
		return true
	}
	return false
}

// Interceptors are the unary and stream client interceptors for one
// dependency. Make them with New; they are safe for concurrent use.
type Interceptors struct {
	clk        clock.Clock
	throttle   *throttle.Throttle
	policy     *retry.Policy
	retryable  func(error) bool // nil: DefaultRetryable plus pushback
	breaker    *breaker.Breaker
	failure    func(error) bool
	bulkhead   *admit.Gate
	anyMethod  bool
	idempotent func(string) bool

	counters client.Counters
}

// New returns the interceptors, or a *ConfigError (wrapping ErrConfig)
// when Retry is not a valid retry.Policy.
func New(cfg Config) (*Interceptors, error) {
	if cfg.Retry != nil {
		if err := cfg.Retry.Validate(); err != nil {
			return nil, &ConfigError{Field: "Retry", Reason: err.Error()}
		}
	}
	ic := &Interceptors{
		clk: cfg.Clock, throttle: cfg.Throttle, policy: cfg.Retry, retryable: cfg.Retryable,
		breaker: cfg.Breaker, failure: cfg.Failure, bulkhead: cfg.Bulkhead,
		anyMethod: cfg.RetryNonIdempotent, idempotent: cfg.Idempotent,
	}
	if ic.clk == nil {
		ic.clk = clock.NewReal()
	}
	if ic.failure == nil {
		ic.failure = DefaultFailure
	}
	return ic, nil
}

// Stats returns the counters since New, in client.Stats: attempts and
// streams sent, retries decided, calls or attempts refused locally, and
// retries not made by retry.Verdict.
func (ic *Interceptors) Stats() client.Stats { return ic.counters.Stats() }

// Unary returns the unary client interceptor. Per call, in this order:
//
//  1. Throttle.Allow: refused → the pre-built *Error client.Throttled
//     (Unavailable), nothing sent.
//  2. The class of the context (shed.ClassFrom), if any, joins the
//     outgoing metadata as shed.ClassMetadataKey, unless already there.
//  3. Retry.RecordRequest, then for each attempt: Breaker.Allow (refused →
//     *Error client.BreakerOpen, Unavailable), Bulkhead place (refused →
//     *Error client.BulkheadFull, ResourceExhausted; the context's error
//     as a status if it ended while waiting), the call with its trailer
//     captured, then the outcome to the breaker, the throttle and the
//     bulkhead.
//  4. A failed attempt of a retryable method (Config.Idempotent) that
//     Retryable accepts is retried if Policy.Next agrees, after its delay
//     (or the context's end, which ends the call with the context's error
//     as a status). A breaker refusal is retried the same way without
//     spending the budget (retry.Attempt.Unsent); other local refusals are
//     not retried. The last attempt's error is returned as it is.
//
// On the success path it allocates nothing of its own when the context
// carries no class (forwarding one allocates gRPC's metadata copy).
func (ic *Interceptors) Unary() grpc.UnaryClientInterceptor { return ic.unary }

func (ic *Interceptors) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	now := ic.clk.Now()
	if ic.throttle != nil && !ic.throttle.Allow(now, rand.Float64()) {
		ic.counters.Refused()
		return refusal(client.Throttled, 0)
	}
	ctx = forwardClass(ctx)
	if ic.policy == nil {
		return ic.attempt(ctx, now, method, req, reply, cc, invoker, opts)
	}
	ic.policy.RecordRequest(now)
	if !ic.anyMethod && (ic.idempotent == nil || !ic.idempotent(method)) {
		return ic.attempt(ctx, now, method, req, reply, cc, invoker, opts)
	}
	co := callOptsPool.Get().(*callOpts)
	defer co.release()
	a := retry.Attempt{N: 1, After: -1}
	sent := 0 // attempts that reached the dependency
	for {
		err := ic.attempt(ctx, now, method, req, reply, cc, invoker, co.with(opts))
		if err == nil {
			return nil
		}
		a.After, a.NoRetry, a.Unsent = -1, false, false
		local, isLocal := err.(*Error) // attempt returns refusals unwrapped
		if !isLocal {
			sent++
		}
		if isLocal {
			if local.Reason != client.BreakerOpen {
				return refusal(local.Reason, sent)
			}
			// An open breaker: try again after the backoff, by which time
			// it may let a trial through; it cost the server nothing, so
			// the budget does not pay (as client.Transport does).
			err, a.Unsent = refusal(client.BreakerOpen, sent), true
		} else {
			pushback := false
			if v := co.md[retry.PushbackKey]; len(v) > 0 {
				if d, again, ok := retry.ParsePushback(v[0]); ok {
					a.After, a.NoRetry, pushback = d.Seconds(), !again, again
				}
			}
			if ctx.Err() != nil || !ic.canRetry(err, pushback) {
				return err
			}
		}
		a.Now = ic.clk.Now()
		a.Deadline = 0
		if dl, ok := ctx.Deadline(); ok {
			a.Deadline = math.Max(a.Now+time.Until(dl).Seconds(), math.SmallestNonzeroFloat64)
		}
		a.Expected = ic.counters.Expected()
		delay, v := ic.policy.Next(a, nil)
		if v != retry.Retry {
			ic.counters.Stopped(v)
			return err
		}
		ic.counters.Retried()
		if delay > 0 {
			timer := time.NewTimer(clock.Duration(delay))
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		a.Prev = delay
		a.N++
		now = ic.clk.Now()
	}
}

// canRetry applies Retryable, or the default rule.
func (ic *Interceptors) canRetry(err error, pushback bool) bool {
	if ic.retryable != nil {
		return ic.retryable(err)
	}
	return DefaultRetryable(err) || (pushback && status.Code(err) == codes.ResourceExhausted)
}

// attempt sends one attempt, starting at now, through the breaker and the
// bulkhead. A local refusal is returned as the pre-built *Error for 0
// attempts.
func (ic *Interceptors) attempt(ctx context.Context, now float64, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) (err error) {
	var bt breaker.Ticket
	if ic.breaker != nil {
		var berr error
		if bt, berr = ic.breaker.Allow(now); berr != nil {
			ic.counters.Refused()
			return refusal(client.BreakerOpen, 0)
		}
	}
	var slot limit.Ticket
	var place *limit.Ticket
	if ic.bulkhead != nil {
		var why limit.Reason
		place, _, why = ic.bulkhead.Enter(ctx, now, limit.Request{Class: shed.Critical}, &slot)
		if why != limit.Admitted {
			bt.Cancel()
			ic.counters.Refused()
			if cerr := ctx.Err(); cerr != nil {
				return status.FromContextError(cerr).Err()
			}
			return refusal(client.BulkheadFull, 0)
		}
	}
	// A panicking invoker still gives the place and the ticket back.
	o := limit.Ignore
	defer func() {
		bt.Cancel() // no-op once Done was called
		if place != nil {
			ic.bulkhead.Exit(place, now, 0, o)
		}
	}()
	ic.counters.Sent()
	err = invoker(ctx, method, req, reply, cc, opts...)
	end := ic.clk.Now()
	o = ic.breakerOutcome(ctx, &bt, end, err)
	if ic.throttle != nil {
		ic.throttle.Record(end, accepted(err))
	}
	if err == nil {
		ic.counters.Observe(end - now)
	}
	return err
}

// breakerOutcome reports how an attempt or a stream ended (err nil for OK)
// to the breaker, and returns the bulkhead outcome: Ignore when the caller
// cancelled it (which says nothing of the dependency: the ticket is
// cancelled), Dropped for a failure — the caller's deadline passing
// included: the dependency was too slow — Success otherwise.
func (ic *Interceptors) breakerOutcome(ctx context.Context, bt *breaker.Ticket, end float64, err error) limit.Outcome {
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		bt.Cancel()
		return limit.Ignore
	case ic.failure(err):
		bt.Done(end, false)
		return limit.Dropped
	}
	bt.Done(end, true)
	return limit.Success
}

// accepted reports whether an answer counts as an accept for the throttle:
// any code but ResourceExhausted and Unavailable.
func accepted(err error) bool {
	if err == nil {
		return true
	}
	c := status.Code(err)
	return c != codes.ResourceExhausted && c != codes.Unavailable
}

// forwardClass returns ctx with the class it carries in its outgoing
// metadata, unless it carries none or the metadata has one already. A class
// at or above shed.MaxClasses is sent as the least important one a callee
// can configure, as shed.SetClassHeader does.
func forwardClass(ctx context.Context) context.Context {
	c, ok := shed.ClassFrom(ctx)
	if !ok || len(metadata.ValueFromOutgoingContext(ctx, shed.ClassMetadataKey)) > 0 {
		return ctx
	}
	if c >= shed.MaxClasses {
		c = shed.MaxClasses - 1
	}
	return metadata.AppendToOutgoingContext(ctx, shed.ClassMetadataKey, classNames[c])
}

// maxPooledOpts bounds the CallOption slice a pooled callOpts keeps: one
// used for more options is dropped rather than pooled.
const maxPooledOpts = 32

// callOpts is one retryable call's CallOptions with grpc.Trailer appended,
// and the trailer it captures. Pooled, so a retryable call allocates
// nothing; this relies on the invoker having applied its CallOptions (gRPC
// writes the trailer) by the time it returns, as gRPC's own does.
type callOpts struct {
	md   metadata.MD
	opt  grpc.CallOption // grpc.Trailer(&md), made once
	opts []grpc.CallOption
}

var callOptsPool = sync.Pool{New: func() any {
	c := &callOpts{}
	c.opt = grpc.Trailer(&c.md)
	return c
}}

// with returns opts followed by the trailer option, forgetting the previous
// attempt's trailer.
func (c *callOpts) with(opts []grpc.CallOption) []grpc.CallOption {
	c.md = nil
	c.opts = append(append(c.opts[:0], opts...), c.opt)
	return c.opts
}

// release clears c and returns it to the pool.
func (c *callOpts) release() {
	c.md = nil
	clear(c.opts)
	if cap(c.opts) > maxPooledOpts {
		return
	}
	c.opts = c.opts[:0]
	callOptsPool.Put(c)
}
