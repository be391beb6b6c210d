package gateway

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// TestRateLimitRefusal: a route's rule refuses the request past its burst
// with the rate limit's own answer — 429, Retry-After, RateLimit fields,
// the reason code — on both engines, and the backend never sees it.
func TestRateLimitRefusal(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	var hits atomic.Int64
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - cluster: app
    policies:
      ratelimit:
        rules: [{id: per-ip, key: [ip], rate: 2, per: 1m, burst: 2}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`)
	c1 := h1Client(t)
	for i := 0; i < 2; i++ {
		if code, h, _ := fetch(t, c1, "GET", "http://"+g.Addr("web")+"/x", nil); code != 200 || h.Get("Ratelimit") == "" {
			t.Fatalf("request %d within the burst: %d %v", i, code, h)
		}
	}
	for _, c := range []*http.Client{c1, h2cClient(t)} { // one ip: one budget, spent
		code, h, body := fetch(t, c, "GET", "http://"+g.Addr("web")+"/x", nil)
		if code != 429 || h.Get("Spillway-Reason") != "ratelimit:per-ip" || h.Get("Retry-After") == "" ||
			h.Get("Ratelimit-Policy") == "" || !strings.Contains(body, `"rule":"per-ip"`) {
			t.Fatalf("past the burst: %d %v %s", code, h, body)
		}
		if ct := h.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("Content-Type %q", ct)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("the backend saw %d requests, want the 2 within the burst", n)
	}
}

// startBackendFunc serves h on a loopback port until the test ends.
func startBackendFunc(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestRetryOnAnotherEndpoint: with one endpoint refusing connections,
// every request is answered by the other (a connect failure is retried
// whatever the method, on an endpoint not tried yet).
func TestRetryOnAnotherEndpoint(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	live := named(t, "live")
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: app, policies: {retry: {attempts: 2, budget: {ratio: 1, max: 100}}}}]
clusters: [{name: app, picker: round_robin, endpoints: ["`+deadAddr(t)+`", "`+live+`"]}]
`)
	for _, c := range []*http.Client{h1Client(t), h2cClient(t)} {
		for i := 0; i < 10; i++ {
			for _, m := range []string{"GET", "POST"} {
				if code, _, body := fetch(t, c, m, "http://"+g.Addr("web")+"/x", nil); code != 200 || body != "live /x" {
					t.Fatalf("%s %d: %d %q", m, i, code, body)
				}
			}
		}
	}
}

// TestResetPOSTNotRetried: an endpoint that resets the connection after
// reading the request: a GET is retried on the other endpoint, a POST is
// answered 502 and sent once (never silently duplicated).
func TestResetPOSTNotRetried(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	var resets atomic.Int64
	bad, stop := rawServer(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		resets.Add(1)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	})
	defer stop()
	good := named(t, "good")
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: app, policies: {retry: {attempts: 2, budget: {ratio: 1, max: 100}}}}]
clusters: [{name: app, picker: round_robin, endpoints: ["`+bad+`", "`+good+`"]}]
`)
	c := h1Client(t)
	for i := 0; i < 6; i++ {
		if code, _, body := fetch(t, c, "GET", "http://"+g.Addr("web")+"/g", nil); code != 200 || body != "good /g" {
			t.Fatalf("GET %d: %d %q", i, code, body)
		}
	}
	resets.Store(0)
	var bad502 int
	for i := 0; i < 6; i++ {
		code, h, _ := fetch(t, c, "POST", "http://"+g.Addr("web")+"/p", nil)
		switch {
		case code == 502 && h.Get("Spillway-Reason") == "upstream-reset":
			bad502++
		case code != 200:
			t.Fatalf("POST %d: %d %v", i, code, h)
		}
	}
	if bad502 == 0 || int64(bad502) != resets.Load() {
		t.Fatalf("POSTs answered 502: %d, resets seen by the endpoint: %d (want equal, > 0: each sent once)", bad502, resets.Load())
	}
}

// TestBreakerFallback: a cluster failing every request opens its breaker
// after threshold failures; then the static fallback answers and the
// backend is not asked.
func TestBreakerFallback(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	var hits atomic.Int64
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(500)
	})
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: app, policies: {retry: {attempts: 1}}}]
clusters:
  - name: app
    endpoints: ["`+be+`"]
    breaker: {threshold: 3, open: 1m, fallback: {status: 200, body: "cached", headers: {X-Fallback: "1"}}}
`)
	c := h1Client(t)
	for i := 0; i < 3; i++ {
		if code, _, _ := fetch(t, c, "GET", "http://"+g.Addr("web")+"/x", nil); code != 500 {
			t.Fatalf("request %d: %d, want the backend's 500", i, code)
		}
	}
	for _, cl := range []*http.Client{c, h2cClient(t)} {
		code, h, body := fetch(t, cl, "GET", "http://"+g.Addr("web")+"/x", nil)
		if code != 200 || body != "cached" || h.Get("X-Fallback") != "1" || h.Get("Spillway-Reason") != "breaker-fallback" {
			t.Fatalf("breaker open: %d %v %q", code, h, body)
		}
	}
	if n := hits.Load(); n != 3 {
		t.Fatalf("backend asked %d times, want 3", n)
	}
}

