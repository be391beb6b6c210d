// Package breaker is a circuit breaker: it stops calling a dependency that
// keeps failing, answers at once with ErrOpen instead, and after a while lets
// trial calls through to find out whether the dependency has recovered.
// Failing fast keeps the caller's threads, pool slots and memory free, so a
// dying dependency does not take its callers down with it (cascading
// failure), and the dependency gets room to recover (seed 003; Michael
// Nygard, "Release It!", 2007).
//
// A Breaker has three states:
//
//	CLOSED     calls pass and their outcomes are counted (see below). When
//	           the count says so, the breaker opens at the time of the
//	           report that tipped it.
//	OPEN       calls are rejected with ErrOpen, without touching the
//	           dependency, until the open time has passed since opening
//	           (now − openedAt >= open time). The first call after that
//	           moves the breaker to HALF_OPEN and is let through as a trial.
//	HALF_OPEN  Trials trial calls are let through per round (one by
//	           default; others are rejected with ErrOpen). Their outcome
//	           closes the breaker or opens it again at the time of the
//	           deciding report. With TrialsInARow, Trials successes close
//	           it and the first failed trial reopens it at once
//	           (gobreaker's rule).
//
// What CLOSED counts is Config.Window:
//
//   - Consecutive (the default, the seed's breaker): consecutive failures;
//     a success resets the count and Threshold failures in a row open the
//     breaker. The count is not reset when the breaker opens, and a failed
//     trial adds one to it (as the seed's reference does). In HALF_OPEN
//     the first trial to report decides.
//   - CountWindow: the outcomes of the last WindowCalls calls.
//   - TimeWindow: the outcomes of the calls reported in the last
//     WindowSeconds, in buckets of BucketSeconds aligned to the caller's
//     timeline (bucket k is [k, k+1) × BucketSeconds of now), not to when
//     the breaker closed.
//
// With a window the breaker opens when the window holds at least MinCalls
// calls and the failure rate (failed/calls) reaches FailureRate or the
// slow-call rate (calls that took SlowCall seconds or more from Allow to
// Done, failed or not, over calls) reaches SlowCallRate. In HALF_OPEN it
// waits for all Trials to report and closes if both of their rates are
// below the thresholds, opens again otherwise. The window is emptied when
// the breaker closes. This is resilience4j's model. docs/PEERS.md maps it
// and gobreaker's and failsafe-go's settings onto Config.
//
// The open time is Recovery the first time; with RecoveryMultiplier > 1
// each failed HALF_OPEN round multiplies it, up to MaxRecovery, until the
// breaker closes again.
//
// What counts as a failure is the caller's call: Done takes ok. HTTPFailure
// is the default rule for HTTP clients (transport errors, timeouts and 5xx
// but 501 are failures; 4xx never are).
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
// lost, and the next call starts a new round (their late reports are then
// discarded).
//
// For metrics, Counters reads cumulative counts without the lock and
// Collector exports them to Prometheus.
package breaker

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// ErrOpen is returned by Allow when the breaker is OPEN, or HALF_OPEN with
// every trial slot taken: the call must not be made.
var ErrOpen = errors.New("breaker: circuit open")

// State is a breaker state.
type State uint8

// The three states.
const (
	Closed State = iota
	Open
	HalfOpen
)

// numStates is the number of states, for tables indexed by State.
const numStates = 3

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

// Transition describes a state change, for Config.OnStateChange.
type Transition struct {
	From, To   State
	At         float64 // the now of the call that caused it, in seconds
	Generation uint64  // the generation that began with it
}

