package h2wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/httpwire"
)

func field(name, value string) httpwire.Field {
	return httpwire.Field{Name: []byte(name), Value: []byte(value)}
}

// fieldValue returns the value of the first field called name.
func fieldValue(fields []httpwire.Field, name string) (string, bool) {
	for _, f := range fields {
		if string(f.Name) == name {
			return string(f.Value), true
		}
	}
	return "", false
}

func TestGET(t *testing.T) {
	checkLeaks(t)
	type seen struct {
		method, scheme, authority, path, test, cookie string
		cl                                            int64
	}
	got := make(chan seen, 1)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		v, _ := fieldValue(st.Fields(), "x-test")
		ck, _ := fieldValue(st.Fields(), "cookie")
		got <- seen{string(st.Method()), string(st.Scheme()), string(st.Authority()), string(st.Path()), v, ck, st.ContentLength()}
		st.WriteHeaders(200, []httpwire.Field{field("Content-Type", "text/plain"), field("X-Answer", "42")}, false)
		st.Write([]byte("hello"))
	}))
	c := s.client(t, nil)
	req, _ := http.NewRequest("GET", s.url("/a/b?q=1"), nil)
	req.Header.Set("X-Test", "yes")
	req.Header.Add("Cookie", "a=1; b=2")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "hello" {
		t.Fatalf("body %q, %v", body, err)
	}
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || resp.Header.Get("Content-Type") != "text/plain" || resp.Header.Get("X-Answer") != "42" {
		t.Errorf("response %d %s %v", resp.StatusCode, resp.Proto, resp.Header)
	}
	want := seen{"GET", "http", s.addr(), "/a/b?q=1", "yes", "a=1; b=2", -1}
	if g := <-got; g != want {
		t.Errorf("handler saw %+v, want %+v", g, want)
	}
}

// pattern returns n deterministic bytes that are not all alike.
func pattern(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestPOSTEcho10MiB(t *testing.T) {
	checkLeaks(t)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		st.WriteHeaders(200, []httpwire.Field{field("content-length", fmt.Sprint(st.ContentLength()))}, false)
		buf := make([]byte, 20000)
		for {
			n, err := st.Read(buf)
			if _, werr := st.Write(buf[:n]); werr != nil {
				return
			}
			if err != nil {
				return
			}
		}
	}))
	c := s.client(t, nil)
	data := pattern(10 << 20)
	resp, err := c.Post(s.url("/echo"), "application/octet-stream", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(body, data) {
		t.Fatalf("echo: %d bytes back of %d, equal %v, %v", len(body), len(data), bytes.Equal(body, data), err)
	}
	if resp.ContentLength != int64(len(data)) {
		t.Errorf("content-length %d", resp.ContentLength)
	}
}

func TestTrailersBothWays(t *testing.T) {
	checkLeaks(t)
	got := make(chan string, 1)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		body, err := io.ReadAll(st)
		v, _ := fieldValue(st.Trailers(), "x-req-sum")
		got <- fmt.Sprintf("%s|%v|%s", body, err, v)
		st.WriteHeaders(200, []httpwire.Field{field("trailer", "x-resp-sum")}, false)
		st.Write([]byte("answer"))
		st.WriteTrailers([]httpwire.Field{field("X-Resp-Sum", "77")})
	}))
	c := s.client(t, nil)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", s.url("/t"), pr)
	req.Trailer = http.Header{"X-Req-Sum": nil}
	go func() {
		pw.Write([]byte("payload"))
		req.Trailer.Set("X-Req-Sum", "99")
		pw.Close()
	}()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "answer" || resp.Trailer.Get("X-Resp-Sum") != "77" {
		t.Errorf("response body %q (%v), trailers %v", body, err, resp.Trailer)
	}
	if g := <-got; g != "payload|<nil>|99" {
		t.Errorf("handler saw %q, want payload|<nil>|99", g)
	}
}

func TestHundredStreamsOneConn(t *testing.T) {
	checkLeaks(t)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		st.WriteHeaders(200, nil, false)
		st.Write(st.Path())
	}))
	c := s.client(t, nil)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/s/%d", i)
			resp, err := c.Get(s.url(path))
			if err != nil {
				bad.Add(1)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != path {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 || s.accepts.Load() != 1 {
		t.Errorf("%d of 100 failed, %d connections", bad.Load(), s.accepts.Load())
	}
}

func TestClientCancelMidBody(t *testing.T) {
	checkLeaks(t)
	started := make(chan struct{})
	result := make(chan error, 1)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		buf := make([]byte, 100)
		if _, err := io.ReadFull(st, buf); err != nil {
			result <- err
			return
		}
		close(started)
		<-st.Done()
		_, err := st.Read(buf)
		result <- err
	}))
	c := s.client(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url("/slow"), pr)
	go pw.Write(make([]byte, 100))
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	if err := <-result; !errors.Is(err, ErrStreamReset) {
		t.Errorf("Read after the client's cancel: %v, want ErrStreamReset", err)
	}
	if err := <-done; err == nil {
		t.Error("client request succeeded after its cancel")
	}
}

