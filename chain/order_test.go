package chain

import (
	"bytes"
	"context"
	"testing"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
)

// A spent budget (Spillway-Timeout: 0S from a trusted peer) is refused
// before the rate limit is asked, before a bulkhead place and before an
// admission place.
func TestExpiredRefusedFirst(t *testing.T) {
	clk := newClock(10)
	alg := &recAlg{n: 4}
	gate := newGate(t, alg, oneClass, clk)
	lims := &fakeLimits{}
	c := New(Config{Guard: guardOf(gate), Limits: lims, Bulkhead: 3, Deadline: Deadline{Headers: true, Default: 5}})
	var p Pass
	ref := c.Admit(context.Background(), clk, 10, get(true, "Spillway-Timeout", "0S"), &p)
	checkRefusal(t, ref, 503, ReasonDeadline, false, GRPCDeadlineExceeded,
		"the request's time budget ran out before it could be served")
	if n := lims.checks.Load(); n != 0 {
		t.Errorf("rate limit asked %d times; want 0", n)
	}
	if n := c.InFlight(); n != 0 {
		t.Errorf("bulkhead holds %d; want 0", n)
	}
	if n, adm := gate.Limiter().InFlight(), gate.Limiter().Counts(0).Admitted; n != 0 || adm != 0 {
		t.Errorf("admission: %d in flight, %d admitted; want 0, 0", n, adm)
	}
	if p.RetryAfter != -1 {
		t.Errorf("RetryAfter %d; want -1", p.RetryAfter)
	}
	if got := c.Counts().Refused; got != 1 {
		t.Errorf("Refused %d; want 1", got)
	}
}

// A budget shorter than the admission queue's current wait cannot be
// met: it is refused before it costs a rate-limit token or a place.
func TestInfeasibleRefusedBeforeRateLimit(t *testing.T) {
	clk := newClock(0)
	alg := &recAlg{n: 1}
	gate := newGate(t, alg, limit.LimiterConfig{Shares: []float64{1},
		Queue: limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 60}}, clk)
	lims := &fakeLimits{}
	c := New(Config{Guard: guardOf(gate), Limits: lims, Bulkhead: 10, Deadline: Deadline{Headers: true, Default: 50}})
	// A holds the one place; B and C queue at 0.
	var a Pass
	if ref := c.Admit(context.Background(), clk, 0, get(false), &a); ref != nil {
		t.Fatalf("A refused: %s", ref.Reason)
	}
	b := admitAsync(c, clk, 0, get(false))
	waitFor(t, "B queued", func() bool { return gate.Limiter().QueueLen() == 1 })
	cq := admitAsync(c, clk, 0, get(false))
	waitFor(t, "C queued", func() bool { return gate.Limiter().QueueLen() == 2 })
	// A ends at 1 s (Ignore: no RTT sample): B is granted after waiting
	// 1 s; the queue wait estimate is 0.2 × 1 s = 0.2 s while C waits.
	clk.Set(1)
	a.End(1, Ignore)
	rb := <-b
	if rb.ref != nil {
		t.Fatalf("B refused: %s", rb.ref.Reason)
	}
	if w := gate.Limiter().QueueWait(); w != 0.2 {
		t.Fatalf("queue wait %v; want 0.2", w)
	}
	checks := lims.checks.Load() // A, B, C: 3
	// D brings 0.1 s: it cannot wait 0.2 s.
	var d Pass
	ref := c.Admit(context.Background(), clk, 1, get(true, "Spillway-Timeout", "100m"), &d)
	checkRefusal(t, ref, 503, ReasonDeadline, false, GRPCDeadlineExceeded,
		"the request's time budget ran out before it could be served")
	if n := lims.checks.Load() - checks; n != 0 {
		t.Errorf("rate limit asked %d times for D; want 0", n)
	}
	if n := c.InFlight(); n != 2 { // A's released; B and C hold theirs
		t.Errorf("bulkhead holds %d; want 2 (B, C)", n)
	}
	if n := gate.Limiter().Counts(0).Rejects[limit.ReasonDeadline]; n != 1 {
		t.Errorf("admission counted %d deadline refusals; want 1", n)
	}
	// Clean up: B ends, C is granted and ends.
	clk.Set(2)
	rb.p.End(2, Ignore)
	rc := <-cq
	if rc.ref != nil {
		t.Fatalf("C refused: %s", rc.ref.Reason)
	}
	rc.p.End(2, Ignore)
	if n := gate.Limiter().InFlight(); n != 0 {
		t.Errorf("%d in flight at the end", n)
	}
}

