// Package breaker is a circuit breaker: it stops calling a dependency that
// keeps failing, answers at once with ErrOpen instead, and after a while lets
// a trial call through to find out whether the dependency has recovered.
// Failing fast keeps the caller's threads, pool slots and memory free, so a
// dying dependency does not take its callers down with it (cascading
// failure), and the dependency gets room to recover (seed 003; Michael
// Nygard, "Release It!", 2007).
//
// A Breaker has three states:
//
//	CLOSED     calls pass; consecutive failures are counted and a success
//	           resets the count. When the count reaches Threshold the
//	           breaker opens at the time of that failure.
//	OPEN       calls are rejected with ErrOpen, without touching the
//	           dependency, until Recovery seconds have passed since opening
//	           (now − openedAt >= Recovery). The first call after that moves
//	           the breaker to HALF_OPEN and is let through as a trial.
//	HALF_OPEN  at most Trials trial calls are out at once (one by default;
//	           others are rejected with ErrOpen). A trial's success closes
//	           the breaker and resets the count; its failure opens it again
//	           at the time of the failure.
//
// The failure count is not reset when the breaker opens, and a failed trial
// adds one to it (as the seed's reference does); Snapshot exposes it.
//
// The API has two steps, so that code that cannot wrap a function — a proxy
// forwarding a request, a stream — can use it: Allow(now) asks for
// permission and returns a Ticket; the caller makes the call and reports the
// outcome with Ticket.Done(now, ok), or Ticket.Cancel() when the call did not
// test the dependency (the client went away). Done is idempotent: a second
// report is ignored. Every state change starts a new generation, and a
// report from a call that began in an earlier generation is discarded (after
// the breaker opened, the stragglers that were already in flight must not
// count again; idea from sony/gobreaker's two-step breaker).
//
// Time is a parameter: now is seconds on the caller's monotonic timeline;
// the breaker never reads a clock. A trial whose outcome is never reported
// would hold HALF_OPEN forever, so when every trial slot is taken and the
// latest trial started Recovery seconds ago, the trials out are presumed
// lost, and the next call becomes a new trial (their late reports are then
// discarded).
//
// Extension points, kept in one place each: the counting policy lives in
// onFailureLocked/onSuccessLocked (a failure-rate window or a slow-call rate
// would replace them), the open time in openLocked (a growing open time
// would compute it there), and the trial policy in allowLocked.
package breaker

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// ErrOpen is returned by Allow when the breaker is OPEN, or HALF_OPEN with
// every trial slot taken: the call must not be made.
var ErrOpen = errors.New("breaker: circuit open")

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("breaker: invalid configuration")

// State is a breaker state.
type State uint8

// The three states.
const (
	Closed State = iota
	Open
	HalfOpen
)

