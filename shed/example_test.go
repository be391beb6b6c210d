package shed_test

import (
	"fmt"

	"github.com/spillwayhq/spillway/shed"
)

// Priority shedding: ordinary requests are refused once 2 are in flight,
// critical ones only at 3.
func ExampleClassLimiter() {
	lim, err := shed.NewClassLimiter(shed.ClassConfig{Limits: []int{3, 2}})
	if err != nil {
		panic(err)
	}
	var toks [4]shed.Token
	for i, c := range []shed.Class{shed.Default, shed.Default, shed.Default, shed.Critical} {
		var ok bool
		toks[i], ok = lim.Admit(c)
		fmt.Printf("%-8s admitted=%v in flight=%d\n", c, ok, lim.InFlight())
	}
	toks[0].Release()
	toks[0].Release() // idempotent
	fmt.Println("after releasing one twice:", lim.InFlight())
	// Output:
	// default  admitted=true in flight=1
	// default  admitted=true in flight=2
	// default  admitted=false in flight=2
	// critical admitted=true in flight=3
	// after releasing one twice: 2
}

// A request handler's shape: admit, and release whatever happens.
func ExampleClassLimiter_Admit() {
	lim, _ := shed.NewClassLimiter(shed.ClassConfig{Limits: []int{shed.NoLimit, 100, 20}})
	handle := func(c shed.Class) string {
		tok, ok := lim.Admit(c)
		if !ok {
			return "503 Service Unavailable"
		}
		defer tok.Release()
		return "200 OK"
	}
	fmt.Println(handle(shed.Sheddable), lim.InFlight())
	// Output: 200 OK 0
}

// Adaptive LIFO: FIFO while the queue drains, newest first once the oldest
// entry has waited over 100 ms, and entries older than 1 s expire.
func ExampleQueue() {
	q, _ := shed.NewQueue[string](shed.QueueConfig{
		Capacity:     100,
		Order:        shed.AdaptiveLIFO,
		StandingWait: shed.DefaultStandingWait,
		MaxWait:      1,
	})
	q.Push(0.0, "a")
	q.Push(0.1, "b")
	q.Push(0.2, "c")
	q.Push(0.3, "d")
	for _, now := range []float64{0.05, 1.15, 1.15, 1.15} {
		e, st := q.Pop(now)
		fmt.Printf("t=%.2f %s %s (waited %.2f s)\n", now, st, e.Value, now-e.At)
	}
	// Output:
	// t=0.05 served a (waited 0.05 s)
	// t=1.15 expired b (waited 1.05 s)
	// t=1.15 served d (waited 0.85 s)
	// t=1.15 served c (waited 0.95 s)
}

// CoDel at dequeue: a queue whose entries have all waited 200 ms for longer
// than the 100 ms interval starts losing them.
func ExampleCoDel() {
	codel, _ := shed.NewCoDel(shed.CoDelConfig{Target: 0.05, Interval: 0.1})
	for _, now := range []float64{0, 0.05, 0.1, 0.1, 0.15, 0.2} {
		fmt.Printf("t=%.2f drop=%v\n", now, codel.Drop(now, now-0.2))
	}
	// Output:
	// t=0.00 drop=false
	// t=0.05 drop=false
	// t=0.10 drop=true
	// t=0.10 drop=false
	// t=0.15 drop=false
	// t=0.20 drop=true
}
