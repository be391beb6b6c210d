package chain

import (
	"context"
	"testing"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// The budget: a trusted peer's header (Spillway-Timeout, else
// grpc-timeout, else Envoy's milliseconds) when the route reads headers,
// else the route's default; capped by its maximum. Arrival at 100 s.
func TestDeadlineBudget(t *testing.T) {
	hdr := Deadline{Headers: true, Default: 2, Forward: true}
	for _, tc := range []struct {
		name     string
		d        Deadline
		trusted  bool
		kv       []string
		deadline float64 // 0: none
	}{
		{"none", Deadline{Forward: true}, true, nil, 0},
		{"default", Deadline{Default: 2, Forward: true}, false, nil, 102},
		{"max alone caps the unbounded", Deadline{Max: 5, Forward: true}, false, nil, 105},
		{"default above max", Deadline{Default: 8, Max: 5, Forward: true}, false, nil, 105},
		{"Spillway-Timeout", hdr, true, []string{"Spillway-Timeout", "500m"}, 100.5},
		{"grpc-timeout", hdr, true, []string{"grpc-timeout", "250m"}, 100.25},
		{"envoy", hdr, true, []string{EnvoyHeader, "1500"}, 101.5},
		{"Spillway-Timeout first", hdr, true, []string{"grpc-timeout", "3S", "Spillway-Timeout", "500m"}, 100.5},
		{"grpc-timeout before envoy", hdr, true, []string{EnvoyHeader, "3000", "grpc-timeout", "1S"}, 101},
		{"header above max", Deadline{Headers: true, Max: 5, Forward: true}, true, []string{"Spillway-Timeout", "1M"}, 105},
		{"header above default", hdr, true, []string{"Spillway-Timeout", "4S"}, 104},
		{"untrusted header ignored", hdr, false, []string{"Spillway-Timeout", "500m"}, 102},
		{"untrusted envoy ignored", hdr, false, []string{EnvoyHeader, "1"}, 102},
		{"untrusted malformed ignored", hdr, false, []string{"Spillway-Timeout", "soon"}, 102},
		{"headers off", Deadline{Default: 2, Forward: true}, true, []string{"Spillway-Timeout", "500m"}, 102},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{Deadline: tc.d})
			var p Pass
			if ref := c.Admit(context.Background(), newClock(100), 100, get(tc.trusted, tc.kv...), &p); ref != nil {
				t.Fatalf("refused: %s", ref.Reason)
			}
			if p.Deadline() != tc.deadline {
				t.Errorf("Deadline() = %v; want %v", p.Deadline(), tc.deadline)
			}
			left, ok := p.Remaining(100)
			if ok != (tc.deadline != 0) || left != max(0, tc.deadline-100) {
				t.Errorf("Remaining(100) = %v %v; want %v %v", left, ok, tc.deadline-100, tc.deadline != 0)
			}
		})
	}
}

// A malformed budget from a trusted peer is the peer's bug: 400
// bad-header, before the rate limit is asked; a spent one (0) is 503
// deadline.
func TestDeadlineHeaderRefusals(t *testing.T) {
	for _, tc := range []struct {
		kv     []string
		status int
		reason string
	}{
		{[]string{"Spillway-Timeout", "soon"}, 400, ReasonBadHeader},
		{[]string{"Spillway-Timeout", "-1S"}, 400, ReasonBadHeader},
		{[]string{"grpc-timeout", "123456789S"}, 400, ReasonBadHeader}, // 9 digits
		{[]string{EnvoyHeader, "1.5"}, 400, ReasonBadHeader},
		{[]string{EnvoyHeader, "-1"}, 400, ReasonBadHeader},
		{[]string{"Spillway-Timeout", "0S"}, 503, ReasonDeadline},
		{[]string{"grpc-timeout", "0n"}, 503, ReasonDeadline},
		{[]string{EnvoyHeader, "0"}, 503, ReasonDeadline},
	} {
		lims := &fakeLimits{}
		c := New(Config{Limits: lims, Deadline: Deadline{Headers: true, Default: 2}})
		var p Pass
		ref := c.Admit(context.Background(), newClock(0), 0, get(true, tc.kv...), &p)
		if tc.status == 400 {
			checkRefusal(t, ref, 400, ReasonBadHeader, false, GRPCUnavailable,
				"malformed time budget (Spillway-Timeout, grpc-timeout or x-envoy-expected-rq-timeout-ms)")
		} else {
			checkRefusal(t, ref, 503, ReasonDeadline, false, GRPCDeadlineExceeded,
				"the request's time budget ran out before it could be served")
		}
		if lims.checks.Load() != 0 {
			t.Errorf("%q: rate limit asked", tc.kv)
		}
	}
}

