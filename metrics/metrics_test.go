package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/upstream"
)

func TestRouteObserverCounts(t *testing.T) {
	m := newMetrics(t, Options{})
	g := m.Generation([]RouteInfo{{"api", "app"}, {"web", "app"}}, nil)
	o := g.Route("api")
	for range 5 {
		o.Begin()
	}
	o.End(ending(200, true, 0.000244140625)) // 2⁻¹²: first bucket
	o.End(ending(503, false, 0.00390625))    // 2⁻⁸: the 5 ms bucket
	o.End(ending(101, true, 2))              // a WebSocket that lived 2 s
	o.End(ending(499, false, 40))            // beyond the last bucket
	expect(t, "requests_total", nonZero(series(t, m, "spillway_requests_total")), map[string]float64{
		"cluster=app,code_class=2xx,route=api,source=upstream": 1,
		"cluster=app,code_class=5xx,route=api,source=gateway":  1,
		"cluster=app,code_class=1xx,route=api,source=upstream": 1,
		"cluster=app,code_class=4xx,route=api,source=gateway":  1,
	})
	// Every child exists from the start: 2 routes × 5 classes × 2 sources.
	if n := len(series(t, m, "spillway_requests_total")); n != 20 {
		t.Errorf("%d requests_total series, want 20", n)
	}
	expect(t, "requests_in_flight", series(t, m, "spillway_requests_in_flight"), map[string]float64{
		"route=api": 1, "route=web": 0,
	})
	want := `
# HELP spillway_request_duration_seconds Time from the request's head to the end of its answer, by route and cluster.
# TYPE spillway_request_duration_seconds histogram
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.0005"} 1
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.001"} 1
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.0025"} 1
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.005"} 2
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.01"} 2
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.025"} 2
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.05"} 2
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.1"} 2
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.25"} 2
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="0.5"} 2
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="1"} 2
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="2.5"} 3
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="5"} 3
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="10"} 3
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="30"} 3
spillway_request_duration_seconds_bucket{cluster="app",route="api",le="+Inf"} 4
spillway_request_duration_seconds_sum{cluster="app",route="api"} 42.004150390625
spillway_request_duration_seconds_count{cluster="app",route="api"} 4
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.0005"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.001"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.0025"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.005"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.01"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.025"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.05"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.1"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.25"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="0.5"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="1"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="2.5"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="5"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="10"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="30"} 0
spillway_request_duration_seconds_bucket{cluster="app",route="web",le="+Inf"} 0
spillway_request_duration_seconds_sum{cluster="app",route="web"} 0
spillway_request_duration_seconds_count{cluster="app",route="web"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "spillway_request_duration_seconds"); err != nil {
		t.Error(err)
	}
}

func TestStatusOutOfRangeCountsAs5xx(t *testing.T) {
	m := newMetrics(t, Options{})
	o := m.Generation([]RouteInfo{{"r", "c"}}, nil).Route("r")
	for _, status := range []int{0, 99, 600, 1000, -1} {
		o.Begin()
		o.End(ending(status, true, 0))
	}
	expect(t, "requests_total", nonZero(series(t, m, "spillway_requests_total")), map[string]float64{
		"cluster=c,code_class=5xx,route=r,source=upstream": 5,
	})
}

func TestUnknownNamesAreNil(t *testing.T) {
	m := newMetrics(t, Options{})
	g := m.Generation([]RouteInfo{{"r", "c"}}, []ClusterInfo{{Name: "c"}})
	if g.Route("nope") != nil || g.Cluster("nope") != nil {
		t.Error("an unknown name has an observer")
	}
	if g.Route("r") == nil || g.Cluster("c") == nil {
		t.Error("a known name has no observer")
	}
}

func TestUpstreamErrorKinds(t *testing.T) {
	m := newMetrics(t, Options{})
	o := m.Generation(nil, []ClusterInfo{{Name: "app"}}).Cluster("app")
	o.UpstreamError("10.0.0.1:80", upstream.KindRefused)
	o.UpstreamError("10.0.0.1:80", upstream.KindRefused)
	o.UpstreamError("10.0.0.1:80", upstream.KindPoolFull)
	o.UpstreamError("10.0.0.2:80", upstream.KindBadResponse)
	o.UpstreamError("10.0.0.2:80", upstream.Kind(200))
	o.UpstreamError("10.0.0.2:80", 0)
	expect(t, "upstream_errors_total", series(t, m, "spillway_upstream_errors_total"), map[string]float64{
		"cluster=app,endpoint=10.0.0.1:80,kind=refused":      2,
		"cluster=app,endpoint=10.0.0.1:80,kind=pool_full":    1,
		"cluster=app,endpoint=10.0.0.2:80,kind=bad_response": 1,
		"cluster=app,endpoint=10.0.0.2:80,kind=unknown":      2,
	})
}

func TestReloadsCounted(t *testing.T) {
	m := newMetrics(t, Options{})
	m.Reload(nil)
	m.Reload(errors.New("config.yaml:3:4: bad"))
	m.Reload(nil)
	expect(t, "reloads_total", series(t, m, "spillway_reloads_total"), map[string]float64{
		"result=ok": 2, "result=error": 1,
	})
}

func TestSources(t *testing.T) {
	m := newMetrics(t, Options{})
	if got := series(t, m, "spillway_overload_state"); len(got) != 0 {
		t.Errorf("overload_state without a source: %v", got)
	}
	m.SetSources(Sources{
		OverloadActions: func(add func(string, uint64)) {
			add("keepalive_off", 3)
			add("refuse_connections", 1)
			add("keepalive_off", 9) // a duplicate is dropped
		},
		OverloadState: func() float64 { return 2 },
		Connections: func(add func(string, int)) {
			add("http", 5)
			add("https", 0)
		},
	})
	expect(t, "overload_actions_total", series(t, m, "spillway_overload_actions_total"), map[string]float64{
		"action=keepalive_off": 3, "action=refuse_connections": 1,
	})
	expect(t, "overload_state", series(t, m, "spillway_overload_state"), map[string]float64{"": 2})
	expect(t, "connections_open", series(t, m, "spillway_connections_open"), map[string]float64{
		"listener=http": 5, "listener=https": 0,
	})
}

func TestHandlerServesOwnRegistry(t *testing.T) {
	m := newMetrics(t, Options{})
	m.Generation([]RouteInfo{{"r", "c"}}, nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	for _, s := range []string{"\nspillway_config_generation 1\n", "\nspillway_generations_live 1\n", "\ngo_goroutines ", "\nprocess_cpu_seconds_total "} {
		if !strings.Contains("\n"+string(body), s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}
	// A second Metrics has its own registry: registering the same names twice would panic.
	m2 := newMetrics(t, Options{})
	if got := series(t, m2, "spillway_config_generation"); got[""] != 0 {
		t.Errorf("second Metrics sees generation %v", got[""])
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{
		{MaxEndpoints: -1},
		{Buckets: []float64{1, 0.5}},
		{Buckets: []float64{1, 1}},
		{Buckets: []float64{}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestConcurrentErrorsAndPrunes: errors on new endpoints race scrapes
// that prune; every error of a member that is never pruned is counted.
func TestConcurrentErrorsAndPrunes(t *testing.T) {
	m := newMetrics(t, Options{})
	set, _ := balancer.NewSet(balancer.SetConfig{})
	set.Update(0, eps("keep:1"))
	obs := m.Generation(nil, []ClusterInfo{{Name: "c", Set: set}}).Cluster("c")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				obs.UpstreamError("keep:1", upstream.KindTimeout)
				obs.UpstreamError("gone:"+itoa(w*1000+i), upstream.KindReset)
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			series(t, m, "spillway_upstream_errors_total")
		}
	})
	wg.Wait()
	series(t, m, "spillway_upstream_errors_total") // the last prune
	got := series(t, m, "spillway_upstream_errors_total")
	expect(t, "upstream_errors_total", got, map[string]float64{"cluster=c,endpoint=keep:1,kind=timeout": 800})
}
