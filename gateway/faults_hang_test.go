package gateway

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// The active checks of the hang tests: a check every 200 ms, none
// overlapping, each given 100 ms; three failed in a row mark an endpoint
// down. From the start of a hang the third failed check ends between
// (fall−1)×interval + timeout and fall×interval + timeout + interval.
const (
	hangInterval, hangTimeout, hangFall = 200 * time.Millisecond, 100 * time.Millisecond, 3
	hangChecks                          = "{active: {path: /healthz, interval: 200ms, timeout: 100ms, jitter: 0, fall: 3, rise: 1}"
)

// stateOf returns addr's state in the current generation's cluster name.
func stateOf(g *Gateway, name, addr string) string {
	st, _ := g.cur.Load().clusters[name].px.Set.State(g.clk.Now(), addr)
	return st.String()
}

// firstState polls (every 2 ms, up to 10 s) the state of addr in cluster
// name until it is not healthy, and returns that state and when it came.
func firstState(g *Gateway, name, addr string) (string, time.Time) {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if st := stateOf(g, name, addr); st != "healthy" {
			return st, time.Now()
		}
	}
	return "healthy", time.Now()
}

// TestFaultHangDetected: one endpoint of each of two clusters starts to
// hang (it accepts, reads, and never answers, health checks included) at
// one instant. In cluster quiet, with no traffic, the active checks mark
// it unhealthy between (fall−1)×interval + timeout − 20 ms and
// fall×interval + timeout + interval + 300 ms after. In cluster busy,
// under 200 GET/s with a 150 ms response-header timeout, the outlier
// detector ejects it first (three gateway failures in a row), at least
// one timeout and less than the active checks' earliest after.
func TestFaultHangDetected(t *testing.T) {
	noLeaks(t)
	var q, b [2]*ufSvc
	for i := range 2 {
		q[i] = startUF(t, "127.0.0.1:0", ufConfig(fmt.Sprint("q", i), 20*time.Millisecond))
		b[i] = startUF(t, "127.0.0.1:0", ufConfig(fmt.Sprint("b", i), 20*time.Millisecond))
	}
	g := start(t, `
version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: quiet, match: {prefix: /quiet}, cluster: quiet}
  - {name: busy, cluster: busy, timeouts: {response_header: 150ms}}
clusters:
  - {name: quiet, endpoints: [`+ufAddrs(q[:]...)+`], health: `+hangChecks+`}}
  - name: busy
    endpoints: [`+ufAddrs(b[:]...)+`]
    health: `+hangChecks+`, outlier: {consecutive_gateway_failure: 3, base_ejection_time: 1m, max_ejection_percent: 50}}
`)
	for _, s := range q {
		eventually(t, 10*time.Second, "every endpoint healthy", func() bool { return stateOf(g, "quiet", s.addr) == "healthy" })
	}
	for _, s := range b {
		eventually(t, 10*time.Second, "every endpoint healthy", func() bool { return stateOf(g, "busy", s.addr) == "healthy" })
	}
	load, stopLoad := ufLoad(t, "http://"+g.Addr("web")+"/busy", 200)
	time.Sleep(300 * time.Millisecond)
	if st := stateOf(g, "busy", b[0].addr); st != "healthy" {
		t.Fatalf("busy cluster before the hang: %s %s, want healthy (the machine stalled answers past 150 ms?)", b[0].addr, st)
	}
	began := time.Now()
	q[0].be.SetHang(1)
	b[0].be.SetHang(1)
	var wg sync.WaitGroup
	var qState, bState string
	var qAt, bAt time.Time
	wg.Go(func() { qState, qAt = firstState(g, "quiet", q[0].addr) })
	early := int64(-1) // failures answered by 100 ms after the hang, when ejected before
	wg.Go(func() {
		bState, bAt = firstState(g, "busy", b[0].addr)
		if d := bAt.Sub(began); d < 100*time.Millisecond {
			time.Sleep(100*time.Millisecond - d)
			early = load.status.Load()
		}
	})
	wg.Wait()
	stopLoad()
	active, passive := qAt.Sub(began), bAt.Sub(began)
	lo := (hangFall-1)*hangInterval + hangTimeout - 20*time.Millisecond
	hi := hangFall*hangInterval + hangTimeout + hangInterval + 300*time.Millisecond
	if qState != "unhealthy" || active < lo || active > hi {
		t.Errorf("quiet cluster: the hanging endpoint %s after %v, want unhealthy within [%v, %v]", qState, active, lo, hi)
	}
	first := 150 * time.Millisecond
	switch {
	case bState == "ejected" && passive < first-10*time.Millisecond && early > 0:
		// No answer of the hanging endpoint can fail before its 150 ms
		// timeout: these failed because the machine stalled healthy
		// answers past it, before or at the hang.
		t.Logf("not enforced: ejected after %v, with %d failures answered within 100 ms of the hang (the machine stalled answers past 150 ms)", passive, early)
	case bState != "ejected" || passive < first-10*time.Millisecond || passive >= lo:
		t.Errorf("busy cluster: the hanging endpoint %s after %v, want ejected within [%v, %v)", bState, passive, first-10*time.Millisecond, lo)
	}
	t.Logf("hang detected by the active checks after %v (bounds [%v, %v]), by the outlier detector under load after %v; load on busy: %d sent, %d not 2xx (timed out at the hanging endpoint)",
		active.Round(time.Millisecond), lo, hi, passive.Round(time.Millisecond), load.sent.Load(), load.status.Load())
}

