package chain

import (
	"context"
	"testing"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/retry"
)

// fullChain is a route with every stage: an in-memory rate limit that
// never refuses, a deadline, a bulkhead, an adaptive (AIMD) admission
// limit, retries with a budget and a breaker.
func fullChain(tb testing.TB, clk *fakeClock) *Chain {
	tb.Helper()
	set, err := rules.Parse("chain.yaml", []byte("rules:\n- {id: per-ip, key: [ip], rate: 1e9, per: 1s, burst: 1000000000}\n"))
	if err != nil {
		tb.Fatal(err)
	}
	lims, err := httplimit.New(set, httplimit.Config{Clock: clk})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = lims.Close() })
	alg, err := limit.NewAIMD(limit.AIMDConfig{InitialLimit: 100})
	if err != nil {
		tb.Fatal(err)
	}
	gate := newGate(tb, alg, limit.LimiterConfig{}, clk)
	br, err := breaker.New(breaker.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	g := &Guard{Gate: gate, Breaker: br}
	g.Init()
	bud, err := retry.NewBudget(retry.BudgetConfig{Ratio: 0.2, MinPerSecond: 1})
	if err != nil {
		tb.Fatal(err)
	}
	pol, err := retry.NewPolicy(retry.Policy{Budget: bud})
	if err != nil {
		tb.Fatal(err)
	}
	return New(Config{Route: "api", Guard: g, Limits: lims, Bulkhead: 1000,
		Deadline: Deadline{Default: 5, Forward: true}, Retry: pol, RetryOn: retryAll})
}

// oneRequest runs one admitted request through c at now: Admit, one
// attempt, its success 1 ms later, End.
func oneRequest(tb testing.TB, c *Chain, clk *fakeClock, now float64, p *Pass) {
	v := benchView
	clk.Set(now)
	if ref := c.Admit(context.Background(), clk, now, v, p); ref != nil {
		tb.Fatalf("refused: %s", ref.Reason)
	}
	if ref, _ := p.Attempt(now); ref != nil {
		tb.Fatalf("attempt refused: %s", ref.Reason)
	}
	clk.Set(now + 0.001)
	p.AttemptDone(now+0.001, false)
	p.End(now+0.001, Success)
}

var benchView = get(false)

// An admitted request through the whole chain allocates nothing (the
// first, which adds the rate limit's key, is AllocsPerRun's warm-up).
func TestChainAllocations(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	clk := newClock(1)
	c := fullChain(t, clk)
	var p Pass
	now := 1.0
	got := testing.AllocsPerRun(1000, func() {
		now += 0.002
		oneRequest(t, c, clk, now, &p)
	})
	if got != 0 {
		t.Errorf("%v allocations per request; want 0", got)
	}
	if n := c.Guard().Gate.Limiter().InFlight(); n != 0 || c.InFlight() != 0 {
		t.Errorf("in flight: admission %d, bulkhead %d; want 0, 0", n, c.InFlight())
	}
}

// BenchmarkChain: one admitted request, every stage against none.
func BenchmarkChain(b *testing.B) {
	for _, tc := range []struct {
		name  string
		build func(testing.TB, *fakeClock) *Chain
	}{
		{"empty", func(testing.TB, *fakeClock) *Chain { return New(Config{}) }},
		{"full", fullChain},
	} {
		b.Run(tc.name, func(b *testing.B) {
			clk := newClock(1)
			c := tc.build(b, clk)
			var p Pass
			now := 1.0
			oneRequest(b, c, clk, now, &p)
			b.ReportAllocs()
			for b.Loop() {
				now += 0.002
				oneRequest(b, c, clk, now, &p)
			}
		})
	}
}
