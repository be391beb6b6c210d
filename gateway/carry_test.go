package gateway

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
)

// adminPost sends a POST with X-Spillway-Admin: 1 (no token configured)
// to the gateway's admin endpoint and returns its status and body.
func adminPost(t *testing.T, g *Gateway, path string) (int, string) {
	t.Helper()
	code, _, body := fetch(t, h1Client(t), "POST", "http://"+g.AdminAddr()+path, http.Header{"X-Spillway-Admin": {"1"}})
	return code, body
}

// endpointStates returns GET /clusters's state of every endpoint of
// cluster, by address.
func endpointStates(t *testing.T, g *Gateway, cluster string) map[string]string {
	t.Helper()
	code, _, body := fetch(t, h1Client(t), "GET", "http://"+g.AdminAddr()+"/clusters", nil)
	if code != 200 {
		t.Fatalf("GET /clusters: %d %s", code, body)
	}
	var list []struct {
		Name      string
		Endpoints []struct{ Address, State string }
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("GET /clusters: %v in %s", err, body)
	}
	out := map[string]string{}
	for _, c := range list {
		if c.Name == cluster {
			for _, e := range c.Endpoints {
				out[e.Address] = e.State
			}
		}
	}
	return out
}

// spread sends n sequential requests to url and returns how many reached
// each backend (by the backends' own counters).
func spread(t *testing.T, url string, n int, bs ...*backend) []int64 {
	t.Helper()
	before := make([]int64, len(bs))
	for i, b := range bs {
		before[i] = b.requests.Load()
	}
	c := h1Client(t)
	for range n {
		if code, _, body := fetch(t, c, "GET", url, nil); code != 200 {
			t.Fatalf("GET %s: %d %s", url, code, body)
		}
	}
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.requests.Load() - before[i]
	}
	return out
}

func appConfig(picker, admin, extra string, eps ...*backend) string {
	list := ""
	for i, b := range eps {
		if i > 0 {
			list += ", "
		}
		list += `"` + b.addr + `"`
	}
	return `version: 1
admin: {address: "` + admin + `"}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app}]
clusters:
  - name: app
    picker: ` + picker + `
    panic_threshold: 0
    endpoints: [` + list + `]
` + extra
}

// TestReloadKeepsEndpointDrain: an endpoint drained through the admin API
// stays drained after a reload that adds an endpoint (the cluster is
// kept) and after one that changes the picker (the cluster is rebuilt
// and takes the state over); undrained, it takes requests again.
func TestReloadKeepsEndpointDrain(t *testing.T) {
	noLeaks(t)
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, appConfig("round_robin", "127.0.0.1:0", "", a, b))
	g := startFile(t, file)
	url := "http://" + g.Addr("web") + "/x"
	if code, body := adminPost(t, g, "/clusters/app/endpoints/"+a.addr+"/drain"); code != 200 {
		t.Fatalf("drain: %d %s", code, body)
	}
	for i, step := range []struct{ picker, why string }{
		{"round_robin", "a reload that adds an endpoint"},
		{"random", "a reload that changes the picker (cluster rebuilt)"},
	} {
		writeFile(t, file, appConfig(step.picker, "127.0.0.1:0", "", a, b, c))
		if err := g.Reload("test"); err != nil {
			t.Fatal(err)
		}
		if st := endpointStates(t, g, "app"); st[a.addr] != "draining" || st[b.addr] != "healthy" || st[c.addr] != "healthy" {
			t.Fatalf("after %s: states %v, want a draining, b and c healthy", step.why, st)
		}
		got := spread(t, url, 30, a, b, c)
		if got[0] != 0 || got[1] == 0 || got[2] == 0 || got[1]+got[2] != 30 {
			t.Fatalf("after %s (reload %d): 30 requests reached a, b, c %v; want 0 for the drained a", step.why, i+1, got)
		}
	}
	if code, body := adminPost(t, g, "/clusters/app/endpoints/"+a.addr+"/undrain"); code != 200 {
		t.Fatalf("undrain: %d %s", code, body)
	}
	if got := spread(t, url, 60, a, b, c); got[0] == 0 {
		t.Fatalf("undrained: 60 requests reached a, b, c %v; want a among them", got)
	}
}

