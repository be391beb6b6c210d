package client_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/throttle"
)

// An http.Client for one dependency: retries under a budget, a breaker, a
// bulkhead and adaptive throttling, stacked in the documented order. The
// backend here fails its first two calls with 503; the caller sees one
// answer, the third attempt's.
func ExampleNew() {
	var calls atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer backend.Close()

	budget, _ := retry.NewBudget(retry.BudgetConfig{Ratio: 0.2, MinPerSecond: 5})
	policy, _ := retry.NewPolicy(retry.Policy{MaxAttempts: 5, Backoff: retry.Backoff{Base: 0.01, Cap: 0.1}, Budget: budget})
	brk, _ := breaker.New(breaker.Config{Threshold: 5, Recovery: 0.2})
	thr, _ := throttle.New(throttle.Config{})
	bulk, _ := client.NewBulkhead(64, 20*time.Millisecond)
	inner := &http.Transport{} // nil: http.DefaultTransport
	defer inner.CloseIdleConnections()
	tr, err := client.New(client.Config{Transport: inner, Throttle: thr, Retry: policy, Breaker: brk, Bulkhead: bulk})
	if err != nil {
		panic(err)
	}
	httpClient := &http.Client{Transport: tr}

	resp, err := httpClient.Get(backend.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	st := tr.Stats()
	fmt.Println(resp.StatusCode, string(body))
	fmt.Printf("backend calls %d; attempts sent %d, retries %d\n", calls.Load(), st.Sent, st.Retried)
	// Output:
	// 200 hello
	// backend calls 3; attempts sent 3, retries 2
}

// A bulkhead of one place and no wait: while one call is in flight (its
// response body not yet closed), the next is refused locally, at no cost to
// the dependency.
func ExampleNewBulkhead() {
	started, release := make(chan struct{}), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "done")
	}))
	defer backend.Close()

	bulk, err := client.NewBulkhead(1, 0) // 1 call at a time; 0: refuse at once when full
	if err != nil {
		panic(err)
	}
	inner := &http.Transport{}
	defer inner.CloseIdleConnections()
	tr, _ := client.New(client.Config{Transport: inner, Bulkhead: bulk})
	c := &http.Client{Transport: tr}
	get := func(path string) string {
		resp, err := c.Get(backend.URL + path)
		if err != nil {
			var ce *client.Error
			if errors.As(err, &ce) {
				return "refused locally: " + ce.Reason.String()
			}
			return err.Error()
		}
		defer resp.Body.Close() // closing the body gives the place back
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}

	slow := make(chan string)
	go func() { slow <- get("/slow") }()
	<-started // the slow call holds the only place
	fmt.Println("second call:", get("/fast"))
	close(release)
	fmt.Println("slow call:", <-slow)
	fmt.Println("third call:", get("/fast"))
	// Output:
	// second call: refused locally: bulkhead_full
	// slow call: done
	// third call: done
}
