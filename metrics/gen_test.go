package metrics

import (
	"testing"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/upstream"
)

func gauges(t *testing.T, m *Metrics) (generation, live float64) {
	t.Helper()
	return series(t, m, "spillway_config_generation")[""], series(t, m, "spillway_generations_live")[""]
}

// TestRetireDeletesRemovedSeries: a reload renames route b to b2 and
// moves route c from cluster y to z; once the old generation is retired,
// b's and c-on-y's series and cluster y's errors are gone, and what the
// new generation still has keeps its counts.
func TestRetireDeletesRemovedSeries(t *testing.T) {
	m := newMetrics(t, Options{})
	g1 := m.Generation([]RouteInfo{{"a", "x"}, {"b", "x"}, {"c", "y"}}, []ClusterInfo{{Name: "x"}, {Name: "y"}})
	for _, r := range []string{"a", "b", "c"} {
		g1.Route(r).Begin()
		g1.Route(r).End(ending(200, true, 0.01))
	}
	g1.Cluster("x").UpstreamError("e1:80", upstream.KindRefused)
	g1.Cluster("y").UpstreamError("e2:80", upstream.KindTimeout)
	g2 := m.Generation([]RouteInfo{{"a", "x"}, {"b2", "x"}, {"c", "z"}}, []ClusterInfo{{Name: "x"}, {Name: "z"}})
	if g2.Cluster("x") != g1.Cluster("x") {
		t.Error("cluster x's observer is not shared by the two generations")
	}
	if gen, live := gauges(t, m); gen != 2 || live != 2 {
		t.Errorf("before Retire: generation %v, live %v; want 2, 2", gen, live)
	}
	m.Retire(g1)
	expect(t, "requests_total", nonZero(series(t, m, "spillway_requests_total")), map[string]float64{
		"cluster=x,code_class=2xx,route=a,source=upstream": 1,
	})
	if n := len(series(t, m, "spillway_requests_total")); n != 30 {
		t.Errorf("%d requests_total series, want 30 (a, b2, c on z)", n)
	}
	expect(t, "request_duration_seconds", series(t, m, "spillway_request_duration_seconds"), map[string]float64{
		"cluster=x,route=a": 1, "cluster=x,route=b2": 0, "cluster=z,route=c": 0,
	})
	expect(t, "requests_in_flight", series(t, m, "spillway_requests_in_flight"), map[string]float64{
		"route=a": 0, "route=b2": 0, "route=c": 0,
	})
	expect(t, "upstream_errors_total", series(t, m, "spillway_upstream_errors_total"), map[string]float64{
		"cluster=x,endpoint=e1:80,kind=refused": 1,
	})
	if gen, live := gauges(t, m); gen != 2 || live != 1 {
		t.Errorf("after Retire: generation %v, live %v; want 2, 1", gen, live)
	}
	m.Retire(g1) // twice: nothing happens
	if n := len(series(t, m, "spillway_requests_total")); n != 30 {
		t.Errorf("second Retire: %d requests_total series, want 30", n)
	}
	m.Retire(g2)
	for _, name := range []string{"spillway_requests_total", "spillway_request_duration_seconds", "spillway_requests_in_flight", "spillway_upstream_errors_total"} {
		if got := series(t, m, name); len(got) != 0 {
			t.Errorf("every generation retired, %s still has %v", name, got)
		}
	}
	if gen, live := gauges(t, m); gen != 0 || live != 0 {
		t.Errorf("nothing live: generation %v, live %v; want 0, 0", gen, live)
	}
	// A straggler of a retired generation recreates no series.
	g1.Cluster("y").UpstreamError("e3:80", upstream.KindReset)
	g2.Cluster("x").UpstreamError("e1:80", upstream.KindReset)
	g1.Route("b").End(ending(200, true, 0.01))
	for _, name := range []string{"spillway_requests_total", "spillway_upstream_errors_total"} {
		if got := series(t, m, name); len(got) != 0 {
			t.Errorf("after stragglers, %s has %v", name, got)
		}
	}
}

