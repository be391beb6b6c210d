package chain

import (
	"context"
	"testing"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/shed"
)

// admitOK admits v at now on c or fails t.
func admitOK(t *testing.T, c *Chain, clk *fakeClock, now float64, v *request.View) *Pass {
	t.Helper()
	p := new(Pass)
	if ref := c.Admit(context.Background(), clk, now, v, p); ref != nil {
		t.Fatalf("refused: %s", ref.Reason)
	}
	return p
}

// The cluster at its limit without a queue: 503 admit:limit with the
// Gate's Retry-After (7 s, no jitter).
func TestAdmitLimit(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 1}, oneClass, clk)
	c := New(Config{Guard: guardOf(gate)})
	a := admitOK(t, c, clk, 0, get(false))
	var b Pass
	ref := c.Admit(context.Background(), clk, 0, get(false), &b)
	checkRefusal(t, ref, 503, ReasonAdmitLimit, true, GRPCUnavailable, "the server is at its concurrency limit")
	if b.RetryAfter != 7 {
		t.Errorf("RetryAfter %d; want 7", b.RetryAfter)
	}
	if got := c.Counts().Refused; got != 1 {
		t.Errorf("Refused %d; want 1", got)
	}
	a.End(1, Ignore)
}

// A full queue (MaxQueue 1) refuses at once, and a waiter that outlives
// MaxWait (60 s, seen when a place frees at 61 s) is refused: both 503
// admit:queue.
func TestAdmitQueue(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 1}, limit.LimiterConfig{Shares: []float64{1},
		Queue: limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 60, MaxQueue: 1}}, clk)
	c := New(Config{Guard: guardOf(gate)})
	a := admitOK(t, c, clk, 0, get(false))
	b := admitAsync(c, clk, 0, get(false))
	waitFor(t, "B queued", func() bool { return gate.Limiter().QueueLen() == 1 })
	var cp Pass
	ref := c.Admit(context.Background(), clk, 0, get(false), &cp)
	checkRefusal(t, ref, 503, ReasonAdmitQueue, true, GRPCUnavailable,
		"the server is at its concurrency limit and its wait queue is full")
	if cp.RetryAfter != 7 {
		t.Errorf("RetryAfter %d; want 7", cp.RetryAfter)
	}
	clk.Set(61)
	a.End(61, Ignore)
	rb := <-b
	checkRefusal(t, rb.ref, 503, ReasonAdmitQueue, true, GRPCUnavailable,
		"the request waited the longest allowed for a place")
	if n := gate.Limiter().InFlight(); n != 0 {
		t.Errorf("%d in flight; want 0", n)
	}
}

// CoDel (target 5 ms, interval 100 ms): B, granted at 1 s after a 1 s
// sojourn, arms the dropper until 1.1 s; C, still waiting at 2 s, is
// dropped: 503 admit:codel.
func TestAdmitCoDel(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 1}, limit.LimiterConfig{Shares: []float64{1},
		Queue: limit.QueueConfig{Discipline: limit.CoDel, MaxWait: 60, Target: 0.005, Interval: 0.1}}, clk)
	c := New(Config{Guard: guardOf(gate)})
	a := admitOK(t, c, clk, 0, get(false))
	b := admitAsync(c, clk, 0, get(false))
	waitFor(t, "B queued", func() bool { return gate.Limiter().QueueLen() == 1 })
	cq := admitAsync(c, clk, 0, get(false))
	waitFor(t, "C queued", func() bool { return gate.Limiter().QueueLen() == 2 })
	clk.Set(1)
	a.End(1, Ignore)
	rb := <-b
	if rb.ref != nil {
		t.Fatalf("B refused: %s", rb.ref.Reason)
	}
	clk.Set(2)
	rb.p.End(2, Ignore)
	rc := <-cq
	checkRefusal(t, rc.ref, 503, ReasonAdmitCoDel, true, GRPCUnavailable,
		"the wait queue is standing; the request was dropped to drain it")
	if rc.p.RetryAfter != 7 {
		t.Errorf("RetryAfter %d; want 7", rc.p.RetryAfter)
	}
}

