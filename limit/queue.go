package limit

import (
	"math"
	"strconv"
	"sync/atomic"

	"github.com/spillwayhq/spillway/shed"
)

// Discipline is what a Limiter does with a request that finds its class's
// share of the limit full.
type Discipline uint8

const (
	// Reject refuses it at once (HTTP 503): no queue, the cheapest answer
	// and the right one when clients retry elsewhere.
	Reject Discipline = iota
	// FIFO queues it; places are handed to the oldest waiter first.
	FIFO
	// AdaptiveLIFO queues it and serves FIFO while the queue drains, LIFO
	// while it stands (its oldest waiter has waited longer than
	// QueueConfig.StandingWait): under overload the newest requests, whose
	// clients are still waiting, are served, and the oldest expire.
	AdaptiveLIFO
	// CoDel queues it FIFO and, when a place frees, drops waiters whose
	// queue wait has stayed above Target for an Interval, spacing the drops
	// Interval ÷ √count apart (RFC 8289's control law), so a standing queue
	// is drained back to Target while a short burst is absorbed.
	CoDel
)

// String returns "reject", "fifo", "adaptive-lifo" or "codel" — the names
// ParseDiscipline accepts.
func (d Discipline) String() string {
	switch d {
	case Reject:
		return "reject"
	case FIFO:
		return "fifo"
	case AdaptiveLIFO:
		return "adaptive-lifo"
	case CoDel:
		return "codel"
	}
	return "discipline " + strconv.Itoa(int(d))
}

// ParseDiscipline maps a name String returns to its Discipline.
func ParseDiscipline(s string) (Discipline, bool) {
	for d := Reject; d <= CoDel; d++ {
		if s == d.String() {
			return d, true
		}
	}
	return Reject, false
}

// Defaults of QueueConfig.
const (
	DefaultMaxQueue     = 1024  // entries per class
	DefaultCoDelTarget  = 0.005 // seconds, as Facebook's RPC queues use (Maurer 2015)
	DefaultCoDelWindow  = 0.100 // seconds, CoDel's interval
	defaultStandingWait = shed.DefaultStandingWait
)

// QueueConfig configures the wait queue in front of a Limiter. The zero
// value is Reject: no queue.
//
// The queue is sized in time. A class's queue admits a waiter while it holds
// fewer than K = ⌈μ × MaxWait⌉ entries, where μ, the service rate, is the
// limit ÷ the smoothed RTT of successful requests (Little's law): a waiter
// that joins a full queue of K would wait longer than MaxWait anyway, so it
// is refused at once instead (tail drop, reason ReasonQueueFull). Before the
// first successful request K is MaxQueue. K never exceeds MaxQueue, the memory bound
// (each entry is one pointer in a ring allocated up front, per class).
type QueueConfig struct {
	// Discipline is the serving order; Reject (the zero value) means no
	// queue and the other fields are ignored.
	Discipline Discipline
	// MaxWait is the longest a request may wait, in seconds, > 0: a waiter
	// older than that is refused (ReasonExpired) when its turn comes, and
	// the adapter gives up on it at MaxWait even if no place is released.
	MaxWait float64
	// MaxQueue bounds each class's queue, in entries. 0 means
	// DefaultMaxQueue.
	MaxQueue int
	// StandingWait (AdaptiveLIFO): the queue stands, and is served LIFO,
	// while its oldest waiter has waited longer than this, in seconds.
	// 0 means min(0.1, MaxWait ÷ 2).
	StandingWait float64
	// Target and Interval (CoDel), in seconds: 0 means DefaultCoDelTarget
	// and DefaultCoDelWindow.
	Target, Interval float64
}

func (q *QueueConfig) defaults() {
	if q.MaxQueue == 0 {
		q.MaxQueue = DefaultMaxQueue
	}
	if q.StandingWait == 0 {
		q.StandingWait = math.Min(defaultStandingWait, q.MaxWait/2)
	}
	if q.Target == 0 {
		q.Target = DefaultCoDelTarget
	}
	if q.Interval == 0 {
		q.Interval = DefaultCoDelWindow
	}
}

func (q QueueConfig) validate() error {
	if q.Discipline > CoDel {
		return badConfig("Queue.Discipline", "unknown discipline "+strconv.Itoa(int(q.Discipline)))
	}
	if q.Discipline == Reject {
		return nil
	}
	if err := checkPositive("Queue.MaxWait", q.MaxWait); err != nil {
		return err
	}
	if q.MaxQueue < 1 || q.MaxQueue > 1<<20 {
		return badConfig("Queue.MaxQueue", "must be in [1, 1048576], got "+strconv.Itoa(q.MaxQueue))
	}
	if err := checkPositive("Queue.StandingWait", q.StandingWait); err != nil {
		return err
	}
	if err := checkPositive("Queue.Target", q.Target); err != nil {
		return err
	}
	return checkPositive("Queue.Interval", q.Interval)
}

