package upstream

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Pool holds one endpoint's HTTP/1.1 connections: the idle ones, kept
// most recently used first for the next RoundTrip, and a count of those open.
// It is safe for concurrent use; one mutex per Pool guards a few list
// operations per request (no dial, close or I/O under it).
//
// Bounds: at most MaxIdle idle connections, each closed after IdleTimeout
// (a timer per connection, armed when it goes idle unless already pending,
// re-armed when it fires early); at most MaxConns open
// when set, RoundTrips beyond waiting in FIFO order up to ConnectTimeout
// (the waiters are the callers themselves, so their number is bounded by
// the engine's concurrency).
type Pool struct {
	addr   string
	cfg    Config      // immutable, defaults applied
	tls    *tls.Config // immutable: cfg.TLS with ServerName set, nil for plaintext
	dialer net.Dialer  // immutable

	mu      sync.Mutex
	idle    []*conn   // guarded by mu: oldest first
	open    int       // guarded by mu: dialing, in use or idle
	waiters []*waiter // guarded by mu: FIFO of RoundTrips waiting under MaxConns
	closed  bool      // guarded by mu

	// staleCheck: a connection idle at least this long is checked for a
	// close (or stray bytes) from the server before it is reused (one
	// non-blocking peek, a system call); immutable after NewPool.
	staleCheck time.Duration

	dials, dialFailures, reused, stale atomic.Uint64
}

// staleCheckAfter is the idle time after which a connection is peeked at
// before reuse. Busy connections (reused within it) skip the system call;
// a quiet one is where a server's keep-alive timeout may have closed it.
const staleCheckAfter = 100 * time.Millisecond

// waiter is one RoundTrip waiting for a connection under MaxConns. Its
// channel (capacity 1, so handing over never blocks under mu) receives
// either an idle connection or nil: a free slot to dial into.
type waiter struct{ ch chan *conn }

// PoolStats is a snapshot of a Pool's counts.
type PoolStats struct {
	Open    int // connections dialing, in use or idle
	Idle    int // idle connections
	InUse   int // Open − Idle
	Waiting int // RoundTrips waiting for a connection under MaxConns
	// Dials counts dial attempts, DialFailures those that failed, Reused the
	// exchanges sent on a connection taken from the idle list, Stale the
	// idle connections found closed by the server (or holding stray bytes)
	// when taken, and closed instead of reused.
	Dials, DialFailures, Reused, Stale uint64
}

// NewPool returns an empty pool of connections to addr ("host:port"); cfg's
// zero fields take their defaults. With cfg.TLS set and no ServerName in
// it, the host part of addr is the server name verified.
func NewPool(addr string, cfg Config) *Pool {
	p := &Pool{addr: addr, cfg: cfg.withDefaults(), staleCheck: staleCheckAfter}
	if cfg.TLS != nil {
		p.tls = cfg.TLS.Clone()
		if p.tls.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				p.tls.ServerName = host
			}
		}
	}
	return p
}

// Addr returns the endpoint's address.
func (p *Pool) Addr() string { return p.addr }

// Stats returns the pool's counts now.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	s := PoolStats{Open: p.open, Idle: len(p.idle), Waiting: len(p.waiters)}
	p.mu.Unlock()
	s.InUse = s.Open - s.Idle
	s.Dials, s.DialFailures, s.Reused = p.dials.Load(), p.dialFailures.Load(), p.reused.Load()
	s.Stale = p.stale.Load()
	return s
}

// Close closes the idle connections now; connections in use are closed when
// released, and RoundTrips after Close fail with ErrPoolClosed (KindRefused).
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.open -= len(idle)
	for _, w := range p.waiters {
		p.open++ // the waiter finds the pool closed and gives the slot back
		w.ch <- nil
	}
	p.waiters = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// get returns a connection to send an exchange on: the most recently used
// idle one (reused true) unless fresh is set, else a new one — when MaxConns
// allows, else after a wait for a release.
func (p *Pool) get(ctx context.Context, fresh bool) (*conn, bool, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, false, &Error{Kind: KindRefused, Op: "get connection", Err: ErrPoolClosed}
		}
		c, idleFor, evict := p.popIdleLocked(fresh)
		if c != nil {
			p.mu.Unlock()
			if idleFor >= p.staleCheck && c.peerGone() {
				p.stale.Add(1)
				c.close()
				p.dropSlot()
				continue
			}
			p.reused.Add(1)
			return c, true, nil
		}
		if evict != nil {
			p.mu.Unlock()
			evict.close()
			continue
		}
		if !p.fullLocked() {
			p.open++
			p.mu.Unlock()
			return p.dialSlot(ctx)
		}
		w := &waiter{ch: make(chan *conn, 1)} // only when MaxConns are in use
		p.waiters = append(p.waiters, w)
		p.mu.Unlock()
		return p.wait(ctx, w)
	}
}

