package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// gated is a backend whose /hold requests wait until release is closed
// (entered gets one value per request that arrived); every request is
// answered "ok", with the method it came with in X-Method.
type gated struct {
	entered chan struct{}
	release chan struct{}
}

func newGated(t *testing.T) (*gated, string) {
	g := &gated{entered: make(chan struct{}, 16), release: make(chan struct{})}
	addr := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			g.entered <- struct{}{}
			<-g.release
		}
		w.Header().Set("X-Method", r.Method)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(g.open)
	return g, addr
}

// open releases the held requests (once).
func (g *gated) open() {
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

// waitEntered waits for n held requests to reach the backend.
func (g *gated) waitEntered(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-g.entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d held requests reached the backend", i, n)
		}
	}
}

// get sends a GET on a kept-alive HTTP/1.1 connection and returns the
// response (body read).
func get(t *testing.T, c net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", path)
	resp, _ := readResponse(t, br, "GET")
	return resp
}

// expectEOF fails unless the proxy closes c (within 5 s) without sending
// anything more.
func expectEOF(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read %q, %v; want the connection closed", b, err)
	}
}

func drainSetup(t *testing.T, cfg Config) (string, *Server, *gated) {
	g, be := newGated(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	routes := routerFunc(func(v *request.View) (*Route, bool) { return rt, v.Path != "/none" })
	addr, s := startProxy(t, cfg, routes)
	return addr, s, g
}

// TestDrainH1: after Drain, a kept-alive connection's next response and a
// new connection's first one carry "Connection: close" and the
// connections close after them; so does a refusal; before it, none does.
func TestDrainH1(t *testing.T) {
	noLeaks(t)
	addr, s, _ := drainSetup(t, Config{})
	old, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	obr := bufio.NewReader(old)
	if resp := get(t, old, obr, "/"); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("before the drain: %d, close %v; want 200 kept alive", resp.StatusCode, resp.Close)
	}
	s.Drain()
	if resp := get(t, old, obr, "/"); resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("during the drain: %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	expectEOF(t, old, obr)
	for _, path := range []string{"/", "/none"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		want := map[string]int{"/": 200, "/none": 404}[path]
		if resp := get(t, c, br, path); resp.StatusCode != want || !resp.Close {
			t.Fatalf("new connection during the drain, %s: %d, close %v; want %d with Connection: close", path, resp.StatusCode, resp.Close, want)
		}
		expectEOF(t, c, br)
		_ = c.Close()
	}
}

// TestKeepAliveOff: SetKeepAlive(false) closes each HTTP/1.1 connection
// after its response; SetKeepAlive(true) keeps them again.
func TestKeepAliveOff(t *testing.T) {
	noLeaks(t)
	addr, s, _ := drainSetup(t, Config{})
	s.SetKeepAlive(false)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if resp := get(t, c, br, "/"); !resp.Close {
		t.Fatal("keep-alive off: the response did not carry Connection: close")
	}
	expectEOF(t, c, br)
	_ = c.Close()
	s.SetKeepAlive(true)
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br = bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		if resp := get(t, c, br, "/"); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("keep-alive on again, request %d: %d, close %v", i, resp.StatusCode, resp.Close)
		}
	}
}

// TestDrainH2: after Drain, an h2c connection that served a stream gets
// GOAWAY at once (last stream id 1); one with a stream in flight gets its
// GOAWAY covering that stream, which then finishes; one opened during the
// drain gets its first stream answered, and its GOAWAY only after it.
func TestDrainH2(t *testing.T) {
	noLeaks(t)
	addr, s, g := drainSetup(t, Config{HTTP2: true})
	served := dialH2(t, addr)
	served.get(1, "/")
	served.expect("HEADERS 1 200", "DATA 1 end")
	busy := dialH2(t, addr)
	busy.get(1, "/hold")
	g.waitEntered(t, 1)
	s.Drain()
	served.expect("GOAWAY 1 NO_ERROR")
	busy.expect("GOAWAY 1 NO_ERROR")
	g.open()
	busy.expect("HEADERS 1 200", "DATA 1 end")
	// A fresh connection: no GOAWAY before its first stream (the PING's
	// ack comes first), then one covering that stream, which is answered
	// in full (the GOAWAY is asked for when the handler returns, and x/net
	// may send it before the stream's frames).
	fresh := dialH2(t, addr)
	fresh.ping()
	fresh.get(1, "/")
	fresh.expectAll("HEADERS 1 200", "DATA 1 end", "GOAWAY 1 NO_ERROR")
	for _, p := range []*h2peer{served, busy, fresh} {
		p.expect("closed") // x/net closes a GOAWAY'd connection once its streams are done
	}
}

// TestDrainH2GoClient: during a drain, Go's own HTTP/2 client keeps
// getting answers: every connection it opens serves its first request
// before its GOAWAY, so the client never loops on GOAWAY(last=0).
func TestDrainH2GoClient(t *testing.T) {
	noLeaks(t)
	addr, s, _ := drainSetup(t, Config{HTTP2: true})
	cl := h2cClient(t)
	s.Drain()
	for i := 0; i < 5; i++ {
		resp, err := cl.Get("http://" + addr + "/")
		if err != nil {
			t.Fatalf("request %d during the drain: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("request %d during the drain: %d %q", i, resp.StatusCode, b)
		}
	}
}
