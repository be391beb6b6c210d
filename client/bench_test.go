package client_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/throttle"
)

// canned answers 200 with a reusable body, without a network: the
// benchmark measures the stack, not the transport.
type canned struct{ resp http.Response }

type nopBody struct{ io.Reader }

func (nopBody) Close() error { return nil }

func (c *canned) RoundTrip(*http.Request) (*http.Response, error) {
	r := c.resp
	r.Body = nopBody{strings.NewReader("")}
	return &r, nil
}

func benchStack(b *testing.B, rt http.RoundTripper) {
	req, _ := http.NewRequest(http.MethodGet, "http://backend.local/", nil)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(resp, err)
		}
		resp.Body.Close()
	}
}

func newCanned() *canned {
	return &canned{resp: http.Response{StatusCode: 200, Header: http.Header{}}}
}

// BenchmarkStack/bare is the canned transport alone; /full adds throttle,
// retry with a budget, breaker and bulkhead on the success path.
func BenchmarkStack(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchStack(b, newCanned()) })
	b.Run("full", func(b *testing.B) {
		th, _ := throttle.New(throttle.Config{})
		budget, _ := retry.NewBudget(retry.BudgetConfig{})
		pol, _ := retry.NewPolicy(retry.Policy{Budget: budget})
		br, _ := breaker.New(breaker.Config{})
		bh, _ := client.NewBulkhead(100, 0)
		tr, err := client.New(client.Config{Transport: newCanned(), Throttle: th, Retry: pol, Breaker: br, Bulkhead: bh})
		if err != nil {
			b.Fatal(err)
		}
		benchStack(b, tr)
	})
	b.Run("retry+breaker", func(b *testing.B) {
		budget, _ := retry.NewBudget(retry.BudgetConfig{})
		pol, _ := retry.NewPolicy(retry.Policy{Budget: budget})
		br, _ := breaker.New(breaker.Config{})
		tr, _ := client.New(client.Config{Transport: newCanned(), Retry: pol, Breaker: br})
		benchStack(b, tr)
	})
}
