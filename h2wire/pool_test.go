package h2wire

import (
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestPoolReusesWorkers: sequential streams run on the same few workers
// (a worker parks after the client has its answer, so the next stream may
// find it still busy and start a second one; a goroutine per stream would
// make 200); idle workers exit after their idle time.
func TestPoolReusesWorkers(t *testing.T) {
	checkLeaks(t)
	pool := NewPool(0, 50*time.Millisecond)
	s := newServer(t, Config{Pool: pool}, smallAnswer)
	c := newByteClient(t, s)
	most := 0
	for i := range 200 {
		if n, err := c.get(); err != nil || n != len(helloBody) {
			t.Fatalf("GET %d: %d bytes, %v", i, n, err)
		}
		most = max(most, pool.Workers())
	}
	if most > 4 {
		t.Errorf("up to %d workers for 200 sequential streams, want at most 4", most)
	}
	waitFor(t, "the idle worker to exit", func() bool { return pool.Workers() == 0 })
	if n, err := c.get(); err != nil || n != len(helloBody) {
		t.Fatalf("GET after the idle exit: %d bytes, %v", n, err)
	}
}

// TestPoolFullRefuses: with every worker busy and the pool full, a new
// stream is refused with REFUSED_STREAM, and the connection goes on.
func TestPoolFullRefuses(t *testing.T) {
	checkLeaks(t)
	pool := NewPool(1, 0)
	s := newServer(t, Config{Pool: pool}, hostileHandler)
	r := dialRaw(t, s, true)
	r.headers(1, false, get("/block")...)
	waitFor(t, "the worker to be busy", func() bool { return pool.Workers() == 1 })
	r.headers(3, true, get("/")...)
	r.expect(rst(3, http2.ErrCodeRefusedStream))
	r.fr.WriteRSTStream(1, http2.ErrCodeCancel) // frees the worker
	waitFor(t, "stream 1 to end", func() bool {
		s.mu.Lock()
		c := s.served[0]
		s.mu.Unlock()
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.active == 0
	})
	r.headers(5, true, get("/")...)
	r.expect(outcome{stream: 5, status: "200"})
}
