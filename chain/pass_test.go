package chain

import (
	"context"
	"testing"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
)

// A Pass reused for the next request (as the engines do) keeps nothing
// of the last one: refusal fields, deadline, class, rate-limit fields,
// endpoints tried, attempts.
func TestPassReuse(t *testing.T) {
	clk := newClock(0)
	lims := &fakeLimits{verdict: refuse429}
	a := New(Config{Limits: lims, Class: shed.Default, ClassHeader: true, Deadline: Deadline{Default: 2, Forward: true}})
	var p Pass
	if ref := a.Admit(context.Background(), clk, 0, get(true, "Spillway-Criticality", "critical"), &p); ref == nil {
		t.Fatal("not refused")
	}
	if p.RetryAfter != 5 || p.Class() != shed.Critical || p.Deadline() != 2 {
		t.Fatalf("first request: RetryAfter %d, class %v, deadline %v", p.RetryAfter, p.Class(), p.Deadline())
	}
	lims.verdict = func(out *httplimit.Verdict) {
		out.Policy, out.Limit = []byte(`"per-ip";q=10;w=60`), []byte(`"per-ip";r=9;t=60`)
	}
	if ref := a.Admit(context.Background(), clk, 1, get(false), &p); ref != nil {
		t.Fatal(ref.Reason)
	}
	if _, lim := p.RateLimitFields(); p.RetryAfter != -1 || string(lim) != `"per-ip";r=9;t=60` || p.Class() != shed.Default || p.Deadline() != 3 {
		t.Errorf("second request: RetryAfter %d, RateLimit %q, class %v, deadline %v; want -1, r=9, default, 3",
			p.RetryAfter, lim, p.Class(), p.Deadline())
	}
	p.Attempt(1)
	p.Attempt(1)
	p.Tried("a:1")
	p.Tried("b:1")
	p.End(1, Success)

	b := retryChain(t, retry.Policy{MaxAttempts: 2}, retryAll, 0, Config{Class: shed.Sheddable})
	if ref := b.Admit(context.Background(), clk, 2, get(false), &p); ref != nil {
		t.Fatal(ref.Reason)
	}
	if p.NTried() != 0 || !p.Untried("a:1") || p.Deadline() != 0 || p.Class() != shed.Sheddable {
		t.Errorf("third request: %d tried, deadline %v, class %v; want 0, 0, sheddable", p.NTried(), p.Deadline(), p.Class())
	}
	if _, ok := p.Remaining(2); ok {
		t.Error("Remaining ok without a deadline")
	}
	if pol, lim := p.RateLimitFields(); pol != nil || lim != nil {
		t.Errorf("a route without rate limits has the last request's fields %q %q", pol, lim)
	}
	p.Attempt(2)
	if _, ok := p.Retry(2, status503); !ok { // attempt 1 of 2: the last request's attempts are gone
		t.Error("no retry after the first attempt")
	}
}

// Bypass turns the route's own stages off — deadline, rate limit,
// bulkhead, retries and their budget — and leaves the cluster's
// admission on; turned back on, they apply again.
func TestBypass(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 1}, oneClass, clk)
	bud, err := retry.NewBudget(retry.BudgetConfig{Max: 2, Ratio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	lims := &fakeLimits{}
	pol := retry.Policy{MaxAttempts: 3, Backoff: retry.Backoff{Base: 0.01, Cap: 0.01, Jitter: retry.NoJitter}, Budget: bud}
	c := retryChain(t, pol, retryAll, 0, Config{Guard: guardOf(gate), Limits: lims, Bulkhead: 1,
		Deadline: Deadline{Headers: true, Default: 5}})
	spent := "0S"

	p := admitOK(t, c, clk, 0, get(false))
	p.Attempt(0)
	if _, ok := p.Retry(0, status503); !ok || bud.Tokens() != 1 {
		t.Fatalf("retry %v, budget %v; want true, 1", ok, bud.Tokens())
	}
	p.End(0, Ignore)

	c.Bypass(true)
	if !c.Bypassed() {
		t.Fatal("Bypassed false")
	}
	checks := lims.checks.Load()
	p = admitOK(t, c, clk, 1, get(true, "Spillway-Timeout", spent))
	if lims.checks.Load() != checks || c.InFlight() != 0 || p.Deadline() != 0 {
		t.Errorf("bypassed: %d checks, bulkhead %d, deadline %v; want none, 0, 0",
			lims.checks.Load()-checks, c.InFlight(), p.Deadline())
	}
	if bud.Tokens() != 1 {
		t.Errorf("budget %v; want 1 (a bypassed request deposits nothing)", bud.Tokens())
	}
	p.Attempt(1)
	if _, ok := p.Retry(1, status503); ok {
		t.Error("a bypassed route retried")
	}
	if n := gate.Limiter().InFlight(); n != 1 {
		t.Errorf("admission holds %d; want 1", n)
	}
	var q Pass
	if ref := c.Admit(context.Background(), clk, 1, get(false), &q); ref == nil || ref.Reason != ReasonAdmitLimit {
		t.Errorf("bypassed, cluster full: %v; want admit:limit", ref)
	}
	p.End(1, Ignore)

	c.Bypass(false)
	if ref := c.Admit(context.Background(), clk, 2, get(true, "Spillway-Timeout", spent), &q); ref == nil || ref.Reason != ReasonDeadline {
		t.Errorf("bypass off: %v; want deadline", ref)
	}
	if n := gate.Limiter().Counts(0).Rejects[limit.ReasonLimit]; n != 1 {
		t.Errorf("%d admission refusals; want 1", n)
	}
}
