package metrics

import (
	"bufio"
	"net"
	"testing"
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
	if len(nonZero(series(t, m, "spillway_requests_total"))) == 0 {
		t.Skip("proxy does not call Route.Observer yet (the proxy helper's change of issue 12)")
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
