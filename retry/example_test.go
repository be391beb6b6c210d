package retry_test

import (
	"fmt"

	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/rng"
)

// A client retries a failed call at most three times, each retry paid from
// the shared budget and delayed by full-jitter backoff.
func Example() {
	budget, err := retry.NewBudget(retry.BudgetConfig{Max: 10, Ratio: 0.1})
	if err != nil {
		panic(err)
	}
	backoff := retry.Backoff{Base: 0.5, Cap: 30}
	r := rng.New(1) // any Rand; nil means math/rand/v2

	now := 0.0
	budget.RecordRequest(now) // a new request: deposit 0.1 token
	for attempt := 1; attempt <= 3; attempt++ {
		// ... attempt number `attempt` failed at now ...
		if !budget.TryRetry(now) {
			break
		}
		now += backoff.Delay(attempt, 0, r)
		fmt.Printf("retry %d at %.3f s, ceiling %v s\n", attempt, now, backoff.Ceiling(attempt))
	}
	fmt.Printf("tokens left: %.1f\n", budget.Tokens())
	// Output:
	// retry 1 at 0.627 s, ceiling 1 s
	// retry 2 at 0.633 s, ceiling 2 s
	// retry 3 at 2.742 s, ceiling 4 s
	// tokens left: 7.0
}

// Ten new requests deposit 0.1 token each in float64: 0.9999999999999999,
// one ulp short of a retry.
func ExampleBudget() {
	b, _ := retry.NewBudget(retry.BudgetConfig{Max: 1, Ratio: 0.1})
	b.TryRetry(0) // spend the reserve
	for i := 0; i < 10; i++ {
		b.RecordRequest(0)
	}
	fmt.Println(b.Tokens(), b.TryRetry(0))
	b.RecordRequest(0)
	fmt.Println(b.TryRetry(0))
	// Output:
	// 0.9999999999999999 false
	// true
}
