package shed

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func mustQueue(t *testing.T, cfg QueueConfig) *Queue[string] {
	t.Helper()
	q, err := NewQueue[string](cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// qstep is one operation on a queue at an explicit instant: push v (ok tells
// whether it fits), or pop (v and status are what comes out).
type qstep struct {
	now    float64
	push   string // value to push; "" means pop
	ok     bool   // push: accepted
	v      string // pop: value expected ("" when Empty)
	status PopStatus
}

func runQueue(t *testing.T, q *Queue[string], steps []qstep) {
	t.Helper()
	for i, s := range steps {
		if s.push != "" {
			if got := q.Push(s.now, s.push); got != s.ok {
				t.Fatalf("step %d: Push(%v, %q) = %v, want %v", i, s.now, s.push, got, s.ok)
			}
			continue
		}
		e, st := q.Pop(s.now)
		if e.Value != s.v || st != s.status {
			t.Fatalf("step %d: Pop(%v) = %q %v, want %q %v", i, s.now, e.Value, st, s.v, s.status)
		}
	}
}

func TestQueueFIFOTailDrop(t *testing.T) {
	q := mustQueue(t, QueueConfig{Capacity: 3})
	runQueue(t, q, []qstep{
		{now: 0, v: "", status: Empty},
		{now: 1, push: "a", ok: true},
		{now: 2, push: "b", ok: true},
		{now: 3, push: "c", ok: true},
		{now: 4, push: "d", ok: false}, // full: tail drop
		{now: 5, v: "a", status: Served},
		{now: 6, push: "e", ok: true}, // wraps around the ring
		{now: 7, v: "b", status: Served},
		{now: 8, v: "c", status: Served},
		{now: 9, v: "e", status: Served},
		{now: 10, v: "", status: Empty},
	})
}

func TestQueueLIFO(t *testing.T) {
	q := mustQueue(t, QueueConfig{Capacity: 3, Order: LIFO})
	runQueue(t, q, []qstep{
		{now: 1, push: "a", ok: true},
		{now: 2, push: "b", ok: true},
		{now: 3, v: "b", status: Served},
		{now: 4, push: "c", ok: true},
		{now: 5, push: "d", ok: true},
		{now: 6, push: "x", ok: false},
		{now: 7, v: "d", status: Served},
		{now: 8, v: "c", status: Served},
		{now: 9, v: "a", status: Served},
		{now: 9, v: "", status: Empty},
	})
}

// Entries that waited longer than MaxWait come out as Expired, oldest first;
// one that waited exactly MaxWait is still served.
func TestQueueMaxWait(t *testing.T) {
	q := mustQueue(t, QueueConfig{Capacity: 4, MaxWait: 2})
	runQueue(t, q, []qstep{
		{now: 0, push: "a", ok: true},
		{now: 1, push: "b", ok: true},
		{now: 2.5, push: "c", ok: true},
		{now: 3, v: "a", status: Expired}, // waited 3 > 2
		{now: 3, v: "b", status: Served},  // waited exactly 2
		{now: 5, v: "c", status: Expired}, // waited 2.5
		{now: 5, v: "", status: Empty},
	})
	q = mustQueue(t, QueueConfig{Capacity: 2, Order: LIFO, MaxWait: 1})
	runQueue(t, q, []qstep{
		{now: 0, push: "old", ok: true},
		{now: 1.5, push: "new", ok: true},
		{now: 1.6, v: "old", status: Expired}, // expiry is checked at the front, even in LIFO
		{now: 1.6, v: "new", status: Served},
	})
}

// Adaptive LIFO with StandingWait 0.1 s and MaxWait 1 s: FIFO while the oldest
// has waited at most 0.1 s, LIFO after, expiry beyond 1 s.
func TestQueueAdaptiveLIFOByWait(t *testing.T) {
	q := mustQueue(t, QueueConfig{Capacity: 8, Order: AdaptiveLIFO, StandingWait: 0.1, MaxWait: 1})
	runQueue(t, q, []qstep{
		{now: 0.00, push: "a", ok: true},
		{now: 0.05, push: "b", ok: true},
		{now: 0.10, v: "a", status: Served}, // oldest waited 0.1: not above the threshold, FIFO
		{now: 0.20, push: "c", ok: true},
		{now: 0.20, v: "c", status: Served}, // oldest (b) waited 0.15: standing, newest first
		{now: 0.30, push: "d", ok: true},
		{now: 0.40, push: "e", ok: true},
		{now: 1.10, v: "b", status: Expired}, // b waited 1.05 > 1
		{now: 1.10, v: "e", status: Served},  // d waited 0.8: still standing
		{now: 1.10, v: "d", status: Served},
		{now: 2.00, push: "f", ok: true},
		{now: 2.00, push: "g", ok: true},
		{now: 2.05, v: "f", status: Served}, // drained since: FIFO again
	})
}

func TestQueueAdaptiveLIFOByLength(t *testing.T) {
	q := mustQueue(t, QueueConfig{Capacity: 8, Order: AdaptiveLIFO, StandingLen: 2})
	runQueue(t, q, []qstep{
		{now: 0, push: "a", ok: true},
		{now: 0, push: "b", ok: true},
		{now: 100, v: "a", status: Served}, // 2 entries: not above 2, FIFO however long they waited
		{now: 100, push: "c", ok: true},
		{now: 100, push: "d", ok: true},
		{now: 100, v: "d", status: Served}, // 3 entries: LIFO
		{now: 100, v: "b", status: Served}, // 2 entries: FIFO
		{now: 100, v: "c", status: Served},
	})
}

func TestQueuePopExpiredAndOldest(t *testing.T) {
	q := mustQueue(t, QueueConfig{Capacity: 2, MaxWait: 1})
	if _, ok := q.Oldest(); ok {
		t.Fatal("Oldest of an empty queue reported ok")
	}
	q.Push(0, "a")
	q.Push(0.5, "b")
	if at, ok := q.Oldest(); !ok || at != 0 {
		t.Fatalf("Oldest = %v %v, want 0 true", at, ok)
	}
	if _, ok := q.PopExpired(1); ok {
		t.Fatal("entry that waited exactly MaxWait expired")
	}
	if e, ok := q.PopExpired(1.25); !ok || e.Value != "a" || e.At != 0 {
		t.Fatalf("PopExpired = %+v %v", e, ok)
	}
	if _, ok := q.PopExpired(1.25); ok {
		t.Fatal("b expired after 0.75 s")
	}
	if q.Len() != 1 || q.Cap() != 2 {
		t.Fatalf("Len %d Cap %d", q.Len(), q.Cap())
	}
	noExpiry := mustQueue(t, QueueConfig{Capacity: 1})
	noExpiry.Push(0, "x")
	if _, ok := noExpiry.PopExpired(1e9); ok {
		t.Fatal("MaxWait 0 expired an entry")
	}
}

// Popped slots are cleared, so a queue of pointers does not keep served
// values alive.
func TestQueueClearsSlots(t *testing.T) {
	q, _ := NewQueue[*int](QueueConfig{Capacity: 2, Order: LIFO})
	x, y := new(int), new(int)
	q.Push(0, x)
	q.Push(0, y)
	q.Pop(0)
	q.Pop(0)
	for i, e := range q.buf {
		if e.Value != nil {
			t.Errorf("slot %d still holds a value", i)
		}
	}
}

// A seeded random mix of pushes and pops against a slice model.
func TestQueueModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, order := range []Order{FIFO, LIFO} {
		q, _ := NewQueue[int](QueueConfig{Capacity: 5, Order: order})
		var model []int
		for i := range 5000 {
			if r.IntN(2) == 0 {
				ok := q.Push(float64(i), i)
				if ok != (len(model) < 5) {
					t.Fatalf("%v step %d: Push ok = %v with %d held", order, i, ok, len(model))
				}
				if ok {
					model = append(model, i)
				}
				continue
			}
			e, st := q.Pop(float64(i))
			if len(model) == 0 {
				if st != Empty {
					t.Fatalf("%v step %d: Pop of empty = %v", order, i, st)
				}
				continue
			}
			var want int
			if order == FIFO {
				want, model = model[0], model[1:]
			} else {
				want, model = model[len(model)-1], model[:len(model)-1]
			}
			if st != Served || e.Value != want || e.At != float64(want) {
				t.Fatalf("%v step %d: Pop = %+v %v, want %d", order, i, e, st, want)
			}
		}
	}
}

func TestQueueConfigErrors(t *testing.T) {
	nan := 0.0
	nan /= nan
	tests := []struct {
		cfg   QueueConfig
		field string
	}{
		{QueueConfig{}, "Capacity"},
		{QueueConfig{Capacity: -1}, "Capacity"},
		{QueueConfig{Capacity: 1, Order: 7}, "Order"},
		{QueueConfig{Capacity: 1, MaxWait: -1}, "MaxWait"},
		{QueueConfig{Capacity: 1, MaxWait: nan}, "MaxWait"},
		{QueueConfig{Capacity: 1, StandingWait: -0.1}, "StandingWait"},
		{QueueConfig{Capacity: 1, StandingLen: -1}, "StandingLen"},
		{QueueConfig{Capacity: 1, Order: AdaptiveLIFO}, "StandingWait"},
	}
	for _, tt := range tests {
		_, err := NewQueue[int](tt.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want a ConfigError for %s", tt.cfg, err, tt.field)
		}
	}
}

func TestQueueStrings(t *testing.T) {
	if FIFO.String() != "FIFO" || LIFO.String() != "LIFO" || AdaptiveLIFO.String() != "adaptive LIFO" || Order(9).String() != "Order(9)" {
		t.Error("Order.String")
	}
	if Empty.String() != "empty" || Served.String() != "served" || Expired.String() != "expired" || PopStatus(9).String() != "PopStatus(9)" {
		t.Error("PopStatus.String")
	}
}

// Peek names what Pop would take at the same instant, in every order, and
// leaves the queue as it was.
func TestQueuePeekMatchesPop(t *testing.T) {
	for _, cfg := range []QueueConfig{
		{Capacity: 8},
		{Capacity: 8, Order: LIFO},
		{Capacity: 8, Order: AdaptiveLIFO, StandingWait: 0.1, MaxWait: 0.5},
		{Capacity: 8, MaxWait: 0.3},
	} {
		q := mustQueue(t, cfg)
		r := rand.New(rand.NewPCG(3, 4))
		now := 0.0
		for i := 0; i < 500; i++ {
			now += r.Float64() * 0.05
			if r.IntN(2) == 0 {
				q.Push(now, string(rune('a'+i%26)))
				continue
			}
			n := q.Len()
			pe, ps := q.Peek(now)
			if q.Len() != n {
				t.Fatalf("%v: Peek changed Len", cfg.Order)
			}
			e, s := q.Pop(now)
			if pe != e || ps != s {
				t.Fatalf("%v at %v: Peek = %v %v, Pop = %v %v", cfg.Order, now, pe, ps, e, s)
			}
		}
	}
}

func TestQueueFilter(t *testing.T) {
	q := mustQueue(t, QueueConfig{Capacity: 4})
	// Wrap the ring: push 4, pop 2, push 2 more.
	for i, v := range []string{"a", "b", "c", "d"} {
		q.Push(float64(i), v)
	}
	q.Pop(4)
	q.Pop(4)
	q.Push(5, "x")
	q.Push(6, "e")
	if n := q.Filter(func(v string) bool { return v != "x" && v != "c" }); n != 2 {
		t.Fatalf("Filter removed %d, want 2", n)
	}
	var got []string
	for {
		e, s := q.Pop(10)
		if s == Empty {
			break
		}
		got = append(got, e.Value)
	}
	if len(got) != 2 || got[0] != "d" || got[1] != "e" {
		t.Fatalf("after Filter the queue held %v, want [d e] in order", got)
	}
	if !q.Push(11, "f") || q.Len() != 1 {
		t.Fatal("queue unusable after Filter")
	}
}