// TestAdmissionByClass: under a fixed limit of 2 with sheddable's share
// 0.5, one sheddable request in flight fills sheddable's share: the next
// is refused 503 admit:limit while a critical one passes; a spoofed
// Spillway-Criticality from an untrusted peer changes nothing, and the
// backend sees the route's class.
func TestAdmissionByClass(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	release := make(chan struct{})
	var classes seenList
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		classes.add(r.URL.Path + "=" + r.Header.Get("Spillway-Criticality"))
		if r.URL.Path == "/hold" {
			<-release
		}
	})
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {match: {prefix: /critical}, cluster: app, policies: {class: critical}}
  - {cluster: app, policies: {class: sheddable}}
clusters:
  - name: app
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 2, shares: {critical: 1, default: 1, sheddable: 0.5}}
`)
	c := h1Client(t)
	done := holdSheddable(t, c, "http://"+g.Addr("web")+"/hold", &classes)
	spoof := http.Header{"Spillway-Criticality": {"critical"}}
	code, h, _ := fetch(t, c, "GET", "http://"+g.Addr("web")+"/more", spoof)
	if code != 503 || h.Get("Spillway-Reason") != "admit:limit" || h.Get("Retry-After") == "" {
		t.Fatalf("second sheddable request (spoofing critical): %d %v", code, h)
	}
	if code, _, _ := fetch(t, c, "GET", "http://"+g.Addr("web")+"/critical/x", nil); code != 200 {
		t.Fatalf("critical request: %d", code)
	}
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("held request: %d", code)
	}
	if !classes.has("/critical/x=critical") {
		t.Fatalf("backend saw %v", classes.list())
	}
}

// TestDeadlineFromTrustedPeerOnly: a spent budget (Spillway-Timeout: 0S)
// from a trusted peer is refused before any upstream work; the same
// header from an untrusted peer is ignored (and not forwarded).
func TestDeadlineFromTrustedPeerOnly(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	var got seenList
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) { got.add(r.Header.Get("Spillway-Timeout")) })
	for _, trusted := range []bool{true, false} {
		proxies := `[]`
		if trusted {
			proxies = `["127.0.0.1/32"]`
		}
		g := start(t, fmt.Sprintf(`
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0", trusted_proxies: %s}]
routes: [{cluster: app, policies: {deadline: {max: 30s}}}]
clusters: [{name: app, endpoints: ["%s"]}]
`, proxies, be))
		code, h, _ := fetch(t, h1Client(t), "GET", "http://"+g.Addr("web")+"/x", http.Header{"Spillway-Timeout": {"0S"}})
		if trusted && (code != 503 || h.Get("Spillway-Reason") != "deadline") {
			t.Fatalf("trusted spent budget: %d %v", code, h)
		}
		if !trusted && code != 200 {
			t.Fatalf("untrusted header: %d %v", code, h)
		}
	}
	if l := got.list(); len(l) != 1 || l[0] == "0S" || l[0] == "" {
		t.Fatalf("backend saw budgets %q, want one, the route's remaining max (not the client's 0S)", l)
	}
}

// seenList is a locked list of strings seen by a backend.
type seenList struct {
	mu   sync.Mutex
	seen []string
}

func (m *seenList) add(s string) { m.mu.Lock(); m.seen = append(m.seen, s); m.mu.Unlock() }
func (m *seenList) has(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Contains(m.seen, s)
}
func (m *seenList) list() []string { m.mu.Lock(); defer m.mu.Unlock(); return slices.Clone(m.seen) }

// holdSheddable sends GET url (a path the backend holds) on its own goroutine,
// waits until seen shows it arrived as sheddable, and returns where its
// status will be sent.
func holdSheddable(t *testing.T, c *http.Client, url string, seen *seenList) <-chan int {
	t.Helper()
	done := make(chan int, 1)
	go func() {
		code, _, _ := fetch(t, c, "GET", url, nil)
		done <- code
	}()
	path := url[strings.LastIndex(url, "/"):]
	eventually(t, 5*time.Second, "the held request reaches the backend", func() bool { return seen.has(path + "=sheddable") })
	return done
}