// TestFaultHangBreakerFallback: two clusters of one endpoint each, with a
// breaker (3 failures in a row) and a 500 ms response-header timeout (a
// stalled machine must not time the answers before the hang out).
// Both endpoints answer, then hang: three requests each are answered 504
// upstream-timeout, then the breakers are open and the fallbacks answer —
// the static one (200, its body and header, reason breaker-fallback) and
// the fallback cluster's endpoint — over HTTP/1.1 and h2c, and the
// hanging endpoints are asked nothing more.
func TestFaultHangBreakerFallback(t *testing.T) {
	noLeaks(t)
	one, two, spare := startUF(t, "127.0.0.1:0", ufConfig("one", 10*time.Millisecond)),
		startUF(t, "127.0.0.1:0", ufConfig("two", 10*time.Millisecond)), startUF(t, "127.0.0.1:0", ufConfig("spare", 10*time.Millisecond))
	g := start(t, `
version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: static, match: {prefix: /static}, cluster: one, timeouts: {response_header: 500ms}}
  - {name: other, cluster: two, timeouts: {response_header: 500ms}}
clusters:
  - name: one
    endpoints: [`+ufAddrs(one)+`]
    breaker: {threshold: 3, open: 1m, fallback: {status: 200, body: "from the fallback", headers: {X-Fallback: static}}}
  - {name: two, endpoints: [`+ufAddrs(two)+`], breaker: {threshold: 3, open: 1m, fallback: {cluster: spare}}}
  - {name: spare, endpoints: [`+ufAddrs(spare)+`]}
`)
	url := "http://" + g.Addr("web")
	clients := []*http.Client{h1Client(t), h2cClient(t)}
	for _, path := range []string{"/static", "/other"} {
		for i := range 2 {
			if a := ufSend(clients[i], "GET", url+path, "before"); a.err != nil || a.code != 200 || a.body != "ok\n" {
				t.Fatalf("GET %s before the hang: %+v", path, a)
			}
		}
	}
	one.be.SetHang(1)
	two.be.SetHang(1)
	for _, path := range []string{"/static", "/other"} {
		for i := range 3 {
			if a := ufSend(clients[i%2], "GET", url+path, "hung"); a.err != nil || a.code != 504 || a.reason != "upstream-timeout" {
				t.Fatalf("GET %s %d at the hanging endpoint: %+v, want 504 upstream-timeout", path, i, a)
			}
		}
	}
	for _, c := range clients {
		a := ufSend(c, "GET", url+"/static", "open")
		if a.err != nil || a.code != 200 || a.body != "from the fallback" || a.reason != "breaker-fallback" || a.header.Get("X-Fallback") != "static" {
			t.Errorf("GET /static with the breaker open: %+v, want 200 from the fallback, breaker-fallback, X-Fallback: static", a)
		}
		a = ufSend(c, "GET", url+"/other", "open")
		if a.err != nil || a.code != 200 || a.body != "ok\n" || a.header.Get("Backend-Name") != "spare" {
			t.Errorf("GET /other with the breaker open: %+v, want 200 from the spare cluster", a)
		}
	}
	for _, s := range []*ufSvc{one, two} {
		if st := s.be.Stats(); st.Arrived != 5 || st.Hung != 3 {
			t.Errorf("backend %s: %d requests, %d hung; want 5 (2 before the hang, 3 timed out), 3", s.addr, st.Arrived, st.Hung)
		}
	}
	if n := spare.be.Stats().Arrived; n != 2 {
		t.Errorf("the spare cluster's endpoint saw %d requests, want the 2 sent while the breaker was open", n)
	}
}
