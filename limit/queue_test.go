package limit_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// oneClass gives every class the whole limit, so queue tests see the limit
// itself.
var oneClass = []float64{1, 1, 1}

func queued(t *testing.T, n int, q limit.QueueConfig) *limit.Limiter {
	t.Helper()
	return mustLimiter(t, mustFixed(t, n), limit.LimiterConfig{Shares: oneClass, Queue: q})
}

// hold admits n requests at now and returns their tickets.
func hold(t *testing.T, l *limit.Limiter, now float64, n int) []*limit.Ticket {
	t.Helper()
	ts := make([]*limit.Ticket, n)
	for i := range ts {
		ts[i] = new(limit.Ticket)
		var why limit.Reason
		if *ts[i], why = l.Admit(now, limit.Request{}); why != limit.Admitted {
			t.Fatalf("hold %d: refused, %v", i, why)
		}
	}
	return ts
}

// enqueue queues a request of class c at now and fails unless it was queued.
func enqueue(t *testing.T, l *limit.Limiter, now float64, r limit.Request) *limit.Waiter {
	t.Helper()
	if _, why := l.Admit(now, r); why != limit.ReasonLimit {
		t.Fatalf("Admit at %v: %v, want refusal by the limit", now, why)
	}
	w := limit.NewWaiter()
	if why := l.Enqueue(now, r, w); why != limit.Admitted {
		t.Fatalf("Enqueue at %v: %v", now, why)
	}
	return w
}

// state returns "waiting" or the waiter's reason once Ready fired.
func state(w *limit.Waiter) string {
	select {
	case <-w.Ready():
		return w.Reason().String()
	default:
		return "waiting"
	}
}

func TestQueueFIFO(t *testing.T) {
	l := queued(t, 2, limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 1})
	held := hold(t, l, 0, 2)
	a := enqueue(t, l, 0.1, limit.Request{})
	b := enqueue(t, l, 0.2, limit.Request{})
	if l.QueueLen() != 2 {
		t.Fatalf("QueueLen = %d, want 2", l.QueueLen())
	}
	held[0].Done(0.3, limit.Success)
	if state(a) != "admitted" || state(b) != "waiting" {
		t.Fatalf("after one release: a %s, b %s; want a admitted, b waiting", state(a), state(b))
	}
	if l.InFlight() != 2 {
		t.Fatalf("InFlight = %d, want 2 (the waiter took the place)", l.InFlight())
	}
	a.Ticket().Done(0.4, limit.Success)
	if state(b) != "admitted" {
		t.Fatalf("b = %s, want admitted", state(b))
	}
	b.Ticket().Done(0.5, limit.Success)
	held[1].Done(0.5, limit.Success)
	if l.InFlight() != 0 || l.QueueLen() != 0 {
		t.Fatalf("InFlight %d, QueueLen %d; want 0, 0", l.InFlight(), l.QueueLen())
	}
	k := l.Counts(shed.Critical)
	if k.Admitted != 4 || k.Queued != 2 || k.Rejected != 0 {
		t.Fatalf("counts %+v: want 4 admitted, 2 queued, none refused (the queued ones were served)", k)
	}
}