// FairnessConfig turns on per-client fairness: under pressure a client may
// hold at most its fair share of the limit, so the heaviest client is the
// one refused while lighter ones are still admitted. The zero value is off.
//
// Clients are counted in Slots counters indexed by Request.Client (a hash of
// the client's identity chosen by the adapter: address, API key, tenant);
// two clients in one slot share it, as in stochastic fair queueing, so size
// Slots well above the number of clients active at once. While the requests
// in flight are at least Pressure × the request class's limit, a request of
// client k costing n is admitted only if k's places in flight plus n are at
// most ⌈limit ÷ active clients⌉ (active: slots holding places, k included);
// below that pressure fairness refuses nothing (the server has room for
// everyone). The check and the count are separate atomic steps, so a burst
// of one client's requests racing each other can overshoot its share by the
// number of racers; the share is a soft bound.
type FairnessConfig struct {
	// Slots is the number of client counters, rounded up to a power of two,
	// at most 1<<20 (8 bytes each). 0 turns fairness off.
	Slots int
	// Pressure in (0, 1]: the share of the class's limit in flight above
	// which fairness applies. 0 means 0.8.
	Pressure float64
}

func (f *FairnessConfig) defaults() {
	if f.Pressure == 0 {
		f.Pressure = 0.8
	}
}

func (f FairnessConfig) validate() error {
	if f.Slots < 0 || f.Slots > 1<<20 {
		return badConfig("Fairness.Slots", "must be in [0, 1048576], got "+strconv.Itoa(f.Slots))
	}
	if f.Slots == 0 {
		return nil
	}
	return checkFraction("Fairness.Pressure", f.Pressure, true)
}

// Request describes a request asking a Limiter for a place.
type Request struct {
	// Class is the criticality class (shed.Critical first).
	Class shed.Class
	// Cost is the number of places the request takes; < 1 counts as 1. A
	// request costing more than its class's limit runs only when nothing
	// else is in flight.
	Cost int
	// Client identifies the client for fairness (a hash of its identity);
	// 0 means unknown: no fairness check.
	Client uint64
	// Deadline is when the caller stops waiting for the answer, in seconds
	// on the Limiter's timeline; 0 means none. A request whose deadline has
	// passed is refused (ReasonDeadline) before any work; a queued one is
	// refused when its turn comes if the smoothed RTT would carry it past
	// the deadline.
	Deadline float64
}

func (r Request) cost() int {
	if r.Cost < 1 {
		return 1
	}
	return r.Cost
}

// Reason says why a request was refused.
type Reason uint8

const (
	// Admitted: not refused.
	Admitted Reason = iota
	// ReasonLimit: the class's share of the limit was full and there is no
	// queue.
	ReasonLimit
	// ReasonQueueFull: the limit was full and so was the class's queue.
	ReasonQueueFull
	// ReasonFairness: the client already held its fair share under
	// pressure.
	ReasonFairness
	// ReasonExpired: the request waited MaxWait in the queue.
	ReasonExpired
	// ReasonCoDel: CoDel dropped it from a standing queue.
	ReasonCoDel
	// ReasonDeadline: its deadline had passed or could not be met.
	ReasonDeadline
	// ReasonCancelled: its caller gave up while it waited (Cancel).
	ReasonCancelled

	// NumReasons is the number of Reason values, for arrays indexed by one.
	NumReasons = int(ReasonCancelled) + 1
)

// String returns the reason's metric label: "admitted", "limit",
// "queue_full", "fairness", "expired", "codel", "deadline", "cancelled".
func (r Reason) String() string {
	switch r {
	case Admitted:
		return "admitted"
	case ReasonLimit:
		return "limit"
	case ReasonQueueFull:
		return "queue_full"
	case ReasonFairness:
		return "fairness"
	case ReasonExpired:
		return "expired"
	case ReasonCoDel:
		return "codel"
	case ReasonDeadline:
		return "deadline"
	case ReasonCancelled:
		return "cancelled"
	}
	return "reason " + strconv.Itoa(int(r))
}

// Detail returns a sentence for the refusal's answer to the client (a
// problem+json detail, a gRPC status message): "the server is at its
// concurrency limit", …; "" for Admitted.
func (r Reason) Detail() string {
	switch r {
	case ReasonLimit:
		return "the server is at its concurrency limit"
	case ReasonQueueFull:
		return "the server is at its concurrency limit and its wait queue is full"
	case ReasonFairness:
		return "this client holds its fair share of the server's capacity"
	case ReasonExpired:
		return "the request waited the longest allowed for a place"
	case ReasonCoDel:
		return "the wait queue is standing; the request was dropped to drain it"
	case ReasonDeadline:
		return "the request's deadline passed or cannot be met at the current wait"
	case ReasonCancelled:
		return "the caller stopped waiting"
	}
	return ""
}

