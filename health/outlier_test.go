package health

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func hostNames(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = "10.0.0." + strconv.Itoa(i+1) + ":80"
	}
	return s
}

func newDetector(t *testing.T, cfg OutlierConfig, hosts []string) *Detector {
	t.Helper()
	d, err := NewDetector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.SetHosts(hosts)
	return d
}

// feed records rs at now and returns the last decision, failing the test
// if an earlier one ejected.
func feed(t *testing.T, d *Detector, now float64, addr string, rs ...Result) Ejection {
	t.Helper()
	var e Ejection
	for i, r := range rs {
		e = d.Record(now, addr, r)
		if e.Ejected() && i < len(rs)-1 {
			t.Fatalf("ejected after %d of %d results", i+1, len(rs))
		}
	}
	return e
}

func repeat(r Result, n int) []Result {
	s := make([]Result, n)
	for i := range s {
		s[i] = r
	}
	return s
}

func TestHTTPResult(t *testing.T) {
	for code, want := range map[int]Result{200: Success, 302: Success, 404: Success, 429: Success,
		500: ServerError, 501: ServerError, 502: GatewayFailure, 503: GatewayFailure, 504: GatewayFailure,
		505: ServerError, 599: ServerError} {
		if got := HTTPResult(code); got != want {
			t.Errorf("HTTPResult(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestOutlierConsecutive5xx(t *testing.T) {
	d := newDetector(t, OutlierConfig{}, hostNames(20))
	a := "10.0.0.1:80"
	// Four errors, a success, four more: no run of five.
	if e := feed(t, d, 100, a, append(append(repeat(ServerError, 4), Success), repeat(ServerError, 4)...)...); e.Ejected() {
		t.Fatalf("ejected without five in a row: %+v", e)
	}
	e := d.Record(100, a, ServerError)
	if want := (Ejection{Reason: Consecutive5xx, Until: 130, Multiplier: 1}); e != want {
		t.Fatalf("fifth error: %+v, want %+v", e, want)
	}
	if until, ok := d.Ejected(a); !ok || until != 130 {
		t.Errorf("Ejected = %v, %v", until, ok)
	}
	// Results of requests sent before the ejection are ignored.
	if e := feed(t, d, 101, a, repeat(GatewayFailure, 12)...); e.Ejected() {
		t.Errorf("ejected again while ejected: %+v", e)
	}
	if back := d.Tick(129.999); back != nil {
		t.Errorf("returned early: %v", back)
	}
	if back := d.Tick(130); len(back) != 1 || back[0] != a {
		t.Errorf("Tick(130) = %v, want [%s]", back, a)
	}
	if _, ok := d.Ejected(a); ok {
		t.Error("still ejected after its return")
	}
	// The run starts over after the return.
	if e := feed(t, d, 131, a, repeat(ServerError, 4)...); e.Ejected() {
		t.Errorf("ejected by a run that straddles the ejection: %+v", e)
	}
	s := d.Stats()
	if s.Ejections[Consecutive5xx] != 1 || s.Ejected != 0 || s.Returned != 1 || s.Hosts != 20 {
		t.Errorf("stats %+v", s)
	}
}

func TestOutlierGatewayFailures(t *testing.T) {
	a := "10.0.0.1:80"
	// Gateway failures count as 5xx too: four of them and a 500 make five.
	d := newDetector(t, OutlierConfig{}, hostNames(10))
	if e := feed(t, d, 0, a, append(repeat(GatewayFailure, 4), ServerError)...); e.Reason != Consecutive5xx {
		t.Errorf("4 gateway failures + 500: %+v, want a 5xx ejection", e)
	}
	// With 5xx detection off, a 500 breaks a run of gateway failures.
	d = newDetector(t, OutlierConfig{Consecutive5xx: -1, ConsecutiveGatewayFailure: 3}, hostNames(10))
	if e := feed(t, d, 0, a, GatewayFailure, GatewayFailure, ServerError, GatewayFailure, GatewayFailure); e.Ejected() {
		t.Errorf("ejected across a 500: %+v", e)
	}
	if e := d.Record(5, a, GatewayFailure); e != (Ejection{Reason: ConsecutiveGatewayFailure, Until: 35, Multiplier: 1}) {
		t.Errorf("third gateway failure: %+v", e)
	}
	// Both off: nothing ejects.
	d = newDetector(t, OutlierConfig{Consecutive5xx: -1, ConsecutiveGatewayFailure: -1}, hostNames(10))
	if e := feed(t, d, 0, a, repeat(GatewayFailure, 50)...); e.Ejected() {
		t.Errorf("ejected with detection off: %+v", e)
	}
}

// Ejection times grow with repeated ejections (30, 60, 90 s...) up to the
// cap, and shrink again one step per Interval spent in service.
func TestOutlierEjectionTimeGrows(t *testing.T) {
	d := newDetector(t, OutlierConfig{Consecutive5xx: 2, MaxEjectionTime: 100}, hostNames(10))
	a := "10.0.0.1:80"
	now := 0.0
	for i, want := range []Ejection{
		{Consecutive5xx, 30, 1},
		{Consecutive5xx, 30 + 60, 2},
		{Consecutive5xx, 90 + 90, 3},
		{Consecutive5xx, 180 + 100, 4}, // capped: 120 > 100
		{Consecutive5xx, 280 + 100, 4}, // the multiplier stops growing at the cap
	} {
		if e := feed(t, d, now, a, ServerError, ServerError); e != want {
			t.Fatalf("ejection %d: %+v, want %+v", i+1, e, want)
		}
		now = want.Until
		if back := d.Tick(now); len(back) != 1 {
			t.Fatalf("ejection %d not returned at %v: %v", i+1, now, back)
		}
	}
	// Back at 380 with multiplier 4: 10 s later it is 3, 20 s later 2.
	if back := d.Tick(389.9); back != nil || d.Stats().Multiplier[a] != 4 {
		t.Errorf("at 389.9: %v, multiplier %d, want 4", back, d.Stats().Multiplier[a])
	}
	d.Tick(390)
	d.Tick(395) // not a full interval since the last step
	if m := d.Stats().Multiplier[a]; m != 3 {
		t.Errorf("multiplier at 395 = %d, want 3", m)
	}
	d.Tick(400)
	if e := feed(t, d, 401, a, ServerError, ServerError); e != (Ejection{Consecutive5xx, 401 + 90, 3}) {
		t.Errorf("ejection after two steps of forgiveness: %+v, want multiplier 3 (2+1), 90 s", e)
	}
	// Long in service, it is forgiven entirely.
	d.Tick(491)
	for now := 501.0; now <= 541; now += 10 {
		d.Tick(now)
	}
	if m, ok := d.Stats().Multiplier[a]; ok {
		t.Errorf("multiplier %d after 50 s in service, want 0", m)
	}
	if e := feed(t, d, 600, a, ServerError, ServerError); e != (Ejection{Consecutive5xx, 630, 1}) {
		t.Errorf("ejection after forgiveness: %+v", e)
	}
}

func TestOutlierMaxEjectionPercent(t *testing.T) {
	// 20 endpoints at 10%: two may be ejected, not three.
	hosts := hostNames(20)
	d := newDetector(t, OutlierConfig{}, hosts)
	for _, h := range hosts[:2] {
		if e := feed(t, d, 0, h, repeat(ServerError, 5)...); !e.Ejected() {
			t.Fatalf("%s not ejected", h)
		}
	}
	if e := feed(t, d, 1, hosts[2], repeat(ServerError, 5)...); e.Ejected() {
		t.Fatalf("third of 20 ejected at 10%%: %+v", e)
	}
	if s := d.Stats(); s.Refused != 1 || s.Ejected != 2 {
		t.Errorf("stats %+v, want 1 refused, 2 ejected", s)
	}
	// The refused run was reset: four more errors are not a new run of five.
	d.Tick(30)
	if e := feed(t, d, 31, hosts[2], repeat(ServerError, 4)...); e.Ejected() {
		t.Errorf("ejected by 4 errors after a refusal: %+v", e)
	}
	if e := d.Record(31, hosts[2], ServerError); !e.Ejected() {
		t.Errorf("not ejected by a full run once the cap allows")
	}

	// 5 endpoints at 10% round down to none, but one may always be ejected.
	hosts = hostNames(5)
	d = newDetector(t, OutlierConfig{}, hosts)
	if e := feed(t, d, 0, hosts[0], repeat(GatewayFailure, 5)...); !e.Ejected() {
		t.Error("no ejection at all among 5 endpoints")
	}
	if e := feed(t, d, 0, hosts[1], repeat(GatewayFailure, 5)...); e.Ejected() {
		t.Error("second of 5 ejected at 10%")
	}
	// 100%: everything may go.
	d = newDetector(t, OutlierConfig{MaxEjectionPercent: 100}, hosts)
	for _, h := range hosts {
		if e := feed(t, d, 0, h, repeat(ServerError, 5)...); !e.Ejected() {
			t.Errorf("%s not ejected at 100%%", h)
		}
	}
	// 50% of 5: two (2/5 ≤ 50%), not three (3/5 > 50%).
	d = newDetector(t, OutlierConfig{MaxEjectionPercent: 50}, hosts)
	n := 0
	for _, h := range hosts {
		if feed(t, d, 0, h, repeat(ServerError, 5)...).Ejected() {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d of 5 ejected at 50%%, want 2", n)
	}
}

func TestOutlierSetHosts(t *testing.T) {
	hosts := hostNames(4)
	d := newDetector(t, OutlierConfig{MaxEjectionPercent: 25}, hosts)
	feed(t, d, 0, hosts[0], repeat(ServerError, 5)...) // ejected until 30
	feed(t, d, 0, hosts[1], repeat(ServerError, 4)...) // one short
	// Unknown addresses are ignored.
	if e := feed(t, d, 0, "elsewhere:1", repeat(ServerError, 10)...); e.Ejected() || d.Stats().Hosts != 4 {
		t.Errorf("unknown host: %+v, stats %+v", e, d.Stats())
	}
	// Keep 0 and 1 (state kept), drop 2 and 3, add 4.
	d.SetHosts([]string{hosts[0], hosts[1], "10.0.0.9:80", hosts[1]})
	if s := d.Stats(); s.Hosts != 3 || s.Ejected != 1 {
		t.Errorf("after SetHosts: %+v", s)
	}
	if until, ok := d.Ejected(hosts[0]); !ok || until != 30 {
		t.Errorf("ejection of a kept host lost: %v %v", until, ok)
	}
	// hosts[1]'s run of four survived: one more error completes it, but 1
	// of 3 is already out at 25% ((1+1)/3 > 25%).
	if e := d.Record(1, hosts[1], ServerError); e.Ejected() || d.Stats().Refused != 1 {
		t.Errorf("kept run: %+v, stats %+v", e, d.Stats())
	}
	// Removing the ejected host frees the cap.
	d.SetHosts([]string{hosts[1], "10.0.0.9:80"})
	if e := feed(t, d, 2, hosts[1], repeat(ServerError, 5)...); !e.Ejected() {
		t.Error("not ejected after the ejected host left")
	}
	if back := d.Tick(1000); len(back) != 1 || back[0] != hosts[1] {
		t.Errorf("Tick returned %v, want only %s (the removed host is forgotten)", back, hosts[1])
	}
	// A host added back starts clean.
	d.SetHosts([]string{hosts[0], hosts[1], "10.0.0.9:80"})
	if _, ok := d.Stats().Multiplier[hosts[0]]; ok {
		t.Error("re-added host kept its multiplier")
	}
}

func TestOutlierReturn(t *testing.T) {
	hosts := hostNames(10)
	d := newDetector(t, OutlierConfig{}, hosts)
	feed(t, d, 0, hosts[0], repeat(ServerError, 5)...)
	if !d.Return(5, hosts[0]) || d.Return(5, hosts[0]) || d.Return(5, hosts[1]) {
		t.Error("Return reports wrongly")
	}
	if back := d.Tick(14); back != nil {
		t.Errorf("an endpoint returned early came back again: %v", back)
	}
	// Its multiplier was kept (less than an Interval in service): the next
	// ejection lasts 60 s.
	if e := feed(t, d, 14, hosts[0], repeat(ServerError, 5)...); e.Until != 74 || e.Multiplier != 2 {
		t.Errorf("ejection after an early return: %+v", e)
	}
}

// Many goroutines failing on one endpoint at once eject it once.
func TestOutlierConcurrentRecord(t *testing.T) {
	hosts := hostNames(10)
	d := newDetector(t, OutlierConfig{MaxEjectionPercent: 100}, hosts)
	var mu sync.Mutex
	ejections := 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r := GatewayFailure
				if g == 0 && i%50 == 0 {
					r = Success
				}
				if d.Record(1, hosts[0], r).Ejected() {
					mu.Lock()
					ejections++
					mu.Unlock()
				}
				d.Record(1, hosts[1+g], Success)
			}
		}()
	}
	wg.Wait()
	if ejections != 1 || d.Stats().Ejected != 1 {
		t.Errorf("%d ejections reported, stats %+v; want exactly 1", ejections, d.Stats())
	}
}

func TestOutlierConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   OutlierConfig
		field string
	}{
		{OutlierConfig{BaseEjectionTime: -1}, "BaseEjectionTime"},
		{OutlierConfig{MaxEjectionTime: math.Inf(1)}, "MaxEjectionTime"},
		{OutlierConfig{MaxEjectionTime: 20}, "MaxEjectionTime"}, // below the default base of 30
		{OutlierConfig{BaseEjectionTime: 60, MaxEjectionTime: 45}, "MaxEjectionTime"},
		{OutlierConfig{Interval: math.NaN()}, "Interval"},
		{OutlierConfig{MaxEjectionPercent: 101}, "MaxEjectionPercent"},
		{OutlierConfig{MaxEjectionPercent: -5}, "MaxEjectionPercent"},
	} {
		_, err := NewDetector(tc.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want a ConfigError on %s", tc.cfg, err, tc.field)
		}
	}
	// A base above 300 s raises the default cap to the base.
	d := newDetector(t, OutlierConfig{BaseEjectionTime: 400, Consecutive5xx: 1}, hostNames(1))
	if e := d.Record(0, "10.0.0.1:80", ServerError); e.Until != 400 {
		t.Errorf("first ejection with a 400 s base ends at %v, want 400", e.Until)
	}
}