// Adaptive LIFO: FIFO while the queue is fresh, newest first once its oldest
// waiter has waited longer than StandingWait (seed 000: under overload serve
// the requests whose clients still wait).
func TestQueueAdaptiveLIFO(t *testing.T) {
	l := queued(t, 1, limit.QueueConfig{Discipline: limit.AdaptiveLIFO, MaxWait: 1, StandingWait: 0.1})
	held := hold(t, l, 0, 1)
	a := enqueue(t, l, 0.00, limit.Request{})
	b := enqueue(t, l, 0.02, limit.Request{})
	c := enqueue(t, l, 0.04, limit.Request{})
	held[0].Done(0.05, limit.Success) // oldest waited 0.05 ≤ 0.1: FIFO
	if state(a) != "admitted" || state(b) != "waiting" || state(c) != "waiting" {
		t.Fatalf("fresh queue: a %s b %s c %s; want a first", state(a), state(b), state(c))
	}
	d := enqueue(t, l, 0.10, limit.Request{})
	a.Ticket().Done(0.20, limit.Success) // oldest (b) waited 0.18 > 0.1: standing, LIFO
	if state(d) != "admitted" || state(b) != "waiting" || state(c) != "waiting" {
		t.Fatalf("standing queue: b %s c %s d %s; want d (newest) first", state(b), state(c), state(d))
	}
	d.Ticket().Done(0.21, limit.Success)
	if state(c) != "admitted" {
		t.Fatalf("c = %s, want admitted (newest of the rest)", state(c))
	}
	c.Ticket().Done(1.5, limit.Success) // b has waited 1.48 > MaxWait
	if state(b) != "expired" {
		t.Fatalf("b = %s, want expired", state(b))
	}
	if l.InFlight() != 0 {
		t.Fatalf("InFlight = %d, want 0", l.InFlight())
	}
}

// CoDel (RFC 8289): no drop until the wait has stayed above Target for a
// whole Interval; then drops, spaced Interval/√count, that shrink over time.
func TestQueueCoDel(t *testing.T) {
	l := queued(t, 1, limit.QueueConfig{Discipline: limit.CoDel, MaxWait: 10, MaxQueue: 500, Target: 0.005, Interval: 0.1})
	// Teach the limiter an RTT so K = ⌈1/0.01 × 10⌉ = 1000 → MaxQueue 500.
	cur := hold(t, l, 0, 1)[0]
	cur.Done(0.01, limit.Success)
	cur = hold(t, l, 0.01, 1)[0]
	var ws []*limit.Waiter
	for i := 0; i < 400; i++ {
		ws = append(ws, enqueue(t, l, 0.01, limit.Request{}))
	}
	// Serve one waiter every 10 ms; every wait is above the 5 ms target.
	var drops []float64
	seen := 0
	for k := 1; k <= 60; k++ {
		now := 0.01 + 0.01*float64(k)
		cur.Done(now, limit.Success)
		cur = nil
		for ; seen < len(ws); seen++ {
			s := state(ws[seen])
			if s == "waiting" {
				break
			}
			if s == "codel" {
				drops = append(drops, now)
				continue
			}
			if s != "admitted" {
				t.Fatalf("waiter %d: %s", seen, s)
			}
			cur = ws[seen].Ticket()
		}
		if cur == nil {
			t.Fatalf("at %v nobody was granted", now)
		}
	}
	if len(drops) < 3 {
		t.Fatalf("drops at %v: want at least 3 within 0.6 s of a standing queue", drops)
	}
	if drops[0] < 0.01+0.1 {
		t.Fatalf("first drop at %v, before the wait had stayed above target for an interval (0.11)", drops[0])
	}
	// Spacing shrinks (Interval/√count) while the queue stands; on the
	// 10 ms service grid single gaps are rounded, so compare the ends.
	if first, last := drops[1]-drops[0], drops[len(drops)-1]-drops[len(drops)-2]; !(last < first) {
		t.Fatalf("drop spacing did not shrink: drops at %v", drops)
	}
}

func TestQueueFullIsSizedInTime(t *testing.T) {
	l := queued(t, 10, limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 0.05})
	if l.QueueCap() != limit.DefaultMaxQueue {
		t.Fatalf("QueueCap before any sample = %d, want MaxQueue, %d", l.QueueCap(), limit.DefaultMaxQueue)
	}
	for i, tk := range hold(t, l, 0, 10) {
		tk.Done(0.1+0.001*float64(i), limit.Success) // RTT ≈ 0.1 s
	}
	// μ = 10 / 0.1 s = 100/s; K = ⌈100 × 0.05⌉ = 5 (±1 for the RTT spread).
	if k := l.QueueCap(); k < 5 || k > 6 {
		t.Fatalf("QueueCap = %d, want ⌈μ × MaxWait⌉ ≈ 5", k)
	}
	hold(t, l, 1, 10)
	var n int
	for n = 0; n < 20; n++ {
		if why := l.Enqueue(1, limit.Request{}, limit.NewWaiter()); why != limit.Admitted {
			if why != limit.ReasonQueueFull {
				t.Fatalf("refusal %v, want queue_full", why)
			}
			break
		}
	}
	if n != l.QueueCap() {
		t.Fatalf("queued %d before refusal, want QueueCap %d", n, l.QueueCap())
	}
}

