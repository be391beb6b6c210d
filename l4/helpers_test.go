package l4

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// checkLeaks fails t if goroutines started after this call outlive the
// test's cleanups; call it first, so that its check runs last.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, ignore) })
}

// backend is a TCP server on 127.0.0.1:0 running handle on every
// connection; closed, with its connections, at the test's end.
type backend struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startBackend(t testing.TB, handle func(net.Conn)) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{ln: ln}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			_ = c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *backend) addr() string { return b.ln.Addr().String() }

// greeter writes name and a newline, then echoes until EOF.
func greeter(name string) func(net.Conn) {
	return func(c net.Conn) {
		if _, err := io.WriteString(c, name+"\n"); err != nil {
			return
		}
		_, _ = io.Copy(c, c)
	}
}

// deadAddr returns an address on 127.0.0.1 where nothing listens.
func deadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// newSet returns a Set of addrs, in that order, with panic mode off.
func newSet(t testing.TB, clk clock.Clock, addrs ...string) *balancer.Set {
	t.Helper()
	set, err := balancer.NewSet(balancer.SetConfig{PanicThreshold: -1})
	if err != nil {
		t.Fatal(err)
	}
	var eps []balancer.Endpoint
	for _, a := range addrs {
		eps = append(eps, balancer.Endpoint{Addr: a})
	}
	set.Update(clk.Now(), eps)
	return set
}

// running is a Proxy serving a listener on 127.0.0.1:0.
type running struct {
	*Proxy
	addr   string
	served chan error // Serve's result
}

// startProxy serves a Proxy of cfg; the test's end shuts it down and
// requires Serve to have returned nil.
func startProxy(t testing.TB, cfg Config) *running {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &running{Proxy: p, addr: ln.Addr().String(), served: make(chan error, 1)}
	go func() { r.served <- p.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case err := <-r.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
			r.served <- err
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Shutdown")
		}
	})
	return r
}

// dial connects to the proxy.
func (r *running) dial(t testing.TB) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", r.addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// greeting dials the proxy and returns the backend's name line, or "" when
// the connection is closed without one.
func (r *running) greeting(t testing.TB) (*net.TCPConn, string) {
	t.Helper()
	c := r.dial(t)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && err != io.EOF {
		t.Fatalf("reading the greeting: %v", err)
	}
	return c, strings.TrimSuffix(line, "\n")
}

// waitFor polls cond until it holds, failing t after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitIdle waits until the proxy has no connection open.
func (r *running) waitIdle(t testing.TB) {
	t.Helper()
	waitFor(t, "no active connection", func() bool { return r.Stats().Active == 0 })
}

// inFlight returns the endpoint addr's in-flight count in set.
func inFlight(set *balancer.Set, addr string) int {
	snap := set.Snapshot()
	for i := range snap.Len() {
		if e := snap.Endpoint(i); e.Addr() == addr {
			return e.InFlight()
		}
	}
	return -1
}
