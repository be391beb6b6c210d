package chain

import (
	"context"
	"math"
	"testing"

	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/upstream"
)

// constRand always draws u.
type constRand float64

func (u constRand) Float64() float64 { return float64(u) }

// retryAll retries every kind and the statuses 502 and 503.
var retryAll = RetryOn{ConnectFailure: true, Reset: true, Timeout: true, Statuses: []int{502, 503}}

// status503 is a failed attempt answered 503, without Retry-After.
var status503 = Failure{Status: 503, Replayable: true, After: -1}

// retryChain returns a chain retrying by pol and on, drawing jitter u.
func retryChain(t *testing.T, pol retry.Policy, on RetryOn, u float64, extra Config) *Chain {
	t.Helper()
	rp, err := retry.NewPolicy(pol)
	if err != nil {
		t.Fatal(err)
	}
	extra.Retry, extra.RetryOn, extra.Rand = rp, on, constRand(u)
	return New(extra)
}

// tries runs attempts of p at now until Retry says stop, and returns the
// delays of the retries it allowed.
func tries(p *Pass, now float64, f Failure) []float64 {
	var delays []float64
	for {
		if ref, _ := p.Attempt(now); ref != nil {
			return delays
		}
		d, ok := p.Retry(now, f)
		if !ok {
			return delays
		}
		delays = append(delays, d)
	}
}

func equalDelays(got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			return false
		}
	}
	return true
}

// MaxAttempts 3 allows two retries; without jitter they wait 0.1 × 2^n:
// 0.2 s, then 0.4 s.
func TestRetryAttempts(t *testing.T) {
	c := retryChain(t, retry.Policy{MaxAttempts: 3, Backoff: retry.Backoff{Base: 0.1, Cap: 1, Jitter: retry.NoJitter}}, retryAll, 0, Config{})
	p := admitOK(t, c, newClock(0), 0, get(false))
	if got := tries(p, 0, status503); !equalDelays(got, []float64{0.2, 0.4}) {
		t.Errorf("delays %v; want [0.2 0.4]", got)
	}
	cs := c.Counts()
	if cs.Retries != 2 || cs.RetriesStopped["attempts"] != 1 || cs.RetriesStopped["budget"] != 0 {
		t.Errorf("counts %+v; want 2 retries, 1 stopped by attempts", cs)
	}
}

// Decorrelated jitter grows from the previous delay, which the pass
// keeps: with u = 0.5, base 0.1 and cap 1 the delays are 0.1 + 0.5 ×
// (3 × prev − 0.1) from prev = 0.1: 0.2, 0.35, 0.575, 0.9125, then the
// cap. Every schedule stays within [base, cap] (full jitter within
// [0, cap]).
func TestRetryBackoff(t *testing.T) {
	b := retry.Backoff{Base: 0.1, Cap: 1, Jitter: retry.DecorrelatedJitter}
	c := retryChain(t, retry.Policy{MaxAttempts: 7, Backoff: b}, retryAll, 0.5, Config{})
	p := admitOK(t, c, newClock(0), 0, get(false))
	if got, want := tries(p, 0, status503), []float64{0.2, 0.35, 0.575, 0.9125, 1, 1}; !equalDelays(got, want) {
		t.Errorf("delays %v; want %v", got, want)
	}
	for _, j := range []retry.Jitter{retry.FullJitter, retry.EqualJitter, retry.DecorrelatedJitter, retry.NoJitter} {
		for _, u := range []float64{0, 0.3, 0.999999} {
			b.Jitter = j
			c := retryChain(t, retry.Policy{MaxAttempts: 12, Backoff: b}, retryAll, u, Config{})
			p := admitOK(t, c, newClock(0), 0, get(false))
			delays := tries(p, 0, status503)
			lo := 0.1
			if j == retry.FullJitter {
				lo = 0
			}
			if len(delays) != 11 {
				t.Errorf("%v, u=%v: %d retries; want 11", j, u, len(delays))
			}
			for _, d := range delays {
				if d < lo || d > 1 {
					t.Errorf("%v, u=%v: delay %v outside [%v, 1]", j, u, d, lo)
				}
			}
		}
	}
}