// String returns the state's name as the seed writes it: CLOSED, OPEN or
// HALF_OPEN.
func (s State) String() string {
	switch s {
	case Closed:
		return "CLOSED"
	case Open:
		return "OPEN"
	case HalfOpen:
		return "HALF_OPEN"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Defaults used for zero Config fields: the seed reference's breaker.
const (
	DefaultThreshold = 3 // consecutive failures
	DefaultRecovery  = 5 // seconds
	DefaultTrials    = 1 // concurrent trial calls
)

// Transition describes a state change, for Config.OnStateChange.
type Transition struct {
	From, To   State
	At         float64 // the now of the call that caused it, in seconds
	Generation uint64  // the generation that began with it
}

// Config configures a Breaker. The zero value is the seed's breaker:
// 3 consecutive failures open it for 5 seconds, then one trial call.
type Config struct {
	// Threshold is the number of consecutive failures that opens the
	// breaker. Zero means DefaultThreshold; negative is invalid.
	Threshold int
	// Recovery is how long the breaker stays OPEN before a trial, in
	// seconds; also how long a trial may stay unreported before its slot is
	// presumed lost. Zero means DefaultRecovery; negative, NaN or infinite
	// is invalid.
	Recovery float64
	// Trials is the most trial calls out at once in HALF_OPEN. Zero means
	// DefaultTrials; negative is invalid. The first trial to report decides.
	Trials int
	// OnStateChange, if not nil, is called after every state change, outside
	// the breaker's lock, on the goroutine whose Allow or Done caused it. It
	// may call the breaker. Calls from different goroutines may run
	// concurrently and arrive out of order; order them by Generation.
	OnStateChange func(Transition)
}

// Validate reports the first invalid field, wrapped around ErrConfig.
func (c Config) Validate() error {
	switch {
	case c.Threshold < 0:
		return fmt.Errorf("%w: Config.Threshold = %d, want >= 0 (0 means %d)", ErrConfig, c.Threshold, DefaultThreshold)
	case math.IsNaN(c.Recovery) || math.IsInf(c.Recovery, 0) || c.Recovery < 0:
		return fmt.Errorf("%w: Config.Recovery = %v seconds, want a finite number >= 0 (0 means %v)", ErrConfig, c.Recovery, DefaultRecovery)
	case c.Trials < 0:
		return fmt.Errorf("%w: Config.Trials = %d, want >= 0 (0 means %d)", ErrConfig, c.Trials, DefaultTrials)
	}
	return nil
}

// Breaker is a consecutive-failures circuit breaker. It is safe for
// concurrent use: one mutex guards the state, held for a few comparisons in
// Allow and Done and never while user code (OnStateChange) runs. Allow and
// Done do not allocate.
type Breaker struct {
	// immutable after New
	threshold int
	recovery  float64
	trials    int
	onChange  func(Transition)

	mu       sync.Mutex
	state    State   // guarded by mu
	gen      uint64  // guarded by mu; incremented on every state change
	failures int     // guarded by mu; consecutive failures
	openedAt float64 // guarded by mu; when the breaker last opened
	trialAt  float64 // guarded by mu; when the latest trial was allowed
	trialOut int     // guarded by mu; trials allowed in this round
}

// New returns a CLOSED breaker, or an error naming the bad field.
func New(c Config) (*Breaker, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Recovery == 0 {
		c.Recovery = DefaultRecovery
	}
	if c.Trials == 0 {
		c.Trials = DefaultTrials
	}
	return &Breaker{threshold: c.Threshold, recovery: c.Recovery, trials: c.Trials, onChange: c.OnStateChange}, nil
}

// Ticket is the permission for one call, returned by Allow. Report the
// call's outcome with Done (or Cancel) on the same Ticket; later reports on
// it are ignored. A Ticket is not safe for concurrent use, and a copy does
// not share the "already reported" mark. The zero Ticket reports nothing.
type Ticket struct {
	b     *Breaker
	gen   uint64
	trial bool
	done  bool
}

// Allow asks whether a call may start at now (seconds). If so it returns a
// Ticket on which the outcome must be reported; if not it returns ErrOpen
// and a zero Ticket.
func (b *Breaker) Allow(now float64) (Ticket, error) {
	b.mu.Lock()
	t, tr, changed, err := b.allowLocked(now)
	b.mu.Unlock()
	if changed && b.onChange != nil {
		b.onChange(tr)
	}
	return t, err
}

// allowLocked decides a call at now; tr and changed describe a state change
// the decision made.
func (b *Breaker) allowLocked(now float64) (t Ticket, tr Transition, changed bool, err error) {
	switch b.state {
	case Closed:
		return Ticket{b: b, gen: b.gen}, tr, false, nil
	case Open:
		if !(now-b.openedAt >= b.recovery) { // NaN times are refused too
			return Ticket{}, tr, false, ErrOpen
		}
		tr = b.setStateLocked(HalfOpen, now)
		b.trialOut = 0
		changed = true
	}
	// HALF_OPEN.
	if b.trialOut >= b.trials {
		if !(now-b.trialAt >= b.recovery) {
			return Ticket{}, tr, changed, ErrOpen
		}
		// No trial has started for Recovery seconds and none has
		// reported: presume them lost, start a new round and discard their
		// late reports.
		b.gen++
		b.trialOut = 0
	}
	b.trialAt = now
	b.trialOut++
	return Ticket{b: b, gen: b.gen, trial: true}, tr, changed, nil
}

// Done reports the outcome of the Ticket's call at now (seconds): ok is
// true for a success. Only the first report on a Ticket counts, and only if
// the breaker is still in the generation in which the call was allowed.
func (t *Ticket) Done(now float64, ok bool) {
	if t.b == nil || t.done {
		return
	}
	t.done = true
	b := t.b
	b.mu.Lock()
	var tr Transition
	changed := false
	if t.gen == b.gen {
		if ok {
			tr, changed = b.onSuccessLocked(now)
		} else {
			tr, changed = b.onFailureLocked(now)
		}
	}
	b.mu.Unlock()
	if changed && b.onChange != nil {
		b.onChange(tr)
	}
}

// Cancel reports that the Ticket's call said nothing about the dependency
// (for example, the client gave up before the dependency answered). It
// counts neither as success nor as failure; a trial's slot is given back.
// Like Done, it acts only once per Ticket, and not at all after Done.
func (t *Ticket) Cancel() {
	if t.b == nil || t.done {
		return
	}
	t.done = true
	b := t.b
	b.mu.Lock()
	if t.gen == b.gen && t.trial && b.trialOut > 0 {
		b.trialOut--
	}
	b.mu.Unlock()
}

// onSuccessLocked: a success resets the count; a trial's success closes.
func (b *Breaker) onSuccessLocked(now float64) (Transition, bool) {
	b.failures = 0
	if b.state == HalfOpen {
		return b.setStateLocked(Closed, now), true
	}
	return Transition{}, false
}

// onFailureLocked: a failure adds to the count; a trial's failure, or the
// count reaching Threshold while CLOSED, opens the breaker.
func (b *Breaker) onFailureLocked(now float64) (Transition, bool) {
	b.failures++
	if b.state == HalfOpen || b.failures >= b.threshold {
		return b.openLocked(now), true
	}
	return Transition{}, false
}

// openLocked opens the breaker at now.
func (b *Breaker) openLocked(now float64) Transition {
	b.openedAt = now
	return b.setStateLocked(Open, now)
}

func (b *Breaker) setStateLocked(s State, now float64) Transition {
	tr := Transition{From: b.state, To: s, At: now}
	b.state = s
	b.gen++
	tr.Generation = b.gen
	return tr
}

// Snapshot is a consistent view of a breaker, for metrics and tests.
type Snapshot struct {
	State      State
	Failures   int     // consecutive failures counted so far
	OpenedAt   float64 // when the breaker last opened (0 if never)
	Generation uint64  // number of state changes and lost-trial rounds so far
}

// Snapshot returns the breaker's current state. The state is the one the
// last call left: an OPEN breaker whose Recovery has passed still reads OPEN
// until a call arrives.
func (b *Breaker) Snapshot() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Snapshot{State: b.state, Failures: b.failures, OpenedAt: b.openedAt, Generation: b.gen}
}
