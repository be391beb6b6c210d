package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestAdminEndpointDrain: POST .../drain while a slow request is in
// flight to that endpoint — the request completes with 200, the next 20
// requests all go to the other endpoint, and GET /clusters shows the
// drained endpoint with its request in flight; undrain brings it back.
func TestAdminEndpointDrain(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // before the backends' and the gateway's cleanups run
	a := startBackend(t, &backend{name: "a", hold: 10 * time.Second, release: release})
	b := startBackend(t, &backend{name: "b", hold: 10 * time.Second, release: release})
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, appConfig("round_robin", "127.0.0.1:0", "", a, b))
	g := startFile(t, file)
	url := "http://" + g.Addr("web")

	type result struct {
		code int
		body string
		err  error
	}
	slow, sc := make(chan result, 1), h1Client(t)
	go func() {
		resp, err := sc.Get(url + "/slow")
		if err != nil {
			slow <- result{err: err}
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- result{resp.StatusCode, string(body), err}
	}()
	eventually(t, 10*time.Second, "the slow request at a backend", func() bool { return a.slow.Load()+b.slow.Load() == 1 })
	held, other := a, b
	if b.slow.Load() == 1 {
		held, other = b, a
	}
	code, body := adminPost(t, g, "/clusters/app/endpoints/"+held.addr+"/drain")
	var answer struct {
		Cluster, Endpoint string
		Draining          bool
	}
	if err := json.Unmarshal([]byte(body), &answer); code != 200 || err != nil ||
		answer.Cluster != "app" || answer.Endpoint != held.addr || !answer.Draining {
		t.Fatalf("drain: %d %s (%v), want 200 naming app, %s, draining true", code, body, err, held.addr)
	}
	if got := spread(t, url+"/x", 20, held, other); got[0] != 0 || got[1] != 20 {
		t.Fatalf("after the drain: 20 requests reached the drained and the other endpoint %v, want 0 and 20", got)
	}
	if st := inFlight(t, g, "app", held.addr); st.State != "draining" {
		t.Fatalf("GET /clusters: the drained endpoint %+v, want draining", st)
	}
	free()
	r := <-slow
	if r.err != nil || r.code != 200 || r.body != held.name+" /slow" {
		t.Fatalf("the slow request in flight at the drain: %d %q %v, want 200 %q", r.code, r.body, r.err, held.name+" /slow")
	}
	if code, body := adminPost(t, g, "/clusters/app/endpoints/"+held.addr+"/undrain"); code != 200 {
		t.Fatalf("undrain: %d %s", code, body)
	}
	if got := spread(t, url+"/x", 20, held, other); got[0] != 10 || got[1] != 10 {
		t.Fatalf("after the undrain: 20 requests reached the endpoints %v, want 10 and 10 (round robin)", got)
	}
	if code, body := adminPost(t, g, "/clusters/app/endpoints/127.0.0.1:1/drain"); code != 404 {
		t.Fatalf("drain of an unknown endpoint: %d %s, want 404", code, body)
	}
}

// TestAdminInFlightCount: GET /clusters's in_flight is 1 while one
// request is held at the endpoint and 0 once every request has ended,
// through both engines (HTTP/1.1 and h2c clients) to an HTTP/1.1 cluster
// and from an HTTP/1.1 client to an h2c cluster.
func TestAdminInFlightCount(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	a := startBackend(t, &backend{name: "a", hold: 10 * time.Second, release: release})
	h2 := protoBackend(t, "h2", true)
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, `version: 1
admin: {address: "127.0.0.1:0"}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: h2, match: {prefix: /h2}, cluster: h2}
  - {name: main, cluster: app}
clusters:
  - {name: app, endpoints: ["`+a.addr+`"]}
  - {name: h2, protocol: h2c, endpoints: ["`+h2+`"]}
`)
	g := startFile(t, file)
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // registered last, so it runs first: the gateway's Shutdown does not wait for the held request
	url := "http://" + g.Addr("web")
	h1, h2c := h1Client(t), h2cClient(t)
	done := make(chan error, 1)
	go func() {
		resp, err := h1.Get(url + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	eventually(t, 10*time.Second, "the slow request at the backend", func() bool { return a.slow.Load() == 1 })
	if st := inFlight(t, g, "app", a.addr); st.InFlight != 1 {
		t.Errorf("one request held: %+v, want in_flight 1", st)
	}
	free()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, c := range []*http.Client{h1, h2c} {
		for range 5 {
			fetch(t, c, "GET", url+"/x", nil)
		}
	}
	for range 5 {
		fetch(t, h1, "GET", url+"/h2", nil)
	}
	// An exchange is done just after its last byte is written: poll.
	eventually(t, 5*time.Second, "in_flight 0 on app after 11 requests (1 slow, 5 HTTP/1.1, 5 h2c)", func() bool {
		return inFlight(t, g, "app", a.addr).InFlight == 0
	})
	eventually(t, 5*time.Second, "in_flight 0 on the h2c cluster after 5 HTTP/1.1 requests", func() bool {
		return inFlight(t, g, "h2", h2).InFlight == 0
	})
}

type endpointInfo struct {
	Address  string
	State    string
	InFlight int `json:"in_flight"`
}

// inFlight returns GET /clusters's entry for addr in cluster.
func inFlight(t *testing.T, g *Gateway, cluster, addr string) endpointInfo {
	t.Helper()
	code, _, body := fetch(t, h1Client(t), "GET", "http://"+g.AdminAddr()+"/clusters", http.Header{})
	if code != 200 {
		t.Fatalf("GET /clusters: %d %s", code, body)
	}
	var list []struct {
		Name      string
		Endpoints []endpointInfo
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		for _, e := range c.Endpoints {
			if c.Name == cluster && e.Address == addr {
				return e
			}
		}
	}
	t.Fatalf("GET /clusters has no %s: %s", addr, body)
	return endpointInfo{}
}