// Waiter states.
const (
	waiting uint32 = iota
	granted
	refused
	cancelled
)

// Waiter is a request waiting in a Limiter's queue. Make one with
// NewWaiter per queued request (it is the slow path's one allocation),
// pass it to Enqueue, then wait on Ready: when it fires the request was
// either granted a place — Ticket holds it and must be ended with Done — or
// refused, with Reason saying why. A caller that gives up first calls
// Cancel; a Waiter must not be reused.
type Waiter struct {
	ticket Ticket
	ready  chan struct{} // one send, buffered: the grant or the refusal
	state  atomic.Uint32
	reason Reason // written before the send on ready
	req    Request
	at     float64
}

// NewWaiter returns a Waiter for one request.
func NewWaiter() *Waiter { return &Waiter{ready: make(chan struct{}, 1)} }

// Ready fires once, when the request was granted a place or refused.
func (w *Waiter) Ready() <-chan struct{} { return w.ready }

// Ticket returns the granted place, after Ready fired with Reason() ==
// Admitted; the caller must call Done on it.
func (w *Waiter) Ticket() *Ticket { return &w.ticket }

// Reason returns why the request was refused, or Admitted; valid once Ready
// has fired (or Cancel returned true: ReasonCancelled).
func (w *Waiter) Reason() Reason { return w.reason }

// Queueing reports whether the Limiter has a wait queue.
func (l *Limiter) Queueing() bool { return l.qcfg.Discipline != Reject }

// MaxWait returns the queue's MaxWait in seconds (0 without a queue): the
// adapter stops waiting and calls Cancel with ReasonExpired by then.
func (l *Limiter) MaxWait() float64 {
	if !l.Queueing() {
		return 0
	}
	return l.qcfg.MaxWait
}

// QueueLen returns the number of entries in all class queues (including
// cancelled ones not yet reclaimed).
func (l *Limiter) QueueLen() int { return int(l.queued.Load()) }

// QueueWait returns the current queue wait estimate in seconds: 0 while the
// queues are empty, otherwise a moving average of the waits of the last
// waiters granted a place. An adapter compares it, plus RTT, with a
// request's remaining deadline before admitting it.
func (l *Limiter) QueueWait() float64 {
	if l.queued.Load() == 0 {
		return 0
	}
	return math.Float64frombits(l.waitBits.Load())
}

// RTT returns the smoothed RTT of successful requests, in seconds (0 before
// the first one).
func (l *Limiter) RTT() float64 { return math.Float64frombits(l.srttBits.Load()) }

// QueueCap returns the current per-class queue bound K = ⌈μ × MaxWait⌉ (see
// QueueConfig); 0 without a queue.
func (l *Limiter) QueueCap() int { return int(l.qcap.Load()) }

// Enqueue queues r, which has just been refused by Admit with ReasonLimit,
// in w (fresh from NewWaiter), at now. It returns Admitted when w is queued
// — possibly already granted, if a place was released meanwhile: wait on
// w.Ready() — or why it was refused at once: ReasonLimit when the Limiter
// has no queue, ReasonQueueFull, ReasonFairness, ReasonDeadline. Enqueue
// takes the queue lock; it allocates nothing beyond the Waiter.
func (l *Limiter) Enqueue(now float64, r Request, w *Waiter) Reason {
	c := l.class(r.Class)
	if !l.Queueing() {
		return ReasonLimit // Admit counted it
	}
	if r.Deadline > 0 && now >= r.Deadline {
		return l.refuse(c, ReasonDeadline)
	}
	if !l.fairOK(c, r.cost(), r.Client) {
		return l.refuse(c, ReasonFairness)
	}
	w.req, w.at = r, now
	l.qmu.Lock()
	q := l.queues[c]
	l.expireLocked(now, c)
	if q.Len() >= int(l.qcap.Load()) && l.abandoned.Load() > 0 {
		n := q.Filter(func(w *Waiter) bool { return w.state.Load() != cancelled })
		l.abandoned.Add(int64(-n))
		l.queued.Add(int64(-n))
	}
	if q.Len() >= int(l.qcap.Load()) || !q.Push(now, w) {
		l.qmu.Unlock()
		return l.refuse(c, ReasonQueueFull)
	}
	l.queued.Add(1)
	l.counts[c].queued.Add(1)
	l.dispatchLocked(now)
	l.qmu.Unlock()
	return Admitted
}

