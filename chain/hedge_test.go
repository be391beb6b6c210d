package chain

import (
	"math"
	"testing"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/upstream"
)

// hedgeChain returns a chain hedging by hc, paid from a budget of max
// tokens filled ratio per request (no floor), as the gateway builds it for
// a route whose retries are off.
func hedgeChain(t *testing.T, hc retry.HedgeConfig, max, ratio float64, extra Config) (*Chain, *retry.Budget) {
	t.Helper()
	b, err := retry.NewBudget(retry.BudgetConfig{Max: max, Ratio: ratio})
	if err != nil {
		t.Fatal(err)
	}
	hc.Budget = b
	h, err := retry.NewHedger(hc)
	if err != nil {
		t.Fatal(err)
	}
	extra.Hedger, extra.Budget = h, b
	return New(extra), b
}

// A fixed delay: each of max_hedges (2) hedges may follow after 50 ms;
// after the second, or on a POST, a bypassed route, or a request whose
// deadline comes before the delay, none (+Inf) and TryHedge refuses
// without counting a refusal.
func TestHedgeDelayFixed(t *testing.T) {
	c, _ := hedgeChain(t, retry.HedgeConfig{Delay: 0.05, MaxHedges: 2}, 10, 1, Config{})
	p := admitOK(t, c, newClock(0), 0, get(false))
	for i := range 2 {
		if d := p.HedgeDelay(1); d != 0.05 {
			t.Fatalf("hedge %d: delay %v, want 0.05", i+1, d)
		}
		if _, ok := p.TryHedge(1.05); !ok {
			t.Fatalf("hedge %d refused", i+1)
		}
	}
	if d := p.HedgeDelay(1.1); !math.IsInf(d, 1) {
		t.Errorf("after max_hedges: delay %v, want +Inf", d)
	}
	if _, ok := p.TryHedge(1.1); ok {
		t.Error("a third hedge went")
	}
	if p.Hedges() != 2 {
		t.Errorf("Hedges() = %d, want 2", p.Hedges())
	}
	post := admitOK(t, c, newClock(2), 2, viewOf("POST", "192.0.2.1:4000", false))
	if d := post.HedgeDelay(2); !math.IsInf(d, 1) {
		t.Errorf("POST: delay %v, want +Inf", d)
	}
	if _, ok := post.TryHedge(2.05); ok {
		t.Error("POST hedged")
	}
	keyed := admitOK(t, c, newClock(2), 2, viewOf("POST", "192.0.2.1:4000", false, "Idempotency-Key", "k1"))
	if d := keyed.HedgeDelay(2); d != 0.05 {
		t.Errorf("POST with Idempotency-Key: delay %v, want 0.05", d)
	}
	c2, _ := hedgeChain(t, retry.HedgeConfig{Delay: 0.05}, 10, 1, Config{Deadline: Deadline{Default: 0.04}})
	short := admitOK(t, c2, newClock(3), 3, get(false))
	if d := short.HedgeDelay(3); !math.IsInf(d, 1) {
		t.Errorf("deadline 40 ms, delay 50 ms: %v, want +Inf", d)
	}
	c.Bypass(true)
	byp := admitOK(t, c, newClock(4), 4, get(false))
	if d := byp.HedgeDelay(4); !math.IsInf(d, 1) {
		t.Errorf("bypassed: delay %v, want +Inf", d)
	}
	if k := c.Counts(); k.Hedges != 2 || k.HedgesRefused != 0 {
		t.Errorf("counts %+v, want 2 hedges, none refused", k)
	}
}

// With delay 0 the delay is the p95 of the latencies the winners recorded:
// +Inf until 20 are known, then the 19th smallest of 10 ms … 200 ms.
func TestHedgeDelayTracked(t *testing.T) {
	c, _ := hedgeChain(t, retry.HedgeConfig{}, 10, 1, Config{})
	p := admitOK(t, c, newClock(0), 0, get(false))
	for i := 1; i <= 19; i++ {
		p.RecordLatency(1, float64(i)/100)
	}
	if d := p.HedgeDelay(1); !math.IsInf(d, 1) {
		t.Fatalf("19 samples: delay %v, want +Inf", d)
	}
	p.RecordLatency(1, 0.2)
	if d := p.HedgeDelay(1); math.Abs(d-0.19) > 1e-12 {
		t.Errorf("20 samples: delay %v, want 0.19", d)
	}
	if d := p.HedgeDelay(62); !math.IsInf(d, 1) {
		t.Errorf("61 s later (max_age 60 s): delay %v, want +Inf", d)
	}
}