// TestRetireKeepsWhatAnotherLiveGenerationHas: three generations; route a
// is in the first two only. Retiring the first keeps a (the second still
// counts on it); retiring the second deletes it.
func TestRetireKeepsWhatAnotherLiveGenerationHas(t *testing.T) {
	m := newMetrics(t, Options{})
	g1 := m.Generation([]RouteInfo{{"a", "x"}}, nil)
	g2 := m.Generation([]RouteInfo{{"a", "x"}}, nil)
	m.Generation([]RouteInfo{{"b", "x"}}, nil)
	g2.Route("a").Begin() // a request still in flight on the second generation
	m.Retire(g1)
	expect(t, "requests_in_flight", series(t, m, "spillway_requests_in_flight"), map[string]float64{"route=a": 1, "route=b": 0})
	if gen, live := gauges(t, m); gen != 3 || live != 2 {
		t.Errorf("generation %v, live %v; want 3, 2", gen, live)
	}
	g2.Route("a").End(ending(200, true, 0.5))
	m.Retire(g2)
	expect(t, "requests_in_flight", series(t, m, "spillway_requests_in_flight"), map[string]float64{"route=b": 0})
	expect(t, "request_duration_seconds", series(t, m, "spillway_request_duration_seconds"), map[string]float64{"cluster=x,route=b": 0})
}

func eps(addrs ...string) (out []balancer.Endpoint) {
	for _, a := range addrs {
		out = append(out, balancer.Endpoint{Addr: a})
	}
	return out
}

// healthSet is a Set at t = 2 s with one endpoint in each state: a
// draining, b unhealthy, c ejected until 100 s, d slow-starting (it joined
// at 1 s, the ramp lasts 10 s), e healthy.
func healthSet(t *testing.T) *balancer.Set {
	t.Helper()
	set, err := balancer.NewSet(balancer.SetConfig{SlowStart: 10})
	if err != nil {
		t.Fatal(err)
	}
	set.Update(0, eps("a:1", "b:1", "c:1", "e:1"))
	set.Update(1, eps("a:1", "b:1", "c:1", "d:1", "e:1"))
	set.Drain(1, "a:1", true)
	set.SetHealthy(1, "b:1", false)
	set.Eject(1, "c:1", 100)
	return set
}

// healthOf returns the endpoint_health series with value 1 (the current
// states) and checks that each endpoint has all five states.
func healthOf(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	all := series(t, m, "spillway_endpoint_health")
	if len(all)%5 != 0 {
		t.Errorf("%d endpoint_health series, not five per endpoint", len(all))
	}
	return nonZero(all)
}

func TestEndpointHealthFromClusterOf(t *testing.T) {
	m := newMetrics(t, Options{Clock: &clock.Manual{T: 2}})
	m.Generation(nil, []ClusterInfo{ClusterOf(&proxy.Cluster{Name: "app", Set: healthSet(t)})})
	expect(t, "endpoint_health", healthOf(t, m), map[string]float64{
		"cluster=app,endpoint=a:1,state=draining":   1,
		"cluster=app,endpoint=b:1,state=unhealthy":  1,
		"cluster=app,endpoint=c:1,state=ejected":    1,
		"cluster=app,endpoint=d:1,state=slow_start": 1,
		"cluster=app,endpoint=e:1,state=healthy":    1,
	})
}

// TestEndpointCap: with MaxEndpoints 2, the third endpoint in address
// order (health) and the third to fail (errors) count as "other".
func TestEndpointCap(t *testing.T) {
	m := newMetrics(t, Options{Clock: &clock.Manual{T: 2}, MaxEndpoints: 2})
	o := m.Generation(nil, []ClusterInfo{{Name: "app", Set: healthSet(t)}}).Cluster("app")
	got := series(t, m, "spillway_endpoint_health")
	expect(t, "endpoint_health", got, map[string]float64{
		"cluster=app,endpoint=a:1,state=draining": 1, "cluster=app,endpoint=a:1,state=healthy": 0,
		"cluster=app,endpoint=a:1,state=unhealthy": 0, "cluster=app,endpoint=a:1,state=ejected": 0,
		"cluster=app,endpoint=a:1,state=slow_start": 0,
		"cluster=app,endpoint=b:1,state=unhealthy":  1, "cluster=app,endpoint=b:1,state=healthy": 0,
		"cluster=app,endpoint=b:1,state=draining": 0, "cluster=app,endpoint=b:1,state=ejected": 0,
		"cluster=app,endpoint=b:1,state=slow_start": 0,
		"cluster=app,endpoint=other,state=ejected":  1, "cluster=app,endpoint=other,state=slow_start": 1,
		"cluster=app,endpoint=other,state=healthy": 1, "cluster=app,endpoint=other,state=draining": 0,
		"cluster=app,endpoint=other,state=unhealthy": 0,
	})
	for _, a := range []string{"e:1", "c:1", "a:1", "e:1"} {
		o.UpstreamError(a, upstream.KindReset)
	}
	expect(t, "upstream_errors_total", series(t, m, "spillway_upstream_errors_total"), map[string]float64{
		"cluster=app,endpoint=e:1,kind=reset":   2,
		"cluster=app,endpoint=c:1,kind=reset":   1,
		"cluster=app,endpoint=other,kind=reset": 1,
	})
}

