package chain

import (
	"testing"

	"github.com/spillwayhq/spillway/breaker"
)

// breakerGuard returns a guard whose breaker opens after 3 consecutive
// failures, for 10 s.
func breakerGuard(t *testing.T) *Guard {
	t.Helper()
	br, err := breaker.New(breaker.Config{Threshold: 3, Recovery: 10})
	if err != nil {
		t.Fatal(err)
	}
	g := &Guard{Breaker: br}
	g.Init()
	return g
}

// fail sends one failed attempt of a new request at now.
func fail(t *testing.T, c *Chain, now float64) {
	t.Helper()
	p := admitOK(t, c, newClock(now), now, get(false))
	if ref, _ := p.Attempt(now); ref != nil {
		t.Fatalf("attempt at %v refused: %s", now, ref.Reason)
	}
	p.AttemptDone(now, true)
	p.End(now, Success)
}

// Three failures reported through AttemptDone open the breaker at 3 s;
// an attempt at 4 s is refused breaker-open with the 9 s left of the
// 10 s as its Retry-After; a success in between resets the count.
func TestBreakerOpens(t *testing.T) {
	g := breakerGuard(t)
	c := New(Config{Guard: g})
	fail(t, c, 0)
	fail(t, c, 0.5)
	p := admitOK(t, c, newClock(1), 1, get(false))
	p.Attempt(1)
	p.AttemptDone(1, false)
	p.End(1, Success)
	if s := g.Breaker.Snapshot(); s.State != breaker.Closed || s.Failures != 0 {
		t.Fatalf("after a success: %v with %d failures; want closed, 0", s.State, s.Failures)
	}
	for _, at := range []float64{1, 2, 3} {
		fail(t, c, at)
	}
	if s := g.Breaker.Snapshot(); s.State != breaker.Open || s.OpenedAt != 3 {
		t.Fatalf("breaker %v opened at %v; want open at 3", s.State, s.OpenedAt)
	}
	p = admitOK(t, c, newClock(4), 4, get(false))
	ref, fb := p.Attempt(4)
	checkRefusal(t, ref, 503, ReasonBreakerOpen, true, GRPCUnavailable, "the cluster's circuit breaker is open")
	if fb {
		t.Error("useFallback without a fallback cluster")
	}
	if p.RetryAfter != 9 {
		t.Errorf("RetryAfter %d; want 9", p.RetryAfter)
	}
	p.End(4, Ignore)
}

// An open breaker answers with the guard's fallback: a static answer
// (no Retry-After), or the fallback cluster (useFallback, no refusal).
func TestBreakerFallback(t *testing.T) {
	g := breakerGuard(t)
	static := &Refusal{Status: 200, Reason: ReasonFallback, Body: []byte("cached"), ContentType: "text/plain"}
	g.Fallback = static
	c := New(Config{Guard: g})
	for _, at := range []float64{1, 2, 3} {
		fail(t, c, at)
	}
	p := admitOK(t, c, newClock(4), 4, get(false))
	if ref, fb := p.Attempt(4); ref != static || fb || p.RetryAfter != -1 {
		t.Errorf("static fallback: %v %v, RetryAfter %d; want the static answer, false, -1", ref, fb, p.RetryAfter)
	}
	g.Fallback, g.FallbackCluster = nil, true
	if ref, fb := p.Attempt(4); ref != nil || !fb {
		t.Errorf("cluster fallback: %v %v; want nil, true", ref, fb)
	}
	p.End(4, Ignore)
}

