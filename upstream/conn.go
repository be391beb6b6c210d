package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/internal/conndeadline"
	"github.com/spillwayhq/spillway/internal/sendwait"
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

	// idleTimer fires expire. It is armed when c goes idle and no firing
	// is pending (armed), and left pending while c is in use: expire then
	// leaves it unarmed, or re-arms it for what is left of a later idle
	// time, so that a busy connection costs no timer operation per
	// exchange.
	idleTimer *time.Timer
	armed     bool      // guarded by pool.mu
	idleSince time.Time // guarded by pool.mu

	// raw is the TCP socket under nc, for peerGone's peek; nil when nc has
	// none. peekFn is c.peek as a func value, made once.
	raw    syscall.RawConn
	peekFn func(fd uintptr) bool
	peeked peekResult
	peekB  [1]byte

	// send writes a bodiless request and waits for its answer in one
	// system call less (plaintext TCP only; internal/sendwait).
	send sendwait.Sender

	// dl tracks nc's deadlines. They are renewed lazily (conndeadline),
	// and an exchange leaves its read deadline armed when nothing more is
	// read for it: a busy connection costs no timer update per exchange.
	dl conndeadline.Conn
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
	c.peekFn = c.peek
	c.raw = rawConn(nc)
	c.send.Init(nc)
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

// setReadDeadline bounds the next reads by d of inactivity (d <= 0: no
// bound). A bound may fire up to conndeadline.Slack(d) late.
func (c *conn) setReadDeadline(d time.Duration) { c.dl.ArmRead(c.nc, time.Now(), d) }

// setWriteDeadline bounds the next writes by d of inactivity (d <= 0: no
// bound).
func (c *conn) setWriteDeadline(d time.Duration) { c.dl.ArmWrite(c.nc, time.Now(), d) }

// clearDeadlines clears what an earlier exchange armed.
func (c *conn) clearDeadlines() { c.dl.Clear(c.nc) }

// rawConn returns the socket under nc (a TCP connection, or TLS over one),
// or nil.
func rawConn(nc net.Conn) syscall.RawConn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// peerGone reports whether the server closed or reset the idle connection,
// or sent bytes on it unasked (a 408 before closing, say): either way it
// cannot carry an exchange. It peeks without blocking and without
// consuming.
func (c *conn) peerGone() bool {
	if c.br.Buffered() > 0 {
		return true
	}
	if c.raw == nil {
		return false
	}
	c.peeked = peekUnknown
	c.dl.SetRead(c.nc, time.Time{}) // a deadline left armed may have passed while idle, failing the peek
	if err := c.raw.Read(c.peekFn); err != nil {
		return true
	}
	return c.peeked != peekIdle
}

// peekResult is what peek saw on an idle connection.
type peekResult uint8

const (
	peekUnknown peekResult = iota
	peekIdle               // nothing to read: usable
	peekClosed             // EOF or an error: the server closed or reset it
	peekBytes              // bytes nobody asked for
)
