package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
)

// conn is one pooled HTTP/1.1 connection with its buffers. One exchange at
// a time owns it (between get and release); the pool owns it while idle.
type conn struct {
	pool *Pool
	nc   net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	cw   httpwire.ChunkedWriter // over bw, for chunked request bodies

	// cancelFn is c.cancel as a func value, made once so that watching a
	// request's context allocates nothing for it.
	cancelFn func()
	// canceled is set before a context's end closes nc: the I/O errors that
	// follow are reported as KindCanceled.
	canceled atomic.Bool

	idleTimer *time.Timer // fires expire; stopped while in use
	idleSince time.Time   // guarded by pool.mu

	// deadline says a read or write deadline may be set on nc, to clear
	// before the next exchange.
	deadline bool
}

// dial opens a new connection (and its TLS session) within ConnectTimeout.
func (p *Pool) dial(ctx context.Context) (*conn, error) {
	p.dials.Add(1)
	dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	nc, err := p.dialer.DialContext(dctx, "tcp", p.addr)
	if err == nil && p.tls != nil {
		tc := tls.Client(nc, p.tls)
		if err = tc.HandshakeContext(dctx); err != nil {
			nc.Close()
		}
		nc = tc
	}
	if err != nil {
		p.dialFailures.Add(1)
		return nil, dialError(ctx, err)
	}
	c := &conn{
		pool: p,
		nc:   nc,
		br:   bufio.NewReaderSize(nc, readBufSize),
		bw:   bufio.NewWriterSize(nc, writeBufSize),
	}
	c.cancelFn = c.cancel
	c.idleTimer = time.AfterFunc(time.Hour, c.expire)
	c.idleTimer.Stop()
	return c, nil
}

// cancel runs when the context of the exchange on c ends: it closes the
// connection at once, which ends any read or write blocked on it.
func (c *conn) cancel() {
	c.canceled.Store(true)
	c.nc.Close()
}

func (c *conn) expire() { c.pool.expire(c) }

// close closes the connection for good.
func (c *conn) close() {
	c.idleTimer.Stop()
	c.nc.Close()
}

// setReadDeadline arms (d > 0) or clears the read deadline.
func (c *conn) setReadDeadline(d time.Duration) {
	switch {
	case d > 0:
		c.nc.SetReadDeadline(time.Now().Add(d))
		c.deadline = true
	case c.deadline:
		c.nc.SetReadDeadline(time.Time{})
	}
}

// setWriteDeadline arms (d > 0) the write deadline.
func (c *conn) setWriteDeadline(d time.Duration) {
	if d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
		c.deadline = true
	}
}

// clearDeadlines clears what an earlier exchange armed.
func (c *conn) clearDeadlines() {
	if c.deadline {
		c.nc.SetDeadline(time.Time{})
		c.deadline = false
	}
}
