package httpserver

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// Generous bounds: the configured timeouts are a few hundred milliseconds,
// and a connection counts as held if it is still open after closeWithin.
const (
	short       = 300 * time.Millisecond
	closeWithin = 10 * time.Second
)

// start serves h with cfg on a loopback port and returns the address. The
// server is closed, and goroutines checked for leaks, when the test ends.
func start(t *testing.T, cfg Config, h http.Handler) string {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Handler = h
	srv := New(cfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
		leakcheck.Verify(t, closeWithin, ignore)
	})
	return ln.Addr().String()
}

// dial opens n connections to addr, closed when the test ends.
func dial(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns[i] = c
	}
	return conns
}

// waitClosed reads from c until the server closes it, failing the test if
// it is still open after closeWithin. It returns what was read.
func waitClosed(t *testing.T, c net.Conn, r io.Reader) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(closeWithin))
	b, err := io.ReadAll(r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: still open after %v", c.LocalAddr(), closeWithin)
	}
	return string(b)
}

// waitAllClosed runs waitClosed on every connection at once.
func waitAllClosed(t *testing.T, conns []net.Conn) []string {
	t.Helper()
	out := make([]string, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { out[i] = waitClosed(t, c, c) })
	}
	wg.Wait()
	return out
}

// roundTrip sends a bodiless GET on c and reads the response.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(closeWithin))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// ok answers 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// isDeadline reports whether err is a deadline passing.
func isDeadline(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// post returns the start of a request with a body of n bytes.
func post(n int) string {
	return "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
}