// TestReloadKeepsUnhealthy: an endpoint the active check found unhealthy
// (initially_healthy, so a Set built afresh would count it healthy) stays
// unhealthy after two reloads that change the picker, each rebuilding the
// cluster; the checker carried twice then reports to the last rebuilt
// cluster, so when the endpoint recovers it takes requests again.
func TestReloadKeepsUnhealthy(t *testing.T) {
	noLeaks(t)
	good, sick := newBackend(t, "good"), newBackend(t, "sick")
	sick.sick.Store(true)
	check := "    health: {active: {type: http, path: /health, interval: 50ms, timeout: 1s, fall: 1, rise: 1, initially_healthy: true}}\n"
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, appConfig("round_robin", "127.0.0.1:0", check, good, sick))
	g := startFile(t, file)
	url := "http://" + g.Addr("web") + "/x"
	eventually(t, 10*time.Second, "the sick endpoint unhealthy", func() bool {
		return endpointStates(t, g, "app")[sick.addr] == "unhealthy"
	})
	// Two rebuilds in a row: the checker is carried twice.
	for _, picker := range []string{"random", "least_request"} {
		before := g.cur.Load().clusters["app"]
		writeFile(t, file, appConfig(picker, "127.0.0.1:0", check, good, sick))
		if err := g.Reload("test"); err != nil {
			t.Fatal(err)
		}
		if g.cur.Load().clusters["app"] == before {
			t.Fatal("a picker change kept the cluster object; the test needs a rebuilt one")
		}
		if st := endpointStates(t, g, "app"); st[sick.addr] != "unhealthy" || st[good.addr] != "healthy" {
			t.Fatalf("after the reload to %s: states %v, want sick unhealthy and good healthy", picker, st)
		}
		if got := spread(t, url, 40, good, sick); got[0] != 40 || got[1] != 0 {
			t.Fatalf("after the reload to %s: 40 requests reached good, sick %v; want 40, 0", picker, got)
		}
	}
	sick.sick.Store(false)
	eventually(t, 10*time.Second, "the recovered endpoint healthy in the rebuilt cluster", func() bool {
		st, _ := g.cur.Load().clusters["app"].px.Set.State(g.clk.Now(), sick.addr)
		return st == balancer.Healthy
	})
	if got := spread(t, url, 40, good, sick); got[1] == 0 {
		t.Fatalf("recovered: 40 requests reached good, sick %v; want sick among them", got)
	}
}

// idlePools waits until every pool of the cluster has no connection in
// use, so the next request finds its connection idle (no race between a
// connection's return and the next pick).
func idlePools(t *testing.T, g *Gateway, cluster string) {
	t.Helper()
	cl := g.cur.Load().clusters[cluster]
	eventually(t, 5*time.Second, "the pools idle", func() bool {
		for _, p := range *cl.px.Pools.Load() {
			if p.Stats().InUse != 0 {
				return false
			}
		}
		return true
	})
}

// TestReloadReusesPools: after a reload that changes only routes, and one
// that changes the picker (the cluster rebuilt, the pools taken over), the
// backends see no new TCP connection: the gateway's idle connections are
// reused.
func TestReloadReusesPools(t *testing.T) {
	noLeaks(t)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, appConfig("round_robin", "off", "", a, b))
	g := startFile(t, file)
	url := "http://" + g.Addr("web") + "/x"
	c := h1Client(t)
	send := func(n int) {
		t.Helper()
		for range n {
			idlePools(t, g, "app")
			if code, _, body := fetch(t, c, "GET", url, nil); code != 200 {
				t.Fatalf("%d %s", code, body)
			}
		}
	}
	send(10)
	if a.conns.Load() != 1 || b.conns.Load() != 1 {
		t.Fatalf("10 sequential requests: the backends accepted %d and %d connections, want 1 each", a.conns.Load(), b.conns.Load())
	}
	for _, cfg := range []string{
		// Routes only: a response header on the route.
		`version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app, response_headers: {add: {X-Reloaded: "1"}}}]
clusters:
  - {name: app, picker: round_robin, panic_threshold: 0, endpoints: ["` + a.addr + `", "` + b.addr + `"]}
`,
		appConfig("random", "off", "", a, b), // the picker: a rebuilt cluster
	} {
		writeFile(t, file, cfg)
		if err := g.Reload("test"); err != nil {
			t.Fatal(err)
		}
		send(10)
	}
	if a.conns.Load() != 1 || b.conns.Load() != 1 {
		t.Fatalf("after the reloads the backends had accepted %d and %d connections, want still 1 each", a.conns.Load(), b.conns.Load())
	}
}
