package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/internal/syncbuf"
	"github.com/spillwayhq/spillway/retry"
)

// slowBackend answers "name" after hold, or gives up when its request's
// context ends (the gateway cancelled the exchange), counting both.
type slowBackend struct {
	name                string
	addr                string
	hold                atomic.Int64 // nanoseconds; a test may change it
	requests, cancelled atomic.Int64
	// first, when set, is shared by several backends: the request that
	// takes it (the first to arrive at any of them) holds firstHold
	// instead of hold.
	first     *atomic.Bool
	firstHold time.Duration
}

func startSlow(t *testing.T, name string, hold time.Duration) *slowBackend {
	t.Helper()
	return startSlowOn(t, name, hold, false)
}

// startSlowOn starts a slowBackend speaking HTTP/1.1, or h2c with prior
// knowledge only.
func startSlowOn(t *testing.T, name string, hold time.Duration, h2c bool) *slowBackend {
	t.Helper()
	b := &slowBackend{name: name}
	b.hold.Store(int64(hold))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		hold := time.Duration(b.hold.Load())
		if b.first != nil && b.first.CompareAndSwap(false, true) {
			hold = b.firstHold
		}
		if hold > 0 {
			tm := time.NewTimer(hold) // the backend's work, not a test's wait
			defer tm.Stop()
			select {
			case <-tm.C:
			case <-r.Context().Done():
				b.cancelled.Add(1)
				return
			}
		}
		fmt.Fprint(w, b.name)
	})
	if !h2c {
		b.addr = startBackendFunc(t, h)
		return b
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	b.addr = ln.Addr().String()
	return b
}

// hedgeConfig is one route, main, on cluster app (round_robin over
// addrs) with the retry section retry.
func hedgeConfig(retry string, addrs ...string) string {
	return hedgeConfigProto(retry, "http1", addrs...)
}

// hedgeConfigProto is hedgeConfig with the cluster's protocol.
func hedgeConfigProto(retry, proto string, addrs ...string) string {
	return fmt.Sprintf(`
version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: main, cluster: app, access_log: full, policies: {retry: %s}}
clusters:
  - {name: app, picker: round_robin, protocol: %s, endpoints: [%s]}
`, retry, proto, strings.Join(addrs, ", "))
}

// mainCounts is route main's chain counters in g's current generation.
func mainCounts(t *testing.T, g *Gateway) chain.Counts {
	t.Helper()
	chains := g.cur.Load().chainsOf("main")
	if len(chains) == 0 {
		t.Fatal("no chain for route main")
	}
	return chains[0].Counts()
}

// timedGet sends a request of method to url (with body, if any) and
// returns its status, body and how long it took.
func timedGet(t *testing.T, c *http.Client, method, url, body string) (int, string, time.Duration) {
	t.Helper()
	t0 := time.Now()
	if body == "" {
		code, _, b := fetch(t, c, method, url, nil)
		return code, b, time.Since(t0)
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), time.Since(t0)
}

