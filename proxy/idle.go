package proxy

import "net"

// The states of an HTTP/1.1 connection, for Shutdown and Stats.
const (
	connActive  = iota // reading, serving or answering a request
	connIdle           // waiting for the first byte of a request
	connClosing        // Shutdown closed it while it was idle
)

// awaitRequest waits for the first byte of the next request, up to
// IdleTimeout or the connection's max age, whichever comes first. It reports false when the connection is to close quietly:
// the client went away or stayed silent, the Server is shutting down, or
// Shutdown closed the connection while it waited.
func (c *h1conn) awaitRequest() bool {
	if c.br.Buffered() > 0 {
		return true // a pipelined request
	}
	if c.bw.Flush() != nil {
		return false
	}
	c.state.Store(connIdle)
	if c.s.flags.Load()&flagShutdown != 0 {
		return false // Shutdown's sweep of idle connections may have missed this one
	}
	_ = c.c.SetReadDeadline(c.idleDeadline())
	_, err := c.br.Peek(1)
	return c.state.CompareAndSwap(connIdle, connActive) && err == nil
}

// closeIdle closes the HTTP/1.1 connections waiting for a request. A
// connection whose first byte arrives at the same moment loses it (its
// client retries, as it would on any kept-alive connection closed under
// it); one that missed the sweep sees the shutdown flag before it waits.
func (s *Server) closeIdle() {
	sw := &s.sweep
	var idle []net.Conn
	sw.mu.Lock()
	for c := range sw.conns {
		if c.state.CompareAndSwap(connIdle, connClosing) {
			idle = append(idle, c.c) // read under the lock: c may be pooled once it is unregistered
		}
	}
	sw.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}

// countIdle returns how many HTTP/1.1 connections wait for a request.
func (s *Server) countIdle() int {
	sw := &s.sweep
	sw.mu.Lock()
	defer sw.mu.Unlock()
	n := 0
	for c := range sw.conns {
		if c.state.Load() == connIdle {
			n++
		}
	}
	return n
}
