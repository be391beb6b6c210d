package metrics

import (
	"context"
	"net/netip"
	"testing"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/shed"
)

// refused is a gateway answer with a reason code, classed by a chain
// unless class is negative.
func refused(status int, reason string, class int) proxy.Ending {
	e := proxy.Ending{Status: status, Reason: reason, Seconds: 0.001}
	if class >= 0 {
		e.Class, e.Classed = shed.Class(class), true
	}
	return e
}

// TestRefusalsByReasonAndClass: every answer with a reason code counts
// once under its route, reason and class — "none" when no chain classed
// it, the last class for one beyond them — and answers without a reason
// (the upstream's) count none.
func TestRefusalsByReasonAndClass(t *testing.T) {
	m := newMetrics(t, Options{})
	g := m.Generation([]RouteInfo{{"api", "app"}, {"web", "app"}}, nil)
	api, web := g.Route("api"), g.Route("web")
	for _, e := range []proxy.Ending{
		refused(429, "ratelimit:per-ip", int(shed.Sheddable)),
		refused(429, "ratelimit:per-ip", int(shed.Sheddable)),
		refused(503, "admit:limit", int(shed.Default)),
		refused(503, "admit:limit", int(shed.Critical)),
		refused(502, "upstream-reset", -1),
		refused(503, "breaker-open", 12), // beyond shed.MaxClasses
		{Status: 200, FromUpstream: true},
		{Status: 503, FromUpstream: true},
	} {
		api.Begin()
		api.End(e)
	}
	web.Begin()
	web.End(refused(499, "client-gone", int(shed.Default)))
	expect(t, "refusals_total", series(t, m, "spillway_refusals_total"), map[string]float64{
		"class=sheddable,reason=ratelimit:per-ip,route=api": 2,
		"class=default,reason=admit:limit,route=api":        1,
		"class=critical,reason=admit:limit,route=api":       1,
		"class=none,reason=upstream-reset,route=api":        1,
		"class=class 7,reason=breaker-open,route=api":       1,
		"class=default,reason=client-gone,route=web":        1,
	})
	want := map[string]map[string]uint64{
		"ratelimit:per-ip": {"sheddable": 2}, "admit:limit": {"default": 1, "critical": 1},
		"upstream-reset": {"none": 1}, "breaker-open": {"class 7": 1},
	}
	got := m.Refusals("api")
	if len(got) != len(want) {
		t.Errorf("Refusals(api) = %v, want %v", got, want)
	}
	for r, byClass := range want {
		for c, n := range byClass {
			if got[r][c] != n {
				t.Errorf("Refusals(api)[%s][%s] = %d, want %d", r, c, got[r][c], n)
			}
		}
	}
	if got := m.Refusals("nope"); got != nil {
		t.Errorf("Refusals(nope) = %v, want nil", got)
	}
}

// TestReasonCap: past MaxReasons distinct reason codes on a route, the
// others count under reason "other".
func TestReasonCap(t *testing.T) {
	m := newMetrics(t, Options{})
	o := m.Generation([]RouteInfo{{"api", "app"}}, nil).Route("api")
	for i := range MaxReasons + 5 {
		o.Begin()
		o.End(refused(429, "ratelimit:r"+itoa(i), 0))
	}
	o.Begin()
	o.End(refused(429, "ratelimit:r0", 0)) // an old reason keeps its own series
	got := series(t, m, "spillway_refusals_total")
	if len(got) != MaxReasons+1 {
		t.Errorf("%d series, want %d (the cap and other)", len(got), MaxReasons+1)
	}
	if got["class=critical,reason=other,route=api"] != 5 || got["class=critical,reason=ratelimit:r0,route=api"] != 2 {
		t.Errorf("other = %v, r0 = %v; want 5 and 2", got["class=critical,reason=other,route=api"], got["class=critical,reason=ratelimit:r0,route=api"])
	}
}

// TestRefusalsRetired: retiring the last generation with a route deletes
// its refusal series, and a late answer of that generation creates none;
// while another live generation has the route, they stay.
func TestRefusalsRetired(t *testing.T) {
	m := newMetrics(t, Options{})
	g1 := m.Generation([]RouteInfo{{"api", "app"}}, nil)
	g1.Route("api").Begin()
	g1.Route("api").End(refused(503, "deadline", 1))
	g2 := m.Generation([]RouteInfo{{"api", "app"}}, nil)
	m.Retire(g1)
	if n := len(series(t, m, "spillway_refusals_total")); n != 1 {
		t.Fatalf("after retiring g1 (g2 has the route): %d series, want 1", n)
	}
	m.Retire(g2)
	if n := len(series(t, m, "spillway_refusals_total")); n != 0 {
		t.Fatalf("after retiring g2: %d series, want 0", n)
	}
	g2.Route("api").End(refused(503, "admit:queue", 1))
	if n := len(series(t, m, "spillway_refusals_total")); n != 0 {
		t.Fatalf("a late answer of a retired generation created %d series", n)
	}
}

