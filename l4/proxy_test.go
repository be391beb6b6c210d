package l4

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
)

func TestRoundRobinAlternates(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a, b := startBackend(t, greeter("A")), startBackend(t, greeter("B"))
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr(), b.addr()), Clock: clk,
		Picker: balancer.Loaded{Picker: &balancer.RoundRobin{}}})
	var got string
	for range 6 {
		c, name := r.greeting(t)
		got += name
		if _, err := io.WriteString(c, "ping"); err != nil {
			t.Fatal(err)
		}
		echo := make([]byte, 4)
		if _, err := io.ReadFull(c, echo); err != nil || string(echo) != "ping" {
			t.Fatalf("echo %q, %v", echo, err)
		}
		_ = c.Close()
	}
	if got != "ABABAB" {
		t.Fatalf("backends in order %q, want ABABAB", got)
	}
	r.waitIdle(t)
	s := r.Stats()
	// Up: "ping" six times; down: "A\n" or "B\n" and "ping", six times.
	if s.Accepted != 6 || s.BytesUp != 24 || s.BytesDown != 36 || s.DialFailures != 0 {
		t.Fatalf("stats %+v, want 6 accepted, 24 bytes up, 36 down", s)
	}
}

// TestLeastRequestSeesOpenConns: a connection held open counts against its
// endpoint until it closes. Round robin would answer A B A B.
func TestLeastRequestSeesOpenConns(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a, b := startBackend(t, greeter("A")), startBackend(t, greeter("B"))
	set := newSet(t, clk, a.addr(), b.addr())
	r := startProxy(t, Config{Set: set, Clock: clk, Picker: balancer.Loaded{Picker: &balancer.LeastOutstanding{}}})

	c1, n1 := r.greeting(t) // pick 0 starts at A: both idle → A, held open
	c2, n2 := r.greeting(t) // pick 1 starts at B: B idle → B
	_ = c2.Close()
	waitFor(t, "B's connection to end", func() bool { return inFlight(set, b.addr()) == 0 })
	_, n3 := r.greeting(t) // pick 2 starts at A, which is busy → B, held open
	_ = c1.Close()
	waitFor(t, "A's connection to end", func() bool { return inFlight(set, a.addr()) == 0 })
	_, n4 := r.greeting(t) // pick 3 starts at B, which is busy → A
	if got := n1 + n2 + n3 + n4; got != "ABBA" {
		t.Fatalf("backends in order %q, want ABBA", got)
	}
	if got := inFlight(set, a.addr()) + inFlight(set, b.addr()); got != 2 {
		t.Fatalf("%d connections in flight, want 2", got)
	}
}

func TestUnhealthySkipped(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a, b := startBackend(t, greeter("A")), startBackend(t, greeter("B"))
	set := newSet(t, clk, a.addr(), b.addr())
	if !set.SetHealthy(clk.Now(), b.addr(), false) {
		t.Fatal("SetHealthy did not find B")
	}
	r := startProxy(t, Config{Set: set, Clock: clk, Picker: balancer.Loaded{Picker: &balancer.RoundRobin{}}})
	var got string
	for range 4 {
		c, name := r.greeting(t)
		got += name
		_ = c.Close()
	}
	if got != "AAAA" {
		t.Fatalf("backends %q, want AAAA (B is unhealthy)", got)
	}
}