// The budget (Max 2, Ratio 0.5) starts full: two retries, then the
// third is stopped though attempts remain; two new requests deposit a
// token, which pays for one more retry.
func TestRetryBudget(t *testing.T) {
	bud, err := retry.NewBudget(retry.BudgetConfig{Max: 2, Ratio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	pol := retry.Policy{MaxAttempts: 10, Backoff: retry.Backoff{Base: 0.01, Cap: 0.01, Jitter: retry.NoJitter}, Budget: bud}
	c := retryChain(t, pol, retryAll, 0, Config{})
	clk := newClock(0)
	if got := tries(admitOK(t, c, clk, 0, get(false)), 0, status503); len(got) != 2 {
		t.Errorf("%d retries; want 2", len(got))
	}
	if n := c.Counts().RetriesStopped["budget"]; n != 1 {
		t.Errorf("stopped by the budget %d times; want 1", n)
	}
	admitOK(t, c, clk, 1, get(false)).End(1, Success)
	if got := tries(admitOK(t, c, clk, 1, get(false)), 1, status503); len(got) != 1 {
		t.Errorf("%d retries after two requests; want 1", len(got))
	}
	if n := c.Counts().RetriesStopped["budget"]; n != 2 {
		t.Errorf("stopped by the budget %d times; want 2", n)
	}
}

// A floor of 1 retry per second pays when the proportional part (Max 1,
// Ratio 0.1) is empty: at 0 s the token, then the floor's one; at 1.5 s
// the floor has refilled one.
func TestRetryBudgetFloor(t *testing.T) {
	bud, err := retry.NewBudget(retry.BudgetConfig{Max: 1, Ratio: 0.1, MinPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	pol := retry.Policy{MaxAttempts: 10, Backoff: retry.Backoff{Base: 0.01, Cap: 0.01, Jitter: retry.NoJitter}, Budget: bud}
	c := retryChain(t, pol, retryAll, 0, Config{})
	clk := newClock(0)
	if got := tries(admitOK(t, c, clk, 0, get(false)), 0, status503); len(got) != 2 {
		t.Errorf("%d retries at 0 s; want 2 (a token, then the floor)", len(got))
	}
	if got := tries(admitOK(t, c, clk, 1.5, get(false)), 1.5, status503); len(got) != 1 {
		t.Errorf("%d retries at 1.5 s; want 1 (the floor)", len(got))
	}
}

// Requests the chain refuses never reach the cluster: they earn no
// retries. After the budget (Max 1, Ratio 0.5) is spent, four requests
// refused by the rate limit and one admitted leave 0.5 tokens: no retry.
func TestRetryBudgetNotEarnedByRefusals(t *testing.T) {
	bud, err := retry.NewBudget(retry.BudgetConfig{Max: 1, Ratio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	lims := &fakeLimits{}
	pol := retry.Policy{MaxAttempts: 5, Backoff: retry.Backoff{Base: 0.01, Cap: 0.01, Jitter: retry.NoJitter}, Budget: bud}
	c := retryChain(t, pol, retryAll, 0, Config{Limits: lims})
	clk := newClock(0)
	if got := tries(admitOK(t, c, clk, 0, get(false)), 0, status503); len(got) != 1 {
		t.Fatalf("%d retries; want 1", len(got))
	}
	lims.verdict = refuse429
	for i := 0; i < 4; i++ {
		var p Pass
		if ref := c.Admit(context.Background(), clk, 1, get(false), &p); ref == nil {
			t.Fatal("not refused")
		}
	}
	lims.verdict = nil
	if got := tries(admitOK(t, c, clk, 2, get(false)), 2, status503); len(got) != 0 {
		t.Errorf("%d retries paid by refused requests; want 0", len(got))
	}
	if tok := bud.Tokens(); tok != 0.5 {
		t.Errorf("budget %v tokens; want 0.5", tok)
	}
}

// What is retried: a connection never made whatever the method; resets,
// timeouts and listed statuses only for idempotent requests (or with a
// non-empty Idempotency-Key); nothing the engine cannot replay.
func TestRetryable(t *testing.T) {
	refused := Failure{Kind: upstream.KindRefused, Replayable: true, After: -1}
	reset := Failure{Kind: upstream.KindReset, Replayable: true, After: -1}
	timeout := Failure{Kind: upstream.KindTimeout, Replayable: true, After: -1}
	kind := func(k upstream.Kind) Failure { return Failure{Kind: k, Replayable: true, After: -1} }
	status := func(s int) Failure { return Failure{Status: s, Replayable: true, After: -1} }
	unreplayable := func(f Failure) Failure { f.Replayable = false; return f }
	for _, tc := range []struct {
		name   string
		on     RetryOn
		method string
		kv     []string
		f      Failure
		want   bool
	}{
		{"GET refused", retryAll, "GET", nil, refused, true},
		{"POST refused", retryAll, "POST", nil, refused, true},
		{"POST refused, not replayable", retryAll, "POST", nil, unreplayable(refused), false},
		{"GET refused, connect failures off", RetryOn{Reset: true}, "GET", nil, refused, false},
		{"GET reset", retryAll, "GET", nil, reset, true},
		{"GET reset, resets off", RetryOn{ConnectFailure: true}, "GET", nil, reset, false},
		{"POST reset", retryAll, "POST", nil, reset, false},
		{"POST reset, Idempotency-Key", retryAll, "POST", []string{"Idempotency-Key", "k-1"}, reset, true},
		{"POST reset, empty Idempotency-Key", retryAll, "POST", []string{"Idempotency-Key", ""}, reset, false},
		{"PATCH timeout", retryAll, "PATCH", nil, timeout, false},
		{"PUT timeout", retryAll, "PUT", nil, timeout, true},
		{"GET timeout, timeouts off", RetryOn{Reset: true}, "GET", nil, timeout, false},
		{"GET bad response", retryAll, "GET", nil, kind(upstream.KindBadResponse), false},
		{"GET canceled", retryAll, "GET", nil, kind(upstream.KindCanceled), false},
		{"GET pool full", retryAll, "GET", nil, kind(upstream.KindPoolFull), false},
		{"GET 503", retryAll, "GET", nil, status(503), true},
		{"GET 502", retryAll, "GET", nil, status(502), true},
		{"GET 500", retryAll, "GET", nil, status(500), false},
		{"GET 504", retryAll, "GET", nil, status(504), false},
		{"DELETE 503", retryAll, "DELETE", nil, status(503), true},
		{"POST 503", retryAll, "POST", nil, status(503), false},
		{"GET 503, not replayable", retryAll, "GET", nil, unreplayable(status(503)), false},
		{"GET reset, not replayable", retryAll, "GET", nil, unreplayable(reset), false},
	} {
		c := retryChain(t, retry.Policy{MaxAttempts: 3}, tc.on, 0, Config{})
		p := admitOK(t, c, newClock(0), 0, viewOf(tc.method, "192.0.2.1:4000", false, tc.kv...))
		p.Attempt(0)
		if _, ok := p.Retry(0, tc.f); ok != tc.want {
			t.Errorf("%s: retried %v; want %v", tc.name, ok, tc.want)
		}
	}
	p := admitOK(t, New(Config{}), newClock(0), 0, get(false))
	p.Attempt(0)
	if _, ok := p.Retry(0, refused); ok {
		t.Error("a route without a retry policy retried")
	}
}

// The server's Retry-After replaces a shorter backoff; a retry that
// cannot finish before the deadline (2 s) is not made.
func TestRetryServerDelay(t *testing.T) {
	pol := retry.Policy{MaxAttempts: 5, Backoff: retry.Backoff{Base: 0.1, Cap: 1, Jitter: retry.NoJitter}}
	c := retryChain(t, pol, retryAll, 0, Config{Deadline: Deadline{Default: 2}})
	p := admitOK(t, c, newClock(0), 0, get(false))
	p.Attempt(0)
	if d, ok := p.Retry(0.5, Failure{Status: 503, Replayable: true, After: 1}); !ok || d != 1 {
		t.Errorf("Retry-After 1: %v %v; want 1 true", d, ok)
	}
	p.Attempt(1.5)
	if d, ok := p.Retry(1.5, Failure{Status: 503, Replayable: true, After: 5}); ok {
		t.Errorf("Retry-After 5 past the deadline: retried after %v", d)
	}
	p.Attempt(1.9)
	if d, ok := p.Retry(1.9, status503); ok { // 1.9 + 0.4 ≥ 2
		t.Errorf("backoff past the deadline: retried after %v", d)
	}
	if cs := c.Counts(); cs.Retries != 1 || cs.RetriesStopped["deadline"] != 2 {
		t.Errorf("counts %+v; want 1 retry, 2 stopped by the deadline", cs)
	}
}

// The endpoints tried: at most 8 remembered, in order.
func TestTried(t *testing.T) {
	p := admitOK(t, New(Config{}), newClock(0), 0, get(false))
	addrs := []string{"a:1", "b:1", "c:1", "d:1", "e:1", "f:1", "g:1", "h:1", "i:1", "j:1"}
	for i, a := range addrs {
		if !p.Untried(a) {
			t.Errorf("%s tried before it was", a)
		}
		p.Tried(a)
		if want := min(i+1, 8); p.NTried() != want {
			t.Errorf("NTried %d; want %d", p.NTried(), want)
		}
	}
	for i, a := range addrs {
		if got, want := p.Untried(a), i >= 8; got != want {
			t.Errorf("Untried(%s) = %v; want %v", a, got, want)
		}
	}
}