// TestHedgeSlowEndpoint: a cluster of a slow endpoint (answers after 3 s)
// and a fast one, hedging after 50 ms. Round robin sends every other
// request to the slow one first; each is answered by the fast one through
// its hedge, well before the slow one would answer (a third of its time,
// a ratio a loaded machine keeps), and the slow one sees each of its
// requests cancelled. The hedges won and sent are counted.
func TestHedgeSlowEndpoint(t *testing.T) {
	noLeaks(t)
	slow, fast := startSlow(t, "slow", 3*time.Second), startSlow(t, "fast", 0)
	var log syncbuf.Buffer
	g := startOpts(t, hedgeConfig(`{attempts: 1, hedge: {delay: 50ms}, budget: {ratio: 1, max: 1000}}`, slow.addr, fast.addr),
		Options{AccessLog: slog.New(slog.NewJSONHandler(&log, nil))})
	c := h1Client(t)
	url := "http://" + g.Addr("web") + "/x"
	for i := range 6 {
		code, body, took := timedGet(t, c, "GET", url, "")
		if code != 200 || body != "fast" {
			t.Fatalf("request %d: %d %q, want 200 from fast", i, code, body)
		}
		if took >= time.Second {
			t.Fatalf("request %d took %v; the slow endpoint takes 3 s, a hedge after 50 ms should not", i, took)
		}
	}
	if n := slow.requests.Load(); n < 3 {
		t.Fatalf("the slow endpoint saw %d requests, want at least 3 of 6 (round robin)", n)
	}
	eventually(t, 5*time.Second, "every request to the slow endpoint cancelled", func() bool {
		return slow.cancelled.Load() == slow.requests.Load()
	})
	k := mainCounts(t, g)
	if k.Hedges < 3 || k.HedgesWon < 3 || k.HedgesWon > k.Hedges {
		t.Errorf("counts %+v: want at least 3 hedges sent and won, no more won than sent", k)
	}
	// The access log shows a hedged request's two attempts and the winner.
	hedged := `"endpoint":"` + fast.addr + `","bytes_in":0,"bytes_out":4,`
	eventually(t, 5*time.Second, "6 access log lines", func() bool { return strings.Count(log.String(), `"msg":"access"`) == 6 })
	n := 0
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, hedged) && strings.Contains(line, `"attempts":2`) {
			n++
		}
	}
	if n < 3 {
		t.Errorf("%d access log lines with attempts 2 and endpoint %s, want at least 3:\n%s", n, fast.addr, log.String())
	}
	t.Logf("slow saw %d (cancelled %d), fast %d; %+v", slow.requests.Load(), slow.cancelled.Load(), fast.requests.Load(), k)
}

// TestHedgeEngines: the HTTP/2 engine hedges too, to HTTP/1.1 and to h2c
// clusters: over h2c, requests that round robin sends to a slow endpoint
// (2 s) are answered by the fast one within half that, and the slow one
// sees them cancelled. The HTTP/1.1 engine does not hedge to an h2c
// cluster (yet): there the slow endpoint's requests wait for it.
func TestHedgeEngines(t *testing.T) {
	noLeaks(t)
	for _, tc := range []struct {
		name, proto string
		h2cClient   bool
	}{
		{"h2c client, http1 cluster", "http1", true},
		{"h2c client, h2c cluster", "h2c", true},
		{"http1 client, h2c cluster: not hedged", "h2c", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h2 := tc.proto == "h2c"
			slow, fast := startSlowOn(t, "slow", 2*time.Second, h2), startSlowOn(t, "fast", 0, h2)
			g := start(t, hedgeConfigProto(`{attempts: 1, hedge: {delay: 50ms}, budget: {ratio: 1, max: 1000}}`, tc.proto, slow.addr, fast.addr))
			c := h1Client(t)
			if tc.h2cClient {
				c = h2cClient(t)
			}
			url := "http://" + g.Addr("web") + "/x"
			slowAnswers := 0
			for i := range 4 {
				code, body, took := timedGet(t, c, "GET", url, "")
				if code != 200 {
					t.Fatalf("request %d: %d %q", i, code, body)
				}
				if body == "slow" {
					slowAnswers++
				} else if took >= time.Second {
					t.Fatalf("request %d took %v; the slow endpoint takes 2 s, a hedge after 50 ms should not", i, took)
				}
			}
			k := mainCounts(t, g)
			if !tc.h2cClient {
				if slowAnswers != 2 || k.Hedges != 0 {
					t.Errorf("%d answers from the slow endpoint, %d hedges; want 2 and none", slowAnswers, k.Hedges)
				}
				return
			}
			if slowAnswers != 0 || k.Hedges < 2 || k.HedgesWon < 2 {
				t.Errorf("%d answers from the slow endpoint, counts %+v; want none, at least 2 hedges sent and won", slowAnswers, k)
			}
			eventually(t, 5*time.Second, "every request to the slow endpoint cancelled", func() bool {
				return slow.requests.Load() >= 2 && slow.cancelled.Load() == slow.requests.Load()
			})
		})
	}
}

