package listener

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/overload"
)

func TestTLS(t *testing.T) {
	checkLeaks(t)
	srv, cli := selfSigned(t)
	var calls atomic.Int64
	e := &echoEngine{name: "e"}
	// A clock that does not move: the bucket (1 per second, burst 1) has
	// exactly one token.
	r := start(t, overload.Config{HandshakeRate: 1, Clock: &clock.Manual{}}, 0,
		Config{TLS: func() *tls.Config { calls.Add(1); return srv }}, e)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", r.addr, cli)
	if err != nil {
		t.Fatalf("first TLS connection: %v", err)
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if want := "e " + c.LocalAddr().String() + " " + r.addr + "\n"; err != nil || line != want {
		t.Fatalf("over TLS the engine said %q (%v), want %q", line, err, want)
	}
	if c2, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", r.addr, cli); err == nil {
		_ = c2.Close()
		t.Fatal("a second handshake in the same instant was admitted")
	}
	if n := r.gate.Stats().Refused[overload.ReasonHandshakeRate]; n != 1 {
		t.Errorf("handshake-rate refusals %d, want 1", n)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("Config.TLS called %d times, want once (the refused connection got no TLS)", n)
	}
}

// TestSwapLosesNothing: while four clients open connections one after
// another, half of them with a PROXY header, the engine is swapped back
// and forth; every connection is served by one engine or the other.
func TestSwapLosesNothing(t *testing.T) {
	checkLeaks(t)
	const clients, each = 4, 100
	a, b := &echoEngine{name: "A"}, &echoEngine{name: "B"}
	cfg := Config{ProxyFrom: loopback}
	r := start(t, overload.Config{}, 0, cfg, a)
	var (
		wg     sync.WaitGroup
		served atomic.Int64
		failed atomic.Int64
	)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				prefix := ""
				if (w+i)%2 == 0 {
					prefix = "PROXY TCP4 203.0.113.7 198.51.100.1 4567 443\r\n"
				}
				if serveOnce(r.addr, prefix) {
					served.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	swaps := 0
	for done := false; !done; swaps++ {
		next := Engine(b)
		if swaps%2 == 1 {
			next = a
		}
		r.Swap(cfg, next)
		time.Sleep(time.Millisecond)
		done = served.Load()+failed.Load() == clients*each
	}
	wg.Wait()
	if served.Load() != clients*each || failed.Load() != 0 {
		t.Fatalf("%d served, %d failed over %d swaps; want all %d served", served.Load(), failed.Load(), swaps, clients*each)
	}
	if n := a.conns.Load() + b.conns.Load(); n != clients*each {
		t.Errorf("engines saw %d connections, want %d", n, clients*each)
	}
	r.Swap(cfg, b)
	if line, err := send(t, r.addr, "ping\n"); err != nil || !strings.HasPrefix(line, "B ") {
		t.Errorf("after the last Swap: %q (%v), want engine B", line, err)
	}
}

// serveOnce opens one connection, sends prefix and a line, and reports
// whether an engine greeted it and echoed the line.
func serveOnce(addr, prefix string) bool {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, prefix+"ping\n"); err != nil {
		return false
	}
	br := bufio.NewReader(c)
	greeting, err := br.ReadString('\n')
	if err != nil || !(strings.HasPrefix(greeting, "A ") || strings.HasPrefix(greeting, "B ")) {
		return false
	}
	echo, err := br.ReadString('\n')
	return err == nil && echo == "ping\n"
}

// TestCloseEndsHeaderReads: Close closes the socket and the connections
// still waiting for their PROXY header; Serve returns nil.
func TestCloseEndsHeaderReads(t *testing.T) {
	checkLeaks(t)
	g, err := overload.New(overload.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoEngine{name: "e"}
	l := New(ln, g.Gate("c"), Config{ProxyFrom: loopback, HeaderTimeout: time.Hour}, e)
	served := make(chan error, 1)
	go func() { served <- l.Serve() }()
	c := dial(t, l.Addr().String())
	waitFor(t, "the connection to wait for its header", func() bool { return g.Stats().Open == 1 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes after Close, want the connection closed", n)
	}
	waitFor(t, "the ticket released", func() bool { return g.Stats().Open == 0 })
	if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		t.Error("the socket still accepts after Close")
	}
	if err := l.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if n := e.conns.Load(); n != 0 {
		t.Errorf("engine saw %d connections, want none", n)
	}
}