// Remaining needs a deadline and a route that forwards it; it is never
// negative.
func TestRemaining(t *testing.T) {
	var p Pass
	New(Config{Deadline: Deadline{Default: 2}}).Admit(context.Background(), newClock(0), 10, get(false), &p)
	if p.Deadline() != 12 {
		t.Errorf("Deadline() = %v; want 12", p.Deadline())
	}
	if _, ok := p.Remaining(10); ok {
		t.Error("Remaining ok on a route that does not forward")
	}
	New(Config{Deadline: Deadline{Default: 2, Forward: true}}).Admit(context.Background(), newClock(0), 10, get(false), &p)
	if left, ok := p.Remaining(11.5); !ok || left != 0.5 {
		t.Errorf("Remaining(11.5) = %v %v; want 0.5 true", left, ok)
	}
	if left, ok := p.Remaining(13); !ok || left != 0 {
		t.Errorf("Remaining(13) = %v %v; want 0 true", left, ok)
	}
}

// Time in the admission queue spends the budget: the deadline stays
// where arrival put it, so after a 10 s wait 20 s of 30 are left; a
// request whose wait reaches its deadline is refused and gives its place
// back without a sample.
func TestQueueWaitSpendsBudget(t *testing.T) {
	clk := newClock(0)
	alg := &recAlg{n: 1}
	gate := newGate(t, alg, limit.LimiterConfig{Shares: []float64{1},
		Queue: limit.QueueConfig{Discipline: limit.FIFO, MaxWait: 60}}, clk)
	c := New(Config{Guard: guardOf(gate), Deadline: Deadline{Headers: true, Default: 30, Forward: true}})
	var a Pass
	if ref := c.Admit(context.Background(), clk, 0, get(false), &a); ref != nil {
		t.Fatal(ref.Reason)
	}
	b := admitAsync(c, clk, 0, get(false))
	waitFor(t, "B queued", func() bool { return gate.Limiter().QueueLen() == 1 })
	clk.Set(10)
	a.End(10, Ignore) // no RTT sample: the limiter's RTT stays 0
	rb := <-b
	if rb.ref != nil {
		t.Fatalf("B refused: %s", rb.ref.Reason)
	}
	if rb.p.wait != 10 || rb.p.Deadline() != 30 {
		t.Errorf("B waited %v, deadline %v; want 10, 30", rb.p.wait, rb.p.Deadline())
	}
	if left, ok := rb.p.Remaining(10); !ok || left != 20 {
		t.Errorf("B's Remaining(10) = %v %v; want 20 true", left, ok)
	}

	// C brings 5 s at 10 and is granted at 15, its deadline: too late.
	cq := admitAsync(c, clk, 10, get(true, "Spillway-Timeout", "5S"))
	waitFor(t, "C queued", func() bool { return gate.Limiter().QueueLen() == 1 })
	clk.Set(15)
	rb.p.End(15, Ignore)
	rc := <-cq
	checkRefusal(t, rc.ref, 503, ReasonDeadline, false, GRPCDeadlineExceeded,
		"the request's time budget ran out before it could be served")
	if n := gate.Limiter().InFlight(); n != 0 {
		t.Errorf("%d in flight; want 0 (C's place given back)", n)
	}
	if s := alg.seen(); len(s) != 0 {
		t.Errorf("samples %+v; want none", s)
	}
}

// The class is the route's; a trusted peer's Spillway-Criticality
// replaces it when the route allows, and admission sees it: with a limit
// of 2 and shares 1, 0.5, one default request fills its class.
func TestClass(t *testing.T) {
	for _, tc := range []struct {
		name    string
		header  bool
		trusted bool
		kv      []string
		want    shed.Class
	}{
		{"route", false, true, nil, shed.Sheddable},
		{"header not allowed", false, true, []string{"Spillway-Criticality", "critical"}, shed.Sheddable},
		{"trusted header", true, true, []string{"Spillway-Criticality", "critical"}, shed.Critical},
		{"untrusted header", true, false, []string{"Spillway-Criticality", "critical"}, shed.Sheddable},
		{"malformed header", true, true, []string{"Spillway-Criticality", "urgent"}, shed.Sheddable},
	} {
		c := New(Config{Class: shed.Sheddable, ClassHeader: tc.header})
		var p Pass
		c.Admit(context.Background(), newClock(0), 0, get(tc.trusted, tc.kv...), &p)
		if p.Class() != tc.want {
			t.Errorf("%s: class %v; want %v", tc.name, p.Class(), tc.want)
		}
	}

	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 2}, limit.LimiterConfig{Shares: []float64{1, 0.5}}, clk)
	c := New(Config{Guard: guardOf(gate), Class: shed.Default, ClassHeader: true})
	var first, spoofed, critical Pass
	if ref := c.Admit(context.Background(), clk, 0, get(false), &first); ref != nil {
		t.Fatal(ref.Reason)
	}
	ref := c.Admit(context.Background(), clk, 0, get(false, "Spillway-Criticality", "critical"), &spoofed)
	if ref == nil || ref.Reason != ReasonAdmitLimit {
		t.Errorf("an untrusted critical request: %v; want admit:limit", ref)
	}
	if ref := c.Admit(context.Background(), clk, 0, get(true, "Spillway-Criticality", "critical"), &critical); ref != nil {
		t.Errorf("a trusted critical request refused: %s", ref.Reason)
	}
	if n := gate.Limiter().Counts(shed.Critical).Admitted; n != 1 {
		t.Errorf("critical admitted %d; want 1", n)
	}
	first.End(1, Ignore)
	critical.End(1, Ignore)
}