// Hedges are paid from the route's retry budget: 2 tokens, 0.1 per
// request. The first request's hedge leaves 1 (2 capped, minus 1), the
// second's 0.1; the third request finds 0.2 and is not hedged (counted
// as refused). The budget is filled without a retry policy.
func TestHedgeBudget(t *testing.T) {
	c, b := hedgeChain(t, retry.HedgeConfig{Delay: 0.05}, 2, 0.1, Config{})
	want := []bool{true, true, false}
	for i, w := range want {
		now := float64(i)
		p := admitOK(t, c, newClock(now), now, get(false))
		if _, ok := p.TryHedge(now + 0.05); ok != w {
			t.Errorf("request %d: hedged %v, want %v (tokens %v)", i+1, ok, w, b.Tokens())
		}
		p.End(now+0.1, Success)
	}
	if tk := b.Tokens(); math.Abs(tk-0.2) > 1e-9 {
		t.Errorf("tokens left %v, want 0.2", tk)
	}
	if k := c.Counts(); k.Hedges != 2 || k.HedgesRefused != 1 {
		t.Errorf("counts %+v, want 2 hedges, 1 refused", k)
	}
}

// Two attempts in flight hold two breaker tickets. A winning hedge's
// ticket becomes the request's (its success resets the count) and the
// first attempt's is cancelled, not failed; a losing hedge's cancel
// leaves the first attempt's failure counted alone. In half-open, the one
// trial is the first attempt's: the hedge is refused.
func TestHedgeBreakerTickets(t *testing.T) {
	br, err := breaker.New(breaker.Config{Threshold: 2, Recovery: 10, Trials: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := &Guard{Breaker: br}
	g.Init()
	c, _ := hedgeChain(t, retry.HedgeConfig{Delay: 0.05, MaxHedges: 1}, 10, 1, Config{Guard: g})
	fail(t, c, 0) // one failure of two
	p := admitOK(t, c, newClock(1), 1, get(false))
	p.Attempt(1)
	ht, ok := p.TryHedge(1.05)
	if !ok {
		t.Fatal("hedge refused by a closed breaker")
	}
	p.HedgeWon(&ht)
	p.AttemptDone(1.1, false)
	p.End(1.1, Success)
	if s := br.Snapshot(); s.State != breaker.Closed || s.Failures != 0 {
		t.Fatalf("hedge won: %v with %d failures, want closed, 0", s.State, s.Failures)
	}
	fail(t, c, 2)
	p = admitOK(t, c, newClock(3), 3, get(false))
	p.Attempt(3)
	ht, ok = p.TryHedge(3.05)
	if !ok {
		t.Fatal("second hedge refused")
	}
	ht.Cancel() // the first attempt won, then failed: 2 of 2
	p.AttemptDone(3.1, true)
	p.End(3.1, Success)
	if s := br.Snapshot(); s.State != breaker.Open || s.OpenedAt != 3.1 {
		t.Fatalf("first attempt failed: %v opened at %v, want open at 3.1", s.State, s.OpenedAt)
	}
	p = admitOK(t, c, newClock(14), 14, get(false))
	if ref, _ := p.Attempt(14); ref != nil {
		t.Fatalf("half-open trial refused: %s", ref.Reason)
	}
	if _, ok := p.TryHedge(14.05); ok {
		t.Error("hedge went beside the only half-open trial")
	}
	p.AttemptDone(14.1, false)
	p.End(14.1, Success)
	if s := br.Snapshot(); s.State != breaker.Closed {
		t.Errorf("after the trial's success: %v, want closed", s.State)
	}
	if k := c.Counts(); k.Hedges != 2 || k.HedgesWon != 1 || k.HedgesRefused != 1 {
		t.Errorf("counts %+v, want 2 hedges, 1 won, 1 refused", k)
	}
}

// Pass.Retryable says which answers may not win a hedge race: what
// RetryOn lists, for idempotent requests (a 503 of a GET); not a 500 it
// does not list, nor a POST's 503; nothing without a chain. (TestRetryable
// has the rule's every case.)
func TestPassRetryable(t *testing.T) {
	c := New(Config{RetryOn: RetryOn{Reset: true, Statuses: []int{503}}})
	get := admitOK(t, c, newClock(0), 0, get(false))
	post := admitOK(t, c, newClock(0), 0, viewOf("POST", "192.0.2.1:4000", false))
	for _, tc := range []struct {
		name string
		p    *Pass
		f    Failure
		want bool
	}{
		{"GET 503", get, status503, true},
		{"GET 500", get, Failure{Status: 500, Replayable: true, After: -1}, false},
		{"GET reset", get, Failure{Kind: upstream.KindReset, Replayable: true, After: -1}, true},
		{"POST 503", post, status503, false},
		{"no chain", new(Pass), status503, false},
	} {
		if got := tc.p.Retryable(tc.f); got != tc.want {
			t.Errorf("%s: Retryable %v, want %v", tc.name, got, tc.want)
		}
	}
}
