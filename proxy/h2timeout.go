package proxy

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The bounds x/net/http2's transport lacks, for exchanges with HTTP/2
// clusters: the wait for the response head (headerTimer) and the silence
// of a streaming exchange (idleCut). The HTTP/1.1 pools bound both with
// read deadlines.

// headerTimer bounds the wait for an HTTP/2 upstream's response head from
// the end of the request body (so a client-streaming call, whose answer
// comes after the last message, is not cut while it sends). A nil
// *headerTimer does nothing.
type headerTimer struct {
	d      time.Duration
	cancel func()
	mu     sync.Mutex
	t      *time.Timer
	done   bool // the head arrived or the exchange failed: no timer any more
	fired  atomic.Bool
}

// newHeaderTimer returns a timer calling cancel d after start, or nil
// when d is not positive.
func newHeaderTimer(d time.Duration, cancel func()) *headerTimer {
	if d <= 0 {
		return nil
	}
	return &headerTimer{d: d, cancel: cancel}
}

// start says the request is sent: the wait for the head begins.
func (h *headerTimer) start() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done && h.t == nil {
		h.t = time.AfterFunc(h.d, func() { h.fired.Store(true); h.cancel() })
	}
}

// stop says the wait is over (head or error).
func (h *headerTimer) stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if h.t != nil {
		h.t.Stop()
	}
}

// timedOut reports whether the timer fired.
func (h *headerTimer) timedOut() bool { return h != nil && h.fired.Load() }

// startAtEOF is a request body that starts a headerTimer at its end.
type startAtEOF struct {
	r io.ReadCloser
	h *headerTimer
}

func (s startAtEOF) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.h.start()
	}
	return n, err
}

func (s startAtEOF) Close() error { return s.r.Close() }

// sendBody returns body, made to start h at its end; a request without a
// body starts h now.
func sendBody(body io.ReadCloser, h *headerTimer) io.ReadCloser {
	if h == nil {
		return body
	}
	if body == nil || body == http.NoBody {
		h.start()
		return body
	}
	return startAtEOF{body, h}
}

// idleCut ends a streaming route's exchange with an HTTP/2 cluster once
// the route's idle timeout passes with no byte in either direction (the
// HTTP/1.1 pools bound each upstream read themselves; x/net's transport
// has no such bound, so a stalled stream would be held forever). A nil
// *idleCut does nothing.
type idleCut struct {
	d     time.Duration
	t     *time.Timer
	fired atomic.Bool
}

// newIdleCut arms the cut for rt (nil unless rt is a streaming route to
// an HTTP/2 cluster with an idle timeout); it calls cancel when it fires.
func newIdleCut(rt *Route, cancel context.CancelFunc) *idleCut {
	if !rt.Streaming || rt.IdleTimeout <= 0 || rt.Cluster.H2 == nil {
		return nil
	}
	c := &idleCut{d: rt.IdleTimeout}
	c.t = time.AfterFunc(c.d, func() { c.fired.Store(true); cancel() })
	return c
}

// touch records a byte moved: the silence starts again.
func (c *idleCut) touch() {
	if c != nil {
		c.t.Reset(c.d)
	}
}

func (c *idleCut) stop() {
	if c != nil {
		c.t.Stop()
	}
}

// timedOut reports whether the cut fired.
func (c *idleCut) timedOut() bool { return c != nil && c.fired.Load() }

// touchReader touches c for every byte read from r.
type touchReader struct {
	r io.Reader
	c *idleCut
}

func (t touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.c.touch()
	}
	return n, err
}
