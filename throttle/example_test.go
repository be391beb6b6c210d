package throttle_test

import (
	"fmt"

	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/throttle"
)

// A backend refuses every request: after n refusals p = n/(n+1), so the
// client sends the (n+1)-th request with probability 1/(n+1), about
// ln 100 + 0.58 ≈ 5 of the first 100 on average, and rejects the rest
// itself, without sending them.
func Example() {
	th, err := throttle.New(throttle.Config{}) // K = 2, two minutes in 1 s slices
	if err != nil {
		panic(err)
	}
	r := rng.New(1) // the caller's randomness; math/rand/v2 in production
	sent := 0
	for i := 0; i < 100; i++ {
		now := float64(i) / 10 // ten requests per second
		if !th.Allow(now, r.Float64()) {
			continue // rejected locally: fail at once, do not retry
		}
		sent++
		th.Record(now, false) // the backend answered 503
	}
	fmt.Printf("sent %d of 100, p = %.2f\n", sent, th.Probability(10))
	// Output:
	// sent 6 of 100, p = 0.99
}