func TestQueueCancel(t *testing.T) {
	l := queued(t, 1, limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 1, MaxQueue: 2})
	held := hold(t, l, 0, 1)[0]
	a := enqueue(t, l, 0.1, limit.Request{})
	b := enqueue(t, l, 0.2, limit.Request{})
	if !l.Cancel(a, 0.3, limit.ReasonCancelled) {
		t.Fatal("Cancel of a waiting waiter returned false")
	}
	if l.Cancel(a, 0.3, limit.ReasonCancelled) {
		t.Fatal("second Cancel returned true")
	}
	// The queue is full of 2 entries, one abandoned: a new waiter reclaims it.
	c := enqueue(t, l, 0.35, limit.Request{})
	held.Done(0.4, limit.Success)
	if state(b) != "admitted" || state(c) != "waiting" {
		t.Fatalf("b %s c %s; want b admitted (a was cancelled)", state(b), state(c))
	}
	// Cancel after the grant reports false: the caller owns the ticket.
	if l.Cancel(b, 0.45, limit.ReasonCancelled) {
		t.Fatal("Cancel after grant returned true")
	}
	b.Ticket().Done(0.5, limit.Ignore)
	if state(c) != "admitted" {
		t.Fatalf("c = %s, want admitted", state(c))
	}
	c.Ticket().Done(0.6, limit.Success)
	if l.InFlight() != 0 || l.QueueLen() != 0 {
		t.Fatalf("InFlight %d QueueLen %d, want 0 0", l.InFlight(), l.QueueLen())
	}
	if k := l.Counts(shed.Critical); k.Rejects[limit.ReasonCancelled] != 1 {
		t.Fatalf("cancelled count %d, want 1", k.Rejects[limit.ReasonCancelled])
	}
}

// A more important class is served first, whatever the arrival order.
func TestQueueClassPriority(t *testing.T) {
	l := queued(t, 1, limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 1})
	held := hold(t, l, 0, 1)[0]
	low := enqueue(t, l, 0.1, limit.Request{Class: shed.Sheddable})
	mid := enqueue(t, l, 0.2, limit.Request{Class: shed.Default})
	top := enqueue(t, l, 0.3, limit.Request{Class: shed.Critical})
	held.Done(0.4, limit.Success)
	if state(top) != "admitted" || state(mid) != "waiting" || state(low) != "waiting" {
		t.Fatalf("top %s mid %s low %s; want critical first", state(top), state(mid), state(low))
	}
	top.Ticket().Done(0.5, limit.Success)
	if state(mid) != "admitted" || state(low) != "waiting" {
		t.Fatalf("mid %s low %s; want default before sheddable", state(mid), state(low))
	}
}

func TestDeadlines(t *testing.T) {
	l := queued(t, 1, limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 5})
	if _, why := l.Admit(2, limit.Request{Deadline: 2}); why != limit.ReasonDeadline {
		t.Fatalf("Admit with a passed deadline: %v, want deadline (no work done)", why)
	}
	if l.InFlight() != 0 {
		t.Fatal("an expired request took a place")
	}
	// Learn an RTT of 0.5 s.
	tk := hold(t, l, 2, 1)[0]
	tk.Done(2.5, limit.Success)
	held := hold(t, l, 3, 1)[0]
	late := enqueue(t, l, 3, limit.Request{Deadline: 3.9}) // granted at 3.6, needs until 4.1
	ok := enqueue(t, l, 3, limit.Request{Deadline: 10})
	held.Done(3.6, limit.Success)
	if state(late) != "deadline" || state(ok) != "admitted" {
		t.Fatalf("late %s ok %s; want the request that cannot finish by its deadline refused", state(late), state(ok))
	}
	if why := l.Enqueue(11, limit.Request{Deadline: 10}, limit.NewWaiter()); why != limit.ReasonDeadline {
		t.Fatalf("Enqueue past deadline: %v", why)
	}
}

