package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	svc "github.com/spillwayhq/spillway/backend"
)

// Upstream fault tests (issue 13, item 7): real backends on loopback
// (package backend: timer-based service, so a busy machine does not
// change their capacity) killed, restarted, hung and added behind a
// gateway under open-loop load.

// ufID is the header the fault tests tag requests with; the backends
// count requests by its value.
const ufID = "X-Fault-Id"

// ufSvc is one life of a backend.Backend served over HTTP/1.1 on a
// loopback address: kill resets its listener and every connection at
// once, stop shuts it down gracefully; a new life may then listen on the
// same address.
type ufSvc struct {
	addr string
	be   *svc.Backend
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	once sync.Once

	mu    sync.Mutex
	conns []net.Conn // every connection accepted (a test's few hundred)
}

// ufConfig is a backend named name with 64 workers, a queue of 64 and
// constant service time mean, counting requests by ufID.
func ufConfig(name string, mean time.Duration) svc.Config {
	return svc.Config{Name: name, Workers: 64, Queue: 64, CountHeader: ufID,
		Service: svc.Dist{Kind: svc.Constant, Mean: mean}}
}

// startUF serves a new backend of cfg on addr ("127.0.0.1:0": any free
// port) until kill, stop or the test's end.
func startUF(t *testing.T, addr string, cfg svc.Config) *ufSvc {
	t.Helper()
	be, err := svc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for try := 0; ; try++ { // the same address again: it may take a moment to be free
		if ln, err = net.Listen("tcp", addr); err == nil || try == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &ufSvc{addr: ln.Addr().String(), be: be, ln: ln, done: make(chan struct{})}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	s.srv = &http.Server{Protocols: p, Handler: be}
	go func() { defer close(s.done); _ = s.srv.Serve(ufListener{ln, s}) }()
	t.Cleanup(s.kill)
	return s
}

// ufListener records the connections it accepts in its ufSvc.
type ufListener struct {
	net.Listener
	s *ufSvc
}

func (l ufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.s.mu.Lock()
		l.s.conns = append(l.s.conns, c)
		l.s.mu.Unlock()
	}
	return c, err
}

// kill ends the backend as a crash does: the listener closed (the
// address refuses), every connection reset (RST, no FIN), then the
// requests it held end unanswered. Idempotent.
func (s *ufSvc) kill() {
	s.once.Do(func() {
		_ = s.ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
		s.mu.Unlock()
		s.be.Close()
		_ = s.srv.Close()
		<-s.done
	})
}

// stop shuts the backend down gracefully: no new connection, idle ones
// closed, the requests in flight finished. Idempotent.
func (s *ufSvc) stop(t *testing.T) {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			t.Errorf("backend %s: Shutdown: %v", s.addr, err)
		}
		s.be.Close()
		<-s.done
	})
}

// tagged counts the requests s received whose ufID starts with prefix.
func (s *ufSvc) tagged(prefix string) map[string]int64 {
	out := map[string]int64{}
	for id, n := range s.be.Stats().ByHeader {
		if id != "" && strings.HasPrefix(id, prefix) {
			out[id] = n
		}
	}
	return out
}

// ufOK is the backends' answer to a served request.
func ufOK(b string) bool { return b == "ok\n" }

// ufLoad starts open-loop GET load on url over an HTTP/1.1 and an h2c
// client; the returned stop (also run at cleanup, idempotent) ends it.
func ufLoad(t *testing.T, url string, rate float64) (*loadGen, func()) {
	l := startLoad(url, rate, ufOK, h1Client(t), h2cClient(t))
	stop := sync.OnceFunc(l.Stop)
	t.Cleanup(stop)
	return l, stop
}

// ufAnswer is one response as a test goroutine saw it.
type ufAnswer struct {
	code         int
	reason, body string
	header       http.Header
	err          error
}

// send sends one request with ufID id (safe off the test goroutine).
func ufSend(c *http.Client, method, url, id string) ufAnswer {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return ufAnswer{err: err}
	}
	req.Header.Set(ufID, id)
	resp, err := c.Do(req)
	if err != nil {
		return ufAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return ufAnswer{code: resp.StatusCode, reason: resp.Header.Get("Spillway-Reason"), body: string(b), header: resp.Header, err: err}
}

// quoted lists addresses as a YAML flow sequence's items.
func ufAddrs(svcs ...*ufSvc) string {
	var b strings.Builder
	for i, s := range svcs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", s.addr)
	}
	return b.String()
}