// Cancel withdraws w, whose caller stopped waiting at now, with reason
// (ReasonExpired when MaxWait ran out, ReasonDeadline or ReasonCancelled
// when the request's context ended). It returns true if w was still
// waiting: it will never be granted. It returns false if w was granted or
// refused first — Ready has fired or is about to; read Reason, and if it is
// Admitted end the Ticket (Done with Ignore when the caller has gone).
// Cancel takes no lock: the entry stays in the queue until dispatch or a
// full queue reclaims it.
func (l *Limiter) Cancel(w *Waiter, now float64, reason Reason) bool {
	if !w.state.CompareAndSwap(waiting, cancelled) {
		return false
	}
	w.reason = reason
	l.abandoned.Add(1)
	l.refuse(l.class(w.req.Class), reason)
	return true
}

// refuse counts a refusal of class c for reason and returns the reason.
func (l *Limiter) refuse(c shed.Class, reason Reason) Reason {
	l.counts[c].rejects[reason].Add(1)
	return reason
}

// settle ends a waiter that was still waiting: granted when reason is
// Admitted, refused otherwise. It reports false if the waiter had been
// cancelled meanwhile (nothing is sent; the caller undoes any grant).
func (l *Limiter) settle(w *Waiter, c shed.Class, reason Reason) bool {
	to := refused
	if reason == Admitted {
		to = granted
	}
	if !w.state.CompareAndSwap(waiting, to) {
		l.abandoned.Add(-1)
		return false
	}
	w.reason = reason
	if reason == Admitted { // counted before the waiter can see it
		l.counts[c].admitted.Add(1)
	} else {
		l.refuse(c, reason)
	}
	w.ready <- struct{}{}
	return true
}

// expireLocked refuses the waiters of class c that have waited longer than
// MaxWait at now, and reclaims cancelled ones met on the way. Caller holds
// l.qmu.
func (l *Limiter) expireLocked(now float64, c shed.Class) {
	for {
		e, ok := l.queues[c].PopExpired(now)
		if !ok {
			return
		}
		l.queued.Add(-1)
		l.settle(e.Value, c, ReasonExpired)
	}
}

// dispatchLocked hands the places free at now to waiters: classes in order
// of importance, each by its discipline, stopping at the first waiter that
// does not fit (a less important class never overtakes a more important
// one). Caller holds l.qmu.
func (l *Limiter) dispatchLocked(now float64) {
	for c := shed.Class(0); int(c) < l.classes; c++ {
		q := l.queues[c]
		for {
			e, st := q.Peek(now)
			if st == shed.Empty {
				if cd := l.codels[c]; cd != nil {
					cd.Idle()
				}
				break
			}
			w := e.Value
			if w.state.Load() == cancelled {
				q.Pop(now)
				l.queued.Add(-1)
				l.abandoned.Add(-1)
				continue
			}
			if st == shed.Expired {
				q.Pop(now)
				l.queued.Add(-1)
				l.settle(w, c, ReasonExpired)
				continue
			}
			cost := w.req.cost()
			if !l.admitInto(&w.ticket, now, c, cost, w.req.Client) {
				return // no room for this class, hence none for the classes after it
			}
			q.Pop(now)
			l.queued.Add(-1)
			reason := Admitted
			if cd := l.codels[c]; cd != nil && cd.Drop(now, e.At) {
				reason = ReasonCoDel
			} else if d := w.req.Deadline; d > 0 && now+l.RTT() > d {
				reason = ReasonDeadline
			}
			if reason != Admitted {
				w.ticket.unwind()
				l.settle(w, c, reason)
				continue
			}
			if !l.settle(w, c, Admitted) {
				w.ticket.unwind()
				continue
			}
			wait := now - e.At
			old := math.Float64frombits(l.waitBits.Load())
			l.waitBits.Store(math.Float64bits(float64(0.8*old) + float64(0.2*wait)))
		}
	}
}

// fairOK reports whether client may take cost more places of class c now.
func (l *Limiter) fairOK(c shed.Class, cost int, client uint64) bool {
	if l.fair == nil || client == 0 {
		return true
	}
	lim := l.cl.Limit(c)
	if float64(l.cl.InFlight()) < float64(l.fcfg.Pressure*float64(lim)) {
		return true
	}
	mine := l.fair[client&l.fairMask].Load()
	active := l.active.Load()
	if mine == 0 {
		active++
	}
	if active < 1 {
		active = 1
	}
	share := (int64(lim) + active - 1) / active
	return mine+int64(cost) <= max(share, 1)
}

// Refused counts a refusal of class c for reason decided outside the
// Limiter — an adapter that drops a request whose deadline cannot be met
// before asking for a place — so Counts and metrics show every refusal.
func (l *Limiter) Refused(c shed.Class, reason Reason) {
	if int(reason) < NumReasons {
		l.refuse(l.class(c), reason)
	}
}