// popIdleLocked takes the most recently used idle connection: to use (c,
// idle for idleFor), or to close (evict: it expired, or fresh is set and it
// makes room for a new one under MaxConns; its slot is given back). Both are
// nil when there is none to take.
func (p *Pool) popIdleLocked(fresh bool) (c *conn, idleFor time.Duration, evict *conn) {
	n := len(p.idle)
	if n == 0 || (fresh && !p.fullLocked()) {
		return nil, 0, nil
	}
	c = p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	if idleFor = time.Since(c.idleSince); fresh || idleFor >= p.cfg.IdleTimeout {
		p.open--
		return nil, 0, c
	}
	return c, idleFor, nil
}

// fullLocked reports whether MaxConns connections are open.
func (p *Pool) fullLocked() bool { return p.cfg.MaxConns > 0 && p.open >= p.cfg.MaxConns }

// dialSlot dials into a slot already counted in open, giving it back when
// the dial fails.
func (p *Pool) dialSlot(ctx context.Context) (*conn, bool, error) {
	c, err := p.dial(ctx)
	if err != nil {
		p.dropSlot()
		return nil, false, err
	}
	return c, false, nil
}

// wait waits for w to be handed a connection or a slot, up to ConnectTimeout
// or ctx's end.
func (p *Pool) wait(ctx context.Context, w *waiter) (*conn, bool, error) {
	t := time.NewTimer(p.cfg.ConnectTimeout)
	defer t.Stop()
	var err error
	select {
	case c := <-w.ch:
		return p.handed(ctx, c)
	case <-t.C:
		err = &Error{Kind: KindPoolFull, Op: "wait for a connection", Err: ErrPoolFull}
	case <-ctx.Done():
		err = &Error{Kind: KindCanceled, Op: "wait for a connection", Err: context.Cause(ctx)}
	}
	p.mu.Lock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = slices.Delete(p.waiters, i, i+1)
			p.mu.Unlock()
			return nil, false, err
		}
	}
	p.mu.Unlock()
	// Handed something while giving up: pass it on.
	if c := <-w.ch; c != nil {
		p.release(c, true)
	} else {
		p.dropSlot()
	}
	return nil, false, err
}

// handed takes what a waiter was given: an idle connection, or a slot.
func (p *Pool) handed(ctx context.Context, c *conn) (*conn, bool, error) {
	if c != nil {
		p.reused.Add(1)
		return c, true, nil
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.dropSlot()
		return nil, false, &Error{Kind: KindRefused, Op: "get connection", Err: ErrPoolClosed}
	}
	return p.dialSlot(ctx)
}

// popWaiterLocked removes and returns the longest waiting RoundTrip, or nil.
func (p *Pool) popWaiterLocked() *waiter {
	if len(p.waiters) == 0 {
		return nil
	}
	w := p.waiters[0]
	copy(p.waiters, p.waiters[1:])
	p.waiters[len(p.waiters)-1] = nil
	p.waiters = p.waiters[:len(p.waiters)-1]
	return w
}

// release takes back a connection after an exchange: reuse says whether it
// may carry another one. A reusable connection goes to the longest waiter,
// else to the idle list while it holds fewer than MaxIdle; otherwise it is
// closed and its slot handed to a waiter.
func (p *Pool) release(c *conn, reuse bool) {
	p.mu.Lock()
	if reuse && !p.closed {
		if w := p.popWaiterLocked(); w != nil {
			p.mu.Unlock()
			w.ch <- c
			return
		}
		if len(p.idle) < p.cfg.MaxIdle {
			c.idleSince = time.Now()
			p.idle = append(p.idle, c)
			if !c.armed { // else expire, when it fires, re-arms it for the rest
				c.idleTimer.Reset(p.cfg.IdleTimeout)
				c.armed = true
			}
			p.mu.Unlock()
			return
		}
	}
	p.dropSlotLocked()
	p.mu.Unlock()
	c.close()
}

// dropSlot gives back the slot of a connection that is gone (closed, failed
// to dial, hijacked).
func (p *Pool) dropSlot() {
	p.mu.Lock()
	p.dropSlotLocked()
	p.mu.Unlock()
}

func (p *Pool) dropSlotLocked() {
	p.open--
	if w := p.popWaiterLocked(); w != nil {
		p.open++
		w.ch <- nil
	}
}

// expire closes c when its idle timer fires and it is still idle since
// IdleTimeout. It may have been taken and released again meanwhile: in
// use, it is left for its release to arm the timer; idle for less, the
// timer is armed for the rest of IdleTimeout.
func (p *Pool) expire(c *conn) {
	p.mu.Lock()
	c.armed = false
	i := -1
	for j, x := range p.idle {
		if x == c {
			i = j
			break
		}
	}
	if i < 0 {
		p.mu.Unlock()
		return
	}
	if idleFor := time.Since(c.idleSince); idleFor < p.cfg.IdleTimeout {
		c.idleTimer.Reset(p.cfg.IdleTimeout - idleFor)
		c.armed = true
		p.mu.Unlock()
		return
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	p.dropSlotLocked()
	p.mu.Unlock()
	c.close()
}
