package backend

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// testClock is a clock the test sets, safe for concurrent use (handlers
// read it).
type testClock struct{ bits atomic.Uint64 }

func (c *testClock) Now() float64  { return math.Float64frombits(c.bits.Load()) }
func (c *testClock) Set(t float64) { c.bits.Store(math.Float64bits(t)) }

func newBackend(t *testing.T, cfg Config) *Backend {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// call is one request handed to ServeHTTP directly, in its own goroutine.
type call struct {
	rec    *httptest.ResponseRecorder
	cancel context.CancelFunc // the client leaves
	done   chan struct{}      // closed when ServeHTTP has returned
}

// serve starts a GET of path with the given header pairs (name, value, …).
func serve(b *Backend, path string, header ...string) *call {
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	c := &call{rec: httptest.NewRecorder(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		b.ServeHTTP(c.rec, r)
	}()
	return c
}

// wait waits up to 10 s for the call to end and returns its status and
// body.
func (c *call) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("ServeHTTP did not return within 10 s")
	}
	c.cancel()
	return c.rec.Code, c.rec.Body.String()
}

// waitFor polls cond every 2 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// statsAre waits until the backend's stats satisfy cond.
func statsAre(t *testing.T, b *Backend, what string, cond func(Stats) bool) {
	t.Helper()
	waitFor(t, what, func() bool { return cond(b.Stats()) })
	if s := b.Stats(); !cond(s) {
		t.Fatalf("%s: no longer so: %+v", what, s)
	}
}

// httpBackend serves b on a loopback port and returns its URL and a
// client. At the end the backend is closed, then the server, then the
// test fails if a goroutine it started is still running.
func httpBackend(t *testing.T, b *Backend) (string, *http.Client) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	srv := httptest.NewServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	t.Cleanup(func() {
		b.Close()
		tr.CloseIdleConnections()
		srv.Close()
		leakcheck.Verify(t, 10*time.Second, ignore)
	})
	return srv.URL, &http.Client{Transport: tr}
}
