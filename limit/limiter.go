package limit

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/spillwayhq/spillway/shed"
)

// DefaultShares are the class shares a LimiterConfig with nil Shares uses:
// Critical may fill the whole limit, Default 90% of it, Sheddable half.
// Under overload Sheddable is refused first (once half the limit is in
// flight), then Default, and the last 10% of the places are Critical's.
var DefaultShares = [3]float64{1.0, 0.9, 0.5}

// LimiterConfig configures a Limiter. The zero value uses DefaultShares.
type LimiterConfig struct {
	// Shares holds, per class (shed.Critical first), the share of the
	// algorithm's limit that class may fill: a request of class c is
	// admitted while the requests in flight, over all classes, are fewer
	// than floor(Shares[c] × limit), and at least 1 for the first class so
	// the server never refuses everything. Each share is in (0, 1] and no
	// share exceeds the one before it, so a less important class is always
	// refused first. len(Shares) is the number of classes, 1 to
	// shed.MaxClasses; a class beyond them is treated as the last one.
	// nil means DefaultShares (critical 1.0, default 0.9, sheddable 0.5).
	Shares []float64

	// Queue configures the wait queue for requests that find their class's
	// share full; the zero value refuses them at once.
	Queue QueueConfig

	// Fairness configures per-client fairness; the zero value is off.
	Fairness FairnessConfig
}

// Outcome is how an admitted request ended, reported with Ticket.Done.
type Outcome uint8

const (
	// Success: the request was served; its RTT is fed to the algorithm.
	Success Outcome = iota
	// Dropped: the request failed by overload (a timeout, a rejection or
	// error downstream the caller counts as overload); the algorithm gets a
	// sample with Dropped set and shrinks its limit.
	Dropped
	// Ignore: the request says nothing about the server's capacity (the
	// client cancelled, a validation error); its place is released and no
	// sample is fed. An Outcome value not listed here is treated as Ignore.
	Ignore
)

// String returns "success", "dropped", "ignore", or "outcome N".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Dropped:
		return "dropped"
	case Ignore:
		return "ignore"
	}
	return "outcome " + strconv.Itoa(int(o))
}

// classCounter is one class's counters, padded to its own cache line so
// classes admitted on different cores do not contend.
type classCounter struct {
	admitted atomic.Uint64
	queued   atomic.Uint64
	rejects  [NumReasons]atomic.Uint64
	_        [64 - (2+NumReasons)*8%64]byte
}

// Limiter enforces an Algorithm's concurrency limit with criticality
// classes. Acquire admits a request while fewer than its class's share of
// the limit are in flight and refuses it at once otherwise (no waiting, no
// queue); the admitted request's Ticket.Done releases its place and feeds
// its outcome to the algorithm as a Sample (Now = the Done instant,
// RTT = Done instant − Acquire instant, InFlight = the count in flight just
// after its admission, itself included).
//
// A Limiter is safe for concurrent use by any number of goroutines.
// Admission is lock-free (a shed.ClassLimiter: one atomic counter changed by
// compare-and-swap, so the in-flight count never exceeds the limit of the
// most permissive class). The algorithm is not safe for concurrent use, so
// Done calls its Update under one mutex, mu; when Update returns a limit
// different from the one applied, the class limits are recomputed and
// published with ClassLimiter.SetLimits under the same mutex, so limits are
// applied in the order the algorithm produced them. Acquire never takes the
// lock. The Algorithm must not be used by anything else once given to
// NewLimiter. Neither Acquire nor Done allocates.
type Limiter struct {
	cl      *shed.ClassLimiter // immutable pointer; safe for concurrent use
	shares  [shed.MaxClasses]float64
	classes int // immutable: len(shares in use)

	counts [shed.MaxClasses]classCounter

	limit atomic.Int64 // the limit last applied, for Limit()

	mu      sync.Mutex
	alg     Algorithm            // guarded by mu
	applied int                  // guarded by mu: the limit the class limits were computed from
	scratch [shed.MaxClasses]int // guarded by mu: class limits handed to SetLimits
	srtt    float64              // guarded by mu: smoothed RTT of successes
	pinned  int                  // guarded by mu: the limit Pin set (0: the algorithm's)

	srttBits atomic.Uint64 // srtt, for lock-free readers
	qcap     atomic.Int64  // per-class queue bound K (0 without a queue)

	// The wait queue (see QueueConfig); unused with Reject.
	qcfg      QueueConfig // immutable
	qmu       sync.Mutex
	queues    [shed.MaxClasses]*shed.Queue[*Waiter] // guarded by qmu
	codels    [shed.MaxClasses]*shed.CoDel          // guarded by qmu; nil unless CoDel
	queued    atomic.Int64                          // entries in all queues, cancelled ones included
	abandoned atomic.Int64                          // cancelled entries not yet removed
	waitBits  atomic.Uint64                         // moving average of granted waiters' waits

	// Fairness (see FairnessConfig); fair is nil when off.
	fcfg     FairnessConfig // immutable
	fair     []atomic.Int64 // places in flight per client slot
	fairMask uint64
	active   atomic.Int64 // slots holding places
}

