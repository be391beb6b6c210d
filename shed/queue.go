package shed

import "strconv"

// Order is the order in which a Queue serves its entries.
type Order uint8

const (
	// FIFO serves the oldest entry first.
	FIFO Order = iota
	// LIFO serves the newest entry first. Without MaxWait, old entries can
	// wait forever while new ones keep arriving.
	LIFO
	// AdaptiveLIFO serves FIFO while the queue is short-lived and LIFO while
	// it is standing (see QueueConfig.StandingWait and StandingLen). Under
	// overload the newest requests, whose clients are still waiting, are
	// served; the oldest ones expire (MaxWait) instead of being served late.
	AdaptiveLIFO
)

// String returns "FIFO", "LIFO" or "adaptive LIFO".
func (o Order) String() string {
	switch o {
	case FIFO:
		return "FIFO"
	case LIFO:
		return "LIFO"
	case AdaptiveLIFO:
		return "adaptive LIFO"
	}
	return "Order(" + strconv.Itoa(int(o)) + ")"
}

// DefaultStandingWait is a reasonable QueueConfig.StandingWait for request
// queues: Facebook's adaptive LIFO treats a queue that has not drained for
// 100 ms as standing (Maurer 2015).
const DefaultStandingWait = 0.100

// QueueConfig configures a Queue.
type QueueConfig struct {
	// Capacity is the most entries the queue holds, > 0. Push refuses an
	// entry when the queue is full (tail drop). Size it in time: throughput
	// × the longest acceptable wait.
	Capacity int

	// Order is the serving order; the zero value is FIFO.
	Order Order

	// MaxWait, in seconds, is how long an entry may wait: an entry that has
	// waited longer than MaxWait (now − enqueued > MaxWait) is returned by
	// Pop as Expired, oldest first, before anything is served. 0 means
	// entries never expire. It applies to every Order; set it with LIFO and
	// AdaptiveLIFO so old entries are not starved.
	MaxWait float64

	// StandingWait, in seconds (AdaptiveLIFO only): the queue counts as
	// standing, and is served LIFO, while its oldest entry has waited longer
	// than StandingWait (now − oldest > StandingWait). 0 turns this trigger
	// off. DefaultStandingWait is a good start.
	StandingWait float64

	// StandingLen (AdaptiveLIFO only): the queue also counts as standing
	// while it holds more than StandingLen entries. 0 turns this trigger off.
	// AdaptiveLIFO needs at least one of StandingWait and StandingLen.
	StandingLen int
}

func (cfg QueueConfig) validate() error {
	if cfg.Capacity <= 0 {
		return badConfig("Capacity", "must be at least 1, got "+strconv.Itoa(cfg.Capacity))
	}
	if cfg.Order > AdaptiveLIFO {
		return badConfig("Order", "unknown order "+strconv.Itoa(int(cfg.Order)))
	}
	if err := checkSeconds("MaxWait", cfg.MaxWait); err != nil {
		return err
	}
	if err := checkSeconds("StandingWait", cfg.StandingWait); err != nil {
		return err
	}
	if cfg.StandingLen < 0 {
		return badConfig("StandingLen", "must not be negative")
	}
	if cfg.Order == AdaptiveLIFO && cfg.StandingWait == 0 && cfg.StandingLen == 0 {
		return badConfig("StandingWait", "AdaptiveLIFO needs StandingWait or StandingLen to be set")
	}
	return nil
}

// Entry is a queued value and the time it was pushed.
type Entry[T any] struct {
	Value T
	At    float64 // enqueue time, seconds on the caller's timeline
}

// PopStatus says what Pop returned.
type PopStatus uint8

const (
	Empty   PopStatus = iota // the queue was empty; no entry
	Served                   // serve this entry
	Expired                  // this entry waited longer than MaxWait: refuse it
)

// String returns "empty", "served" or "expired".
func (s PopStatus) String() string {
	switch s {
	case Empty:
		return "empty"
	case Served:
		return "served"
	case Expired:
		return "expired"
	}
	return "PopStatus(" + strconv.Itoa(int(s)) + ")"
}

// Queue is a bounded queue of values with their enqueue times: a ring buffer
// whose capacity is fixed (and allocated) at construction. Push and Pop do
// not allocate. A Queue is not safe for concurrent use; guard it with the
// lock of whatever owns it.
//
// The serving rule, applied by Pop at time now:
//
//  1. If the oldest entry has waited longer than MaxWait (MaxWait > 0), it is
//     removed and returned as Expired.
//  2. Otherwise the queue serves by Order: FIFO the oldest, LIFO the newest,
//     AdaptiveLIFO the newest while the queue is standing — more than
//     StandingLen entries (StandingLen > 0) or the oldest has waited longer
//     than StandingWait (StandingWait > 0) — and the oldest otherwise.
type Queue[T any] struct {
	buf  []Entry[T]
	head int // index of the oldest entry
	n    int // entries held

	order        Order
	maxWait      float64
	standingWait float64
	standingLen  int
}