// Breaker is a circuit breaker. It is safe for concurrent use. Allow in
// CLOSED, Allow refusing while OPEN, and Done reporting a success while no
// consecutive failure is counted (Consecutive) read a few atomics and take
// no lock; Done, Cancel and the other Allow paths hold one mutex for a few
// comparisons (and, with a time window, the O(1) amortised bucket update),
// never while user code (OnStateChange) runs. Allow, Done and Cancel do not
// allocate. Memory is fixed at New: at most MaxWindowCalls bytes for a
// count window, 32 × MaxBuckets bytes for a time window.
type Breaker struct {
	// Read by every call, written rarely (under mu): with the immutable
	// fields, on cache lines of their own. word is gen<<2 | state.
	// openedAt and openFor are float64 bits, written only as the breaker
	// opens or closes, that is while it is CLOSED or HALF_OPEN: a reader
	// that loads word and finds OPEN, then loads openedAt and openFor, then
	// finds the same word again, has read the values of that OPEN period.
	// failures is the count of consecutive failures (Consecutive), read by
	// Done's lock-free success path.
	word     atomic.Uint64
	openedAt atomic.Uint64
	openFor  atomic.Uint64
	failures atomic.Int64

	// immutable after New
	kind        WindowKind
	threshold   int
	recovery    float64
	multiplier  float64
	maxRecovery float64 // +Inf when not capped
	trials      int
	inARow      bool // Config.TrialsInARow
	minCalls    int
	failureRate float64
	slowCall    float64 // 0: no call is slow
	slowRate    float64
	onChange    func(Transition)

	_ [64]byte // whatever the alignment, no line shared with the above

	// Written by every call. The outcome counters sit by the mutex: the
	// locked paths bump them while they own its cache line.
	mu         sync.Mutex
	successes  atomic.Uint64
	slowOK     atomic.Uint64
	failed     atomic.Uint64
	rejected   atomic.Uint64
	cancelled  atomic.Uint64
	state      State     // guarded by mu
	gen        uint64    // guarded by mu; incremented on every state change and lost round
	trialAt    float64   // guarded by mu; when the latest trial was allowed
	trialOut   int       // guarded by mu; trials allowed in this round
	probes     tally     // guarded by mu; this round's reported trials (windows)
	fromProbes bool      // guarded by mu; the last opening was decided by trials (windows)
	count      countRing // guarded by mu; CountWindow
	time       timeRing  // guarded by mu; TimeWindow

	transitions [numStates][numStates]atomic.Uint64 // changes by [from][to]
}

// New returns a CLOSED breaker, or a *ConfigError naming the bad field.
func New(c Config) (*Breaker, error) {
	c, err := c.resolve()
	if err != nil {
		return nil, err
	}
	b := &Breaker{
		kind: c.Window, threshold: c.Threshold, recovery: c.Recovery,
		multiplier: c.RecoveryMultiplier, maxRecovery: c.MaxRecovery, trials: c.Trials, inARow: c.TrialsInARow,
		minCalls: c.MinCalls, failureRate: c.FailureRate, slowCall: c.SlowCall, slowRate: c.SlowCallRate,
		onChange: c.OnStateChange,
	}
	if b.maxRecovery == 0 {
		b.maxRecovery = math.Inf(1)
	}
	switch c.Window {
	case CountWindow:
		b.count = newCountRing(c.WindowCalls)
	case TimeWindow:
		n, _ := c.buckets() // validated by resolve
		b.time = newTimeRing(c.BucketSeconds, n)
	}
	b.openFor.Store(math.Float64bits(b.recovery))
	return b, nil
}

// Ticket is the permission for one call, returned by Allow. Report the
// call's outcome with Done (or Cancel) on the same Ticket; later reports on
// it are ignored. A Ticket is not safe for concurrent use, and a copy does
// not share the "already reported" mark. The zero Ticket reports nothing.
type Ticket struct {
	b     *Breaker
	gen   uint64
	start float64 // the now of Allow, for the call's duration
	trial bool
	done  bool
}

// Allow asks whether a call may start at now (seconds). If so it returns a
// Ticket on which the outcome must be reported; if not it returns ErrOpen
// and a zero Ticket.
func (b *Breaker) Allow(now float64) (Ticket, error) {
	w := b.word.Load()
	switch State(w & 3) {
	case Closed:
		return Ticket{b: b, gen: w >> 2, start: now}, nil
	case Open:
		openedAt := math.Float64frombits(b.openedAt.Load())
		openFor := math.Float64frombits(b.openFor.Load())
		if !(now-openedAt >= openFor) && b.word.Load() == w { // NaN times are refused too
			b.rejected.Add(1)
			return Ticket{}, ErrOpen
		}
	}
	b.mu.Lock()
	t, tr, changed, err := b.allowLocked(now)
	b.mu.Unlock()
	if err != nil {
		b.rejected.Add(1)
	}
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
		return Ticket{b: b, gen: b.gen, start: now}, tr, false, nil
	case Open:
		if !(now-math.Float64frombits(b.openedAt.Load()) >= math.Float64frombits(b.openFor.Load())) {
			return Ticket{}, tr, false, ErrOpen
		}
		tr = b.setStateLocked(HalfOpen, now)
		b.trialOut = 0
		b.probes = tally{}
		changed = true
	}
	// HALF_OPEN.
	if b.trialOut >= b.trials {
		if !(now-b.trialAt >= b.recovery) {
			return Ticket{}, tr, changed, ErrOpen
		}
		// No trial has started for Recovery seconds and the round is not
		// decided: presume the trials out lost, start a new round and
		// discard their late reports.
		b.gen++
		b.publishLocked()
		b.trialOut = 0
		b.probes = tally{}
	}
	b.trialAt = now
	b.trialOut++
	return Ticket{b: b, gen: b.gen, start: now, trial: true}, tr, changed, nil
}

