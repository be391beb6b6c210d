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
	name string // its Backend-Name
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
	s := &ufSvc{name: cfg.Name, addr: ln.Addr().String(), be: be, ln: ln, done: make(chan struct{})}
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

// ufSend sends one request with ufID id, and an Idempotency-Key of id
// too when id starts "key-" (safe off the test goroutine).
func ufSend(c *http.Client, method, url, id string) ufAnswer {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return ufAnswer{err: err}
	}
	req.Header.Set(ufID, id)
	if strings.HasPrefix(id, "key-") {
		req.Header.Set("Idempotency-Key", id)
	}
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
// on, and 18 POSTs in flight (12 without Idempotency-Key, 6 with; half
// over HTTP/1.1, half over h2c; each held 1.2 s by its backend); one
// backend is killed (listener closed, connections reset) while it holds
// both kinds of POST and at least one GET. Every GET is answered 200 (the
// ones in flight at the kill retried on another endpoint, later ones
// refused by the dead address retried too until the outlier detector
// ejects it; the budget's burst, max 100, covers them). Every POST
// without a key reached a backend exactly once: those the killed one held
// are answered 502 upstream-reset (unless it answered them before the
// kill, on a stalled machine), the others 200. The keyed POSTs the killed
// one held were retried on another backend and answered 200.
func TestFaultBackendKilled(t *testing.T) {
	noLeaks(t)
	svcs := make([]*ufSvc, 3)
	for i := range svcs {
		cfg := ufConfig(fmt.Sprint("s", i), 30*time.Millisecond)
		cfg.Costs = map[string]float64{"/post": 100} // 3 s
		svcs[i] = startUF(t, "127.0.0.1:0", cfg)
	}
	g := start(t, `
version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app, policies: {retry: {attempts: 2, budget: {max: 100}}}}]
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

	const plain, keyed = 12, 6
	answers := map[string]*ufAnswer{}
	var wg sync.WaitGroup
	clients := []*http.Client{h1Client(t), h2cClient(t)}
	for i := range plain + keyed {
		id, a := fmt.Sprint("post-", i), new(ufAnswer)
		if i >= plain {
			id = fmt.Sprint("key-", i)
		}
		answers[id] = a
		wg.Go(func() { *a = ufSend(clients[i%2], "POST", url+"/post", id) })
	}
	eventually(t, 10*time.Second, "every POST at a backend", func() bool {
		return len(svcs[0].tagged(""))+len(svcs[1].tagged(""))+len(svcs[2].tagged("")) == plain+keyed
	})
	var victim *ufSvc // holds both kinds of POST, the most plain ones
	for _, s := range svcs {
		if len(s.tagged("key-")) > 0 && (victim == nil || len(s.tagged("post-")) > len(victim.tagged("post-"))) {
			victim = s
		}
	}
	if victim == nil || len(victim.tagged("post-")) == 0 {
		t.Fatalf("no backend holds both kinds of POST: %v %v %v", svcs[0].tagged(""), svcs[1].tagged(""), svcs[2].tagged(""))
	}
	held := victim.tagged("")
	eventually(t, 10*time.Second, "a GET in flight at the victim", func() bool { return victim.be.Stats().InFlight > len(held) })
	gets := victim.be.Stats().InFlight - len(held)
	victim.kill()
	time.Sleep(1500 * time.Millisecond) // the load goes on without the victim
	stopLoad()
	wg.Wait()
	summary := load.verify(t, 300) // 200/s for 2 s and more; a starved machine still sends 300

	reached := map[string]int64{} // by the backends' counts of each id
	for _, s := range svcs {
		for id, n := range s.tagged("") {
			reached[id] += n
		}
	}
	resets, early := 0, 0
	for id, a := range answers {
		// A POST the victim answered itself was done before the kill (a
		// stalled machine can take 3 s to get there).
		before := held[id] > 0 && a.err == nil && a.code == 200 && a.header.Get("Backend-Name") == victim.name
		keyedAt := held[id] > 0 && !before && strings.HasPrefix(id, "key-")
		switch {
		case a.err != nil:
			t.Errorf("POST %s: %v", id, a.err)
		case keyedAt && (reached[id] != 2 || a.code != 200):
			t.Errorf("POST %s (Idempotency-Key) held by the killed backend: reached backends %d times, answered %d %q; want twice (retried elsewhere), 200", id, reached[id], a.code, a.reason)
		case keyedAt:
		case reached[id] != 1:
			t.Errorf("POST %s reached backends %d times, want once", id, reached[id])
		case before:
			early++
		case held[id] > 0 && (a.code != 502 || a.reason != "upstream-reset"):
			t.Errorf("POST %s held by the killed backend: %d %q %q, want 502 upstream-reset", id, a.code, a.reason, a.body)
		case held[id] > 0:
			resets++
		case a.code != 200 || a.body != "ok\n":
			t.Errorf("POST %s at a live backend: %d %q %q, want 200", id, a.code, a.reason, a.body)
		}
	}
	if want := len(victim.tagged("post-")); resets == 0 || resets+early > want {
		t.Errorf("POSTs answered 502: %d, done before the kill: %d, plain POSTs held by the killed backend: %d (want some 502s, none beyond those held)", resets, early, want)
	}
	t.Logf("load: %s; at the kill the victim held POSTs %v and %d GETs; the route's retries: %+v",
		summary, held, gets, g.cur.Load().routes[0].Policy.Counts())
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

// TestFaultRetryAvoidsTriedEndpoint: a retry goes to an endpoint not
// tried yet even when the picker keeps choosing the failed one. With
// least_request a dead endpoint (connections refused, no outlier
// detection) has the fewest requests in flight and wins most draws: under
// 300 GET/s over it and two live endpoints, with a budget that allows
// every retry, no request fails. With ring_hash every draw of a key is
// the same endpoint: requests of 40 users over a dead and a live endpoint
// all reach the live one.
func TestFaultRetryAvoidsTriedEndpoint(t *testing.T) {
	noLeaks(t)
	s0, s1 := startUF(t, "127.0.0.1:0", ufConfig("s0", 30*time.Millisecond)), startUF(t, "127.0.0.1:0", ufConfig("s1", 30*time.Millisecond))
	dead := deadAddr(t)
	g := start(t, fmt.Sprintf(`
version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: hash, match: {prefix: /hash}, cluster: hash, policies: {retry: {attempts: 2, budget: {ratio: 1, max: 10000}}}}
  - {name: main, cluster: app, policies: {retry: {attempts: 2, budget: {ratio: 1, max: 10000}}}}
clusters:
  - {name: app, endpoints: [%q, %s]}
  - {name: hash, picker: ring_hash, hash_key: {header: X-User}, endpoints: [%q, %s]}
`, dead, ufAddrs(s0, s1), dead, ufAddrs(s0)))
	url := "http://" + g.Addr("web")
	load, stopLoad := ufLoad(t, url+"/get", 300)
	time.Sleep(2 * time.Second)
	stopLoad()
	summary := load.verify(t, 300) // 300/s for 2 s; a starved machine still sends 300
	c := h1Client(t)
	for u := range 40 {
		if code, _, body := fetch(t, c, "GET", url+"/hash", http.Header{"X-User": {fmt.Sprint("user-", u)}}); code != 200 || body != "ok\n" {
			t.Fatalf("user-%d on the ring: %d %q, want 200 from the live endpoint", u, code, body)
		}
	}
	counts := func(route string) string {
		for _, r := range g.cur.Load().routes {
			if r.Name == route {
				return fmt.Sprintf("%+v", r.Policy.Counts())
			}
		}
		return "no route " + route
	}
	t.Logf("load: %s; retries on main %s, on hash %s", summary, counts("main"), counts("hash"))
}
