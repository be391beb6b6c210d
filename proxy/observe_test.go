package proxy

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// events records what observers saw, as text, in order.
type events struct {
	mu   sync.Mutex
	list []string
	secs []float64 // the durations End reported, in order
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, s)
}

// wait returns the events once there are n of them (5 s at most).
func (e *events) wait(t *testing.T, n int) []string {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d observer events", n), func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.list) >= n
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.list
	e.list = nil
	return out
}

// routeObs is a route's Observer writing to events.
type routeObs struct {
	name string
	ev   *events
}

func (o *routeObs) Begin() { o.ev.add(o.name + " begin") }

func (o *routeObs) End(e Ending) {
	status, fromUp, seconds := e.Status, e.FromUpstream, e.Seconds
	o.ev.mu.Lock()
	o.ev.secs = append(o.ev.secs, seconds)
	o.ev.mu.Unlock()
	src := "gateway"
	if fromUp {
		src = "upstream"
	}
	o.ev.add(fmt.Sprintf("%s end %d %s", o.name, status, src))
}

// clusterObs is a cluster's observer writing to events.
type clusterObs struct{ ev *events }

func (o clusterObs) UpstreamError(addr string, kind upstream.Kind) {
	o.ev.add("error " + addr + " " + kind.String())
}

// silent is a backend that reads requests and never answers.
func silent(t *testing.T) string {
	return rawServer(t, func(c net.Conn) {
		defer c.Close()
		_, _ = c.Read(make([]byte, 4096))
		_, _ = c.Read(make([]byte, 1)) // until the proxy gives up
	})
}

// observed routes /dead to a closed port, /slow to a silent backend with
// a 100 ms request timeout, and the rest to the gated backend (bodies of
// at most 10 bytes), each route and cluster observed.
func observed(t *testing.T, h2 bool) (string, *gated, *events, string) {
	ev := &events{}
	g, be := newGated(t)
	deadAddr := closedAddr(t)
	mk := func(name, addr string) *Cluster {
		cl := newCluster(t, name, upstream.Config{}, addr)
		cl.Observer = clusterObs{ev}
		return cl
	}
	rt := &Route{Name: "r", Cluster: mk("app", be), MaxBodyBytes: 10, Observer: &routeObs{"r", ev}}
	dead := &Route{Name: "dead", Cluster: mk("dead", deadAddr), Observer: &routeObs{"dead", ev}}
	slow := &Route{Name: "slow", Cluster: mk("slow", silent(t)), RequestTimeout: 100 * time.Millisecond, Observer: &routeObs{"slow", ev}}
	h2dead := mk("h2dead", deadAddr) // spoken to in HTTP/2: x/net's transport errors
	h2dead.H2 = upstream.NewH2Transport(upstream.Config{}, true)
	t.Cleanup(h2dead.H2.(interface{ CloseIdleConnections() }).CloseIdleConnections)
	deadH2 := &Route{Name: "deadh2", Cluster: h2dead, Observer: &routeObs{"deadh2", ev}}
	routes := routerFunc(func(v *request.View) (*Route, bool) {
		switch v.Path {
		case "/dead":
			return dead, true
		case "/deadh2":
			return deadH2, true
		case "/slow":
			return slow, true
		case "/none":
			return nil, false
		}
		return rt, true
	})
	addr, _ := startProxy(t, Config{HTTP2: h2}, routes)
	return addr, g, ev, deadAddr
}

// observerCases are the requests both engines are checked with, and what
// the observers must see for each.
func observerCases(dead string) []struct {
	method, path, body string
	want               []string
} {
	return []struct {
		method, path, body string
		want               []string
	}{
		{"GET", "/", "", []string{"r begin", "r end 200 upstream"}},
		{"POST", "/", "01234567890", []string{"r begin", "r end 413 gateway"}},
		{"GET", "/dead", "", []string{"dead begin", "error " + dead + " refused", "dead end 502 gateway"}},
		{"GET", "/deadh2", "", []string{"deadh2 begin", "error " + dead + " refused", "deadh2 end 502 gateway"}},
		{"GET", "/slow", "", []string{"slow begin", "error " + silentAddrMark + " timeout", "slow end 504 gateway"}},
		{"GET", "/none", "", nil}, // not routed: not observed
	}
}

// silentAddrMark stands for the silent backend's address in a case.
const silentAddrMark = "<silent>"

func checkObserved(t *testing.T, ev *events, name string, want []string) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	got := ev.wait(t, len(want))
	for i := range got {
		if f := strings.Fields(got[i]); len(f) == 3 && f[0] == "error" && strings.HasPrefix(want[i], "error "+silentAddrMark) {
			got[i] = "error " + silentAddrMark + " " + f[2]
		}
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("%s: observers saw %q, want %q", name, got, want)
	}
}

// TestObserversH1: each routed request is begun and ended once, with the
// status the client got and whose answer it was; upstream failures are
// reported with the endpoint and their kind; a client that leaves is 499.
func TestObserversH1(t *testing.T) {
	noLeaks(t)
	addr, g, ev, dead := observed(t, false)
	for _, tc := range observerCases(dead) {
		req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: a\r\nConnection: close\r\n", tc.method, tc.path)
		if tc.body != "" {
			req += fmt.Sprintf("Content-Length: %d\r\n", len(tc.body))
		}
		_ = raw(t, addr, req+"\r\n"+tc.body)
		checkObserved(t, ev, tc.method+" "+tc.path, tc.want)
	}
	checkSlowSeconds(t, ev)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "GET /hold HTTP/1.1\r\nHost: a\r\n\r\n")
	g.waitEntered(t, 1)
	_ = c.Close()
	checkObserved(t, ev, "client gone", []string{"r begin", "r end 499 gateway"})
}

// TestObserversH2: the same on the HTTP/2 engine.
func TestObserversH2(t *testing.T) {
	noLeaks(t)
	addr, g, ev, dead := observed(t, true)
	cl := h2cClient(t)
	for _, tc := range observerCases(dead) {
		req, err := http.NewRequest(tc.method, "http://"+addr+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.body == "" {
			req.Body = nil
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		checkObserved(t, ev, tc.method+" "+tc.path, tc.want)
	}
	checkSlowSeconds(t, ev)
	p := dialH2(t, addr)
	p.get(1, "/hold")
	g.waitEntered(t, 1)
	_ = p.fr.WriteRSTStream(1, 0x8) // CANCEL
	checkObserved(t, ev, "stream reset", []string{"r begin", "r end 499 gateway"})
}

// checkSlowSeconds: the /slow request, cut by its 100 ms timeout, is the
// fifth End; its duration is at least the timeout.
func checkSlowSeconds(t *testing.T, ev *events) {
	t.Helper()
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.secs) != 5 {
		t.Fatalf("%d durations, want 5", len(ev.secs))
	}
	if s := ev.secs[4]; s < 0.1 || s > 5 {
		t.Fatalf("the timed-out request lasted %v s, want in [0.1, 5]", s)
	}
	for i, s := range ev.secs[:4] {
		if s < 0 || s > 5 {
			t.Fatalf("duration %d: %v s", i, s)
		}
	}
}
