package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// noLeaks checks, after every other cleanup of the test (the proxy's and
// the echo server's), that no goroutine started by the test is left.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
}

// echo starts a TCP server on loopback that writes back what it reads and
// closes its side when the client closes its own.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				_, _ = io.Copy(c, c)
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg on c and reads as many bytes back within 10 s.
func roundTrip(c net.Conn, msg string) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len(msg))
	n, err := io.ReadFull(c, buf)
	return string(buf[:n]), err
}

func mustEcho(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if got, err := roundTrip(c, msg); err != nil || got != msg {
		t.Fatalf("echo of %q: %q, %v", msg, got, err)
	}
}

// silent fails t if c delivers a byte within wait: nothing crosses.
func silent(t *testing.T, c net.Conn, wait time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	var b [1]byte
	n, err := c.Read(b[:])
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, error %v; want nothing before the deadline", n, err)
	}
}

// started starts a proxy to an echo server and returns it with a
// connection through it that has carried one round trip.
func started(t *testing.T) (*Proxy, net.Conn) {
	t.Helper()
	noLeaks(t)
	p := Start(t, echo(t))
	c := dial(t, p.Addr())
	mustEcho(t, c, "before")
	return p, c
}

// Pass forwards both ways, and a half-close reaches the server and its
// answer to it comes back: the client reads everything, then EOF.
func TestPass(t *testing.T) {
	p, c := started(t)
	big := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB: many chunks
	go func() {
		_, _ = c.Write(big)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("1 MB then a half-close: read %d bytes back, %v", len(got), err)
	}
	if m, _ := p.Mode(); m != Pass {
		t.Errorf("mode %v, want pass", m)
	}
}

// BlackHole: an existing and a new connection both stall, the bytes sent
// are read and dropped, and Pass makes new connections work again.
func TestBlackHole(t *testing.T) {
	p, old := started(t)
	p.BlackHole()
	if _, err := old.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	silent(t, old, 200*time.Millisecond)
	fresh := dial(t, p.Addr())
	if _, err := fresh.Write([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	silent(t, fresh, 200*time.Millisecond)
	waitFor(t, "8 bytes dropped", func() bool { return p.Stats().Dropped == 8 })
	p.Pass()
	mustEcho(t, dial(t, p.Addr()), "after")
	if s := p.Stats(); s.Accepted != 3 || s.Resets != 0 {
		t.Errorf("stats %+v, want 3 accepted and no reset", s)
	}
}

// Reset: an existing connection is reset, a new one is reset once
// accepted, and Pass makes new connections work again.
func TestReset(t *testing.T) {
	p, old := started(t)
	p.Reset()
	if _, err := roundTrip(old, "x"); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("existing connection after Reset: %v, want ECONNRESET", err)
	}
	// The kernel completes the handshake before the proxy accepts and
	// resets: the RST reaches the dial, or the first read.
	fresh, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err == nil {
		_, err = roundTrip(fresh, "y")
		fresh.Close()
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("new connection in Reset: %v, want ECONNRESET", err)
	}
	p.Pass()
	mustEcho(t, dial(t, p.Addr()), "after")
	if s := p.Stats(); s.Resets != 2 || s.Accepted != 3 {
		t.Errorf("stats %+v, want 2 resets of 3 accepted", s)
	}
}

// Delay holds each chunk: a round trip (one chunk each way) takes at least
// twice the delay, and Pass forwards at once again on the same connection.
func TestDelay(t *testing.T) {
	p, c := started(t)
	const d = 100 * time.Millisecond
	p.Delay(d)
	if m, got := p.Mode(); m != Delay || got != d {
		t.Fatalf("mode %v %v, want delay %v", m, got, d)
	}
	start := time.Now()
	mustEcho(t, c, "slow")
	if el := time.Since(start); el < 2*d {
		t.Errorf("a delayed round trip took %v, want at least %v", el, 2*d)
	}
	p.Pass()
	mustEcho(t, c, "fast")
}

// Refuse: connects are refused while an existing connection carries on;
// Pass listens again on the same port.
func TestRefuse(t *testing.T) {
	p, old := started(t)
	addr := p.Addr()
	p.Refuse()
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial in Refuse: %v, want ECONNREFUSED", err)
	}
	mustEcho(t, old, "still here")
	p.Pass()
	if p.Addr() != addr {
		t.Fatalf("address moved from %s to %s", addr, p.Addr())
	}
	mustEcho(t, dial(t, addr), "back")
}

// A target that refuses: the client's connection is closed.
func TestTargetDown(t *testing.T) {
	noLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p := Start(t, dead)
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "anyone?"); err == nil {
		t.Fatal("a round trip through a proxy to a dead target succeeded")
	}
}

// waitFor polls cond every 5 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