// NewQueue returns an empty queue, or a *ConfigError naming the bad field.
func NewQueue[T any](cfg QueueConfig) (*Queue[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Queue[T]{
		buf:          make([]Entry[T], cfg.Capacity),
		order:        cfg.Order,
		maxWait:      cfg.MaxWait,
		standingWait: cfg.StandingWait,
		standingLen:  cfg.StandingLen,
	}, nil
}

// Len returns the number of entries held.
func (q *Queue[T]) Len() int { return q.n }

// Cap returns the capacity.
func (q *Queue[T]) Cap() int { return len(q.buf) }

// Push appends v, enqueued at now. It returns false, and keeps nothing, when
// the queue is full (tail drop): the caller should refuse the request now.
// Expired entries are only removed by Pop and PopExpired; a caller that
// wants them to make room calls PopExpired first.
func (q *Queue[T]) Push(now float64, v T) bool {
	if q.n == len(q.buf) {
		return false
	}
	q.buf[q.index(q.n)] = Entry[T]{Value: v, At: now}
	q.n++
	return true
}

// Oldest returns the enqueue time of the oldest entry; ok is false when the
// queue is empty. now − Oldest is the queue's current wait, the signal to
// watch on a dashboard.
func (q *Queue[T]) Oldest() (at float64, ok bool) {
	if q.n == 0 {
		return 0, false
	}
	return q.buf[q.head].At, true
}

// Pop removes the next entry by the serving rule (see Queue) at time now.
// An Expired entry must be refused, not served; call Pop again for the next.
// Empty means the queue held nothing.
func (q *Queue[T]) Pop(now float64) (Entry[T], PopStatus) {
	if q.n == 0 {
		return Entry[T]{}, Empty
	}
	if e, ok := q.PopExpired(now); ok {
		return e, Expired
	}
	if q.order == LIFO || (q.order == AdaptiveLIFO && q.standing(now)) {
		return q.popBack(), Served
	}
	return q.popFront(), Served
}

// Peek returns the entry Pop would return at time now, and its status,
// without removing it: a Pop with the same now right after (nothing pushed
// in between) removes exactly this entry. A caller uses it to check that the
// next entry can be served (it fits the limit) before taking it.
func (q *Queue[T]) Peek(now float64) (Entry[T], PopStatus) {
	if q.n == 0 {
		return Entry[T]{}, Empty
	}
	if q.maxWait > 0 && now-q.buf[q.head].At > q.maxWait {
		return q.buf[q.head], Expired
	}
	if q.order == LIFO || (q.order == AdaptiveLIFO && q.standing(now)) {
		return q.buf[q.index(q.n-1)], Served
	}
	return q.buf[q.head], Served
}

// Filter removes every entry for which keep returns false, keeping the
// others in their order, and returns how many it removed. It takes time
// proportional to Len: use it to reclaim the room of entries abandoned in
// place (a cancelled waiter), when the queue is full, not per operation.
func (q *Queue[T]) Filter(keep func(T) bool) int {
	w := 0
	for r := 0; r < q.n; r++ {
		e := q.buf[q.index(r)]
		if keep(e.Value) {
			q.buf[q.index(w)] = e
			w++
		}
	}
	for i := w; i < q.n; i++ {
		q.buf[q.index(i)] = Entry[T]{}
	}
	removed := q.n - w
	q.n = w
	return removed
}

// PopExpired removes and returns the oldest entry if it has waited longer
// than MaxWait at time now; ok is false if there is no such entry (or
// MaxWait is 0).
func (q *Queue[T]) PopExpired(now float64) (e Entry[T], ok bool) {
	if q.n == 0 || q.maxWait == 0 || !(now-q.buf[q.head].At > q.maxWait) {
		return Entry[T]{}, false
	}
	return q.popFront(), true
}

// standing reports whether an adaptive queue is standing at now.
func (q *Queue[T]) standing(now float64) bool {
	return (q.standingLen > 0 && q.n > q.standingLen) ||
		(q.standingWait > 0 && now-q.buf[q.head].At > q.standingWait)
}

// index returns the buffer index of the i-th oldest entry.
func (q *Queue[T]) index(i int) int {
	i += q.head
	if i >= len(q.buf) {
		i -= len(q.buf)
	}
	return i
}

func (q *Queue[T]) popFront() Entry[T] {
	e := q.buf[q.head]
	q.buf[q.head] = Entry[T]{} // let the value be collected
	q.head = q.index(1)
	q.n--
	return e
}

func (q *Queue[T]) popBack() Entry[T] {
	i := q.index(q.n - 1)
	e := q.buf[i]
	q.buf[i] = Entry[T]{}
	q.n--
	return e
}