// TestRemovedEndpointsPruned: discovery drops an endpoint; its error
// series go at the next scrape (a late error too), those of a cluster
// without Members stay, and an endpoint that comes back counts afresh.
func TestRemovedEndpointsPruned(t *testing.T) {
	m := newMetrics(t, Options{Clock: &clock.Manual{}})
	set, _ := balancer.NewSet(balancer.SetConfig{})
	set.Update(0, eps("e1:80", "e2:80"))
	g := m.Generation(nil, []ClusterInfo{{Name: "app", Set: set}, {Name: "blind"}})
	g.Cluster("app").UpstreamError("e1:80", upstream.KindRefused)
	g.Cluster("app").UpstreamError("e2:80", upstream.KindRefused)
	g.Cluster("app").UpstreamError("e2:80", upstream.KindTimeout)
	g.Cluster("blind").UpstreamError("gone:80", upstream.KindRefused)
	set.Update(0, eps("e1:80"))
	series(t, m, "spillway_upstream_errors_total") // this scrape prunes
	expect(t, "upstream_errors_total", series(t, m, "spillway_upstream_errors_total"), map[string]float64{
		"cluster=app,endpoint=e1:80,kind=refused":     1,
		"cluster=blind,endpoint=gone:80,kind=refused": 1,
	})
	g.Cluster("app").UpstreamError("e2:80", upstream.KindTimeout) // a late error of a request in flight: gone at the next scrape
	series(t, m, "spillway_upstream_errors_total")
	expect(t, "upstream_errors_total", series(t, m, "spillway_upstream_errors_total"), map[string]float64{
		"cluster=app,endpoint=e1:80,kind=refused":     1,
		"cluster=blind,endpoint=gone:80,kind=refused": 1,
	})
	set.Update(0, eps("e1:80", "e2:80")) // e2 comes back: it counts afresh
	g.Cluster("app").UpstreamError("e2:80", upstream.KindTimeout)
	expect(t, "upstream_errors_total", series(t, m, "spillway_upstream_errors_total"), map[string]float64{
		"cluster=app,endpoint=e1:80,kind=refused":     1,
		"cluster=app,endpoint=e2:80,kind=timeout":     1,
		"cluster=blind,endpoint=gone:80,kind=refused": 1,
	})
}

// TestPruneUsesEveryLiveGeneration: an old generation's cluster still
// lists e2, the new one does not; e2's errors stay until the old one is
// retired, and health shows the newest generation's view.
func TestPruneUsesEveryLiveGeneration(t *testing.T) {
	m := newMetrics(t, Options{Clock: &clock.Manual{}})
	set1, _ := balancer.NewSet(balancer.SetConfig{})
	set1.Update(0, eps("e1:80", "e2:80"))
	set2, _ := balancer.NewSet(balancer.SetConfig{})
	set2.Update(0, eps("e1:80"))
	g1 := m.Generation(nil, []ClusterInfo{{Name: "app", Set: set1}})
	m.Generation(nil, []ClusterInfo{{Name: "app", Set: set2}})
	g1.Cluster("app").UpstreamError("e2:80", upstream.KindReset)
	series(t, m, "spillway_upstream_errors_total")
	expect(t, "upstream_errors_total", series(t, m, "spillway_upstream_errors_total"), map[string]float64{
		"cluster=app,endpoint=e2:80,kind=reset": 1,
	})
	expect(t, "endpoint_health", healthOf(t, m), map[string]float64{"cluster=app,endpoint=e1:80,state=healthy": 1})
	m.Retire(g1)
	series(t, m, "spillway_upstream_errors_total")
	if got := series(t, m, "spillway_upstream_errors_total"); len(got) != 0 {
		t.Errorf("after the old generation's retirement: %v", got)
	}
}