func TestDialFailureRetries(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, greeter("A"))
	dead1, dead2 := deadAddr(t), deadAddr(t)
	rr := func() balancer.SetPicker { return balancer.Loaded{Picker: &balancer.RoundRobin{}} }

	t.Run("retried on another endpoint", func(t *testing.T) {
		r := startProxy(t, Config{Set: newSet(t, clk, dead1, a.addr()), Clock: clk, Picker: rr()})
		for range 2 { // each connection: the dead endpoint first, then A
			if _, name := r.greeting(t); name != "A" {
				t.Fatalf("reached %q, want A", name)
			}
		}
		if s := r.Stats(); s.DialFailures != 2 || s.Unreachable != 0 {
			t.Fatalf("stats %+v, want 2 dial failures, none unreachable", s)
		}
	})
	t.Run("no retries", func(t *testing.T) {
		r := startProxy(t, Config{Set: newSet(t, clk, dead1, a.addr()), Clock: clk, Picker: rr(), Retries: -1})
		if _, name := r.greeting(t); name != "" {
			t.Fatalf("reached %q, want the connection closed", name)
		}
		if _, name := r.greeting(t); name != "A" {
			t.Fatalf("second connection reached %q, want A", name)
		}
		if s := r.Stats(); s.DialFailures != 1 || s.Unreachable != 1 {
			t.Fatalf("stats %+v, want 1 dial failure, 1 unreachable", s)
		}
	})
	t.Run("each endpoint tried once", func(t *testing.T) {
		set := newSet(t, clk, dead1, dead2)
		r := startProxy(t, Config{Set: set, Clock: clk, Picker: rr(), Retries: MaxRetries})
		if _, name := r.greeting(t); name != "" {
			t.Fatalf("reached %q, want the connection closed", name)
		}
		r.waitIdle(t)
		if s := r.Stats(); s.DialFailures != 2 || s.Unreachable != 1 {
			t.Fatalf("stats %+v, want 2 dial failures (one per endpoint), 1 unreachable", s)
		}
		if n := inFlight(set, dead1) + inFlight(set, dead2); n != 0 {
			t.Fatalf("%d in flight after failed dials, want 0", n)
		}
	})
}

func TestNoEndpointCloses(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	r := startProxy(t, Config{Set: newSet(t, clk), Clock: clk})
	if _, name := r.greeting(t); name != "" {
		t.Fatalf("got %q from an empty set", name)
	}
	r.waitIdle(t)
	if s := r.Stats(); s.NoEndpoint != 1 || s.Accepted != 1 {
		t.Fatalf("stats %+v, want 1 accepted, 1 without endpoint", s)
	}
}

// TestHalfClose: the client shuts down its write side; the backend reads to
// EOF and only then answers, and the answer reaches the client.
func TestHalfClose(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		_, _ = io.WriteString(c, "got "+strconv.FormatInt(n, 10)+" bytes")
	})
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr()), Clock: clk})
	c := r.dial(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16) // past the small buffer
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, err := io.ReadAll(c)
	if err != nil || string(reply) != "got 102400 bytes" {
		t.Fatalf("reply %q, %v; want \"got 102400 bytes\"", reply, err)
	}
	r.waitIdle(t)
	if s := r.Stats(); s.BytesUp != 102400 || s.BytesDown != 16 {
		t.Fatalf("stats %+v, want 102400 bytes up, 16 down", s)
	}
}

func TestIdleTimeout(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, greeter("A"))
	const idle = 200 * time.Millisecond
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr()), Clock: clk, IdleTimeout: idle})
	c, name := r.greeting(t)
	if name != "A" {
		t.Fatalf("reached %q", name)
	}
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	elapsed := time.Since(start)
	if n != 0 || !closedByPeer(err) {
		t.Fatalf("read %d, %v: want the proxy to close the connection", n, err)
	}
	if elapsed < idle-20*time.Millisecond { // the greeting came a little before start
		t.Fatalf("closed after %v, before the idle timeout %v", elapsed, idle)
	}
	r.waitIdle(t)
	if s := r.Stats(); s.IdleClosed != 1 {
		t.Fatalf("stats %+v, want 1 idle close", s)
	}
}

