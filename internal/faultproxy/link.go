package faultproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds the proxy's connect to its target.
const dialTimeout = 5 * time.Second

// link is one proxied connection: the client's and the proxy's own to the
// target.
type link struct {
	p      *Proxy
	client net.Conn
	server net.Conn
	once   sync.Once
	done   chan struct{} // closed when the link is closed or reset
	// gone: the server's side ended while black-holed, so its end was
	// not passed on; the client learns it when it next sends after the
	// black hole (forward resets the link), as a host answers a packet
	// for a socket it no longer has with an RST.
	gone atomic.Bool
}

// handle connects c to the target and pumps both ways until both are done.
// If the target cannot be reached, c is closed.
func (p *Proxy) handle(c net.Conn) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		c.Close()
		return
	}
	l := &link{p: p, client: c, server: s, done: make(chan struct{})}
	if !p.register(l) {
		return
	}
	defer p.unregister(l)
	var wg sync.WaitGroup
	wg.Go(func() { l.pump(c, s) })
	l.pump(s, c)
	wg.Wait()
	l.close()
}

// register adds l to the open links, or closes it if the proxy is closed;
// a link that arrives in Reset is reset.
func (p *Proxy) register(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		l.close()
		return false
	}
	p.conns[l] = struct{}{}
	if p.state.Load().mode == Reset {
		l.reset()
	}
	return true
}

func (p *Proxy) unregister(l *link) {
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// pump copies src to dst chunk by chunk, each as the mode says. The end of
// src (a FIN) is passed on as a half-close of dst, except in a black hole;
// an error closes the link.
func (l *link) pump(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.forward(dst, buf[:n]) {
			l.close()
			return
		}
		if err != nil && src == l.server && l.p.state.Load().mode == BlackHole {
			l.gone.Store(true)
			return
		}
		if err == io.EOF {
			if l.p.state.Load().mode != BlackHole {
				closeWrite(dst)
			}
			return
		}
		if err != nil {
			l.close()
			return
		}
	}
}

// forward writes b to dst as the mode says; false ends the link.
func (l *link) forward(dst net.Conn, b []byte) bool {
	s := l.p.state.Load()
	switch s.mode {
	case BlackHole:
		l.p.dropped.Add(int64(len(b)))
		return true
	case Reset:
		return false
	}
	if dst == l.server && l.gone.Load() {
		l.reset()
		return false
	}
	switch s.mode {
	case Delay:
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			return false
		}
	}
	_, err := dst.Write(b)
	return err == nil
}

// closeWrite half-closes c, or closes it if it cannot half-close.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok && tc.CloseWrite() == nil {
		return
	}
	c.Close()
}

// close closes both connections (a FIN each); later calls do nothing.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.server.Close()
	})
}

// reset closes both connections with an RST, unless the link is closed
// already.
func (l *link) reset() {
	l.once.Do(func() {
		l.p.resets.Add(1)
		close(l.done)
		resetConn(l.client)
		resetConn(l.server)
	})
}