// A rate-limit refusal is the limiter's own answer, and costs neither a
// bulkhead place nor an admission place.
func TestRateLimitRefusedBeforeAdmission(t *testing.T) {
	clk := newClock(3)
	gate := newGate(t, &recAlg{n: 4}, oneClass, clk)
	lims := &fakeLimits{verdict: refuse429}
	c := New(Config{Guard: guardOf(gate), Limits: lims, Bulkhead: 2})
	var p Pass
	ref := c.Admit(context.Background(), clk, 3, get(false), &p)
	if ref == nil {
		t.Fatal("admitted")
	}
	if ref.Status != 429 || ref.Reason != "ratelimit:per-ip" || !ref.Retry || ref.GRPC != GRPCResourceExhausted ||
		string(ref.Body) != `{"status":429}` {
		t.Errorf("refusal %+v", ref)
	}
	if p.RetryAfter != 5 {
		t.Errorf("RetryAfter %d; want 5", p.RetryAfter)
	}
	if pol, lim := p.RateLimitFields(); string(pol) != `"per-ip";q=10;w=60` || string(lim) != `"per-ip";r=0;t=5` {
		t.Errorf("RateLimit fields %q %q", pol, lim)
	}
	if n := lims.checks.Load(); n != 1 {
		t.Errorf("rate limit asked %d times; want 1", n)
	}
	if n, adm := gate.Limiter().InFlight(), gate.Limiter().Counts(0).Admitted; n != 0 || adm != 0 {
		t.Errorf("admission: %d in flight, %d admitted; want 0, 0", n, adm)
	}
	if c.InFlight() != 0 {
		t.Errorf("bulkhead holds %d; want 0", c.InFlight())
	}
}

// A fail-closed rule's 503 keeps its status and maps to UNAVAILABLE.
func TestRateLimitUnavailable(t *testing.T) {
	lims := &fakeLimits{verdict: func(out *httplimit.Verdict) {
		*out = httplimit.Verdict{Status: 503, Rule: "otp", Reason: "ratelimit-unavailable:otp", RetryAfter: 2}
	}}
	c := New(Config{Limits: lims})
	var p Pass
	ref := c.Admit(context.Background(), newClock(0), 0, get(false), &p)
	if ref == nil || ref.Status != 503 || ref.Reason != "ratelimit-unavailable:otp" || ref.GRPC != GRPCUnavailable || !ref.Retry {
		t.Fatalf("refusal %+v", ref)
	}
	if p.RetryAfter != 2 {
		t.Errorf("RetryAfter %d; want 2", p.RetryAfter)
	}
}