func TestDetectorCollector(t *testing.T) {
	hosts := hostNames(20)
	d := newDetector(t, OutlierConfig{}, hosts)
	feed(t, d, 0, hosts[0], repeat(ServerError, 5)...)
	feed(t, d, 0, hosts[1], repeat(GatewayFailure, 5)...)
	feed(t, d, 0, hosts[2], repeat(GatewayFailure, 5)...) // refused
	d.Tick(30)
	if n := testutil.CollectAndCount(d.Collector("api")); n != 6 {
		t.Errorf("%d series, want 6", n)
	}
	if err := testutil.CollectAndCompare(d.Collector("api"), stringsReader(`
# HELP spillway_outlier_ejections_total Endpoints ejected by outlier detection, by reason.
# TYPE spillway_outlier_ejections_total counter
spillway_outlier_ejections_total{detector="api",reason="consecutive_5xx"} 1
spillway_outlier_ejections_total{detector="api",reason="consecutive_gateway_failure"} 1
# HELP spillway_outlier_ejections_refused_total Ejections refused because the ejected share would exceed MaxEjectionPercent.
# TYPE spillway_outlier_ejections_refused_total counter
spillway_outlier_ejections_refused_total{detector="api"} 1
# HELP spillway_outlier_returns_total Ejections ended (time served, or returned early).
# TYPE spillway_outlier_returns_total counter
spillway_outlier_returns_total{detector="api"} 2
# HELP spillway_outlier_ejected Endpoints ejected now.
# TYPE spillway_outlier_ejected gauge
spillway_outlier_ejected{detector="api"} 0
# HELP spillway_outlier_hosts Endpoints watched by outlier detection.
# TYPE spillway_outlier_hosts gauge
spillway_outlier_hosts{detector="api"} 20
`)); err != nil {
		t.Error(err)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
