package listener

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/l4"
	"github.com/spillwayhq/spillway/overload"
)

// TestProxyProtocolThroughL4: a PROXY header read by the listener reaches
// the endpoint in the header l4 writes, and a half-close crosses both
// ways.
func TestProxyProtocolThroughL4(t *testing.T) {
	checkLeaks(t)
	be := headerBackend(t)
	clk := clock.NewReal()
	set, err := balancer.NewSet(balancer.SetConfig{PanicThreshold: -1})
	if err != nil {
		t.Fatal(err)
	}
	set.Update(clk.Now(), []balancer.Endpoint{{Addr: be}})
	p, err := l4.New(l4.Config{Set: set, Clock: clk, ProxyProtocol: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("l4 Shutdown: %v", err)
		}
	})
	r := start(t, overload.Config{}, 0, Config{ProxyFrom: loopback}, p)
	for _, c := range []struct{ name, header, want string }{
		{"header", "PROXY TCP4 203.0.113.7 198.51.100.1 4567 443\r\n", "203.0.113.7:4567 198.51.100.1:443"},
		{"no header", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, r.addr)
			want := c.want
			if want == "" {
				want = conn.LocalAddr().String() + " " + r.addr
			}
			if _, err := io.WriteString(conn, c.header+"hello"); err != nil {
				t.Fatal(err)
			}
			if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(conn) // to the EOF the half-close brings back
			if w := want + "\nhello"; err != nil || string(got) != w {
				t.Errorf("got %q (%v), want %q then EOF", got, err, w)
			}
		})
	}
}

// headerBackend parses each connection's PROXY header, writes "source
// destination\n", echoes until EOF and closes.
func headerBackend(t *testing.T) string {
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
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				h, err := proxyproto.Read(br)
				if err != nil {
					_, _ = fmt.Fprintf(c, "error %v\n", err)
					return
				}
				_, _ = fmt.Fprintf(c, "%v %v\n", h.SourceAddr, h.DestinationAddr)
				_, _ = io.Copy(c, br)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}
