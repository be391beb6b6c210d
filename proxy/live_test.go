package proxy

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// liveSetup routes /dead to a cluster nothing listens on, /ws to an
// upgrade echo, and everything else to the gated backend (bodies of at
// most 10 bytes); the three routes share one generation counter.
func liveSetup(t *testing.T, h2 bool) (string, *gated, *atomic.Int64) {
	g, be := newGated(t)
	live := new(atomic.Int64)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be), MaxBodyBytes: 10, Live: live}
	dead := &Route{Name: "dead", Cluster: newCluster(t, "dead", upstream.Config{}, closedAddr(t)), Live: live}
	ws := &Route{Name: "ws", Cluster: newCluster(t, "ws", upstream.Config{}, upgradeEcho(t)), Upgrades: []string{"websocket"}, Live: live}
	routes := routerFunc(func(v *request.View) (*Route, bool) {
		switch {
		case strings.HasPrefix(v.Path, "/dead"):
			return dead, true
		case v.Path == "/ws":
			return ws, true
		}
		return rt, true
	})
	addr, _ := startProxy(t, Config{HTTP2: h2}, routes)
	return addr, g, live
}

// settles waits for the counter to read want (the engine ends its record
// after the client has its answer).
func settles(t *testing.T, live *atomic.Int64, want int64, after string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("live = %d after %s (it is %d)", want, after, live.Load()), func() bool { return live.Load() == want })
}

// TestLiveH1: the generation counter is 1 while a request is upstream or
// a tunnel is open, and back to 0 after every kind of ending: an answer,
// a refusal after routing, an upstream failure, a client gone.
func TestLiveH1(t *testing.T) {
	noLeaks(t)
	addr, g, live := liveSetup(t, false)
	for _, tc := range []struct{ name, req, status string }{
		{"answered", "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 200 OK"},
		{"body too large", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n01234567890", "HTTP/1.1 413 Request Entity Too Large"},
		{"upgrade refused", "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, close\r\nUpgrade: foo\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"upstream refused", "GET /dead HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 502 Bad Gateway"},
	} {
		if got := statusOf(raw(t, addr, tc.req)); got != tc.status {
			t.Fatalf("%s: %q, want %q", tc.name, got, tc.status)
		}
		settles(t, live, 0, tc.name)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "GET /hold HTTP/1.1\r\nHost: a\r\n\r\n")
	g.waitEntered(t, 1)
	if n := live.Load(); n != 1 {
		t.Fatalf("live = %d with a request upstream, want 1", n)
	}
	_ = c.Close() // the client goes away: the watcher cancels the exchange
	settles(t, live, 0, "the client left")
	tun, tbr := openTunnel(t, addr)
	if !echoes(tun, tbr, "ping") || live.Load() != 1 {
		t.Fatalf("live = %d with a tunnel open, want 1", live.Load())
	}
	_ = tun.Close()
	settles(t, live, 0, "the tunnel closed")
}

// TestLiveH2: the same on the HTTP/2 engine, the client going away being
// a stream reset.
func TestLiveH2(t *testing.T) {
	noLeaks(t)
	addr, g, live := liveSetup(t, true)
	p := dialH2(t, addr)
	p.get(1, "/")
	p.expect("HEADERS 1 200", "DATA 1 end")
	settles(t, live, 0, "an answer")
	p.get(3, "/dead")
	p.expect("HEADERS 3 502", "DATA 3 end")
	settles(t, live, 0, "an upstream failure")
	p.get(5, "/hold")
	g.waitEntered(t, 1)
	if n := live.Load(); n != 1 {
		t.Fatalf("live = %d with a stream upstream, want 1", n)
	}
	if err := p.fr.WriteRSTStream(5, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	settles(t, live, 0, "the stream was reset")
	g.open()
	// A body larger than the route's bound, announced by Content-Length.
	resp, err := h2cClient(t).Post("http://"+addr+"/", "text/plain", strings.NewReader("01234567890"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("large body: %d, want 413", resp.StatusCode)
	}
	settles(t, live, 0, "a refusal")
}
