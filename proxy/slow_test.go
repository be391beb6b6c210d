package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/upstream"
)

// Slow and oversized clients: each is cut with the right status, the
// connection closed, the upstream exchange (if any) aborted, and no
// goroutine left behind (noLeaks).

// trickle writes s to c one byte every 100 ms until done, s is sent or a
// write fails; it returns how many bytes were written.
func trickle(c net.Conn, s string, done <-chan struct{}) int {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; i < len(s); i++ {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return i
		}
		select {
		case <-done:
			return i + 1
		case <-t.C:
		}
	}
	return len(s)
}

// slowHead is a head of 95 bytes: trickled at 10 bytes a second it takes
// almost 10 s to arrive.
const slowHead = "GET /slow HTTP/1.1\r\nHost: a\r\nUser-Agent: slowloris\r\nX-Padding: " +
	"0123456789012345678901234567\r\n\r\n"

// slowloris trickles slowHead on a new connection and returns what the
// proxy answered (read until it closed the connection), how many bytes had
// been sent by then, and how long after the first byte the answer ended.
func slowloris(t testing.TB, addr string) (string, int, time.Duration) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return "", 0, 0
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	done := make(chan struct{})
	sent := make(chan int, 1)
	start := time.Now()
	go func() { sent <- trickle(c, slowHead, done) }()
	b, _ := io.ReadAll(c) // until the proxy closes (EOF) or resets
	d := time.Since(start)
	close(done)
	return string(b), <-sent, d
}

// TestSlowlorisHeadCut: a head trickled a byte per 100 ms is cut by the
// 500 ms HeaderTimeout (a bound on the whole head, not re-armed per byte)
// with 408 header-timeout and the connection closed, long before it is
// complete; the upstream never sees it.
func TestSlowlorisHeadCut(t *testing.T) {
	noLeaks(t)
	var hits atomic.Int32
	be := backend(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{HeaderTimeout: 500 * time.Millisecond}, one(rt))
	resp, sent, d := slowloris(t, addr)
	if got := statusOf(resp); got != "HTTP/1.1 408 Request Timeout" {
		t.Fatalf("status %q, want 408:\n%s", got, resp)
	}
	if !strings.Contains(resp, "Spillway-Reason: header-timeout\r\n") || !strings.Contains(resp, "Connection: close\r\n") {
		t.Fatalf("want reason header-timeout and Connection: close:\n%s", resp)
	}
	if sent >= len(slowHead) {
		t.Fatalf("the whole head (%d bytes) was sent before the cut", sent)
	}
	if d < 450*time.Millisecond {
		t.Fatalf("cut after %v, before the 500 ms HeaderTimeout", d)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the backend saw %d requests", n)
	}
	t.Logf("cut after %v and %d of %d bytes", d.Round(time.Millisecond), sent, len(slowHead))
}

// TestSlowlorisHundred: 100 slowloris connections at once are all cut with
// 408, and every goroutine they caused ends (noLeaks).
func TestSlowlorisHundred(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{HeaderTimeout: 500 * time.Millisecond}, one(rt))
	const n = 100
	var wg sync.WaitGroup
	var cut atomic.Int32
	for range n {
		wg.Go(func() {
			resp, sent, _ := slowloris(t, addr)
			if statusOf(resp) == "HTTP/1.1 408 Request Timeout" && sent < len(slowHead) {
				cut.Add(1)
			} else {
				t.Errorf("not cut: %q after %d bytes", statusOf(resp), sent)
			}
		})
	}
	wg.Wait()
	if got := cut.Load(); got != n {
		t.Fatalf("%d of %d slowloris connections cut", got, n)
	}
}

// bodySink is a backend that reads each request body to its end and
// reports what it read and the read's error; started gets a value when
// the first body bytes of a request arrive.
type bodySink struct {
	got     chan sinkResult
	started chan struct{}
}

type sinkResult struct {
	n   int
	err error
}

func newBodySink(t *testing.T) (*bodySink, string) {
	s := &bodySink{got: make(chan sinkResult, 16), started: make(chan struct{}, 16)}
	addr := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var first [1]byte
		n, err := io.ReadFull(r.Body, first[:])
		s.started <- struct{}{}
		var b []byte
		if err == nil {
			b, err = io.ReadAll(r.Body)
		}
		s.got <- sinkResult{n + len(b), err}
		fmt.Fprintf(w, "%d", n+len(b))
	}))
	return s, addr
}

// wait returns the backend's next result, failing after 5 s.
func (s *bodySink) wait(t *testing.T) sinkResult {
	t.Helper()
	select {
	case r := <-s.got:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the backend never finished reading the body")
		return sinkResult{}
	}
}

