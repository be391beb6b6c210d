package admit

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// ErrConfig is the sentinel every configuration error wraps.
var ErrConfig = errors.New("admit: invalid configuration")

// ConfigError reports a bad configuration field.
type ConfigError struct {
	Field  string // the field, e.g. "Limiter"
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string { return "admit: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func badConfig(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }

// Config configures a Gate. Only Limiter is required.
type Config struct {
	// Name labels the Gate's metrics (the "gate" label); "" means "default".
	Name string

	// Limiter decides admission: its algorithm, class shares, wait queue
	// and fairness. Required.
	Limiter *limit.Limiter

	// Clock is where the Gate reads the time it passes to the Limiter and
	// the Dimmer; nil means clock.NewReal().
	Clock clock.Clock

	// DefaultClass is the class of a request that names none (no header
	// or metadata, no Classify answer): a name shed.ParseClass accepts.
	// "" means "default".
	DefaultClass string

	// IgnoreClassHeader makes the adapters ignore the class a caller sends
	// (shed.ClassHeader, gRPC metadata shed.ClassMetadataKey). Set it where
	// callers are not trusted — an internet-facing edge, where any client
	// could mark all its requests critical — and classify by route with
	// Classify instead. The class is still put in the request context and
	// forwarded downstream.
	IgnoreClassHeader bool

	// IgnoreDeadlineHeader makes the HTTP middleware ignore the caller's
	// budget (deadline.HTTPHeader). gRPC deadlines arrive as the context's
	// deadline and are always used.
	IgnoreDeadlineHeader bool

	// LenientHeaders makes the HTTP middleware ignore a malformed class or
	// deadline header instead of answering 400 with the reason.
	LenientHeaders bool

	// Dimmer, if set, decides per admitted request whether it may run
	// optional work (brownout.OptionalFrom in the handler) and learns from
	// every finished request's queue wait and latency.
	Dimmer *brownout.Dimmer

	// RetryAfter is the Retry-After, in whole seconds, of a refusal; 0
	// means 1. RetryJitter adds a uniformly drawn 0 to RetryJitter whole
	// seconds so refused clients do not come back in step; 0 means 2, a
	// negative value none.
	RetryAfter, RetryJitter int

	// ProblemBase, if not empty, prefixes the problem type URIs of refusal
	// bodies ("<ProblemBase>overloaded", "<ProblemBase>fair-share",
	// "<ProblemBase>deadline", "<ProblemBase>bad-header"); "" means
	// "about:blank" for all.
	ProblemBase string
}

// Gate admits requests into a limit.Limiter for the HTTP middleware and the
// gRPC interceptors, and turns the time it reads into the Limiter's
// timeline. A Gate is safe for concurrent use.
type Gate struct {
	name         string
	l            *limit.Limiter
	clk          clock.Clock
	defaultClass shed.Class
	cfg          Config
	dimmer       *brownout.Dimmer

	retryMin, retrySpan int
	resp                [limit.NumReasons]response // pre-built refusals, by reason
	retryVals           retryValues
	badHeaderType       string

	goodput [shed.MaxClasses]atomic.Uint64
	waitH   waitHistogram
}

// New returns a Gate, or a *ConfigError naming the bad field.
func New(cfg Config) (*Gate, error) {
	if cfg.Limiter == nil {
		return nil, badConfig("Limiter", "required")
	}
	g := &Gate{name: cfg.Name, l: cfg.Limiter, clk: cfg.Clock, cfg: cfg, dimmer: cfg.Dimmer}
	if g.name == "" {
		g.name = "default"
	}
	if g.clk == nil {
		g.clk = clock.NewReal()
	}
	dc := cfg.DefaultClass
	if dc == "" {
		dc = "default"
	}
	c, ok := shed.ParseClass(dc)
	if !ok {
		return nil, badConfig("DefaultClass", "unknown class "+strconv.Quote(dc))
	}
	g.defaultClass = c
	g.retryMin, g.retrySpan = cfg.RetryAfter, cfg.RetryJitter
	if g.retryMin == 0 {
		g.retryMin = 1
	}
	if g.retrySpan == 0 {
		g.retrySpan = 2
	}
	if g.retryMin < 0 || g.retryMin > 86400 {
		return nil, badConfig("RetryAfter", "must be in [0, 86400] seconds, got "+strconv.Itoa(cfg.RetryAfter))
	}
	if g.retrySpan < 0 {
		g.retrySpan = 0
	}
	if g.retrySpan > 3600 {
		return nil, badConfig("RetryJitter", "must be at most 3600 seconds, got "+strconv.Itoa(cfg.RetryJitter))
	}
	g.buildResponses()
	return g, nil
}

// Limiter returns the Gate's Limiter.
func (g *Gate) Limiter() *limit.Limiter { return g.l }

// Clock returns the Gate's clock.
func (g *Gate) Clock() clock.Clock { return g.clk }

// Dimmer returns the Gate's brownout dimmer, or nil.
func (g *Gate) Dimmer() *brownout.Dimmer { return g.dimmer }

// DefaultClass returns the class of a request that names none.
func (g *Gate) DefaultClass() shed.Class { return g.defaultClass }

// TrustClass reports whether adapters take the class a caller sends.
func (g *Gate) TrustClass() bool { return !g.cfg.IgnoreClassHeader }

// RetryAfterSeconds draws the Retry-After of one refusal, in whole seconds:
// RetryAfter plus a uniform draw in [0, RetryJitter]. gRPC adapters send it
// as pushback.
func (g *Gate) RetryAfterSeconds() int {
	if g.retrySpan == 0 {
		return g.retryMin
	}
	return g.retryMin + rand.IntN(g.retrySpan+1)
}

// Deadline converts a context deadline into the Limiter's timeline at now,
// the instant read from the Gate's clock: now + the time left before dl,
// read from the wall clock once. ok is false when ctx has no deadline.
func (g *Gate) Deadline(ctx context.Context, now float64) (at float64, ok bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	// A deadline that passed before the clock's epoch would come out ≤ 0,
	// which limit.Request reads as "no deadline": keep it positive (and
	// long passed).
	return math.Max(now+time.Until(dl).Seconds(), math.SmallestNonzeroFloat64), true
}

// Enter asks for a place for r at now (from g.Clock()), waiting in the
// Limiter's queue if it has one, until a place is granted, the request is
// refused, MaxWait passes or ctx ends. r.Deadline, if set, is on the
// Limiter's timeline (see Deadline).
//
// A request that cannot meet its deadline given the current queue wait
// (r.Deadline ≤ now + QueueWait) is refused with limit.ReasonDeadline
// before any work. On admission Enter returns the ticket to end with Exit —
// slot itself on the fast path (fill nothing in it: Enter does), the
// queued waiter's ticket otherwise — and how long the request waited, in
// seconds. The fast path does not allocate; a queued request allocates its
// Waiter and a timer.
func (g *Gate) Enter(ctx context.Context, now float64, r limit.Request, slot *limit.Ticket) (t *limit.Ticket, wait float64, why limit.Reason) {
	if r.Deadline > 0 && r.Deadline <= now+g.l.QueueWait() {
		why = limit.ReasonDeadline
		g.l.Refused(r.Class, why)
		return nil, 0, why
	}
	if *slot, why = g.l.Admit(now, r); why == limit.Admitted {
		return slot, 0, why
	}
	if why != limit.ReasonLimit || !g.l.Queueing() {
		return nil, 0, why
	}
	w := limit.NewWaiter()
	if why = g.l.Enqueue(now, r, w); why != limit.Admitted {
		return nil, 0, why
	}
	maxWait := g.l.MaxWait()
	if r.Deadline > 0 {
		maxWait = math.Min(maxWait, r.Deadline-now)
	}
	timer := time.NewTimer(clock.Duration(maxWait))
	defer timer.Stop()
	select {
	case <-w.Ready():
	case <-ctx.Done():
		reason := limit.ReasonCancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = limit.ReasonDeadline
		}
		if g.l.Cancel(w, g.clk.Now(), reason) {
			return nil, 0, reason
		}
		<-w.Ready() // a grant or refusal won the race: it has been sent
	case <-timer.C:
		reason := limit.ReasonExpired
		if r.Deadline > 0 && r.Deadline-now < g.l.MaxWait() {
			reason = limit.ReasonDeadline
		}
		if g.l.Cancel(w, g.clk.Now(), reason) {
			return nil, 0, reason
		}
		<-w.Ready() // a grant or refusal won the race: it has been sent
	}
	if why = w.Reason(); why != limit.Admitted {
		return nil, 0, why
	}
	wait = g.clk.Now() - now
	g.waitH.observe(wait)
	if ctx.Err() != nil { // granted as the caller left: give the place back
		w.Ticket().Done(g.clk.Now(), limit.Ignore)
		return nil, 0, limit.ReasonCancelled
	}
	return w.Ticket(), wait, limit.Admitted
}

// Exit ends an admitted request: the ticket gets outcome o at the current
// time, the Dimmer learns its wait and latency (start is the now passed to
// Enter), and a Success of class c counts as goodput.
func (g *Gate) Exit(t *limit.Ticket, start, wait float64, o limit.Outcome) {
	now := g.clk.Now()
	t.Done(now, o)
	if o == limit.Success {
		g.goodput[classIndex(t.Class())].Add(1)
	}
	if g.dimmer != nil {
		g.dimmer.Observe(now, wait, now-start)
	}
}

// Optional draws the brownout decision for a request admitted at now: true
// (full service) without a Dimmer.
func (g *Gate) Optional(now float64) bool {
	if g.dimmer == nil {
		return true
	}
	return g.dimmer.Optional(now, rand.Float64())
}

// Goodput returns the number of requests of class c that ended in Success.
func (g *Gate) Goodput(c shed.Class) uint64 { return g.goodput[classIndex(c)].Load() }

func classIndex(c shed.Class) int {
	if int(c) >= shed.MaxClasses {
		return shed.MaxClasses - 1
	}
	return int(c)
}