// Done reports the outcome of the Ticket's call at now (seconds): ok is
// true for a success. The call's duration is now minus the now of Allow.
// Only the first report on a Ticket counts, and it changes the breaker only
// if the breaker is still in the generation in which the call was allowed
// (Counters count it either way).
func (t *Ticket) Done(now float64, ok bool) {
	if t.b == nil || t.done {
		return
	}
	t.done = true
	b := t.b
	if ok && b.kind == Consecutive && !t.trial && b.failures.Load() == 0 {
		// The common case, without the lock: a success while no failure
		// is counted changes nothing. If the ticket's generation is the
		// current one the breaker is CLOSED (only trials are allowed in
		// HALF_OPEN) and the count stays 0; if not, the report would be
		// discarded.
		b.successes.Add(1)
		return
	}
	slow := b.slowCall > 0 && now-t.start >= b.slowCall
	b.mu.Lock()
	switch {
	case !ok:
		b.failed.Add(1)
	case slow:
		b.slowOK.Add(1)
	default:
		b.successes.Add(1)
	}
	var tr Transition
	changed := false
	if t.gen == b.gen {
		tr, changed = b.recordLocked(now, !ok, slow)
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
	b.cancelled.Add(1)
	b.mu.Lock()
	if t.gen == b.gen && t.trial && b.trialOut > 0 {
		b.trialOut--
	}
	b.mu.Unlock()
}

// recordLocked counts a report of the current generation: the counting
// policy. The state is the one in which the call was allowed (CLOSED or
// HALF_OPEN): OPEN allows no call, and every state change starts a new
// generation.
func (b *Breaker) recordLocked(now float64, fail, slow bool) (Transition, bool) {
	if b.state == HalfOpen && b.inARow {
		return b.trialInARowLocked(now, fail, slow)
	}
	if b.kind == Consecutive {
		if fail {
			return b.onFailureLocked(now)
		}
		return b.onSuccessLocked(now)
	}
	if b.state == HalfOpen {
		b.probes.add(fail, slow)
		switch {
		case b.probes.calls < b.trials:
			return Transition{}, false
		case b.tripped(b.probes):
			b.fromProbes = true
			return b.openLocked(now), true
		}
		return b.closeLocked(now), true
	}
	var t tally
	if b.kind == CountWindow {
		t = b.count.add(fail, slow)
	} else {
		t = b.time.add(now, fail, slow)
	}
	if t.calls >= b.minCalls && b.tripped(t) {
		b.fromProbes = false
		return b.openLocked(now), true
	}
	return Transition{}, false
}

// trialInARowLocked decides a trial's report with TrialsInARow: a failed
// or slow trial opens the breaker at once; the round's Trials-th success
// closes it. With Consecutive a failure still adds to the count and a
// success resets it.
func (b *Breaker) trialInARowLocked(now float64, fail, slow bool) (Transition, bool) {
	b.probes.add(fail, slow)
	if fail || slow {
		if b.kind == Consecutive {
			b.failures.Add(1)
		}
		b.fromProbes = true
		return b.openLocked(now), true
	}
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.probes.calls < b.trials {
		return Transition{}, false
	}
	return b.closeLocked(now), true
}

// tripped says whether t's failure rate or slow-call rate reaches its
// threshold; t.calls > 0.
func (b *Breaker) tripped(t tally) bool {
	n := float64(t.calls)
	return float64(t.failures)/n >= b.failureRate || (b.slowCall > 0 && float64(t.slow)/n >= b.slowRate)
}

// onSuccessLocked (Consecutive): a success resets the count; a trial's
// success closes.
func (b *Breaker) onSuccessLocked(now float64) (Transition, bool) {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.state == HalfOpen {
		return b.closeLocked(now), true
	}
	return Transition{}, false
}

// onFailureLocked (Consecutive): a failure adds to the count; a trial's
// failure, or the count reaching Threshold while CLOSED, opens the breaker.
func (b *Breaker) onFailureLocked(now float64) (Transition, bool) {
	n := b.failures.Add(1)
	if b.state == HalfOpen || n >= int64(b.threshold) {
		return b.openLocked(now), true
	}
	return Transition{}, false
}

// openLocked opens the breaker at now. Opening again from HALF_OPEN
// multiplies the open time (up to MaxRecovery).
func (b *Breaker) openLocked(now float64) Transition {
	if b.state == HalfOpen && b.multiplier != 1 {
		d := math.Float64frombits(b.openFor.Load())
		b.openFor.Store(math.Float64bits(math.Min(d*b.multiplier, b.maxRecovery)))
	}
	b.openedAt.Store(math.Float64bits(now))
	return b.setStateLocked(Open, now)
}

// closeLocked closes the breaker at now: the counts start afresh and the
// open time goes back to Recovery.
func (b *Breaker) closeLocked(now float64) Transition {
	b.failures.Store(0)
	b.count.reset()
	b.time.reset()
	b.openFor.Store(math.Float64bits(b.recovery))
	return b.setStateLocked(Closed, now)
}

func (b *Breaker) setStateLocked(s State, now float64) Transition {
	tr := Transition{From: b.state, To: s, At: now}
	b.transitions[b.state][s].Add(1)
	b.state = s
	b.gen++
	b.publishLocked()
	tr.Generation = b.gen
	return tr
}

// publishLocked makes the state and generation visible to Allow's
// lock-free path.
func (b *Breaker) publishLocked() { b.word.Store(b.gen<<2 | uint64(b.state)) }

// Snapshot is a consistent view of a breaker, for tests and diagnostics.
type Snapshot struct {
	State State
	// Failures: with Consecutive, the consecutive failures counted so far.
	// With a window, the failed calls among Calls.
	Failures int
	// Calls and Slow (windows only; zero with Consecutive) are the counts
	// the breaker decides on: in CLOSED the window as of its latest report
	// (a time window drops old buckets when a report arrives); in HALF_OPEN
	// the trials of this round reported so far; in OPEN whichever of the
	// two opened it.
	Calls, Slow int
	OpenedAt    float64 // when the breaker last opened (0 if never)
	OpenFor     float64 // the open time of the last (or next) opening, in seconds
	Generation  uint64  // number of state changes and lost-trial rounds so far
}

// Snapshot returns the breaker's current state. The state is the one the
// last call left: an OPEN breaker whose open time has passed still reads
// OPEN until a call arrives.
func (b *Breaker) Snapshot() Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Snapshot{
		State: b.state, OpenedAt: math.Float64frombits(b.openedAt.Load()),
		OpenFor: math.Float64frombits(b.openFor.Load()), Generation: b.gen,
	}
	var t tally
	switch {
	case b.kind == Consecutive:
		s.Failures = int(b.failures.Load())
		return s
	case b.state == HalfOpen || (b.state == Open && b.fromProbes):
		t = b.probes
	case b.kind == CountWindow:
		t = b.count.sum
	default:
		t = b.time.sum
	}
	s.Calls, s.Failures, s.Slow = t.calls, t.failures, t.slow
	return s
}