// TestSlowBodyCut: a body whose bytes arrive every 100 ms passes a 500 ms
// BodyTimeout for 1 s (an inactivity bound, re-armed per read), then a
// silence longer than it gets 408 body-timeout, the connection closed, and
// the upstream exchange aborted: the backend's body read fails after the
// bytes sent so far.
func TestSlowBodyCut(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(map[bool]string{false: "length", true: "chunked"}[chunked], func(t *testing.T) {
			noLeaks(t)
			sink, be := newBodySink(t)
			rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
			addr, _ := startProxy(t, Config{BodyTimeout: 500 * time.Millisecond}, one(rt))
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			body := "0123456789"
			if chunked {
				fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
				body = "a\r\n0123456789\r\n" // one chunk, trickled
			} else {
				fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
			}
			trickle(c, body, nil) // 1 s of bytes, then silence
			resp, _ := io.ReadAll(c)
			if got := statusOf(string(resp)); got != "HTTP/1.1 408 Request Timeout" {
				t.Fatalf("status %q, want 408:\n%s", got, resp)
			}
			if !strings.Contains(string(resp), "Spillway-Reason: body-timeout\r\n") {
				t.Fatalf("want reason body-timeout:\n%s", resp)
			}
			r := sink.wait(t)
			if r.err == nil || r.n != 10 {
				t.Fatalf("backend read %d bytes, err %v; want the 10 bytes sent, then an error", r.n, r.err)
			}
		})
	}
}

// TestFastBodyNotCut: a 64 MiB upload at full speed passes a 200 ms
// BodyTimeout: the deadline bounds silence, not the body's duration.
func TestFastBodyNotCut(t *testing.T) {
	noLeaks(t)
	be := streamBackend(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{BodyTimeout: 200 * time.Millisecond}, one(rt))
	start := time.Now()
	if got := uploadH1(t, addr, 64*mib, false); got != 64*mib {
		t.Fatalf("backend counted %d bytes, want %d", got, 64*mib)
	}
	t.Logf("64 MiB in %v", time.Since(start).Round(time.Millisecond))
}

// TestOversizedHeads: the default limits (32 KiB, 100 fields) refuse a
// larger head with 431 and close the connection; a head at the field limit
// passes. The backend sees only the one that passes.
func TestOversizedHeads(t *testing.T) {
	noLeaks(t)
	var hits atomic.Int32
	be := backend(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{}, one(rt))
	fields := func(n int) string { // Host and n-1 more fields
		var b strings.Builder
		b.WriteString("GET / HTTP/1.1\r\nHost: a\r\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "X-F%d: v\r\n", i)
		}
		return b.String() + "Connection: close\r\n\r\n"
	}
	cases := []struct {
		name, req, status, detail string
	}{
		// Connection: close is one of the fields: 99 + Host + it = 101.
		{"100 fields", fields(99), "HTTP/1.1 200 OK", ""},
		{"101 fields", fields(100), "HTTP/1.1 431 Request Header Fields Too Large", "too many header fields"},
		{"one 33 KiB field", "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", 33<<10) + "\r\n\r\n",
			"HTTP/1.1 431 Request Header Fields Too Large", "header section too large"},
		{"40 KiB of small fields", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: "+strings.Repeat("a", 400)+"\r\n", 99) + "\r\n",
			"HTTP/1.1 431 Request Header Fields Too Large", "header section too large"},
	}
	for _, tc := range cases {
		resp := raw(t, addr, tc.req)
		if got := statusOf(resp); got != tc.status {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.status)
			continue
		}
		if tc.detail != "" && (!strings.Contains(resp, `"detail":"`+tc.detail+`"`) || !strings.Contains(resp, "Connection: close\r\n")) {
			t.Errorf("%s: want detail %q and Connection: close:\n%s", tc.name, tc.detail, resp)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the backend saw %d requests, want 1", n)
	}
}

// TestClientGoneMidBody: a client that disconnects (or resets) in the
// middle of its body aborts the upstream exchange: the backend's body read
// fails after what was sent, and no goroutine is left.
func TestClientGoneMidBody(t *testing.T) {
	cases := []struct {
		name, head string
		reset      bool
	}{
		{"length close", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n", false},
		{"length reset", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n", true},
		{"chunked close", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			sink, be := newBodySink(t)
			rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
			addr, _ := startProxy(t, Config{}, one(rt))
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprint(c, tc.head)
			if _, err := c.Write(pattern[:16<<10]); err != nil {
				t.Fatal(err)
			}
			// Wait until the backend has the head and part of the body:
			// the proxy streams each read through at once.
			select {
			case <-sink.started:
			case <-time.After(5 * time.Second):
				t.Fatal("the body never reached the backend")
			}
			if tc.reset {
				_ = c.(*net.TCPConn).SetLinger(0)
			}
			_ = c.Close()
			r := sink.wait(t)
			if r.err == nil || r.n == 0 || r.n >= 1<<20 {
				t.Fatalf("backend read %d bytes, err %v; want part of the body, then an error", r.n, r.err)
			}
		})
	}
}

// TestSlowReaderCut: a client that asks for a large body and stops reading
// is cut once the proxy's writes block for SendTimeout (300 ms), and the
// upstream exchange is aborted: the backend's writes fail.
func TestSlowReaderCut(t *testing.T) {
	noLeaks(t)
	wrote := make(chan error, 1)
	be := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := w.Write(pattern); err != nil {
				wrote <- err
				return
			}
		}
	}))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{SendTimeout: 300 * time.Millisecond}, one(rt))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET /endless HTTP/1.1\r\nHost: a\r\n\r\n")
	select { // the socket buffers on the way fill, then the cut
	case err := <-wrote:
		t.Logf("backend write failed: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the backend is still writing to a client that stopped reading")
	}
	// What was buffered arrives, then the end: the proxy closed.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if isTimeout(err) {
		t.Fatalf("the client connection is still open after %d bytes", n)
	}
}
