package metrics

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// TestProxyCountsThroughObservers: through a real proxy.Server, 5
// answered requests and one to an endpoint that refuses connections are
// counted by route, class and source; the refusal also by endpoint and
// kind.
func TestProxyCountsThroughObservers(t *testing.T) {
	rt, addr := proxiedRoute(t, fixedBackend(t))
	m := observe(t, rt)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	for range 5 {
		if s := exchange(c, br); s != 200 {
			t.Fatalf("status %d, want 200", s)
		}
	}

	down, downAddr := proxiedRoute(t, refusingAddr(t))
	m2 := observe(t, down)
	c2, err := net.Dial("tcp", downAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if s := exchange(c2, bufio.NewReaderSize(c2, 4096)); s != 502 {
		t.Fatalf("status %d from a refusing endpoint, want 502", s)
	}

	// The engine calls End once the answer is written: the client may read
	// it first. Wait (bounded) until nothing is in flight on either route.
	settled(t, m, "route=api")
	settled(t, m2, "route=api")
	expect(t, "requests_total", nonZero(series(t, m, "spillway_requests_total")), map[string]float64{
		"cluster=app,code_class=2xx,route=api,source=upstream": 5,
	})
	expect(t, "request_duration_seconds", series(t, m, "spillway_request_duration_seconds"), map[string]float64{"cluster=app,route=api": 5})
	expect(t, "requests_in_flight", series(t, m, "spillway_requests_in_flight"), map[string]float64{"route=api": 0})
	expect(t, "requests_total (down)", nonZero(series(t, m2, "spillway_requests_total")), map[string]float64{
		"cluster=app,code_class=5xx,route=api,source=gateway": 1,
	})
	expect(t, "upstream_errors_total (down)", series(t, m2, "spillway_upstream_errors_total"), map[string]float64{
		"cluster=app,endpoint=" + down.Cluster.Set.Members(0)[0].Addr() + ",kind=refused": 1,
	})
}

// settled waits up to 5 s for requests_in_flight{route} to reach 0.
func settled(t *testing.T, m *Metrics, route string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if series(t, m, "spillway_requests_in_flight")[route] == 0 {
			return
		}
	}
	t.Fatalf("%s still has requests in flight after 5 s", route)
}