func TestHeaderListTooLarge(t *testing.T) {
	checkLeaks(t)
	var ran atomic.Int64
	s := newServer(t, Config{MaxHeaderListSize: 4096}, HandlerFunc(func(st *Stream) { ran.Add(1) }))
	c := s.client(t, nil)
	req, _ := http.NewRequest("GET", s.url("/big"), nil)
	req.Header.Set("X-Big", strings.Repeat("v", 6000))
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 431 {
			t.Errorf("status %d, want 431 (or a client-side refusal)", resp.StatusCode)
		}
	}
	// The connection still serves.
	resp, err = c.Get(s.url("/small"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("small request after a big one: %v", err)
	}
	resp.Body.Close()
	if ran.Load() != 1 {
		t.Errorf("handler ran %d times, want 1 (the small request)", ran.Load())
	}
}

// TestMaxConcurrentStreamsRespected: x/net's client, told 4 streams per
// connection, opens more connections for 12 requests held at once, and no
// connection runs more than 4 handlers. (StrictMaxConcurrentStreams, which
// would keep one connection, deadlocks in x/net's client when more requests
// wait than the limit: their reservations count as open streams.)
func TestMaxConcurrentStreamsRespected(t *testing.T) {
	checkLeaks(t)
	var mu sync.Mutex
	cur, peak := map[*Conn]int{}, map[*Conn]int{}
	var running atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	s := newServer(t, Config{MaxConcurrentStreams: 4}, HandlerFunc(func(st *Stream) {
		mu.Lock()
		cur[st.c]++
		peak[st.c] = max(peak[st.c], cur[st.c])
		mu.Unlock()
		running.Add(1)
		<-release
		mu.Lock()
		cur[st.c]--
		mu.Unlock()
	}))
	c := s.client(t, nil)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(s.url("/"))
			if err != nil || resp.StatusCode != 200 {
				t.Log(err)
				bad.Add(1)
				return
			}
			resp.Body.Close()
		}()
	}
	waitFor(t, "12 handlers", func() bool { return running.Load() == 12 })
	once.Do(func() { close(release) })
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for conn, p := range peak {
		if p > 4 {
			t.Errorf("connection %p ran %d handlers at once, over its 4", conn, p)
		}
	}
	if bad.Load() != 0 || len(peak) < 3 {
		t.Errorf("%d of 12 failed, %d connections (want at least 3)", bad.Load(), len(peak))
	}
}

// TestShutdown: GOAWAY NO_ERROR with the last stream id, the open stream
// finishes, a stream opened after it is refused, then the connection ends.
func TestShutdown(t *testing.T) {
	checkLeaks(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		if string(st.Path()) == "/block" {
			started <- struct{}{}
			<-release
		}
		st.WriteHeaders(200, nil, false)
		st.Write([]byte("done"))
	}))
	r := dialRaw(t, s, true)
	r.headers(1, true, get("/block")...)
	<-started
	s.mu.Lock()
	conn := s.served[0]
	s.mu.Unlock()
	shut := make(chan error, 1)
	go func() { shut <- conn.Shutdown(context.Background()) }()
	r.expect(goaway(http2.ErrCodeNo))
	r.headers(3, true, get("/late")...)
	r.expect(rst(3, http2.ErrCodeRefusedStream))
	close(release)
	r.expect(outcome{stream: 1, status: "200"})
	r.nc.Close() // the client goes, as it does after a GOAWAY
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestShutdownContext: a stream that does not finish is cut when the
// context ends; its handler sees Done.
func TestShutdownContext(t *testing.T) {
	checkLeaks(t)
	started := make(chan struct{}, 1)
	sawDone := make(chan struct{})
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		started <- struct{}{}
		<-st.Done()
		close(sawDone)
	}))
	r := dialRaw(t, s, true)
	r.headers(1, true, get("/stuck")...)
	<-started
	s.mu.Lock()
	conn := s.served[0]
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- conn.Shutdown(ctx) }()
	r.expect(goaway(http2.ErrCodeNo))
	cancel()
	if err := <-shut; !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want context.Canceled", err)
	}
	<-sawDone
}

// TestUnreadBodiesGiveBackWindow: handlers that answer without reading
// the body leave the connection window whole (what was buffered or still
// in flight is given back), so a connection keeps serving such requests
// past many times its window.
func TestUnreadBodiesGiveBackWindow(t *testing.T) {
	checkLeaks(t)
	s := newServer(t, Config{StreamWindow: 65535, ConnWindow: 65535, ReadTimeout: 5 * time.Second}, HandlerFunc(func(st *Stream) {
		var one [1]byte
		if _, err := io.ReadFull(st, one[:]); err != nil { // stalls if the window leaked
			st.WriteHeaders(500, nil, true)
			return
		}
		st.WriteHeaders(202, nil, true)
	}))
	c := s.client(t, nil)
	for i := range 20 {
		resp, err := c.Post(s.url("/"), "application/octet-stream", bytes.NewReader(make([]byte, 200<<10)))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	if s.accepts.Load() != 1 {
		t.Errorf("%d connections, want 1", s.accepts.Load())
	}
}

// TestPreRead: the bytes a sniffer already read (here the whole preface
// and part of the first frame) are served before the connection's.
func TestPreRead(t *testing.T) {
	checkLeaks(t)
	pool := NewPool(0, 0)
	t.Cleanup(pool.Close)
	cfg := Config{Pool: pool}
	s := listen(t, func(_ *server, nc net.Conn) {
		pre := make([]byte, len(http2.ClientPreface)+5)
		if _, err := io.ReadFull(nc, pre); err != nil {
			nc.Close()
			return
		}
		Serve(nc, pre, &cfg, smallAnswer)
	})
	resp, err := s.client(t, nil).Get(s.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Errorf("status %d, body %q", resp.StatusCode, body)
	}
}