// TestFaultBackendKilled: three endpoints under 200 GET/s with retries
// on, and twelve POSTs without Idempotency-Key in flight (half over
// HTTP/1.1, half over h2c, each held 1.2 s by its backend); one backend is
// killed (listener closed, connections reset) while it holds POSTs and at
// least one GET. Every GET is answered 200 (the ones in flight at the
// kill retried on another endpoint, later ones refused by the dead
// address retried too until the outlier detector ejects it); every POST
// reached exactly one backend, once; those at the killed one are answered
// 502 upstream-reset, the others 200.
func TestFaultBackendKilled(t *testing.T) {
	noLeaks(t)
	svcs := make([]*ufSvc, 3)
	for i := range svcs {
		cfg := ufConfig(fmt.Sprint("s", i), 30*time.Millisecond)
		cfg.Costs = map[string]float64{"/post": 40} // 1.2 s
		svcs[i] = startUF(t, "127.0.0.1:0", cfg)
	}
	g := start(t, `
version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app, policies: {retry: {attempts: 2}}}]
clusters:
  - name: app
    endpoints: [`+ufAddrs(svcs...)+`]
    health: {outlier: {consecutive_gateway_failure: 3, base_ejection_time: 1m}}
`)
	url := "http://" + g.Addr("web")
	load, stopLoad := ufLoad(t, url+"/get", 200)
	eventually(t, 10*time.Second, "GETs at every backend", func() bool {
		return svcs[0].be.Stats().Served > 0 && svcs[1].be.Stats().Served > 0 && svcs[2].be.Stats().Served > 0
	})

	const posts = 12
	answers := make([]ufAnswer, posts)
	var wg sync.WaitGroup
	clients := []*http.Client{h1Client(t), h2cClient(t)}
	for i := range posts {
		wg.Go(func() { answers[i] = ufSend(clients[i%2], "POST", url+"/post", fmt.Sprint("post-", i)) })
	}
	arrived := func() int {
		n := 0
		for _, s := range svcs {
			n += len(s.tagged("post-"))
		}
		return n
	}
	eventually(t, 10*time.Second, "every POST at a backend", func() bool { return arrived() == posts })
	victim := svcs[0]
	for _, s := range svcs[1:] {
		if len(s.tagged("post-")) > len(victim.tagged("post-")) {
			victim = s
		}
	}
	held := len(victim.tagged("post-"))
	eventually(t, 10*time.Second, "a GET in flight at the victim", func() bool { return victim.be.Stats().InFlight > held })
	gets := victim.be.Stats().InFlight - held
	victim.kill()
	time.Sleep(1500 * time.Millisecond) // the load goes on without the victim
	stopLoad()
	wg.Wait()
	summary := load.verify(t, 300) // 200/s for 2 s and more; a starved machine still sends 300

	at := map[string]*ufSvc{}
	for _, s := range svcs {
		for id, n := range s.tagged("post-") {
			if n != 1 || at[id] != nil {
				t.Errorf("POST %s reached a backend %d times, and another before: %v (want once, at one backend)", id, n, at[id] != nil)
			}
			at[id] = s
		}
	}
	resets := 0
	for i, a := range answers {
		id := fmt.Sprint("post-", i)
		switch {
		case a.err != nil:
			t.Errorf("POST %s: %v", id, a.err)
		case at[id] == victim && (a.code != 502 || a.reason != "upstream-reset"):
			t.Errorf("POST %s held by the killed backend: %d %q %q, want 502 upstream-reset", id, a.code, a.reason, a.body)
		case at[id] == victim:
			resets++
		case a.code != 200 || a.body != "ok\n":
			t.Errorf("POST %s at a live backend: %d %q %q, want 200", id, a.code, a.reason, a.body)
		}
	}
	if resets == 0 || resets != held {
		t.Errorf("POSTs answered 502: %d, held by the killed backend: %d (want equal, > 0)", resets, held)
	}
	t.Logf("load: %s; at the kill the victim held %d POSTs and %d GETs", summary, held, gets)
}

// TestFaultRollingRestart: three endpoints with active checks and a 3 s
// slow start under 300 GET/s; each in turn is drained through the admin
// API, stopped once its in-flight count is 0, seen down by the checks,
// started again on the same address, seen up, and undrained. No request
// fails; each new process is slow-starting when undrained and gets less
// than half the mean of the others' requests in its first second (at
// full weight it would get as many).
func TestFaultRollingRestart(t *testing.T) {
	noLeaks(t)
	svcs := make([]*ufSvc, 3)
	for i := range svcs {
		svcs[i] = startUF(t, "127.0.0.1:0", ufConfig(fmt.Sprint("s", i), 20*time.Millisecond))
	}
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app}]
clusters:
  - name: app
    endpoints: [`+ufAddrs(svcs...)+`]
    slow_start: 3s
    health: {active: {path: /healthz, interval: 100ms, timeout: 1s, jitter: 0, fall: 3, rise: 2}}