// NewLimiter returns a Limiter enforcing alg's limit with cfg's classes, or
// a *ConfigError naming the bad field (wrapping ErrConfig). alg must not be
// nil and must not be used elsewhere afterwards.
func NewLimiter(alg Algorithm, cfg LimiterConfig) (*Limiter, error) {
	if alg == nil {
		return nil, badConfig("alg", "must not be nil")
	}
	shares := cfg.Shares
	if shares == nil {
		shares = DefaultShares[:]
	}
	if len(shares) == 0 || len(shares) > shed.MaxClasses {
		return nil, badConfig("Shares", "need 1 to "+strconv.Itoa(shed.MaxClasses)+" classes, got "+strconv.Itoa(len(shares)))
	}
	q, f := cfg.Queue, cfg.Fairness
	if q.Discipline != Reject {
		q.defaults()
	}
	f.defaults()
	if err := q.validate(); err != nil {
		return nil, err
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	l := &Limiter{alg: alg, classes: len(shares), qcfg: q, fcfg: f}
	for c, s := range shares {
		field := "Shares[" + strconv.Itoa(c) + "]"
		if math.IsNaN(s) || s <= 0 || s > 1 {
			return nil, badConfig(field, "must be in (0, 1], got "+ftoa(s))
		}
		if c > 0 && s > shares[c-1] {
			return nil, badConfig(field, "must not exceed the share of the more important class before it")
		}
		l.shares[c] = s
	}
	n := alg.Limit()
	l.fillLocked(n) // not yet shared: no lock needed
	cl, err := shed.NewClassLimiter(shed.ClassConfig{Limits: l.scratch[:l.classes]})
	if err != nil { // cannot happen: fillLocked keeps the shed rules
		return nil, badConfig("Shares", err.Error())
	}
	l.cl = cl
	l.applied = n
	l.limit.Store(int64(n))
	if q.Discipline != Reject {
		qc := shed.QueueConfig{Capacity: q.MaxQueue, Order: shed.FIFO, MaxWait: q.MaxWait}
		if q.Discipline == AdaptiveLIFO {
			qc.Order, qc.StandingWait = shed.AdaptiveLIFO, q.StandingWait
		}
		for c := 0; c < l.classes; c++ {
			if l.queues[c], err = shed.NewQueue[*Waiter](qc); err != nil {
				return nil, badConfig("Queue", err.Error())
			}
			if q.Discipline == CoDel {
				cd, err := shed.NewCoDel(shed.CoDelConfig{Target: q.Target, Interval: q.Interval, Law: shed.RFC8289})
				if err != nil {
					return nil, badConfig("Queue", err.Error())
				}
				l.codels[c] = cd
			}
		}
		l.qcap.Store(int64(q.MaxQueue))
	}
	if f.Slots > 0 {
		slots := 1
		for slots < f.Slots {
			slots <<= 1
		}
		l.fair = make([]atomic.Int64, slots)
		l.fairMask = uint64(slots - 1)
	}
	return l, nil
}

// fillLocked computes the class limits for limit n into l.scratch.
// Caller holds l.mu (or owns l exclusively).
func (l *Limiter) fillLocked(n int) {
	if n < 1 {
		n = 1
	}
	for c := 0; c < l.classes; c++ {
		v := int(math.Floor(l.shares[c] * float64(n)))
		if c == 0 && v < 1 {
			v = 1
		}
		l.scratch[c] = v
	}
}

// applyLocked publishes the class limits for limit n. Caller holds l.mu.
func (l *Limiter) applyLocked(n int) {
	l.fillLocked(n)
	// SetLimits cannot fail: same number of classes, limits ≥ 0 and
	// non-increasing because the shares are.
	_ = l.cl.SetLimits(l.scratch[:l.classes])
	l.applied = n
	l.limit.Store(int64(n))
}

// class maps c onto a configured class, as the ClassLimiter does.
func (l *Limiter) class(c shed.Class) shed.Class {
	if int(c) >= l.classes {
		return shed.Class(l.classes - 1)
	}
	return c
}

// Acquire admits a request of class c started at now (seconds on the
// monotonic timeline used for Done) if fewer than its class's share of the
// limit are in flight. On admission it returns the request's Ticket and
// true; the caller must call Done on it exactly when the request ends (more
// calls do nothing). Otherwise it returns the zero Ticket and false at once:
// the request should be rejected (HTTP 503, gRPC RESOURCE_EXHAUSTED), or
// queued with Enqueue. A class beyond the configured ones counts as the
// last one. Acquire takes no lock and does not allocate. It is Admit with a
// Request of class c, cost 1, no client and no deadline.
func (l *Limiter) Acquire(now float64, c shed.Class) (t Ticket, ok bool) {
	// Filled in place with a bare return: a Ticket holds atomics and must
	// not be copied (vet's copylocks).
	c = l.class(c)
	if ok = l.admitInto(&t, now, c, 1, 0); !ok {
		if !l.Queueing() {
			l.refuse(c, ReasonLimit)
		}
		return
	}
	l.counts[c].admitted.Add(1)
	return
}

// Admit is Acquire for a full Request: its cost, its client (fairness) and
// its deadline. It returns the Ticket and Admitted, or the zero Ticket and
// why the request was refused: ReasonDeadline (the deadline has passed),
// ReasonFairness (the client holds its fair share under pressure) or
// ReasonLimit (no room: refuse it, or queue it with Enqueue). Refusals are
// counted by reason (Counts), except ReasonLimit when the Limiter has a
// queue: the caller is expected to Enqueue the request then, and Enqueue
// counts what becomes of it. Admit takes no lock and does not allocate.
func (l *Limiter) Admit(now float64, r Request) (t Ticket, why Reason) {
	c := l.class(r.Class)
	switch {
	case r.Deadline > 0 && now >= r.Deadline:
		why = ReasonDeadline
	case !l.fairOK(c, r.cost(), r.Client):
		why = ReasonFairness
	case !l.admitInto(&t, now, c, r.cost(), r.Client):
		why = ReasonLimit
	default:
		l.counts[c].admitted.Add(1)
		return
	}
	if why != ReasonLimit || !l.Queueing() {
		l.refuse(c, why)
	}
	return
}

// admitInto takes cost places of class c for client into t if they fit.
func (l *Limiter) admitInto(t *Ticket, now float64, c shed.Class, cost int, client uint64) bool {
	var ok bool
	if t.tok, ok = l.cl.AdmitN(c, cost); !ok {
		return false
	}
	t.slot = -1
	if l.fair != nil && client != 0 {
		t.slot = int64(client & l.fairMask)
		if l.fair[t.slot].Add(int64(cost)) == int64(cost) {
			l.active.Add(1)
		}
	}
	t.l, t.start, t.inFlight = l, now, l.cl.InFlight()
	return true
}

// Limit returns the algorithm's limit as last applied: the most permissive
// class (with share 1) is admitted while fewer than this are in flight.
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

// Fair reports whether per-client fairness is on (Config.Fairness): only
// then does a Request's Client count, so an adapter may leave it 0.
func (l *Limiter) Fair() bool { return l.fair != nil }

// InFlight returns the number of admitted requests whose Done has not been
// called.
func (l *Limiter) InFlight() int { return l.cl.InFlight() }

// Classes returns the number of configured classes.
func (l *Limiter) Classes() int { return l.classes }

// ClassLimit returns the in-flight limit currently applied to class c:
// floor(share × Limit()), at least 1 for the first class.
func (l *Limiter) ClassLimit(c shed.Class) int { return l.cl.Limit(c) }

// ClassCounts are a class's counters since the Limiter was created.
type ClassCounts struct {
	Admitted uint64 // requests given a place, at once or from the queue
	Queued   uint64 // requests that entered the wait queue
	Rejected uint64 // requests refused, for any reason (the sum of Rejects)
	// Rejects counts refusals by Reason (index Admitted stays 0).
	Rejects [NumReasons]uint64
}

// Counts returns class c's counters, for metrics. A class beyond the
// configured ones reports the last class (whose counters it adds to). The
// numbers are read one after the other, not as one snapshot.
func (l *Limiter) Counts(c shed.Class) ClassCounts {
	k := &l.counts[l.class(c)]
	cc := ClassCounts{Admitted: k.admitted.Load(), Queued: k.queued.Load()}
	for r := range cc.Rejects {
		cc.Rejects[r] = k.rejects[r].Load()
		cc.Rejected += cc.Rejects[r]
	}
	return cc
}

// release gives t's places back: the limiter's and its client slot's.
func (l *Limiter) release(t *Ticket) {
	cost := int64(t.tok.Cost())
	t.tok.Release()
	if t.slot >= 0 && l.fair[t.slot].Add(-cost) == 0 {
		l.active.Add(-1)
	}
}

// done releases t's place, feeds the sample and hands free places to
// waiters; t has just been marked done.
func (l *Limiter) done(t *Ticket, now float64, o Outcome) {
	l.release(t)
	if o == Success || o == Dropped {
		rtt := now - t.start
		s := Sample{Now: now, RTT: rtt, InFlight: t.inFlight, Dropped: o == Dropped}
		l.mu.Lock()
		if n := l.alg.Update(s); n != l.applied && l.pinned == 0 {
			l.applyLocked(n)
		}
		if o == Success && validRTT(s) {
			l.observeRTTLocked(rtt)
		}
		l.mu.Unlock()
	}
	if l.queued.Load() > 0 {
		l.qmu.Lock()
		l.dispatchLocked(now)
		l.qmu.Unlock()
	}
}

// observeRTTLocked folds a successful request's RTT into the smoothed RTT
// (weight 1/8, as TCP's SRTT) and resizes the queue bound K. Caller holds
// l.mu.
func (l *Limiter) observeRTTLocked(rtt float64) {
	if l.srtt == 0 {
		l.srtt = rtt
	} else {
		l.srtt = float64(0.875*l.srtt) + float64(0.125*rtt)
	}
	l.srttBits.Store(math.Float64bits(l.srtt))
	if l.Queueing() {
		k := math.Ceil(float64(l.applied) / l.srtt * l.qcfg.MaxWait)
		l.qcap.Store(int64(clamp(k, 1, float64(l.qcfg.MaxQueue))))
	}
}

// Ticket is an admitted request's place in a Limiter. Done ends it; Done is
// idempotent — the second and later calls do nothing, even when made
// concurrently — so a timeout path and a completion path may both call it:
// the place is released once and the algorithm sampled once.
//
// A Ticket must not be copied after Acquire returns it (go vet reports
// copies): each copy would carry its own "done" flag and could release the
// place and feed a sample again. Keep it in a variable or struct field and
// pass a *Ticket around. The zero Ticket (a refusal) does nothing on Done.
type Ticket struct {
	tok      shed.Token
	l        *Limiter
	start    float64
	inFlight int
	slot     int64 // fairness slot, -1 for none
	done     atomic.Bool
}

// Done reports how the request ended, at now (seconds, same timeline as
// Acquire's now): it releases the place and, for Success and Dropped, feeds
// the algorithm a sample (taking the Limiter's mutex). Only the first call
// has an effect. Done does not allocate.
func (t *Ticket) Done(now float64, o Outcome) {
	if t.l == nil || !t.done.CompareAndSwap(false, true) {
		return
	}
	t.l.done(t, now, o)
}

// unwind gives back a place just granted to a waiter that will not use it:
// no sample, no dispatch (the caller is dispatching).
func (t *Ticket) unwind() {
	if t.l == nil || !t.done.CompareAndSwap(false, true) {
		return
	}
	t.l.release(t)
}

// Admitted reports whether the ticket holds (or held) a place: false for the
// zero Ticket returned with a refusal.
func (t *Ticket) Admitted() bool { return t.l != nil }

// Class returns the class the request was admitted as (after mapping an
// unconfigured class onto the last configured one).
func (t *Ticket) Class() shed.Class { return t.tok.Class() }

// Start returns the instant passed to Acquire.
func (t *Ticket) Start() float64 { return t.start }