// TestHedgeNotWithBody: a POST, and a PUT with a body, are never hedged,
// over HTTP/1.1 or h2c (not idempotent; a body would have to be sent twice
// at once): one that round robin sends to the slow endpoint (400 ms) waits
// for it. Requests are sent until one has been answered by each endpoint
// (round robin alternates; at most 6, as another pick now and then may
// shift the rotation by one). A GET on the same route is hedged, so the
// route does hedge.
func TestHedgeNotWithBody(t *testing.T) {
	noLeaks(t)
	slow, fast := startSlow(t, "slow", 400*time.Millisecond), startSlow(t, "fast", 0)
	g := start(t, hedgeConfig(`{attempts: 1, hedge: {delay: 20ms}, budget: {ratio: 1, max: 1000}}`, slow.addr, fast.addr))
	c := h1Client(t)
	url := "http://" + g.Addr("web") + "/x"
	for _, m := range []struct{ method, body string }{{"POST", ""}, {"POST", "abc"}, {"PUT", "abc"}} {
		for _, cc := range []*http.Client{c, h2cClient(t)} { // both engines
			got := map[string]int{}
			for i := 0; i < 6 && (got["slow"] == 0 || got["fast"] == 0); i++ {
				code, body, took := timedGet(t, cc, m.method, url, m.body)
				if code != 200 {
					t.Fatalf("%s: %d", m.method, code)
				}
				got[body]++
				if body == "slow" && took < 400*time.Millisecond {
					t.Errorf("%s to the slow endpoint answered in %v", m.method, took)
				}
			}
			if got["slow"] == 0 || got["fast"] == 0 {
				t.Errorf("%s body %q: answers %v, want some from each endpoint (none hedged)", m.method, m.body, got)
			}
		}
	}
	if k := mainCounts(t, g); k.Hedges != 0 {
		t.Fatalf("%d hedges for requests with a body or not idempotent", k.Hedges)
	}
	for range 2 {
		if code, body, _ := timedGet(t, c, "GET", url, ""); code != 200 || body != "fast" {
			t.Fatalf("GET: %d %q, want 200 from fast", code, body)
		}
	}
	if k := mainCounts(t, g); k.Hedges < 1 { // 2 when the fast one took 20 ms on a busy machine
		t.Errorf("GETs: %d hedges, want at least 1", k.Hedges)
	}
}

// TestHedgeBudget: hedges are paid from the retry budget. Both endpoints
// always slow (200 ms), hedging after 20 ms, a budget of 3 tokens filled
// 0.001 per request and no floor: of 8 requests the first 3 are hedged
// and the others are not, each counted once as refused; the endpoints saw
// 8 + 3. On both engines.
func TestHedgeBudget(t *testing.T) {
	noLeaks(t)
	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2c=%v", h2c), func(t *testing.T) {
			a, b := startSlow(t, "a", 200*time.Millisecond), startSlow(t, "b", 200*time.Millisecond)
			g := start(t, hedgeConfig(`{attempts: 1, hedge: {delay: 20ms}, budget: {ratio: 0.001, max: 3, min_per_second: 0}}`, a.addr, b.addr))
			c := clientFor(t, h2c)
			url := "http://" + g.Addr("web") + "/x"
			for i := range 8 {
				if code, _, _ := timedGet(t, c, "GET", url, ""); code != 200 {
					t.Fatalf("request %d: %d", i, code)
				}
			}
			k := mainCounts(t, g)
			if k.Hedges != 3 || k.HedgesRefused != 5 {
				t.Errorf("counts %+v: want 3 hedges sent, 5 refused by the budget", k)
			}
			eventually(t, 5*time.Second, "11 requests at the endpoints", func() bool {
				return a.requests.Load()+b.requests.Load() == 11
			})
		})
	}
}

// clientFor is an HTTP/1.1 client, or an h2c one.
func clientFor(t *testing.T, h2c bool) *http.Client {
	if h2c {
		return h2cClient(t)
	}
	return h1Client(t)
}

