package balancerhttp

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"go.uber.org/goleak"
)

// wait is the generous bound for anything polled: far above what a busy
// 2-core machine needs, reached only when a test is failing.
const wait = 10 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// backend is a loopback HTTP server that counts the requests it serves.
// It answers with its status (200 unless set) and its name as the body;
// after a delay when one is set; and, for a request with the query
// "block", it reports its name on entered and waits for release.
type backend struct {
	name    string
	srv     *httptest.Server
	addr    string
	count   atomic.Int64 // requests served, blocking ones included
	status  atomic.Int64 // 0 means 200
	delay   time.Duration
	entered chan string
	release chan struct{}
	once    sync.Once

	mu    sync.Mutex
	hosts []string // Host header of every request
}

func newBackend(t *testing.T, name string) *backend {
	t.Helper()
	b := &backend{name: name, release: make(chan struct{})}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	b.addr = b.srv.Listener.Addr().String()
	t.Cleanup(func() {
		b.unblock()
		b.srv.Close()
	})
	return b
}

func (b *backend) unblock() { b.once.Do(func() { close(b.release) }) }

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	b.count.Add(1)
	b.mu.Lock()
	b.hosts = append(b.hosts, r.Host)
	b.mu.Unlock()
	if r.URL.Query().Has("block") && b.entered != nil {
		b.entered <- b.name
		select {
		case <-b.release:
		case <-r.Context().Done():
		}
	}
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	if s := b.status.Load(); s != 0 {
		w.WriteHeader(int(s))
	}
	_, _ = io.WriteString(w, b.name)
}

// newSet returns a Set over the backends' addresses.
func newSet(t *testing.T, cfg balancer.SetConfig, bs ...*backend) *balancer.Set {
	t.Helper()
	set, err := balancer.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eps := make([]balancer.Endpoint, len(bs))
	for i, b := range bs {
		eps[i] = balancer.Endpoint{Addr: b.addr}
	}
	set.Update(0, eps)
	return set
}

// inner returns an http.Transport of the test's own, closed at the end.
func inner(t *testing.T) *http.Transport {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// get sends GET http://svc.example/path through rt and returns the body,
// failing the test on an error or a status other than want.
func get(t *testing.T, rt http.RoundTripper, want int, header ...string) string {
	t.Helper()
	body, err := tryGet(rt, want, header...)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// tryGet is get returning its failure, for goroutines other than the test's.
func tryGet(rt http.RoundTripper, want int, header ...string) (string, error) {
	req, err := http.NewRequest("GET", "http://svc.example/path?q=1", nil)
	if err != nil {
		return "", err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != want {
		return "", fmt.Errorf("status %d from %s, want %d", resp.StatusCode, body, want)
	}
	return string(body), nil
}

// counts returns the backends' request counts.
func counts(bs ...*backend) []int64 {
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.count.Load()
	}
	return out
}

// endpointOf returns addr's EndpointState from set's current snapshot.
func endpointOf(t *testing.T, set *balancer.Set, addr string) *balancer.EndpointState {
	t.Helper()
	s := set.Snapshot()
	for i := range s.Len() {
		if e := s.Endpoint(i); e.Addr() == addr {
			return e
		}
	}
	t.Fatalf("%s is not eligible", addr)
	return nil
}

// eventually polls cond until it holds or wait passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rtFunc is a canned inner RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closeCounter is a request or response body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

func newBody(s string) *closeCounter { return &closeCounter{Reader: strings.NewReader(s)} }

// goroutinesBack fails t if a goroutine not in ignore is still running
// after the wait.
func goroutinesBack(t *testing.T, ignore goleak.Option) {
	t.Helper()
	leakcheck.Verify(t, wait, ignore)
}