// closedByPeer reports whether a read's error says the other side closed
// the connection (EOF or reset), not that the read's own deadline passed.
func closedByPeer(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestIdleKeptByOneWayTraffic: bytes moving up only keep the connection
// open for several idle timeouts; once they stop, the timeout cuts it.
func TestIdleKeptByOneWayTraffic(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	const idle = 500 * time.Millisecond
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr()), Clock: clk, IdleTimeout: idle})
	c := r.dial(t)
	chunk := make([]byte, 1024)
	for start := time.Now(); time.Since(start) < 3*idle; {
		if _, err := c.Write(chunk); err != nil {
			t.Fatalf("write after %v: %v", time.Since(start), err)
		}
	}
	if s := r.Stats(); s.IdleClosed != 0 || s.Active != 1 {
		t.Fatalf("stats %+v while sending, want 1 active, no idle close", s)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !closedByPeer(err) {
		t.Fatalf("read: %v, want the proxy to close the idle connection", err)
	}
	r.waitIdle(t)
	if s := r.Stats(); s.IdleClosed != 1 {
		t.Fatalf("stats %+v, want 1 idle close", s)
	}
}

func TestShutdownWaits(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, greeter("A"))
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr()), Clock: clk})
	c, _ := r.greeting(t)
	shut := make(chan error, 1)
	go func() { shut <- r.Shutdown(context.Background()) }()
	select {
	case err := <-r.served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		r.served <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
	if nc, err := net.DialTimeout("tcp", r.addr, 10*time.Second); err == nil {
		_ = nc.Close()
		t.Fatal("a new connection was accepted after Shutdown")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a connection open", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := io.WriteString(c, "still"); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, 5)
	if _, err := io.ReadFull(c, echo); err != nil || string(echo) != "still" {
		t.Fatalf("echo during shutdown %q, %v", echo, err)
	}
	_ = c.Close()
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the last connection closed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(ln); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Shutdown: %v, want ErrClosed", err)
	}
}

func TestShutdownCloses(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, greeter("A"))
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr()), Clock: clk})
	c, _ := r.greeting(t)
	start := time.Now() // before the context: its deadline is then at least start + 200ms
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := r.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("Shutdown gave up after %v, before its context's 200ms", d)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !closedByPeer(err) {
		t.Fatalf("read %d, %v: want the connection closed by Shutdown", n, err)
	}
	if s := r.Stats(); s.Active != 0 {
		t.Fatalf("stats %+v after Shutdown, want none active", s)
	}
}

func TestMaxConns(t *testing.T) {
	checkLeaks(t)
	clk := clock.NewReal()
	a := startBackend(t, greeter("A"))
	r := startProxy(t, Config{Set: newSet(t, clk, a.addr()), Clock: clk, MaxConns: 1})
	c1, n1 := r.greeting(t)
	_, n2 := r.greeting(t)
	if n1 != "A" || n2 != "" {
		t.Fatalf("got %q and %q, want A and a closed connection", n1, n2)
	}
	_ = c1.Close()
	r.waitIdle(t)
	if _, n3 := r.greeting(t); n3 != "A" {
		t.Fatalf("after the first closed: %q, want A", n3)
	}
	if s := r.Stats(); s.Refused != 1 || s.Accepted != 3 {
		t.Fatalf("stats %+v, want 3 accepted, 1 refused", s)
	}
}

func TestNewErrors(t *testing.T) {
	set, err := balancer.NewSet(balancer.SetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "l4: Config.Set: must not be nil"},
		{Config{Set: set, ConnectTimeout: -time.Second}, "l4: Config.ConnectTimeout: must not be negative (0 means 5s), got -1s"},
		{Config{Set: set, Retries: 4}, "l4: Config.Retries: must be at most 3 (other endpoints tried after a failed dial), got 4"},
		{Config{Set: set, ProxyProtocol: 3}, "l4: Config.ProxyProtocol: must be 0 (none), 1 or 2, got 3"},
	}
	for _, c := range cases {
		_, err := New(c.cfg)
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	_, err = New(Config{Set: set, Picker: &balancer.LeastRequest{Choices: -1}})
	if !errors.Is(err, balancer.ErrConfig) {
		t.Errorf("a bad picker: %v, want its ConfigError", err)
	}
}