// TestHedgeTrackedDelay: with delay 0 the hedge follows the p95 of the
// route's recent times to a good answer. Before 20 are known nothing is
// hedged (a request to an endpoint taking 300 ms waits for it); once 30
// fast answers are known, requests to an endpoint that now takes 2 s are
// answered by the other within half that. On both engines.
func TestHedgeTrackedDelay(t *testing.T) {
	noLeaks(t)
	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2c=%v", h2c), func(t *testing.T) {
			a, b := startSlow(t, "a", 300*time.Millisecond), startSlow(t, "b", 0)
			g := start(t, hedgeConfig(`{attempts: 1, hedge: {}, budget: {ratio: 1, max: 1000}}`, a.addr, b.addr))
			c := clientFor(t, h2c)
			url := "http://" + g.Addr("web") + "/x"
			got := map[string]int{}
			for range 2 {
				_, body, _ := timedGet(t, c, "GET", url, "")
				got[body]++
			}
			// Round robin sends one of the two to a; a hedge would have let b
			// answer it. (A CI run under -race once saw a answer both, an
			// extra pick unexplained: the requests each endpoint saw are in
			// the message.)
			if k := mainCounts(t, g); got["a"] == 0 || k.Hedges != 0 {
				t.Fatalf("before 20 samples: answers %v, %d hedges, requests at a %d, at b %d; want an answer from a, none hedged",
					got, k.Hedges, a.requests.Load(), b.requests.Load())
			}
			a.hold.Store(0)
			for i := range 30 {
				if code, _, _ := timedGet(t, c, "GET", url, ""); code != 200 {
					t.Fatalf("fast request %d: %d", i, code)
				}
			}
			a.hold.Store(int64(2 * time.Second))
			for i := range 4 {
				code, body, took := timedGet(t, c, "GET", url, "")
				if code != 200 || body != "b" || took >= time.Second {
					t.Fatalf("request %d after a slowed down: %d %q in %v, want b's answer well within 2 s", i, code, body, took)
				}
			}
		})
	}
}

// TestHedgeClientGone: a client that gives up (once both are sent) on a hedged
// request whose two attempts both take 2 s: both exchanges are cancelled,
// on both engines, and nothing outlives the request (noLeaks).
func TestHedgeClientGone(t *testing.T) {
	noLeaks(t)
	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2c=%v", h2c), func(t *testing.T) {
			a, b := startSlow(t, "a", 2*time.Second), startSlow(t, "b", 2*time.Second)
			g := start(t, hedgeConfig(`{attempts: 1, hedge: {delay: 50ms}, budget: {ratio: 1, max: 1000}}`, a.addr, b.addr))
			c := clientFor(t, h2c)
			// The client gives up once both attempts have reached their
			// endpoints (the first, and the hedge 50 ms later), however
			// long the machine takes to get there.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				defer cancel()
				for range 500 {
					if a.requests.Load()+b.requests.Load() == 2 {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+g.Addr("web")+"/x", nil)
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("answered %d; want the client to give up", resp.StatusCode)
			}
			eventually(t, 5*time.Second, "both attempts cancelled", func() bool {
				return a.requests.Load()+b.requests.Load() == 2 && a.cancelled.Load()+b.cancelled.Load() == 2
			})
			if k := mainCounts(t, g); k.Hedges != 1 || k.HedgesWon != 0 {
				t.Errorf("counts %+v, want 1 hedge, none won", k)
			}
		})
	}
}

// TestHedgeMaxHedges: max_hedges 2 over four endpoints, hedging after
// 30 ms; the first request to arrive anywhere takes 400 ms, the others 5 s
// (so the losers are still at work when the winner answers, however the
// machine schedules them): one request reaches three of them (the first
// attempt and two hedges), never the fourth; the two losers are cancelled.
func TestHedgeMaxHedges(t *testing.T) {
	noLeaks(t)
	var bs []*slowBackend
	var addrs []string
	first := new(atomic.Bool)
	for i := range 4 {
		b := startSlow(t, fmt.Sprint("s", i), 5*time.Second)
		b.first, b.firstHold = first, 400*time.Millisecond
		bs, addrs = append(bs, b), append(addrs, b.addr)
	}
	g := start(t, hedgeConfig(`{attempts: 1, hedge: {delay: 30ms, max_hedges: 2}, budget: {ratio: 1, max: 1000}}`, addrs...))
	c := h1Client(t)
	if code, _, _ := timedGet(t, c, "GET", "http://"+g.Addr("web")+"/x", ""); code != 200 {
		t.Fatalf("status %d", code)
	}
	if k := mainCounts(t, g); k.Hedges != 2 || k.HedgesRefused != 0 {
		t.Errorf("counts %+v, want 2 hedges", k)
	}
	sum := func(f func(*slowBackend) int64) (n int64) {
		for _, b := range bs {
			n += f(b)
		}
		return n
	}
	eventually(t, 5*time.Second, "3 requests at the endpoints, 2 cancelled", func() bool {
		return sum(func(b *slowBackend) int64 { return b.requests.Load() }) == 3 &&
			sum(func(b *slowBackend) int64 { return b.cancelled.Load() }) == 2
	})
	time.Sleep(100 * time.Millisecond) // a fourth would have been sent 30 ms after the second hedge
	if n := sum(func(b *slowBackend) int64 { return b.requests.Load() }); n != 3 {
		t.Errorf("%d requests at the endpoints, want 3", n)
	}
}