// Forced open refuses every attempt of a closed breaker (Retry-After:
// the open time, there is no end to wait for); forced closed lets every
// attempt through an open one, reporting nothing to it; "" gives the
// breaker back its say.
func TestBreakerForced(t *testing.T) {
	g := breakerGuard(t)
	c := New(Config{Guard: g})
	if !g.ForceBreaker("open") || g.ForcedBreaker() != "open" {
		t.Fatal("ForceBreaker(open)")
	}
	p := admitOK(t, c, newClock(0), 0, get(false))
	ref, _ := p.Attempt(0)
	if ref == nil || ref.Reason != ReasonBreakerOpen || p.RetryAfter != 10 {
		t.Errorf("forced open: %v, RetryAfter %d; want breaker-open, 10", ref, p.RetryAfter)
	}
	p.End(0, Ignore)
	if g.Breaker.Snapshot().State != breaker.Closed {
		t.Error("forcing changed the breaker")
	}

	for _, at := range []float64{1, 2, 3} {
		g.ForceBreaker("")
		fail(t, c, at)
	}
	if !g.ForceBreaker("closed") || g.ForcedBreaker() != "closed" {
		t.Fatal("ForceBreaker(closed)")
	}
	before := g.Breaker.Counters()
	p = admitOK(t, c, newClock(4), 4, get(false))
	if ref, fb := p.Attempt(4); ref != nil || fb {
		t.Errorf("forced closed: %v %v; want nil, false", ref, fb)
	}
	p.AttemptDone(4, true)
	p.End(4, Success)
	if after := g.Breaker.Counters(); after != before {
		t.Errorf("a forced-closed attempt was reported: %+v, then %+v", before, after)
	}
	if g.ForceBreaker("ajar") {
		t.Error("ForceBreaker(ajar) accepted")
	}
	g.ForceBreaker("")
	if g.ForcedBreaker() != "" {
		t.Errorf("ForcedBreaker %q; want \"\"", g.ForcedBreaker())
	}
	p = admitOK(t, c, newClock(4), 4, get(false))
	if ref, _ := p.Attempt(4); ref == nil || ref.Reason != ReasonBreakerOpen {
		t.Errorf("unforced, open: %v; want breaker-open", ref)
	}
	p.End(4, Ignore)
}

// A shadow breaker counts the attempts it would refuse and lets them go.
func TestBreakerShadow(t *testing.T) {
	g := breakerGuard(t)
	g.BreakerShadow = true
	c := New(Config{Guard: g})
	for _, at := range []float64{1, 2, 3} {
		fail(t, c, at)
	}
	if g.Breaker.Snapshot().State != breaker.Open {
		t.Fatal("not open")
	}
	for i := 0; i < 2; i++ {
		p := admitOK(t, c, newClock(4), 4, get(false))
		if ref, fb := p.Attempt(4); ref != nil || fb {
			t.Errorf("shadow: %v %v; want nil, false", ref, fb)
		}
		p.End(4, Success)
	}
	if n := g.ShadowBreaker(); n != 2 {
		t.Errorf("ShadowBreaker %d; want 2", n)
	}
}

// End cancels a trial the engine never reported: its slot is given back
// (one trial per round), so the next request gets the trial, whose
// success closes the breaker. While the trial is out, others are refused
// with Retry-After 1.
func TestEndCancelsTrial(t *testing.T) {
	g := breakerGuard(t)
	c := New(Config{Guard: g})
	for _, at := range []float64{1, 2, 3} {
		fail(t, c, at)
	}
	gone := admitOK(t, c, newClock(13), 13, get(false))
	if ref, _ := gone.Attempt(13); ref != nil {
		t.Fatalf("trial refused: %s", ref.Reason)
	}
	busy := admitOK(t, c, newClock(13.2), 13.2, get(false))
	if ref, _ := busy.Attempt(13.2); ref == nil || ref.Reason != ReasonBreakerOpen || busy.RetryAfter != 1 {
		t.Errorf("while the trial is out: %v, RetryAfter %d; want breaker-open, 1", ref, busy.RetryAfter)
	}
	busy.End(13.2, Ignore)
	gone.End(13, Ignore) // the client left before the answer
	p := admitOK(t, c, newClock(13), 13, get(false))
	if ref, _ := p.Attempt(13); ref != nil {
		t.Fatalf("second trial refused: %s", ref.Reason)
	}
	p.AttemptDone(13.5, false)
	p.End(13.5, Success)
	if s := g.Breaker.Snapshot(); s.State != breaker.Closed {
		t.Errorf("breaker %v; want closed", s.State)
	}
}