// Fairness (limit 4, pressure 0.5): client A holds 2 places and B 1; in
// flight 3 ≥ 2 so A's share is ⌈4/2⌉ = 2 and its third request is
// refused, 429 admit:fairness, while B's second is admitted.
func TestAdmitFairness(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 4}, limit.LimiterConfig{Shares: []float64{1},
		Fairness: limit.FairnessConfig{Slots: 1 << 16, Pressure: 0.5}}, clk)
	c := New(Config{Guard: guardOf(gate)})
	va, vb := viewOf("GET", "192.0.2.1:1000", false), viewOf("GET", "198.51.100.9:1000", false)
	held := []*Pass{admitOK(t, c, clk, 0, va), admitOK(t, c, clk, 0, va), admitOK(t, c, clk, 0, vb)}
	var p Pass
	ref := c.Admit(context.Background(), clk, 0, va, &p)
	checkRefusal(t, ref, 429, ReasonAdmitFairness, true, GRPCResourceExhausted,
		"this client holds its fair share of the server's capacity")
	if p.RetryAfter != 7 {
		t.Errorf("RetryAfter %d; want 7", p.RetryAfter)
	}
	held = append(held, admitOK(t, c, clk, 0, vb))
	for _, h := range held {
		h.End(1, Ignore)
	}
}

// Shadow admission refuses nothing: a request the Gate would refuse goes
// on holding no place, and is counted by its class.
func TestAdmitShadow(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 1}, oneClass, clk)
	g := &Guard{Gate: gate, AdmitShadow: true}
	g.Init()
	def := New(Config{Guard: g, Class: shed.Default})
	shd := New(Config{Guard: g, Class: shed.Sheddable})
	a := admitOK(t, def, clk, 0, get(false))
	b := admitOK(t, shd, clk, 0, get(false))
	c2 := admitOK(t, shd, clk, 0, get(false))
	if n := gate.Limiter().InFlight(); n != 1 {
		t.Errorf("%d in flight; want 1 (A)", n)
	}
	if s, d := g.ShadowAdmissions(shed.Sheddable), g.ShadowAdmissions(shed.Default); s != 2 || d != 0 {
		t.Errorf("shadow refusals: sheddable %d, default %d; want 2, 0", s, d)
	}
	b.End(1, Success)
	c2.End(1, Success)
	a.End(1, Ignore)
	if n := gate.Limiter().InFlight(); n != 0 {
		t.Errorf("%d in flight; want 0", n)
	}
}

// End feeds admission the request's outcome: a success is a latency
// sample (RTT from arrival at 2 s to the end at 2.25 s), a drop is a
// sample marked Dropped and no latency (the limiter's smoothed RTT does
// not move), Ignore feeds nothing.
func TestEndOutcome(t *testing.T) {
	clk := newClock(2)
	alg := &recAlg{n: 4}
	gate := newGate(t, alg, oneClass, clk)
	c := New(Config{Guard: guardOf(gate)})

	p := admitOK(t, c, clk, 2, get(false))
	clk.Set(2.25)
	p.End(2.25, Success)
	s := alg.seen()
	if len(s) != 1 || s[0].RTT != 0.25 || s[0].Now != 2.25 || s[0].Dropped || s[0].InFlight != 1 {
		t.Fatalf("samples %+v; want one of RTT 0.25 at 2.25, in flight 1", s)
	}
	if rtt := gate.Limiter().RTT(); rtt != 0.25 {
		t.Errorf("RTT %v; want 0.25", rtt)
	}
	if n := gate.Goodput(shed.Critical); n != 1 {
		t.Errorf("goodput %d; want 1", n)
	}

	p = admitOK(t, c, clk, 2.25, get(false))
	clk.Set(5)
	p.End(5, Dropped)
	s = alg.seen()
	if len(s) != 2 || !s[1].Dropped {
		t.Fatalf("samples %+v; want a second one, Dropped", s)
	}
	if rtt := gate.Limiter().RTT(); rtt != 0.25 {
		t.Errorf("RTT %v after a drop; want 0.25 still", rtt)
	}

	p = admitOK(t, c, clk, 5, get(false))
	clk.Set(6)
	p.End(6, Ignore)
	if s := alg.seen(); len(s) != 2 {
		t.Errorf("samples %+v after Ignore; want still 2", s)
	}
	if n := gate.Limiter().InFlight(); n != 0 {
		t.Errorf("%d in flight; want 0", n)
	}
}