// TestHedgeReload: a reload that leaves a route's hedge section (and its
// retry budget) as it was keeps its hedger, with the latencies it
// tracked; a changed one starts fresh.
func TestHedgeReload(t *testing.T) {
	noLeaks(t)
	fast := startSlow(t, "fast", 0)
	cfg := func(q string) string {
		return hedgeConfig(`{attempts: 1, hedge: {quantile: `+q+`}}`, fast.addr)
	}
	g := start(t, cfg("0.9"))
	hedger := func() *retry.Hedger { return g.cur.Load().pol.hedgers["main"].v }
	was := hedger()
	if was == nil {
		t.Fatal("no hedger for route main")
	}
	reloadYAML(t, g, cfg("0.9")+"\n# touched\n")
	if hedger() != was {
		t.Error("an unchanged hedge section got a new hedger")
	}
	reloadYAML(t, g, cfg("0.8"))
	if hedger() == was {
		t.Error("a changed hedge section kept its hedger")
	}
	reloadYAML(t, g, hedgeConfig(`{attempts: 1}`, fast.addr))
	if hedger() != nil {
		t.Error("hedge section removed: still a hedger")
	}
}

// TestHedgeLoserNotAFailure: an attempt that loses the race is cancelled,
// not failed. The slow endpoint (3 s) loses every request round robin
// sends it first, on both engines, yet outlier detection that ejects
// after 2 gateway failures in a row does not eject it, and the cluster's
// breaker (open after 2 failures in a row) stays closed.
func TestHedgeLoserNotAFailure(t *testing.T) {
	noLeaks(t)
	slow, fast := startSlow(t, "slow", 3*time.Second), startSlow(t, "fast", 0)
	g := start(t, fmt.Sprintf(`
version: 1
admin: {address: "127.0.0.1:0"}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: main, cluster: app, policies: {retry: {attempts: 1, hedge: {delay: 50ms}, budget: {ratio: 1, max: 1000}}}}
clusters:
  - name: app
    picker: round_robin
    endpoints: [%s, %s]
    breaker: {threshold: 2, open: 1h}
    health: {outlier: {consecutive_gateway_failure: 2, consecutive_5xx: 2, max_ejection_percent: 100, base_ejection_time: 1h}}
`, slow.addr, fast.addr))
	url := "http://" + g.Addr("web") + "/x"
	for _, h2c := range []bool{false, true} {
		c := clientFor(t, h2c)
		for i := range 6 {
			if code, body, _ := timedGet(t, c, "GET", url, ""); code != 200 || body != "fast" {
				t.Fatalf("h2c=%v, request %d: %d %q, want 200 from fast", h2c, i, code, body)
			}
		}
	}
	eventually(t, 5*time.Second, "every request to the slow endpoint cancelled", func() bool {
		return slow.requests.Load() >= 6 && slow.cancelled.Load() == slow.requests.Load()
	})
	if n := ejected(t, g); n != 0 {
		t.Errorf("%d endpoints ejected; a cancelled loser is no failure", n)
	}
	if st := g.cur.Load().pol.guards["app"].v.Breaker.Snapshot(); st.State != breaker.Closed || st.Failures != 0 {
		t.Errorf("breaker %v with %d failures; want closed, none", st.State, st.Failures)
	}
}
