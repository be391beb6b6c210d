package deadline_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spillwayhq/spillway/deadline"
)

func ExampleParseTimeout() {
	for _, s := range []string{"250m", "2M", "0n", "99999999H", "5h"} {
		d, err := deadline.ParseTimeout(s)
		fmt.Println(d, err)
	}
	// Output:
	// 250ms <nil>
	// 2m0s <nil>
	// 0s <nil>
	// 2562047h47m16.854775807s <nil>
	// 0s deadline: bad timeout "5h": unknown unit 'h'
}

// The finest unit that fits in 8 digits, rounded down.
func ExampleFormatTimeout() {
	for _, d := range []time.Duration{
		1500 * time.Microsecond,
		2*time.Second + 999, // the last 999 ns do not fit: rounded down
		30 * time.Hour,
		-time.Second, // already spent
	} {
		fmt.Println(deadline.FormatTimeout(d))
	}
	// Output:
	// 1500000n
	// 2000000u
	// 108000S
	// 0n
}

// A handler's edge: read the budget, make it the context deadline, refuse
// work that cannot finish in time, and pass the rest downstream.
func Example() {
	// The request as it arrives, and the instant it arrived (time.Now() in a
	// real server; a fixed instant keeps this example reproducible).
	in := http.Header{}
	in.Set(deadline.HTTPHeader, "300m")
	arrived := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	budget, ok, err := deadline.FromHeader(in)
	if err != nil {
		fmt.Println("400:", err)
		return
	}
	if !ok {
		budget = 2 * time.Second // the server's own default
	}
	ctx, cancel := deadline.WithBudget(context.Background(), arrived, budget)
	defer cancel()

	// 20 ms later, with an expected 50 ms of queueing and 100 ms of work:
	now := arrived.Add(20 * time.Millisecond)
	rem, _ := deadline.Remaining(ctx, now)
	fmt.Println("remaining:", rem, "feasible:", deadline.Feasible(rem, 50*time.Millisecond, 100*time.Millisecond))
	// With 300 ms of expected queueing it could not finish: drop it now.
	fmt.Println("feasible with a long queue:", deadline.Feasible(rem, 300*time.Millisecond, 100*time.Millisecond))

	// A call downstream keeps 10 ms back for the network.
	out := http.Header{}
	sent, _ := deadline.SetHeader(out, ctx, now, 10*time.Millisecond)
	fmt.Println("sent:", sent, out.Get(deadline.HTTPHeader))
	// Output:
	// remaining: 280ms feasible: true
	// feasible with a long queue: false
	// sent: 270ms 270000u
}
