// Package faultproxy is an in-process TCP proxy for tests, between a client
// and a real server on loopback, that fails the way networks and servers
// fail: it black-holes, resets, delays and refuses, switched while the test
// runs.
//
//	p := faultproxy.Start(t, redisAddr)
//	client := redis.NewClient(&redis.Options{Addr: p.Addr()})
//	p.BlackHole() // requests go unanswered
//	p.Pass()      // traffic flows again
//
// The modes:
//
//   - Pass forwards both ways.
//   - BlackHole forwards nothing: the proxy still accepts connections and
//     reads what either side sends, and drops it, as a black-holed route
//     drops packets. Existing connections stall as new ones do. A
//     connection that carried bytes during a black hole has lost them; its
//     client must give it up (as clients do after a timeout). A
//     connection whose target closed or reset its side during a black
//     hole learns it when its client next sends after the black hole: the
//     proxy resets it then, as a host answers a packet for a socket it no
//     longer has.
//   - Reset resets every connection (SO_LINGER 0, then close: an RST),
//     the existing ones at once and each new one as it is accepted; the
//     target's side is reset too.
//   - Delay(d) holds each chunk read from either side for d before writing
//     it on; chunks behind it wait their turn, so order is kept.
//   - Refuse closes the listening socket, so that connects are refused;
//     existing connections carry on as in Pass. Leaving Refuse for any
//     other mode listens again on the same port.
//
// Every goroutine the proxy starts ends by the test's cleanup, which
// closes the listener and every connection and waits for them.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mode is what the proxy does with connections and their bytes.
type Mode int

// The modes; see the package documentation.
const (
	Pass Mode = iota
	BlackHole
	Reset
	Delay
	Refuse
)

var modeNames = [...]string{"pass", "black-hole", "reset", "delay", "refuse"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode(?)"
}

// state is one mode and its delay, swapped as a whole.
type state struct {
	mode  Mode
	delay time.Duration
}

// Proxy is a TCP proxy to one target. Its methods are safe for concurrent
// use, except that the mode switches that listen again (leaving Refuse)
// fail the test like t.Fatal and so belong to the test's goroutine.
type Proxy struct {
	t      testing.TB
	target string
	addr   string // fixed at Start; kept across Refuse
	state  atomic.Pointer[state]
	done   chan struct{} // closed by close

	mu     sync.Mutex // guards ln, conns, closed and switching
	ln     net.Listener
	conns  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup

	accepted atomic.Int64
	dropped  atomic.Int64
	resets   atomic.Int64
}

// Start listens on 127.0.0.1 on a free port and forwards to target
// (host:port) in mode Pass until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	p := &Proxy{t: t, target: target, addr: ln.Addr().String(), done: make(chan struct{}),
		conns: make(map[*link]struct{})}
	p.state.Store(&state{mode: Pass})
	p.serve(ln)
	t.Cleanup(p.close)
	return p
}

// Addr returns the address clients dial, 127.0.0.1:port; it stays the same
// across Refuse.
func (p *Proxy) Addr() string { return p.addr }

// Mode returns the current mode and, in Delay, the delay.
func (p *Proxy) Mode() (Mode, time.Duration) {
	s := p.state.Load()
	return s.mode, s.delay
}

// Pass forwards traffic both ways.
func (p *Proxy) Pass() { p.set(state{mode: Pass}) }

// BlackHole accepts and reads, and forwards and answers nothing.
func (p *Proxy) BlackHole() { p.set(state{mode: BlackHole}) }

// Reset resets every connection, present and future.
func (p *Proxy) Reset() { p.set(state{mode: Reset}) }

// Delay holds every chunk for d before forwarding it.
func (p *Proxy) Delay(d time.Duration) { p.set(state{mode: Delay, delay: d}) }

// Refuse closes the listener: connects are refused until another mode.
func (p *Proxy) Refuse() { p.set(state{mode: Refuse}) }

// Stats counts what the proxy has done since Start.
type Stats struct {
	Accepted int64 // connections accepted
	Active   int   // connections open now
	Dropped  int64 // bytes read and dropped by BlackHole
	Resets   int64 // connections reset
	Gone     int   // open connections whose target's side ended in a black hole
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active, gone := len(p.conns), 0
	for l := range p.conns {
		if l.gone.Load() {
			gone++
		}
	}
	p.mu.Unlock()
	return Stats{Accepted: p.accepted.Load(), Active: active, Dropped: p.dropped.Load(), Resets: p.resets.Load(), Gone: gone}
}

// set switches the mode: it closes or reopens the listener as the mode
// needs and resets the open connections when the mode is Reset.
func (p *Proxy) set(s state) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.state.Store(&s)
	switch {
	case s.mode == Refuse && p.ln != nil:
		p.ln.Close()
		p.ln = nil
	case s.mode != Refuse && p.ln == nil:
		ln, err := relisten(p.addr)
		if err != nil {
			p.t.Fatalf("faultproxy: listening again on %s: %v", p.addr, err)
		}
		p.serveLocked(ln)
	}
	if s.mode == Reset {
		for l := range p.conns {
			l.reset()
		}
	}
}

// relisten listens on addr again, retrying for a while: the port was
// ours, but another process may hold it for a moment.
func relisten(addr string) (net.Listener, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return ln, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

// serveLocked makes ln the listener and starts its accept loop.
func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return // closed by Refuse or cleanup
			}
			time.Sleep(5 * time.Millisecond) // out of file descriptors, say: try again
			continue
		}
		p.accepted.Add(1)
		if p.state.Load().mode == Reset {
			p.resets.Add(1)
			resetConn(c)
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// close stops the proxy: the listener, every connection, every goroutine.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	close(p.done)
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for l := range p.conns {
		l.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// resetConn closes c with an RST rather than a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
