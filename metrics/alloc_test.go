package metrics

import (
	"bufio"
	"net"
	"testing"

	"github.com/spillwayhq/spillway/upstream"
)

// TestObserversAllocateNothing: Begin, End and a resolved UpstreamError
// allocate nothing.
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