// A streaming route stays out of the cluster's adaptive admission; a
// bypassed admission admits past the limit, holding no place.
func TestAdmitStreamingAndBypass(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 1}, oneClass, clk)
	g := guardOf(gate)
	a := admitOK(t, New(Config{Guard: g}), clk, 0, get(false))
	s := admitOK(t, New(Config{Guard: g, Streaming: true}), clk, 0, get(false))
	if n := gate.Limiter().InFlight(); n != 1 {
		t.Errorf("%d in flight; want 1 (the stream holds none)", n)
	}
	g.BypassAdmission(true)
	if !g.AdmissionBypassed() {
		t.Error("AdmissionBypassed false")
	}
	b := admitOK(t, New(Config{Guard: g}), clk, 0, get(false))
	if n := gate.Limiter().InFlight(); n != 1 {
		t.Errorf("%d in flight; want 1 (the bypassed request holds none)", n)
	}
	g.BypassAdmission(false)
	var p Pass
	if ref := New(Config{Guard: g}).Admit(context.Background(), clk, 0, get(false), &p); ref == nil || ref.Reason != ReasonAdmitLimit {
		t.Errorf("after the bypass: %v; want admit:limit", ref)
	}
	for _, p := range []*Pass{a, s, b} {
		p.End(1, Ignore)
	}
	if n := gate.Limiter().InFlight(); n != 0 {
		t.Errorf("%d in flight; want 0", n)
	}
}

// The brownout decision sent upstream agrees with Optional: a request
// that holds no admission place (a stream, a bypassed or shadow-refused
// admission) has had no decision drawn and runs its optional work; an
// admitted one draws the dimmer's level, 1 at the start.
func TestBrownoutWithoutPlace(t *testing.T) {
	clk := newClock(0)
	dim, err := brownout.New(brownout.Config{TargetWait: 1})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limit.NewLimiter(&recAlg{n: 1}, oneClass)
	if err != nil {
		t.Fatal(err)
	}
	gate, err := admit.New(admit.Config{Limiter: lim, Clock: clk, Dimmer: dim})
	if err != nil {
		t.Fatal(err)
	}
	g := &Guard{Gate: gate, BrownoutHeader: "Spillway-Brownout"}
	g.Init()
	check := func(what string, p *Pass) {
		t.Helper()
		name, optional, ok := p.Brownout()
		if name != "Spillway-Brownout" || !optional || !ok || !p.Optional() {
			t.Errorf("%s: Brownout() = %q %v %v, Optional() = %v; want Spillway-Brownout true true, true",
				what, name, optional, ok, p.Optional())
		}
	}
	admitted := admitOK(t, New(Config{Guard: g}), clk, 0, get(false))
	check("admitted", admitted)
	stream := admitOK(t, New(Config{Guard: g, Streaming: true}), clk, 0, get(false))
	check("stream", stream)
	g.BypassAdmission(true)
	bypassed := admitOK(t, New(Config{Guard: g}), clk, 0, get(false))
	check("bypassed", bypassed)
	g.BypassAdmission(false)
	g.AdmitShadow = true
	shadow := admitOK(t, New(Config{Guard: g}), clk, 0, get(false))
	check("shadow-refused", shadow)
	for _, p := range []*Pass{admitted, stream, bypassed, shadow} {
		p.End(1, Ignore)
	}
}
