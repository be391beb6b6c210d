package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/internal/syncbuf"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a
}

// rawServer accepts connections and hands each to fn.
func rawServer(t *testing.T, fn func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go fn(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

func TestUpstreamFailures(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := rawServer(t, func(c net.Conn) {
		defer c.Close()
		<-release
	})
	reset := rawServer(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	})
	garbage := rawServer(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nok")
	})
	cases := []struct {
		name, addr, status, reason string
	}{
		{"refused", closedAddr(t), "HTTP/1.1 502 Bad Gateway", "upstream-refused"},
		{"hang", hang, "HTTP/1.1 504 Gateway Timeout", "upstream-timeout"},
		{"reset", reset, "HTTP/1.1 502 Bad Gateway", "upstream-reset"},
		{"CL+TE response", garbage, "HTTP/1.1 502 Bad Gateway", "upstream-bad-response"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, tc.addr), ResponseHeaderTimeout: 200 * time.Millisecond}
			addr, _ := startProxy(t, Config{}, one(rt))
			start := time.Now()
			resp := raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
			if got := statusOf(resp); got != tc.status {
				t.Fatalf("status %q, want %q\n%s", got, tc.status, resp)
			}
			if !strings.Contains(resp, `"reason":"`+tc.reason+`"`) || !strings.Contains(resp, `"cluster":"app"`) {
				t.Fatalf("body does not name reason %s and cluster app:\n%s", tc.reason, resp)
			}
			if !strings.Contains(resp, "Content-Type: application/problem+json") {
				t.Fatalf("not problem+json:\n%s", resp)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

func TestNoRoute404(t *testing.T) {
	noLeaks(t)
	r := routerFunc(func(v *request.View) (*Route, bool) { return nil, false })
	addr, _ := startProxy(t, Config{}, r)
	resp := raw(t, addr, "GET /nope HTTP/1.1\r\nHost: a\r\n\r\nGET /again HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if n := strings.Count(resp, "HTTP/1.1 404 Not Found"); n != 2 {
		t.Fatalf("want two 404s on one connection, got %d:\n%s", n, resp)
	}
	if !strings.Contains(resp, `"reason":"no-route"`) {
		t.Fatalf("no reason:\n%s", resp)
	}
}

// TestClientGoneCancelsUpstream: a client that disconnects while its
// request is upstream frees the upstream connection within 50 ms (seed
// 000: work for a client who left is wasted).
func TestClientGoneCancelsUpstream(t *testing.T) {
	noLeaks(t)
	upClosed := make(chan time.Time, 1)
	be := rawServer(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 4096)
		_, _ = c.Read(buf) // the request; never answer
		_, _ = c.Read(buf) // returns when the gateway closes its side
		upClosed <- time.Now()
	})
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be), AccessLog: LogFull}
	logs := &syncbuf.Buffer{}
	addr, s := startProxy(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))}, one(rt))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(100 * time.Millisecond) // let the request reach the upstream
	gone := time.Now()
	_ = c.Close()
	select {
	case at := <-upClosed:
		if d := at.Sub(gone); d > 50*time.Millisecond {
			t.Fatalf("upstream freed %v after the client left, want ≤ 50ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream connection was never closed")
	}
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Active > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := logs.String(); !strings.Contains(got, "status=499 reason=client-gone") {
		t.Fatalf("access log: %q, want status 499", got)
	}
}

func TestLimits(t *testing.T) {
	noLeaks(t)
	var hits atomic.Int32
	be := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be), MaxBodyBytes: 10}
	addr, _ := startProxy(t, Config{Limits: httpLimits(1024, 10), HeaderTimeout: 300 * time.Millisecond}, one(rt))
	big := "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("x", 2000) + "\r\n\r\n"
	if got := statusOf(raw(t, addr, big)); !strings.HasPrefix(got, "HTTP/1.1 431 ") {
		t.Errorf("large head: %q, want 431", got)
	}
	many := "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: 1\r\n", 11) + "\r\n"
	if got := statusOf(raw(t, addr, many)); !strings.HasPrefix(got, "HTTP/1.1 431 ") {
		t.Errorf("many fields: %q, want 431", got)
	}
	if got := statusOf(raw(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world")); !strings.HasPrefix(got, "HTTP/1.1 413 ") {
		t.Errorf("large body: %q, want 413", got)
	}
	chunked := "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n"
	if got := statusOf(raw(t, addr, chunked)); !strings.HasPrefix(got, "HTTP/1.1 413 ") {
		t.Errorf("large chunked body: %q, want 413", got)
	}
	// Slowloris: half a head, then silence: 408 after HeaderTimeout.
	start := time.Now()
	if got := statusOf(raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n")); !strings.HasPrefix(got, "HTTP/1.1 408 ") {
		t.Errorf("slow head: %q, want 408", got)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("slow head cut after %v", d)
	}
	// Only the chunked request may have reached the backend (its head goes
	// up before the body grows too large); every other one was refused first.
	if n := hits.Load(); n > 1 {
		t.Errorf("the backend saw %d requests, want at most the chunked one", n)
	}
}

// TestRequestTimeout: a route's whole-exchange timeout answers 504 even
// when no response-header timeout is set (the sweeper ends the exchange).
func TestRequestTimeout(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := rawServer(t, func(c net.Conn) {
		defer c.Close()
		<-release
	})
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, hang), RequestTimeout: 200 * time.Millisecond}
	addr, _ := startProxy(t, Config{}, one(rt))
	start := time.Now()
	resp := raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	d := time.Since(start)
	if statusOf(resp) != "HTTP/1.1 504 Gateway Timeout" || !strings.Contains(resp, "upstream-timeout") {
		t.Fatalf("got:\n%s", resp)
	}
	if d < 200*time.Millisecond || d > 3*time.Second {
		t.Fatalf("answered after %v, want 200ms (+ a sweep or two, generously bounded)", d)
	}
}
