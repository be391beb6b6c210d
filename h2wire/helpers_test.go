package h2wire

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// checkLeaks fails t, after its cleanups, if a goroutine it started is
// still running 10 s later. Call it first, so it runs after the others.
func checkLeaks(t testing.TB) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
}

// server is a loopback listener serving every connection with Serve.
type server struct {
	ln      net.Listener
	serve   func(s *server, nc net.Conn) // serves one connection to its end
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
	served  []*Conn
	accepts atomic.Int64
}

// newServer starts a server of h with its own worker pool; it is closed,
// its connections served to the end and the pool closed when t ends.
func newServer(t testing.TB, cfg Config, h Handler) *server {
	if cfg.Pool == nil {
		cfg.Pool = NewPool(0, 0)
	}
	t.Cleanup(cfg.Pool.Close) // after the server's cleanup
	return listen(t, func(s *server, nc net.Conn) {
		c := NewConn(nc, nil, &cfg, h)
		s.mu.Lock()
		s.served = append(s.served, c)
		s.mu.Unlock()
		c.Serve()
	})
}

// listen starts a loopback server running serve on each connection,
// closed when t ends.
func listen(t testing.TB, serve func(s *server, nc net.Conn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, serve: serve, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *server) addr() string { return s.ln.Addr().String() }

func (s *server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepts.Add(1)
		s.mu.Lock()
		s.conns[nc] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(s, nc)
			s.mu.Lock()
			delete(s.conns, nc)
			s.mu.Unlock()
		}()
	}
}

// client returns an h2c client of the x/net Transport for s, closed when
// t ends.
func (s *server) client(t testing.TB, tweak func(*http2.Transport)) *http.Client {
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	if tweak != nil {
		tweak(tr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// url returns the h2c URL of path on s.
func (s *server) url(path string) string { return "http://" + s.addr() + path }

// waitFor polls cond every 5 ms for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