`)
	cl := g.cur.Load().clusters["app"]
	healthy := func(addr string, want bool) func() bool {
		return func() bool { h, _ := cl.checker.Healthy(addr); return h == want }
	}
	for _, s := range svcs {
		eventually(t, 10*time.Second, "every endpoint healthy", healthy(s.addr, true))
	}
	load, stopLoad := ufLoad(t, "http://"+g.Addr("web")+"/get", 300)
	ep := "/clusters/app/endpoints/"
	var shares []string
	for i, s := range svcs {
		if code, body := adminPost(t, g, ep+s.addr+"/drain"); code != 200 {
			t.Fatalf("drain %s: %d %s", s.addr, code, body)
		}
		eventually(t, 10*time.Second, "no request in flight at the drained endpoint", func() bool {
			return inFlight(t, g, "app", s.addr).InFlight == 0
		})
		s.stop(t)
		eventually(t, 10*time.Second, "the stopped endpoint seen down", healthy(s.addr, false))
		n := startUF(t, s.addr, ufConfig(fmt.Sprint("s", i, "-new"), 20*time.Millisecond))
		svcs[i] = n
		eventually(t, 10*time.Second, "the new process seen up", healthy(n.addr, true))
		before := arrivals(svcs)
		if code, body := adminPost(t, g, ep+n.addr+"/undrain"); code != 200 {
			t.Fatalf("undrain %s: %d %s", n.addr, code, body)
		}
		if st := endpointStates(t, g, "app")[n.addr]; st != "slow-starting" {
			t.Errorf("the new process of %s undrained: %s, want slow-starting", n.addr, st)
		}
		time.Sleep(time.Second)
		got := arrivals(svcs)
		var others int64
		for j := range got {
			got[j] -= before[j]
			if j != i {
				others += got[j]
			}
		}
		shares = append(shares, fmt.Sprint(got))
		if mean := float64(others) / 2; mean < 50 || float64(got[i]) >= 0.5*mean {
			t.Errorf("first second after the restart of %s: requests per endpoint %v, want the new one (%d) below half the others' mean %.0f (and that at least 50)",
				n.addr, got, i, mean)
		}
	}
	stopLoad()
	summary := load.verify(t, 600) // 300/s for over 3 s; a starved machine still sends 600
	t.Logf("load: %s; requests per endpoint in the first second after each restart: %v", summary, shares)
}

// arrivals returns the requests each backend has received.
func arrivals(svcs []*ufSvc) []int64 {
	out := make([]int64, len(svcs))
	for i, s := range svcs {
		out[i] = s.be.Stats().Arrived
	}
	return out
}

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
// under 200 GET/s with a 100 ms response-header timeout, the outlier
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
  - {name: busy, cluster: busy, timeouts: {response_header: 100ms}}
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
	began := time.Now()
	q[0].be.SetHang(1)
	b[0].be.SetHang(1)
	var wg sync.WaitGroup
	var qState, bState string
	var qAt, bAt time.Time
	wg.Go(func() { qState, qAt = firstState(g, "quiet", q[0].addr) })
	wg.Go(func() { bState, bAt = firstState(g, "busy", b[0].addr) })
	wg.Wait()
	stopLoad()
	active, passive := qAt.Sub(began), bAt.Sub(began)
	lo := (hangFall-1)*hangInterval + hangTimeout - 20*time.Millisecond
	hi := hangFall*hangInterval + hangTimeout + hangInterval + 300*time.Millisecond
	if qState != "unhealthy" || active < lo || active > hi {
		t.Errorf("quiet cluster: the hanging endpoint %s after %v, want unhealthy within [%v, %v]", qState, active, lo, hi)
	}
	if bState != "ejected" || passive < hangTimeout-10*time.Millisecond || passive >= lo {
		t.Errorf("busy cluster: the hanging endpoint %s after %v, want ejected within [%v, %v)", bState, passive, hangTimeout-10*time.Millisecond, lo)
	}
	t.Logf("hang detected by the active checks after %v (bounds [%v, %v]), by the outlier detector under load after %v; load on busy: %d sent, %d not 2xx (timed out at the hanging endpoint)",
		active.Round(time.Millisecond), lo, hi, passive.Round(time.Millisecond), load.sent.Load(), load.status.Load())
}

// TestFaultHangBreakerFallback: two clusters of one endpoint each, with a
// breaker (3 failures in a row) and a 100 ms response-header timeout.
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
  - {name: static, match: {prefix: /static}, cluster: one, timeouts: {response_header: 100ms}}
  - {name: other, cluster: two, timeouts: {response_header: 100ms}}
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
