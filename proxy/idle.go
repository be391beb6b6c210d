package proxy

import (
	"bufio"
	"net"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/request"
)

// connBufs are an HTTP/1.1 connection's read buffer (a request head up
// to MaxHeaderBytes, plus room) and write buffer, 40.5 KiB with the
// default limits. A connection takes them from the Server's pool when the
// first byte of a request arrives and gives them back when it turns idle
// with nothing buffered, so that an idle connection holds none of them.
type connBufs struct {
	br *bufio.Reader
	bw *bufio.Writer
}

// takeBufs takes the connection's buffers from the pool.
func (c *h1conn) takeBufs() {
	b := c.s.bufs.Get().(*connBufs)
	b.br.Reset(&c.sc)
	b.bw.Reset(&c.sw)
	c.bufs, c.br, c.bw = b, b.br, b.bw
}

// dropBufs gives them back (their content is dropped: callers make sure
// nothing is buffered).
func (c *h1conn) dropBufs() {
	b := c.bufs
	if b == nil {
		return
	}
	b.br.Reset(nil)
	b.bw.Reset(nil)
	c.s.bufs.Put(b)
	c.bufs, c.br, c.bw = nil, nil, nil
	c.forgetRequest()
}

// forgetRequest drops what the last request left pointing into the read
// buffer — its head's fields, the View, the outbound description, the
// chunked body's reader, the record's strings — so that a connection
// that gave its buffers back does not keep them alive (an idle
// connection then costs ~4 KiB of heap, not ~17: TestIdleConnMemory).
func (c *h1conn) forgetRequest() {
	c.head.Reset()
	c.view = request.View{}
	clear(c.out.fields)
	c.out.method, c.out.path, c.out.query, c.out.host, c.out.upgrade = nil, nil, nil, nil, nil
	c.body.chunked = httpwire.ChunkedReader{}
	c.rec = record{}
}

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
//
// The wait is a one-byte read into the stash, with no buffer held: the
// buffers are taken when the byte has arrived (and the byte is the first
// the read buffer then yields).
func (c *h1conn) awaitRequest() bool {
	waited := false
	if c.bufs != nil {
		switch {
		case c.br.Buffered() > 0 || c.sc.has:
			// A pipelined request (the watcher may have read its first
			// byte, which finish cannot look at while it runs).
			c.eager = c.eager || c.deferred
			c.deferred = false
			return c.flush() == nil
		case c.deferred:
			arrived, wait := c.sendDeferred()
			if !wait {
				return arrived
			}
			waited = true
		case c.bw.Flush() != nil:
			return false
		}
	}
	c.state.Store(connIdle)
	if c.s.flags.Load()&flagShutdown != 0 {
		return false // Shutdown's sweep of idle connections may have missed this one
	}
	idle := c.idleDeadline()
	if c.bufs != nil {
		if !waited {
			if arrived, wait := c.awaitBusy(idle); !wait {
				return arrived
			}
		}
		c.dropBufs()
	}
	c.dl.SetRead(c.c, idle)
	n, _ := c.c.Read(c.one[:])
	if !c.state.CompareAndSwap(connIdle, connActive) || n == 0 {
		return false
	}
	c.sc.stash(c.one[0])
	c.takeBufs()
	_, _ = c.br.Peek(1) // the stashed byte, into the buffer (no read)
	return true
}

// busyWait is how long a connection that just answered keeps its buffers
// while it waits for the next request: a busy keep-alive client's next
// request usually comes sooner, and is then read straight into the buffer
// (no one-byte read, no second read for the rest); a connection quiet for
// longer gives them back.
const busyWait = 50 * time.Millisecond

// awaitBusy waits up to busyWait (or until idle, if sooner) with the
// buffers held. It reports whether a request arrived, or wait when the
// connection is still open and quiet and the wait goes on without them.
func (c *h1conn) awaitBusy(idle time.Time) (arrived, wait bool) {
	last := c.armBusy(idle)
	_, err := c.br.Peek(1)
	switch {
	case err == nil:
		return c.state.CompareAndSwap(connIdle, connActive), false
	case !isTimeout(err) || last || c.state.Load() != connIdle:
		return false, false // gone, silent until the idle deadline, or closed by Shutdown or age
	}
	return false, true
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