// The bulkhead bounds the route's requests in flight: the request over
// the bound is refused (after the rate limit, before admission), and an
// ended request gives its place back.
func TestBulkhead(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 10}, oneClass, clk)
	lims := &fakeLimits{}
	c := New(Config{Guard: guardOf(gate), Limits: lims, Bulkhead: 2})
	var p1, p2, p3 Pass
	for _, p := range []*Pass{&p1, &p2} {
		if ref := c.Admit(context.Background(), clk, 0, get(false), p); ref != nil {
			t.Fatalf("refused: %s", ref.Reason)
		}
	}
	ref := c.Admit(context.Background(), clk, 0, get(false), &p3)
	checkRefusal(t, ref, 503, ReasonBulkhead, true, GRPCUnavailable,
		"the route has as many requests in flight as it allows")
	if lims.checks.Load() != 3 {
		t.Errorf("rate limit asked %d times; want 3", lims.checks.Load())
	}
	if n := gate.Limiter().InFlight(); n != 2 {
		t.Errorf("admission holds %d; want 2", n)
	}
	if c.InFlight() != 2 {
		t.Errorf("bulkhead holds %d; want 2", c.InFlight())
	}
	p1.End(1, Success)
	p1.End(1, Success) // a second End does nothing
	if c.InFlight() != 1 || gate.Limiter().InFlight() != 1 {
		t.Errorf("after End: bulkhead %d, admission %d; want 1, 1", c.InFlight(), gate.Limiter().InFlight())
	}
	if ref := c.Admit(context.Background(), clk, 1, get(false), &p3); ref != nil {
		t.Fatalf("refused after a place was freed: %s", ref.Reason)
	}
	p2.End(2, Success)
	p3.End(2, Success)
	if c.InFlight() != 0 || gate.Limiter().InFlight() != 0 {
		t.Errorf("at the end: bulkhead %d, admission %d; want 0, 0", c.InFlight(), gate.Limiter().InFlight())
	}
}

// An admission refusal gives back the bulkhead place the request took.
func TestAdmissionRefusalReleasesBulkhead(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 1}, oneClass, clk)
	c := New(Config{Guard: guardOf(gate), Bulkhead: 5})
	var a, b Pass
	if ref := c.Admit(context.Background(), clk, 0, get(false), &a); ref != nil {
		t.Fatal(ref.Reason)
	}
	ref := c.Admit(context.Background(), clk, 0, get(false), &b)
	checkRefusal(t, ref, 503, ReasonAdmitLimit, true, GRPCUnavailable, "the server is at its concurrency limit")
	if c.InFlight() != 1 {
		t.Errorf("bulkhead holds %d; want 1 (A's)", c.InFlight())
	}
	a.End(1, Success)
}

// A leaky-queue rule's delay is waited before admission; a delay that
// would pass the deadline is not waited but abandoned and refused, as is
// one whose client leaves.
func TestRateLimitDelay(t *testing.T) {
	delay := func(d float64) func(*httplimit.Verdict) {
		return func(out *httplimit.Verdict) { out.Delay = d }
	}
	clk := newClock(5.25) // where the clock is after the wait
	gate := newGate(t, &recAlg{n: 4}, oneClass, clk)
	lims := &fakeLimits{verdict: delay(0.002)}
	c := New(Config{Guard: guardOf(gate), Limits: lims, Deadline: Deadline{Default: 1, Forward: true}})
	var p Pass
	if ref := c.Admit(context.Background(), clk, 5, get(false), &p); ref != nil {
		t.Fatalf("short delay refused: %s", ref.Reason)
	}
	if lims.abandons.Load() != 0 || p.Deadline() != 6 {
		t.Errorf("abandons %d, deadline %v; want 0, 6", lims.abandons.Load(), p.Deadline())
	}
	if at := p.slot.Start(); at != 5.25 {
		t.Errorf("admitted at %v; want 5.25, the time after the wait", at)
	}
	if left, ok := p.Remaining(5.25); !ok || left != 0.75 {
		t.Errorf("Remaining(5.25) = %v %v; want 0.75 true", left, ok)
	}
	p.End(5.5, Success)

	lims.verdict = delay(1) // 5 + 1 is the deadline itself: too late
	ref := c.Admit(context.Background(), clk, 5, get(false), &p)
	if ref == nil || ref.Reason != ReasonDeadline || lims.abandons.Load() != 1 {
		t.Fatalf("delay to the deadline: %v, abandons %d; want deadline, 1", ref, lims.abandons.Load())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lims.verdict = delay(0.5)
	ref = c.Admit(ctx, clk, 5, get(false), &p)
	if ref == nil || ref.Reason != ReasonDeadline || lims.abandons.Load() != 2 {
		t.Fatalf("client gone during the delay: %v, abandons %d; want deadline, 2", ref, lims.abandons.Load())
	}
	if !bytes.Contains(ref.Body, []byte(`"reason":"deadline"`)) {
		t.Errorf("body %s", ref.Body)
	}
}
