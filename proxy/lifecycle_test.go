package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/upstream"
)

// acceptOne accepts one connection on a fresh loopback listener and hands
// it to serve, returning the listener's address and a channel closed when
// serve returned.
func acceptOne(t *testing.T, serve func(net.Conn)) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		serve(c)
	}()
	return ln.Addr().String(), done
}

// waitClosed fails t unless ch is closed within 5 s.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not done after 5 s", what)
	}
}

// TestServeConnSynchronous: ServeConn serves the connection in the
// caller's goroutine and returns once the client has gone.
func TestServeConnSynchronous(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(echo))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	s := NewServer(Config{}, one(rt))
	addr, done := acceptOne(t, s.ServeConn)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: a\r\n\r\n", i)
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	select {
	case <-done:
		t.Fatal("ServeConn returned while the connection was kept alive")
	default:
	}
	if st := s.Stats(); st.Active != 1 {
		t.Fatalf("stats %+v, want 1 active", st)
	}
	_ = c.Close()
	waitClosed(t, done, "ServeConn after the client closed")
	if st := s.Stats(); st.Active != 0 {
		t.Fatalf("stats %+v after the connection ended, want 0 active", st)
	}
}

// TestServeConnAfterShutdown: a connection handed to a shut-down Server
// is closed at once, before anything is read.
func TestServeConnAfterShutdown(t *testing.T) {
	noLeaks(t)
	s := NewServer(Config{}, one(&Route{Name: "r"}))
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr, done := acceptOne(t, s.ServeConn)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitClosed(t, done, "ServeConn on a shut-down Server")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read %d, %v; want the connection closed (EOF)", n, err)
	}
}

// TestServeConnMaxConns: beyond MaxConns, ServeConn closes the connection
// at once and counts it.
func TestServeConnMaxConns(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(echo))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	s := NewServer(Config{MaxConns: 1}, one(rt))
	addr1, done1 := acceptOne(t, s.ServeConn)
	first, err := net.Dial("tcp", addr1)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	fmt.Fprint(first, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, _ := readResponse(t, bufio.NewReader(first), "GET"); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	addr2, done2 := acceptOne(t, s.ServeConn)
	if got := raw(t, addr2, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); got != "" {
		t.Fatalf("second connection answered %q, want it closed", got)
	}
	waitClosed(t, done2, "ServeConn of the refused connection")
	if st := s.Stats(); st.Refused != 1 || st.Active != 1 {
		t.Fatalf("stats %+v, want 1 refused, 1 active", st)
	}
	_ = first.Close()
	waitClosed(t, done1, "ServeConn of the first connection")
}