func TestCost(t *testing.T) {
	l := mustLimiter(t, mustFixed(t, 5), limit.LimiterConfig{Shares: oneClass})
	a, why := l.Admit(0, limit.Request{Cost: 3})
	if why != limit.Admitted || l.InFlight() != 3 {
		t.Fatalf("cost 3: %v, InFlight %d", why, l.InFlight())
	}
	if _, why := l.Admit(0, limit.Request{Cost: 3}); why != limit.ReasonLimit {
		t.Fatalf("second cost 3 in a limit of 5: %v, want limit", why)
	}
	b, why := l.Admit(0, limit.Request{Cost: 2})
	if why != limit.Admitted {
		t.Fatalf("cost 2 fits: %v", why)
	}
	a.Done(1, limit.Success)
	b.Done(1, limit.Success)
	big, why := l.Admit(2, limit.Request{Cost: 50})
	if why != limit.Admitted || l.InFlight() != 50 {
		t.Fatalf("oversize request on an idle limiter: %v, InFlight %d; want admitted alone", why, l.InFlight())
	}
	if _, ok := l.Acquire(2, shed.Critical); ok {
		t.Fatal("admitted beside an oversize request")
	}
	big.Done(3, limit.Success)
	if l.InFlight() != 0 {
		t.Fatalf("InFlight %d after release, want 0", l.InFlight())
	}
}

// Under pressure the heaviest client is refused while a light one is still
// admitted.
func TestFairness(t *testing.T) {
	l := mustLimiter(t, mustFixed(t, 10), limit.LimiterConfig{Shares: oneClass,
		Fairness: limit.FairnessConfig{Slots: 64, Pressure: 0.5}})
	if off := mustLimiter(t, mustFixed(t, 10), limit.LimiterConfig{Shares: oneClass}); !l.Fair() || off.Fair() {
		t.Fatalf("Fair: %v with fairness, %v without; want true, false", l.Fair(), off.Fair())
	}
	const heavy, light = 1, 2
	var ts [5]limit.Ticket
	for i := range ts { // below pressure: no check
		var why limit.Reason
		if ts[i], why = l.Admit(0, limit.Request{Client: heavy}); why != limit.Admitted {
			t.Fatalf("heavy #%d below pressure: %v", i, why)
		}
	}
	// In flight 5 ≥ 0.5 × 10: heavy's share with one client is 10, with the
	// light one arriving it is ⌈10/2⌉ = 5.
	t6, why := l.Admit(0, limit.Request{Client: heavy})
	if why != limit.Admitted {
		t.Fatalf("heavy alone under pressure: %v (its share is the whole limit)", why)
	}
	lt, why := l.Admit(0, limit.Request{Client: light})
	if why != limit.Admitted {
		t.Fatalf("light client: %v, want admitted", why)
	}
	if _, why := l.Admit(0, limit.Request{Client: heavy}); why != limit.ReasonFairness {
		t.Fatalf("heavy client over its share: %v, want fairness", why)
	}
	if _, why := l.Admit(0, limit.Request{Client: light}); why != limit.Admitted {
		t.Fatalf("light client's second: %v, want admitted", why)
	}
	if _, why := l.Admit(0, limit.Request{}); why != limit.Admitted {
		t.Fatalf("anonymous request: %v, want admitted (no fairness key)", why)
	}
	t6.Done(1, limit.Success)
	lt.Done(1, limit.Success)
	for i := range ts {
		ts[i].Done(1, limit.Success)
	}
}

func TestQueueConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg   limit.LimiterConfig
		field string
	}{
		{limit.LimiterConfig{Queue: limit.QueueConfig{Discipline: limit.FIFO}}, "Queue.MaxWait"},
		{limit.LimiterConfig{Queue: limit.QueueConfig{Discipline: 9, MaxWait: 1}}, "Queue.Discipline"},
		{limit.LimiterConfig{Queue: limit.QueueConfig{Discipline: limit.CoDel, MaxWait: 1, MaxQueue: -1}}, "Queue.MaxQueue"},
		{limit.LimiterConfig{Queue: limit.QueueConfig{Discipline: limit.CoDel, MaxWait: 1, Target: -1}}, "Queue.Target"},
		{limit.LimiterConfig{Fairness: limit.FairnessConfig{Slots: -1}}, "Fairness.Slots"},
		{limit.LimiterConfig{Fairness: limit.FairnessConfig{Slots: 8, Pressure: 2}}, "Fairness.Pressure"},
	} {
		_, err := limit.NewLimiter(mustFixed(t, 4), tc.cfg)
		var ce *limit.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: err %v, want a ConfigError on %s", tc.cfg, err, tc.field)
		}
	}
	for d := limit.Reject; d <= limit.CoDel; d++ {
		if got, ok := limit.ParseDiscipline(d.String()); !ok || got != d {
			t.Errorf("ParseDiscipline(%q) = %v, %v", d.String(), got, ok)
		}
	}
}

// Many goroutines admit, queue, cancel and finish at once: the limit is
// never exceeded, every waiter is resolved exactly once, nothing is left.
func TestQueueConcurrent(t *testing.T) {
	for _, d := range []limit.Discipline{limit.FIFO, limit.AdaptiveLIFO, limit.CoDel} {
		t.Run(d.String(), func(t *testing.T) {
			const lim = 8
			l := mustLimiter(t, mustFixed(t, lim), limit.LimiterConfig{
				Queue:    limit.QueueConfig{Discipline: d, MaxWait: 0.5, MaxQueue: 64},
				Fairness: limit.FairnessConfig{Slots: 16},
			})
			var clock atomic.Int64 // virtual time in µs, advanced by every call
			now := func() float64 { return float64(clock.Add(7)) / 1e6 }
			var peak, over atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for i := 0; i < 400; i++ {
						req := limit.Request{Class: shed.Class(r.IntN(3)), Client: uint64(r.IntN(5)), Cost: 1 + r.IntN(2)}
						var tk *limit.Ticket
						t0, why := l.Admit(now(), req)
						switch {
						case why == limit.Admitted:
							tk = &t0
						case why == limit.ReasonLimit:
							w := limit.NewWaiter()
							if l.Enqueue(now(), req, w) != limit.Admitted {
								continue
							}
							if r.IntN(4) == 0 && l.Cancel(w, now(), limit.ReasonCancelled) {
								continue
							}
							<-w.Ready()
							if w.Reason() != limit.Admitted {
								continue
							}
							tk = w.Ticket()
						default:
							continue
						}
						n := int64(l.InFlight())
						if n > peak.Load() {
							peak.Store(n)
						}
						if n > lim {
							over.Add(1)
						}
						tk.Done(now(), limit.Outcome(r.IntN(3)))
					}
				}(g)
			}
			wg.Wait()
			if over.Load() > 0 {
				t.Fatalf("in flight exceeded the limit %d times (peak %d)", over.Load(), peak.Load())
			}
			if l.InFlight() != 0 {
				t.Fatalf("InFlight %d after all done, want 0", l.InFlight())
			}
			// Abandoned entries may remain until the next dispatch; a final
			// dispatch through an admit/finish drains them.
			tk, _ := l.Acquire(now(), shed.Critical)
			tk.Done(now(), limit.Ignore)
			if l.QueueLen() != 0 {
				t.Fatalf("QueueLen %d after all done, want 0", l.QueueLen())
			}
		})
	}
}