// testGuard is a cluster guard with a fixed admission limit of 4 (shadow
// when asked) and a breaker opening after 2 failures in a row.
func testGuard(t *testing.T, shadow bool) *chain.Guard {
	t.Helper()
	alg, err := limit.NewFixed(4)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limit.NewLimiter(alg, limit.LimiterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := admit.New(admit.Config{Name: "app", Limiter: lim, Clock: &clock.Manual{}})
	if err != nil {
		t.Fatal(err)
	}
	br, err := breaker.New(breaker.Config{Threshold: 2, Recovery: 60})
	if err != nil {
		t.Fatal(err)
	}
	g := &chain.Guard{Gate: gate, AdmitShadow: shadow, Breaker: br}
	g.Init()
	return g
}

// TestPolicySeries: the routes' and clusters' policy state read at scrape
// time — admission's and the breaker's own series, the operator
// overrides, the retry counters and budget, and rate-limit decisions by
// rule and outcome.
func TestPolicySeries(t *testing.T) {
	m := newMetrics(t, Options{})
	gd := testGuard(t, false)
	m.SetSources(Sources{
		Routes: func(add func(RoutePolicy)) {
			add(RoutePolicy{Route: "api", Counts: chain.Counts{Retries: 7, RetriesStopped: map[string]uint64{"budget": 2, "attempts": 1},
				Hedges: 5, HedgesWon: 4, HedgesRefused: 6},
				Budget: 3, HasBudget: true, Bypassed: true, Hedging: true,
				Decisions: func(fn func(rule, outcome string, n uint64)) { fn("per-ip", "allowed", 9); fn("per-ip", "denied", 4) }})
			add(RoutePolicy{Route: "api"}) // a name twice: the first only
			add(RoutePolicy{Route: "web", Counts: chain.Counts{RetriesStopped: map[string]uint64{}}})
		},
		Clusters: func(add func(ClusterPolicy)) { add(ClusterPolicy{Cluster: "app", Guard: gd}) },
	})
	expect(t, "retries", series(t, m, "spillway_route_retries_total"), map[string]float64{"route=api": 7, "route=web": 0})
	expect(t, "stopped", series(t, m, "spillway_route_retries_stopped_total"), map[string]float64{
		"route=api,verdict=budget": 2, "route=api,verdict=attempts": 1})
	expect(t, "budget", series(t, m, "spillway_route_retry_budget_tokens"), map[string]float64{"route=api": 3})
	expect(t, "hedges", series(t, m, "spillway_route_hedges_total"), map[string]float64{ // web does not hedge: no series
		"outcome=sent,route=api": 5, "outcome=won,route=api": 4, "outcome=refused,route=api": 6})
	expect(t, "bypassed", series(t, m, "spillway_route_policies_bypassed"), map[string]float64{"route=api": 1, "route=web": 0})
	expect(t, "decisions", series(t, m, "spillway_route_ratelimit_decisions_total"), map[string]float64{
		"outcome=allowed,route=api,rule=per-ip": 9, "outcome=denied,route=api,rule=per-ip": 4})
	expect(t, "limit", series(t, m, "spillway_admission_limit"), map[string]float64{"gate=app": 4})
	expect(t, "pinned", series(t, m, "spillway_admission_pinned_limit"), map[string]float64{"gate=app": 0})
	expect(t, "forced", series(t, m, "spillway_breaker_forced"), map[string]float64{
		"breaker=app,state=open": 0, "breaker=app,state=closed": 0})
	expect(t, "breaker state", series(t, m, "spillway_breaker_state"), map[string]float64{"breaker=app": 0})

	if !gd.PinLimit(0, 2) || !gd.ForceBreaker("open") {
		t.Fatal("PinLimit or ForceBreaker refused")
	}
	gd.BypassAdmission(true)
	expect(t, "limit pinned", series(t, m, "spillway_admission_limit"), map[string]float64{"gate=app": 2})
	expect(t, "pinned", series(t, m, "spillway_admission_pinned_limit"), map[string]float64{"gate=app": 2})
	expect(t, "admission bypassed", series(t, m, "spillway_admission_bypassed"), map[string]float64{"gate=app": 1})
	expect(t, "forced open", series(t, m, "spillway_breaker_forced"), map[string]float64{
		"breaker=app,state=open": 1, "breaker=app,state=closed": 0})
	if n := len(series(t, m, "spillway_admission_shadow_refusals_total")); n != 0 {
		t.Errorf("%d shadow series without shadow mode", n)
	}
	if n := len(series(t, m, "spillway_admission_brownout_forced_level")); n != 0 {
		t.Errorf("%d forced brownout series without a dimmer", n)
	}
}

// TestShadowAdmissionSeries: a shadow admission counts, by class, the
// requests it would have refused.
func TestShadowAdmissionSeries(t *testing.T) {
	m := newMetrics(t, Options{})
	gd := testGuard(t, true)
	c := chain.New(chain.Config{Route: "api", Guard: gd, Class: shed.Sheddable})
	view := request.View{Method: "GET", Path: "/", Client: netip.MustParseAddrPort("192.0.2.1:4000")}
	passes := make([]chain.Pass, 5)
	for i := range passes { // sheddable's share of 4 is 2: three would be refused
		if ref := c.Admit(context.Background(), &clock.Manual{}, 0, &view, &passes[i]); ref != nil {
			t.Fatalf("request %d refused in shadow mode: %s", i, ref.Reason)
		}
	}
	m.SetSources(Sources{Clusters: func(add func(ClusterPolicy)) { add(ClusterPolicy{Cluster: "app", Guard: gd}) }})
	expect(t, "shadow", series(t, m, "spillway_admission_shadow_refusals_total"), map[string]float64{
		"class=critical,gate=app": 0, "class=default,gate=app": 0, "class=sheddable,gate=app": 3})
	for i := range passes {
		passes[i].End(0, chain.Ignore)
	}
}
