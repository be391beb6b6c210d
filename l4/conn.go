package l4

import (
	"errors"
	"net"
	"sync"

	"github.com/spillwayhq/spillway/balancer"
)

// conn is one proxied connection: the client's, the upstream's once
// dialled, and the idle clock both directions share.
type conn struct {
	p      *Proxy
	client net.Conn // immutable

	mu       sync.Mutex
	upstream net.Conn // guarded by mu; nil until dialled
	closed   bool     // guarded by mu: close has run

	idle idleClock
	up   pump // client → upstream
	down pump // upstream → client
}

// serve proxies the connection to its end and unregisters it.
func (c *conn) serve() {
	defer c.p.done(c)
	defer c.close()
	up, ep, connect, ok := c.connect()
	if !ok {
		return
	}
	defer func() { ep.Done(c.p.clk.Now(), connect, true) }()
	if !c.setUpstream(up) || !c.sendHeader(up) {
		return
	}
	c.idle.start(c.p)
	c.up = pump{c: c, src: c.client, dst: up, count: &c.p.bytesUp}
	c.down = pump{c: c, src: up, dst: c.client, count: &c.p.bytesDown}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		c.down.run()
	}()
	c.up.run()
	<-finished
}

// connect picks an endpoint and dials it, trying other endpoints after a
// failed dial. It returns the upstream connection, its endpoint (started:
// the caller owes one Done) and the connect time in seconds; ok false when
// the client connection is to be closed.
func (c *conn) connect() (up net.Conn, ep *balancer.EndpointState, connect float64, ok bool) {
	p := c.p
	var tried balancer.Tried
	for attempt := 0; attempt <= p.retries; attempt++ {
		start := p.clk.Now()
		ep = c.pick(start, &tried)
		if ep == nil {
			if attempt == 0 {
				p.noEndpoint.Add(1)
				p.log.Debug("l4: no eligible endpoint; connection closed", "client", c.client.RemoteAddr().String())
				return nil, nil, 0, false
			}
			break // every eligible endpoint has been tried
		}
		ep.Start()
		tried.Add(ep.Addr())
		nc, err := p.dialer.DialContext(p.dialCtx, "tcp", ep.Addr())
		end := p.clk.Now()
		if err == nil {
			return nc, ep, end - start, true
		}
		if p.dialCtx.Err() != nil {
			ep.Done(end, -1, false) // aborted by Shutdown: no sample, no failure
			return nil, nil, 0, false
		}
		ep.Done(end, end-start, false)
		p.dialFailures.Add(1)
		p.log.Debug("l4: dial failed", "endpoint", ep.Addr(), "attempt", attempt+1, "err", err)
	}
	p.unreachable.Add(1)
	return nil, nil, 0, false
}

// pick returns an eligible endpoint not in tried, or nil. Like
// balancerhttp.Transport it asks the picker again (three times) when the
// answer was tried already, and then takes the first untried endpoint of
// the snapshot, so a retry never dials an endpoint twice.
func (c *conn) pick(now float64, tried *balancer.Tried) *balancer.EndpointState {
	snap := c.p.set.Current(now)
	for range 4 {
		i, err := c.p.picker.Pick(snap, now)
		if err != nil || i < 0 || i >= snap.Len() {
			return nil
		}
		if ep := snap.Endpoint(i); !tried.Has(ep.Addr()) {
			return ep
		}
	}
	for i := range snap.Len() {
		if ep := snap.Endpoint(i); !tried.Has(ep.Addr()) {
			return ep
		}
	}
	return nil
}

// setUpstream records up, or closes it when the connection was closed
// meanwhile (Shutdown); it reports whether up was kept.
func (c *conn) setUpstream(up net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = up.Close()
		return false
	}
	c.upstream = up
	return true
}

// close closes both connections, once; either goroutine, the handler and
// Shutdown may call it.
func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

// closeIdle closes the connection for its idle timeout, counted once.
func (c *conn) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.p.idleClosed.Add(1)
		c.p.log.Debug("l4: idle timeout; connection closed", "client", c.client.RemoteAddr().String())
	}
	c.closeLocked()
}

func (c *conn) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	_ = c.client.Close()
	if c.upstream != nil {
		_ = c.upstream.Close()
	}
}

// errIdle ends a pump whose connection was idle for Config.IdleTimeout.
var errIdle = errors.New("l4: idle timeout")