// Counters are a breaker's cumulative counts since New. Each reported call
// is counted once, by its first report, whatever its generation: the
// counts describe the dependency's answers, not only those the breaker
// acted on.
type Counters struct {
	State     State  // as the last call left it
	Successes uint64 // calls reported ok that were not slow
	Slow      uint64 // calls reported ok that were slow (failed slow calls are Failures)
	Failures  uint64 // calls reported failed, slow or not
	Rejected  uint64 // Allow calls answered ErrOpen
	Cancelled uint64 // tickets cancelled before any Done
	// Transitions counts state changes, indexed [From][To] by State (0
	// CLOSED, 1 OPEN, 2 HALF_OPEN). Only CLOSED→OPEN, OPEN→HALF_OPEN,
	// HALF_OPEN→CLOSED and HALF_OPEN→OPEN occur.
	Transitions [3][3]uint64
}

// Counters returns the breaker's counters, each read with one atomic load
// and no lock (so the set is not one instant's, but each is exact and
// monotonic). Safe for concurrent use with everything else.
func (b *Breaker) Counters() Counters {
	c := Counters{
		State:     State(b.word.Load() & 3),
		Successes: b.successes.Load(), Slow: b.slowOK.Load(), Failures: b.failed.Load(),
		Rejected: b.rejected.Load(), Cancelled: b.cancelled.Load(),
	}
	for i := range b.transitions {
		for j := range b.transitions[i] {
			c.Transitions[i][j] = b.transitions[i][j].Load()
		}
	}
	return c
}
