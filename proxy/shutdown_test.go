package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/upstream"
)

// waitFor polls cond every millisecond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("%s: not so after 5 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// shutdownAsync runs s.Shutdown(ctx) and returns its result channel.
func shutdownAsync(s *Server, ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Shutdown(ctx) }()
	return ch
}

func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return within 10 s")
		return nil
	}
}

// TestShutdownH1: Shutdown closes idle HTTP/1.1 connections (kept-alive
// and fresh ones) at once, lets a request in flight finish with
// "Connection: close", and returns nil once it has.
func TestShutdownH1(t *testing.T) {
	noLeaks(t)
	addr, s, g := drainSetup(t, Config{})
	kept, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	kbr := bufio.NewReader(kept)
	get(t, kept, kbr, "/")
	fresh, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	fmt.Fprint(busy, "GET /hold HTTP/1.1\r\nHost: a\r\n\r\n")
	g.waitEntered(t, 1)
	waitFor(t, "two idle connections", func() bool { return s.Stats().Idle == 2 })
	if st := s.Stats(); st.Active != 3 || st.H2 != 0 {
		t.Fatalf("stats %+v, want 3 active, 0 h2", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch := shutdownAsync(s, ctx)
	expectEOF(t, kept, kbr)
	expectEOF(t, fresh, bufio.NewReader(fresh))
	select {
	case err := <-ch:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	g.open()
	bbr := bufio.NewReader(busy)
	resp, body := readResponse(t, bbr, "GET")
	if resp.StatusCode != 200 || body != "ok" || !resp.Close {
		t.Fatalf("in-flight request: %d %q close %v; want 200 ok with Connection: close", resp.StatusCode, body, resp.Close)
	}
	expectEOF(t, busy, bbr)
	if err := result(t, ch); err != nil {
		t.Fatalf("Shutdown: %v, want nil", err)
	}
}

// TestShutdownH2: Shutdown sends GOAWAY on idle and busy h2c connections;
// the busy one's stream finishes, and Shutdown returns nil.
func TestShutdownH2(t *testing.T) {
	noLeaks(t)
	addr, s, g := drainSetup(t, Config{HTTP2: true})
	idle := dialH2(t, addr)
	idle.ping()
	busy := dialH2(t, addr)
	busy.get(1, "/hold")
	g.waitEntered(t, 1)
	if st := s.Stats(); st.H2 != 2 || st.Idle != 0 {
		t.Fatalf("stats %+v, want 2 h2, 0 idle", st)
	}
	ch := shutdownAsync(s, context.Background())
	idle.expect("GOAWAY 0 NO_ERROR", "closed")
	busy.expect("GOAWAY 1 NO_ERROR")
	g.open()
	busy.expect("HEADERS 1 200", "DATA 1 end", "closed")
	if err := result(t, ch); err != nil {
		t.Fatalf("Shutdown: %v, want nil", err)
	}
}

// upgradeEcho is a backend that answers every request with 101 and then
// echoes what it reads.
func upgradeEcho(t *testing.T) string {
	return rawServer(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		if !skipHead(br) {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_, _ = io.Copy(c, br)
	})
}

// openTunnel opens a WebSocket-style tunnel through the proxy.
func openTunnel(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return c, br
}

// echoes sends msg through a tunnel and reports whether it came back.
func echoes(c net.Conn, br *bufio.Reader, msg string) bool {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return false
	}
	b := make([]byte, len(msg))
	_, err := io.ReadFull(br, b)
	return err == nil && string(b) == msg
}

// TestShutdownTunnelCut: an upgraded connection outlives Shutdown's start
// and keeps moving bytes, until the context ends: then it is closed and
// Shutdown returns the context's error.
func TestShutdownTunnelCut(t *testing.T) {
	noLeaks(t)
	be := upgradeEcho(t)
	rt := &Route{Name: "ws", Cluster: newCluster(t, "app", upstream.Config{}, be), Upgrades: []string{"websocket"}}
	addr, s := startProxy(t, Config{}, one(rt))
	c, br := openTunnel(t, addr)
	if !echoes(c, br, "before") {
		t.Fatal("the tunnel does not echo")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := shutdownAsync(s, ctx)
	waitFor(t, "shutdown started", func() bool { return s.flags.Load()&flagShutdown != 0 })
	if !echoes(c, br, "during") {
		t.Fatal("the tunnel stopped when Shutdown started")
	}
	cancel()
	if err := result(t, ch); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v, want context.Canceled", err)
	}
	expectEOF(t, c, br)
}
