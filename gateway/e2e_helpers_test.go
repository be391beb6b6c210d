package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/internal/syncbuf"
)

// backend is an HTTP/1.1 backend that counts what reaches it: requests
// (not the health checks), accepted TCP connections, and requests to
// /slow, which it holds for hold before answering (or until release is
// closed, if sooner). /health answers 503 while sick is set, else 200.
// Every other path answers "name path".
type backend struct {
	name     string
	addr     string
	hold     time.Duration
	release  chan struct{}
	requests atomic.Int64
	conns    atomic.Int64
	slow     atomic.Int64 // /slow requests that arrived
	sick     atomic.Bool
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// newBackend starts a backend whose /slow holds 500 ms.
func newBackend(t *testing.T, name string) *backend {
	t.Helper()
	return startBackend(t, &backend{name: name, hold: 500 * time.Millisecond})
}

// startBackend starts b (name, hold and release set).
func startBackend(t *testing.T, b *backend) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(b.serve)}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(countingListener{ln, &b.conns}) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	b.addr = ln.Addr().String()
	return b
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		if b.sick.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return
	case "/slow":
		b.requests.Add(1)
		b.slow.Add(1)
		t := time.NewTimer(b.hold) // the backend's work, not a test's wait
		defer t.Stop()
		select {
		case <-t.C:
		case <-b.release:
		case <-r.Context().Done():
			return
		}
	default:
		b.requests.Add(1)
	}
	fmt.Fprintf(w, "%s %s", b.name, r.URL.Path)
}

// writeFile writes text to path.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startFile loads the config file at path, builds and starts a gateway
// from it (so Reload reads the same file) and shuts it down at cleanup.
// Its log goes to a buffer that is printed when the test fails.
func startFile(t *testing.T, path string) *Gateway {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", buf.String())
		}
	})
	return launch(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
}

// eventually polls cond every 10 ms until it holds, failing the test
// after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// h1Client is an HTTP/1.1 keep-alive client; h2cClient speaks h2c with
// prior knowledge. Both are closed at cleanup.
func h1Client(t *testing.T) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	tr := &http.Transport{Protocols: p, MaxIdleConnsPerHost: 128}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func h2cClient(t *testing.T) *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// fetch sends one request and returns its status, header and body.
func fetch(t *testing.T, c *http.Client, method, url string, h http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if host := h.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// loadGen sends GET requests open loop: a 5 ms ticker sends whatever is
// due at rate per second since the start (a late tick catches up, so the
// average rate holds on a busy machine), each request on its own
// goroutine, at most maxInFlight at once — a request due while they are
// all busy is counted as skipped, not sent. Requests alternate over the
// clients; check judges a 2xx answer's body (nil: any body).
type loadGen struct {
	clients []*http.Client
	url     string
	rate    float64
	check   func(body string) bool

	sent, ok, transport, status, badBody, skipped atomic.Int64
	mu                                            sync.Mutex
	errs                                          []string // the first failures

	stop chan struct{}
	wg   sync.WaitGroup
}

const maxInFlight = 200

func startLoad(url string, rate float64, check func(string) bool, clients ...*http.Client) *loadGen {
	l := &loadGen{clients: clients, url: url, rate: rate, check: check, stop: make(chan struct{})}
	l.wg.Add(1)
	go l.run()
	return l
}

func (l *loadGen) run() {
	defer l.wg.Done()
	sem := make(chan struct{}, maxInFlight)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	began, issued := time.Now(), int64(0)
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		due := int64(time.Since(began).Seconds() * l.rate)
		for ; issued < due; issued++ {
			select {
			case sem <- struct{}{}:
			default:
				l.skipped.Add(1)
				continue
			}
			c := l.clients[issued%int64(len(l.clients))]
			l.sent.Add(1)
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() { <-sem }()
				l.one(c)
			}()
		}
	}
}

func (l *loadGen) one(c *http.Client) {
	resp, err := c.Get(l.url)
	if err != nil {
		l.transport.Add(1)
		l.fail(err.Error())
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		l.transport.Add(1)
		l.fail("body: " + err.Error())
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		l.status.Add(1)
		l.fail(fmt.Sprintf("status %d: %s", resp.StatusCode, body))
	case l.check != nil && !l.check(string(body)):
		l.badBody.Add(1)
		l.fail(fmt.Sprintf("body %q", body))
	default:
		l.ok.Add(1)
	}
}

func (l *loadGen) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 10 {
		l.errs = append(l.errs, msg)
	}
}

// Stop stops sending and waits for the requests in flight.
func (l *loadGen) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// verify fails the test unless every request sent succeeded and at least
// min were sent; it returns a one-line summary of the counts.
func (l *loadGen) verify(t *testing.T, min int64) string {
	t.Helper()
	sum := fmt.Sprintf("sent %d, ok %d, transport errors %d, non-2xx %d, bad bodies %d, skipped (in-flight cap) %d",
		l.sent.Load(), l.ok.Load(), l.transport.Load(), l.status.Load(), l.badBody.Load(), l.skipped.Load())
	if l.ok.Load() != l.sent.Load() {
		t.Errorf("load: %s; first failures:\n%s", sum, strings.Join(l.errs, "\n"))
	}
	if l.sent.Load() < min {
		t.Errorf("load: %s; want at least %d sent", sum, min)
	}
	return sum
}
