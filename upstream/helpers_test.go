package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// checkLeaks fails t, after its cleanups, if a goroutine it started is
// still running 5 s later. Call it first, so it runs after the others.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, ignore) })
}

// backend is a raw TCP server on 127.0.0.1:0 that runs handle on each
// accepted connection, then closes it.
type backend struct {
	ln      net.Listener
	handle  func(c net.Conn)
	accepts atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
}

// newBackend starts a backend, closed when t ends.
func newBackend(t testing.TB, handle func(c net.Conn)) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{ln: ln, handle: handle, conns: map[net.Conn]bool{}}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *backend) addr() string { return b.ln.Addr().String() }

func (b *backend) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.accepts.Add(1)
		b.mu.Lock()
		b.conns[c] = true
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.handle(c)
			c.Close()
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
		}()
	}
}

// close stops accepting, closes every connection and waits for handlers.
func (b *backend) close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

var endOfHead = []byte("\r\n\r\n")

// canned answers every request head (bodiless requests) with resp, from a
// fixed buffer: it allocates nothing per request.
func canned(resp string) func(c net.Conn) {
	out := []byte(resp)
	return func(c net.Conn) {
		buf := make([]byte, 16<<10)
		n := 0
		for n < len(buf) {
			m, err := c.Read(buf[n:])
			if err != nil {
				return
			}
			n += m
			for {
				i := bytes.Index(buf[:n], endOfHead)
				if i < 0 {
					break
				}
				n = copy(buf, buf[i+4:n])
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}
	}
}

// readRequests reads requests with net/http's parser, handing each with its
// whole body (and trailers, in r.Trailer) to answer, which returns the raw
// response; the connection closes when answer returns "".
func readRequests(answer func(r *http.Request, body []byte) string) func(c net.Conn) {
	return func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			out := answer(r, body)
			if out == "" {
				return
			}
			if _, err := io.WriteString(c, out); err != nil {
				return
			}
		}
	}
}

// readHeadThen reads one request head from c, then runs then.
func readHeadThen(then func(c net.Conn, br *bufio.Reader)) func(c net.Conn) {
	return func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if string(line) == "\r\n" {
				break
			}
		}
		then(c, br)
	}
}

// untilEOF reads c until it fails and sends the time it did on seen.
func untilEOF(c net.Conn, seen chan<- time.Time) {
	io.Copy(io.Discard, c)
	seen <- time.Now()
}

const okHello = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"

// get builds a bodiless request for path.
func get(method, path string) *Request {
	return &Request{
		Method:     []byte(method),
		Head:       []byte(method + " " + path + " HTTP/1.1\r\nHost: backend\r\n\r\n"),
		Replayable: true,
	}
}

// do sends req and returns the status and the whole body, closing resp.
func do(t *testing.T, p *Pool, req *Request) (int, string, error) {
	t.Helper()
	var resp Response
	if err := p.RoundTrip(context.Background(), req, &resp); err != nil {
		return 0, "", err
	}
	defer resp.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.Head.Status, string(body), err
}

// wantKind fails t unless err is an *Error of kind k.
func wantKind(t *testing.T, err error, k Kind) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want an *Error of kind %v", err, err, k)
	}
	if e.Kind != k {
		t.Fatalf("error %v: kind %v, want %v", err, e.Kind, k)
	}
	return e
}

// eventually polls cond every 5 ms for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// open returns the backend's connections still open.
func (b *backend) open() []net.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	var cs []net.Conn
	for c := range b.conns {
		cs = append(cs, c)
	}
	return cs
}
