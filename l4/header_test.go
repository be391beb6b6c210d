package l4

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/spillwayhq/spillway/clock"
)

// headerEcho is a backend that parses the PROXY header with go-proxyproto,
// writes one line "version command family source destination", then
// echoes.
func headerEcho(c net.Conn) {
	br := bufio.NewReader(c)
	h, err := proxyproto.Read(br)
	if err != nil {
		_, _ = fmt.Fprintf(c, "error %v\n", err)
		return
	}
	if _, err := fmt.Fprintf(c, "v%d %s %s %v %v\n", h.Version, command(h), family(h), h.SourceAddr, h.DestinationAddr); err != nil {
		return
	}
	_, _ = io.Copy(c, br)
}

func family(h *proxyproto.Header) string {
	switch {
	case h.TransportProtocol.IsIPv4():
		return "TCP4"
	case h.TransportProtocol.IsIPv6():
		return "TCP6"
	}
	return "UNSPEC"
}

func command(h *proxyproto.Header) string {
	if h.Command.IsLocal() {
		return "LOCAL"
	}
	return "PROXY"
}

// addrConn is a client connection as the listener package hands it over
// after reading a PROXY header: other addresses than its socket's.
type addrConn struct {
	net.Conn
	remote, local net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }
func (c *addrConn) LocalAddr() net.Addr  { return c.local }

func tcpAddr(s string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		panic(err)
	}
	return a
}

// serveConns accepts on a fresh 127.0.0.1 listener and hands each
// connection to p.ServeConn through wrap; it returns the address.
func serveConns(t *testing.T, p *Proxy, wrap func(net.Conn) net.Conn) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.ServeConn(wrap(c))
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return ln.Addr().String()
}

func TestProxyProtocolSent(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, headerEcho)
	for _, c := range []struct {
		name          string
		version       int
		remote, local string
		want          string
	}{
		{"v1 tcp4", 1, "203.0.113.7:4567", "198.51.100.1:443", "v1 PROXY TCP4 203.0.113.7:4567 198.51.100.1:443"},
		{"v2 tcp4", 2, "203.0.113.7:4567", "198.51.100.1:443", "v2 PROXY TCP4 203.0.113.7:4567 198.51.100.1:443"},
		{"v1 tcp6", 1, "[2001:db8::7]:4567", "[2001:db8::1]:443", "v1 PROXY TCP6 [2001:db8::7]:4567 [2001:db8::1]:443"},
		{"v2 tcp6", 2, "[2001:db8::7]:4567", "[2001:db8::1]:443", "v2 PROXY TCP6 [2001:db8::7]:4567 [2001:db8::1]:443"},
		// Mixed families: sent as TCP6, the IPv4 address v4-mapped (which
		// net.IP prints as IPv4).
		{"v2 mixed", 2, "[2001:db8::7]:4567", "198.51.100.1:443", "v2 PROXY TCP6 [2001:db8::7]:4567 198.51.100.1:443"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(Config{Set: newSet(t, clk, a.addr()), Clock: clk, ProxyProtocol: c.version})
			if err != nil {
				t.Fatal(err)
			}
			addr := serveConns(t, p, func(nc net.Conn) net.Conn {
				return &addrConn{Conn: nc, remote: tcpAddr(c.remote), local: tcpAddr(c.local)}
			})
			line, echo := exchange(t, addr, "after the header")
			if line != c.want || echo != "after the header" {
				t.Errorf("backend saw %q and echoed %q; want %q and the bytes sent", line, echo, c.want)
			}
		})
	}
}

// TestProxyProtocolSentPlain: through Serve, the header carries the
// client's socket address and the proxy's listening address.
func TestProxyProtocolSentPlain(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, headerEcho)
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr()), Clock: clk, ProxyProtocol: 1})
	c := r.dial(t)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1 PROXY TCP4 " + c.LocalAddr().String() + " " + r.addr + "\n"; line != want {
		t.Errorf("backend saw %q, want %q", line, want)
	}
}

func TestNoProxyProtocolByDefault(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, headerEcho)
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr()), Clock: clk})
	line, _ := exchange(t, r.addr, "GET / HTTP/1.1\r\n\r\n")
	if want := "error " + proxyproto.ErrNoProxyProtocol.Error(); line != want {
		t.Errorf("backend saw %q, want %q (no header sent)", line, want)
	}
}

// exchange dials addr, writes msg, and returns the backend's first line and
// what it echoed of msg.
func exchange(t *testing.T, addr, msg string) (line, echo string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(c)
	line, err = br.ReadString('\n')
	if err != nil {
		return strings.TrimSuffix(line, "\n"), ""
	}
	rest, _ := io.ReadAll(br)
	return strings.TrimSuffix(line, "\n"), string(rest)
}

func TestServeConnAfterShutdown(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	p, err := New(Config{Set: newSet(t, clk, deadAddr(t)), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	client, server := net.Pipe()
	defer client.Close()
	p.ServeConn(server) // returns at once, server closed
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after ServeConn on a shut proxy: %v, want EOF", err)
	}
	if s := p.Stats(); s.Accepted != 1 || s.Refused != 0 || s.Active != 0 {
		t.Errorf("stats %+v, want 1 accepted, none refused or active", s)
	}
}
