package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/internal/leakcheck"
	"go.uber.org/goleak"
)

// noLeaks snapshots the goroutines now; the returned func fails t if any
// started since is still running (give it to defer first, so it runs last).
func noLeaks(t *testing.T) func() {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		leakcheck.Verify(t, 10*time.Second, ignore)
	}
}

// server is a loopback HTTP server whose handler sees every request after
// the server stamped its arrival.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	stamps []time.Time // guarded by mu
	reqs   []seen      // guarded by mu
}

// seen is what the server recorded of one request.
type seen struct {
	path, query string
	header      http.Header
	body        string
}

// newServer starts a server on 127.0.0.1 running h (nil: answer 200 at
// once); close it before the leak check.
func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var body []byte
		if r.Body != nil {
			body = make([]byte, 0, 64)
			buf := make([]byte, 512)
			for {
				n, err := r.Body.Read(buf)
				body = append(body, buf[:n]...)
				if err != nil {
					break
				}
			}
		}
		s.mu.Lock()
		s.stamps = append(s.stamps, now)
		s.reqs = append(s.reqs, seen{path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: string(body)})
		s.mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	return s
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.stamps)
}

func (s *server) seenAll() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func (s *server) stampsAll() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.stamps...)
}

// run runs cfg and fails t on an error.
func run(t *testing.T, cfg Config) Result {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// total adds up the steps' Offered, Good, Retries and Attempts.
func total(res Result) (sum StepResult) {
	for _, s := range res.Steps {
		sum.Offered, sum.Good = sum.Offered+s.Offered, sum.Good+s.Good
		sum.Retries, sum.Attempts = sum.Retries+s.Retries, sum.Attempts+s.Attempts
	}
	return sum
}

// slow answers after d, or when the client leaves.
func slow(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
	}
}

// hangFirst hangs the first request of each URL query until its client
// leaves, and answers later ones at once: a call whose first attempt is
// lost.
type hangFirst struct {
	mu    sync.Mutex
	tries map[string]int // guarded by mu
}

func (h *hangFirst) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if h.tries == nil {
		h.tries = make(map[string]int)
	}
	h.tries[r.URL.RawQuery]++
	first := h.tries[r.URL.RawQuery] == 1
	h.mu.Unlock()
	if first {
		<-r.Context().Done()
	}
}

func (h *hangFirst) reset() {
	h.mu.Lock()
	clear(h.tries)
	h.mu.Unlock()
}
