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

// A breaker on the failure rate of the last 10 calls (at least 5), whose
// open time doubles after each failed trial, up to a minute; HTTPFailure
// decides what counts as a failure.
func Example_failureRate() {
	b, err := breaker.New(breaker.Config{
		Window:      breaker.CountWindow,
		WindowCalls: 10, MinCalls: 5, FailureRate: 0.5,
		Recovery: 5, RecoveryMultiplier: 2, MaxRecovery: 60,
	})
	if err != nil {
		panic(err)
	}
	statuses := []int{200, 404, 503, 200, 502, 504, 200}
	for i, status := range statuses {
		now := float64(i)
		ticket, err := b.Allow(now)
		if err != nil {
			fmt.Printf("t=%v rejected\n", now)
			continue
		}
		ticket.Done(now+0.05, !breaker.HTTPFailure(status, nil))
		s := b.Snapshot()
		fmt.Printf("t=%v status %d: %v, %d of %d calls failed\n", now, status, s.State, s.Failures, s.Calls)
	}
	// OPEN since 5.05 for 5 s: the trial at 11 fails, and the breaker
	// opens again, for 10 s this time.
	ticket, err := b.Allow(11)
	if err != nil {
		panic(err)
	}
	ticket.Done(11.05, false)
	s := b.Snapshot()
	fmt.Printf("t=11 trial failed: %v for %v s\n", s.State, s.OpenFor)
	// Output:
	// t=0 status 200: CLOSED, 0 of 1 calls failed
	// t=1 status 404: CLOSED, 0 of 2 calls failed
	// t=2 status 503: CLOSED, 1 of 3 calls failed
	// t=3 status 200: CLOSED, 1 of 4 calls failed
	// t=4 status 502: CLOSED, 2 of 5 calls failed
	// t=5 status 504: OPEN, 3 of 6 calls failed
	// t=6 rejected
	// t=11 trial failed: OPEN for 10 s
}

// gobreaker's Settings{MaxRequests: 3, Timeout: 30 s, ReadyToTrip: more
// than 5 consecutive failures} as a Config: Threshold 6, Recovery 30, and
// TrialsInARow for gobreaker's half-open rule (3 successes in a row
// close it; the first failed trial reopens it at once).
func Example_gobreakerSettings() {
	b, err := breaker.New(breaker.Config{Threshold: 6, Recovery: 30, Trials: 3, TrialsInARow: true})
	if err != nil {
		panic(err)
	}
	call := func(now float64, ok bool) {
		ticket, err := b.Allow(now)
		if err != nil {
			fmt.Printf("t=%v rejected\n", now)
			return
		}
		ticket.Done(now, ok)
		fmt.Printf("t=%v ok=%-5v %v\n", now, ok, b.Snapshot().State)
	}
	for range 6 {
		call(0, false)
	}
	call(30, true)  // the first trial
	call(30, false) // the second fails: OPEN again at once
	call(60, true)
	call(60, true)
	call(60, true) // three in a row
	// Output:
	// t=0 ok=false CLOSED
	// t=0 ok=false CLOSED
	// t=0 ok=false CLOSED
	// t=0 ok=false CLOSED
	// t=0 ok=false CLOSED
	// t=0 ok=false OPEN
	// t=30 ok=true  HALF_OPEN
	// t=30 ok=false OPEN
	// t=60 ok=true  HALF_OPEN
	// t=60 ok=true  HALF_OPEN
	// t=60 ok=true  CLOSED
}
