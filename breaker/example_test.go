package breaker_test

import (
	"errors"
	"fmt"

	"github.com/spillwayhq/spillway/breaker"
)

// The seed's timeline: a dependency that fails its first three calls, a
// breaker that opens after three failures in a row for five seconds.
func Example() {
	b, err := breaker.New(breaker.Config{Threshold: 3, Recovery: 5})
	if err != nil {
		panic(err)
	}
	calls := 0
	dependency := func() bool { calls++; return calls > 3 }

	for _, now := range []float64{0, 1, 2, 3, 10, 11} {
		ticket, err := b.Allow(now)
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Printf("t=%2v rejected\n", now)
			continue
		}
		ok := dependency()
		ticket.Done(now, ok) // with the time the call ended
		s := b.Snapshot()
		fmt.Printf("t=%2v ok=%-5v state=%v failures=%d\n", now, ok, s.State, s.Failures)
	}
	fmt.Println("dependency called", calls, "times")
	// Output:
	// t= 0 ok=false state=CLOSED failures=1
	// t= 1 ok=false state=CLOSED failures=2
	// t= 2 ok=false state=OPEN failures=3
	// t= 3 rejected
	// t=10 ok=true  state=CLOSED failures=0
	// t=11 ok=true  state=CLOSED failures=0
	// dependency called 5 times
}
