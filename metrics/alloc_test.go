package metrics

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/upstream"
)

// TestObserversAllocateNothing: Begin, End (with a resolved reason code
// and class too) and a resolved UpstreamError allocate nothing.
func TestObserversAllocateNothing(t *testing.T) {
	if raceOn {
		t.Skip("allocation counts are not meaningful under -race")
	}
	m := newMetrics(t, Options{})
	g := m.Generation([]RouteInfo{{"api", "app"}}, []ClusterInfo{{Name: "app"}})
	o, c := g.Route("api"), g.Cluster("app")
	if n := testing.AllocsPerRun(1000, func() { o.Begin(); o.End(ending(503, false, 0.02)) }); n != 0 {
		t.Errorf("Begin+End: %v allocations, want 0", n)
	}
	reason := "ratelimit:" + itoa(42) // not a constant: a lookup by a fresh string
	gone := proxy.Ending{Status: 429, Reason: reason, Class: shed.Sheddable, Classed: true}
	o.Begin()
	o.End(gone) // the first answer of a reason and class resolves its child
	if n := testing.AllocsPerRun(1000, func() { o.Begin(); o.End(gone) }); n != 0 {
		t.Errorf("Begin+End with a reason code: %v allocations, want 0", n)
	}
	addr := "10.0.0.1:" + itoa(8080)          // not a constant: a lookup by a fresh string
	c.UpstreamError(addr, upstream.KindReset) // the first error resolves the child
	if n := testing.AllocsPerRun(1000, func() { c.UpstreamError(addr, upstream.KindReset) }); n != 0 {
		t.Errorf("UpstreamError: %v allocations, want 0", n)
	}
	m.SetSources(Sources{})
	series(t, m, "spillway_upstream_errors_total") // a scrape (and its prune) in between
	if n := testing.AllocsPerRun(1000, func() { c.UpstreamError(addr, upstream.KindReset) }); n != 0 {
		t.Errorf("UpstreamError after a scrape: %v allocations, want 0", n)
	}
}

// TestProxiedRequestAllocatesNothingWithMetrics: a kept-alive request
// through proxy.Server with this package's observers allocates nothing
// (the metrics keep the engine's 0 allocs/op).
func TestProxiedRequestAllocatesNothingWithMetrics(t *testing.T) {
	if raceOn {
		t.Skip("allocation counts are not meaningful under -race")
	}
	rt, addr := proxiedRoute(t, fixedBackend(t))
	observe(t, rt)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	once := func() {
		if s := exchange(c, br); s != 200 {
			t.Fatalf("status %d, want 200", s)
		}
	}
	once() // warm the pool
	if n := testing.AllocsPerRun(200, once); n >= 1 {
		t.Fatalf("%.2f allocations per proxied request with metrics on, want 0", n)
	}
}

// TestRefusedRequestAllocatesNothingWithMetrics: a request the policy
// chain refuses (its cluster's breaker forced open: 503 breaker-open,
// counted by reason and class) allocates nothing either.
func TestRefusedRequestAllocatesNothingWithMetrics(t *testing.T) {
	if raceOn {
		t.Skip("allocation counts are not meaningful under -race")
	}
	rt, addr := proxiedRoute(t, fixedBackend(t))
	gd := testGuard(t, false)
	gd.ForceBreaker("open")
	rt.Policy = chain.New(chain.Config{Route: rt.Name, Guard: gd, Class: shed.Critical})
	m := observe(t, rt)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	once := func() {
		if s := exchange(c, br); s != 503 {
			t.Fatalf("status %d, want 503", s)
		}
	}
	once() // resolves the reason's child
	if n := testing.AllocsPerRun(200, once); n >= 1 {
		t.Fatalf("%.2f allocations per refused request with metrics on, want 0", n)
	}
	// AllocsPerRun runs once more than asked; an answer is counted just
	// after it is written, so the last may still be on its way.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := series(t, m, "spillway_refusals_total")["class=critical,reason=breaker-open,route=api"]
		if n == 202 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals counted: %v, want 202", n)
		}
	}
}
