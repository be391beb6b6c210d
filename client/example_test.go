package client_test

import (
	"net/http"
	"time"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/throttle"
)

// An http.Client for one dependency: retries under a budget, a breaker, a
// bulkhead and adaptive throttling, stacked in the documented order.
func ExampleNew() {
	budget, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 0.2, MinPerSecond: 5})
	policy, _ := retry.NewPolicy(retry.Policy{MaxAttempts: 5, Backoff: retry.Backoff{Base: 0.05, Cap: 0.4}, Budget: budget})
	brk, _ := breaker.New(breaker.Config{Threshold: 5, Recovery: 0.2})
	thr, _ := throttle.New(throttle.Config{})
	bulk, _ := client.NewBulkhead(64, 20*time.Millisecond)
	tr, _ := client.New(client.Config{Throttle: thr, Retry: policy, Breaker: brk, Bulkhead: bulk})
	httpClient := &http.Client{Transport: tr}
	_ = httpClient
}
