package proxy

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// watcher notices a client that goes away while its request is upstream,
// and ends exchanges that outlive their route's request timeout.
//
// Watching costs a goroutine blocked in a one-byte Read on the client
// connection, two deadline changes and a syscall, so it starts only for
// exchanges still running one sweep period (sweepEvery) after their
// request was read: the server's sweeper starts it. End of stream or a
// reset then cancels the exchange's context, so the upstream attempt
// stops within ~2 sweep periods (seed 000: work for a client who left is
// wasted). A byte read instead (a pipelined next request) is kept for the
// engine. The same sweep cancels exchanges past their deadline, so no
// timer is made per request.
type watcher struct {
	c    *h1conn
	done chan struct{}

	mu       sync.Mutex // with the sweeper
	cancel   context.CancelFunc
	deadline int64 // monotonic ns (since epoch) at which the exchange times out; 0: none
	since    int64 // tick at which the request was read; 0: not yet; -1: watching
	timedOut bool
	gone     bool // the client went away (valid after stop)
	stopping atomic.Bool
}

// sweepEvery is the sweeper's period: the delay before a slow exchange is
// watched, and the resolution of request timeouts.
const sweepEvery = 5 * time.Millisecond

// arm registers one exchange, cancelled by cancel, timing out after
// timeout (0: never).
func (w *watcher) arm(cancel context.CancelFunc, timeout time.Duration) {
	w.mu.Lock()
	w.cancel, w.since, w.timedOut, w.gone = cancel, 0, false, false
	w.deadline = 0
	if timeout > 0 {
		w.deadline = int64(time.Since(epoch) + timeout)
	}
	w.mu.Unlock()
}

// start says the request has been read: the client may be watched.
func (w *watcher) start() {
	now := w.c.s.sweep.tick.Load()
	w.mu.Lock()
	if w.cancel != nil && w.since == 0 {
		w.since = now + 1 // never 0
	}
	w.mu.Unlock()
}

// epoch is the origin of the watchers' deadlines (monotonic time).
var epoch = time.Now()

// sweep is the sweeper's visit at tick now, ns nanoseconds after epoch.
func (w *watcher) sweep(now, ns int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel == nil {
		return
	}
	if w.deadline != 0 && ns >= w.deadline {
		w.timedOut, w.deadline = true, 0
		w.cancel()
	}
	if w.since > 0 && now > w.since {
		w.since = -1
		w.stopping.Store(false)
		go w.run(w.c.c)
	}
}

func (w *watcher) run(c net.Conn) {
	_ = c.SetReadDeadline(time.Time{})
	if !w.stopping.Load() { // stop sets stopping before its past deadline
		var b [1]byte
		n, err := c.Read(b[:])
		switch {
		case n == 1:
			w.c.sc.stash(b[0])
		case err != nil && !isTimeout(err):
			w.mu.Lock()
			w.gone = true
			if w.cancel != nil {
				w.cancel()
			}
			w.mu.Unlock()
		}
	}
	w.done <- struct{}{}
}

// stop ends the exchange's watch, waiting for a watching goroutine.
func (w *watcher) stop() {
	w.mu.Lock()
	watching := w.since == -1
	w.cancel, w.since, w.deadline = nil, 0, 0
	w.mu.Unlock()
	if watching {
		w.stopping.Store(true)
		_ = w.c.c.SetReadDeadline(aLongTimeAgo)
		<-w.done
		w.c.dl.Forget() // the watcher cleared the read deadline, or stop's came last
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// sweeper visits the server's HTTP/1.1 connections every sweepEvery while
// there are any (its goroutine exits when the last one closes): their
// watchers, and their max age.
type sweeper struct {
	tick    atomic.Int64
	mu      sync.Mutex
	conns   map[*h1conn]struct{}
	running bool
}

func (s *Server) register(c *h1conn) {
	sw := &s.sweep
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.conns == nil {
		sw.conns = make(map[*h1conn]struct{})
	}
	sw.conns[c] = struct{}{}
	if !sw.running {
		sw.running = true
		go sw.run()
	}
}

func (s *Server) unregister(c *h1conn) {
	s.sweep.mu.Lock()
	delete(s.sweep.conns, c)
	s.sweep.mu.Unlock()
}

func (sw *sweeper) run() {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for range t.C {
		now, ns := sw.tick.Add(1), int64(time.Since(epoch))
		sw.mu.Lock()
		if len(sw.conns) == 0 {
			sw.running = false
			sw.mu.Unlock()
			return
		}
		for c := range sw.conns {
			c.checkAge(ns) // idle ones too: a client that pauses between requests is idle most of the time
			if c.state.Load() == connIdle {
				continue // no exchange to watch
			}
			c.watch.sweep(now, ns)
		}
		sw.mu.Unlock()
	}
}

// stashConn is the client connection as the engine's reader sees it: a
// byte the watcher read comes first.
type stashConn struct {
	net.Conn
	b   byte
	has bool
}

func (s *stashConn) stash(b byte) { s.b, s.has = b, true }

func (s *stashConn) Read(p []byte) (int, error) {
	if s.has && len(p) > 0 {
		p[0], s.has = s.b, false
		return 1, nil
	}
	return s.Conn.Read(p)
}
