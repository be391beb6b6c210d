package gateway

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ufReloadConfig is TestFaultReloadUnderLoad's file: a rate-limit rule of
// rate requests a second per client IP, a fixed admission limit, active
// checks, and the endpoints eps balanced by picker.
func ufReloadConfig(rate, limit int, picker string, eps ...*ufSvc) string {
	return fmt.Sprintf(`version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - name: main
    cluster: app
    policies: {ratelimit: {rules: [{id: per-ip, key: [ip], rate: %d, per: 1s, burst: %d}]}}
clusters:
  - name: app
    picker: %s
    panic_threshold: 0
    endpoints: [%s]
    admission: {algorithm: fixed, initial_limit: %d}
    health: {active: {path: /healthz, interval: 100ms, timeout: 1s, jitter: 0, fall: 3, rise: 2}}
`, rate, rate, picker, ufAddrs(eps...), limit)
}

// TestFaultReloadUnderLoad: under 300 GET/s (HTTP/1.1 and h2c), with
// endpoint a healthy and b failing its checks, a reload raises the rate
// limit (1000/s to 2000/s) and the admission limit (250 to 300: the
// default class's 90 % of either is above the load's 200 in flight at
// most, so a stalled machine is not refused) and adds endpoint c; a second reload changes the picker, so the cluster is
// rebuilt and takes the endpoints' state over. No request fails; the
// answers carry the new limit's RateLimit-Policy and the gate has the
// new limit; right after each reload a is still healthy and b still
// unhealthy (b never gets a request); c takes traffic once its checks
// pass; once the load has stopped the gate holds no request (no slot
// lost across the reloads).
func TestFaultReloadUnderLoad(t *testing.T) {
	noLeaks(t)
	a := startUF(t, "127.0.0.1:0", ufConfig("a", 20*time.Millisecond))
	b := startUF(t, "127.0.0.1:0", ufConfig("b", 20*time.Millisecond))
	c := startUF(t, "127.0.0.1:0", ufConfig("c", 20*time.Millisecond))
	b.be.SetHealthy(false)
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, ufReloadConfig(1000, 250, "least_request", a, b))
	g := startFile(t, file)
	eventually(t, 10*time.Second, "a healthy, b checked twice", func() bool {
		return stateOf(g, "app", a.addr) == "healthy" && b.be.Stats().Health >= 2
	})
	url := "http://" + g.Addr("web") + "/x"
	policy := func(rate, limit int, when string) {
		t.Helper()
		p := ufSend(h1Client(t), "GET", url, "probe").header.Get("Ratelimit-Policy")
		lim := g.cur.Load().pol.guards["app"].v.Gate.Limiter().Limit()
		if !strings.Contains(p, fmt.Sprintf(";q=%d;", rate)) || lim != limit {
			t.Errorf("%s: RateLimit-Policy %q, admission limit %d; want q=%d and %d", when, p, lim, rate, limit)
		}
	}
	states := func(when string, want map[*ufSvc]string) {
		t.Helper()
		for s, st := range want {
			if got := stateOf(g, "app", s.addr); got != st {
				t.Errorf("%s: endpoint %s %s, want %s", when, s.addr, got, st)
			}
		}
	}
	policy(1000, 250, "before the reloads")
	load, stopLoad := ufLoad(t, url, 300)
	time.Sleep(500 * time.Millisecond)

	writeFile(t, file, ufReloadConfig(2000, 300, "least_request", a, b, c))
	if err := g.Reload("test"); err != nil {
		t.Fatal(err)
	}
	states("right after the first reload", map[*ufSvc]string{a: "healthy", b: "unhealthy"})
	policy(2000, 300, "after the first reload")
	eventually(t, 10*time.Second, "the new endpoint healthy", func() bool { return stateOf(g, "app", c.addr) == "healthy" })
	joined := c.be.Stats().Arrived
	time.Sleep(500 * time.Millisecond)

	before := g.cur.Load().clusters["app"]
	writeFile(t, file, ufReloadConfig(2000, 300, "round_robin", a, b, c))
	if err := g.Reload("test"); err != nil {
		t.Fatal(err)
	}
	if g.cur.Load().clusters["app"] == before {
		t.Fatal("a picker change kept the cluster object; the test needs a rebuilt one")
	}
	states("right after the second reload (cluster rebuilt)", map[*ufSvc]string{a: "healthy", b: "unhealthy", c: "healthy"})
	policy(2000, 300, "after the second reload")
	time.Sleep(500 * time.Millisecond)
	stopLoad()
	summary := load.verify(t, 300) // 300/s for 1.5 s and more; a starved machine still sends 300
	gate := g.cur.Load().pol.guards["app"].v.Gate.Limiter()
	eventually(t, 5*time.Second, "no request in flight at the gate after the load", func() bool { return gate.InFlight() == 0 })
	if n := b.be.Stats().Arrived; n != 0 {
		t.Errorf("the unhealthy endpoint got %d requests, want 0", n)
	}
	ca, cn := a.be.Stats().Arrived, c.be.Stats().Arrived
	if cn-joined < 50 {
		t.Errorf("the added endpoint got %d requests in the second after its checks passed (a: %d in all), want at least 50", cn-joined, ca)
	}
	if st := g.LastReload(); !st.OK || g.Generation() != 3 {
		t.Errorf("LastReload %+v, Generation %d; want OK, 3", st, g.Generation())
	}
	t.Logf("load: %s; requests at a %d, c %d (%d after it joined)", summary, ca, cn, cn-joined)
}
