package proxy

import (
	"context"
	"net"
	"time"
)

// watcher notices a client that goes away while its request is upstream:
// once the request has been read, one goroutine blocks in a one-byte Read
// on the client connection. End of stream or a reset cancels the
// exchange's context, so the upstream attempt stops within milliseconds
// (seed 000: a server that keeps working for a client who left wastes
// capacity). A byte read instead (a pipelined next request) is kept for
// the engine. stop unblocks the Read with a past deadline and waits.
type watcher struct {
	c       *h1conn
	cancel  context.CancelFunc
	running bool
	gone    bool // the client went away (valid after stop)
	done    chan struct{}
}

// arm prepares a watch for one exchange, cancelling cancel.
func (w *watcher) arm(cancel context.CancelFunc) { w.cancel, w.gone = cancel, false }

func (w *watcher) start() {
	w.running = true
	_ = w.c.c.SetReadDeadline(time.Time{})
	go w.run(w.c.c)
}

// startLater is called by the body reader at the body's end: the watch
// then starts at once (RoundTrip is still waiting for the answer).
func (w *watcher) startLater() {
	if !w.running && w.cancel != nil {
		w.start()
	}
}

func (w *watcher) run(c net.Conn) {
	var b [1]byte
	n, err := c.Read(b[:])
	switch {
	case n == 1:
		w.c.sc.stash(b[0])
	case err != nil && !isTimeout(err):
		w.gone = true
		w.cancel()
	}
	w.done <- struct{}{}
}

// stop ends the watch and waits for its goroutine.
func (w *watcher) stop() {
	if w.running {
		_ = w.c.c.SetReadDeadline(aLongTimeAgo)
		<-w.done
		w.running = false
	}
	w.cancel = nil
}

var aLongTimeAgo = time.Unix(1, 0)

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
