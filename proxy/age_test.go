package proxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

func TestJittered(t *testing.T) {
	for _, tc := range []struct {
		age  time.Duration
		j, u float64
		want time.Duration
	}{
		{time.Second, 0, 0.7, time.Second},
		{time.Second, 0.2, 0, 800 * time.Millisecond},
		{time.Second, 0.2, 0.5, time.Second},
		{time.Second, 0.2, 0.75, 1100 * time.Millisecond},
		{10 * time.Second, 1, 0, 0},
		{10 * time.Second, 1, 0.25, 5 * time.Second},
	} {
		if got := jittered(tc.age, tc.j, tc.u); got != tc.want {
			t.Errorf("jittered(%v, %v, %v) = %v, want %v", tc.age, tc.j, tc.u, got, tc.want)
		}
	}
}

// TestAgeDeadlineSpread: with jitter 0.5 the drawn bounds stay within
// [age/2, 3·age/2] and are not all the same.
func TestAgeDeadlineSpread(t *testing.T) {
	s := NewServer(Config{MaxConnAge: time.Hour, MaxConnAgeJitter: 0.5}, one(&Route{}))
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for i := 0; i < 1000; i++ {
		before := time.Since(epoch)
		d := time.Duration(s.ageDeadline()) - before // at most a little over the drawn bound
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 30*time.Minute || hi > 90*time.Minute+time.Second || hi-lo < 30*time.Minute {
		t.Fatalf("bounds drawn in [%v, %v], want spread over [30m, 90m]", lo, hi)
	}
	if NewServer(Config{}, one(&Route{})).ageDeadline() != 0 {
		t.Fatal("MaxConnAge 0 gave a deadline")
	}
}

// ageSetup starts a proxy whose connections live 200 ms (no jitter) in
// front of the gated backend and an upgrade echo.
func ageSetup(t *testing.T, grace time.Duration, h2 bool) (string, *gated) {
	g, be := newGated(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	ws := &Route{Name: "ws", Cluster: newCluster(t, "ws", upstream.Config{}, upgradeEcho(t)), Upgrades: []string{"websocket"}}
	routes := routerFunc(func(v *request.View) (*Route, bool) {
		if v.Path == "/ws" {
			return ws, true
		}
		return rt, true
	})
	addr, _ := startProxy(t, Config{MaxConnAge: 200 * time.Millisecond, AgeGrace: grace, HTTP2: h2}, routes)
	return addr, g
}

// within fails t unless the time since start is in [lo, hi].
func within(t *testing.T, what string, start time.Time, lo, hi time.Duration) {
	t.Helper()
	if d := time.Since(start); d < lo || d > hi {
		t.Fatalf("%s after %v, want between %v and %v", what, d, lo, hi)
	}
}

// TestMaxAgeH1Busy: a connection sending request after request gets
// "Connection: close" on the first response past its age, and is closed.
func TestMaxAgeH1Busy(t *testing.T) {
	noLeaks(t)
	addr, _ := ageSetup(t, 0, false)
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	n := 0
	for {
		resp := get(t, c, br, "/")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", n, resp.StatusCode)
		}
		n++
		if resp.Close {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no Connection: close after %d requests in 5 s", n)
		}
	}
	within(t, "Connection: close", start, 150*time.Millisecond, 5*time.Second)
	expectEOF(t, c, br)
	if n < 2 {
		t.Fatalf("%d requests before the close, want several", n)
	}
}

// TestMaxAgeH1Idle: an idle kept-alive connection is closed past its age
// (once quiet for ageQuiet; the idle timeout is 75 s), and a tunnel is
// not when AgeGrace is 0.
func TestMaxAgeH1Idle(t *testing.T) {
	noLeaks(t)
	addr, _ := ageSetup(t, 0, false)
	tun, tbr := openTunnel(t, addr) // opened first: older than the idle connection
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if resp := get(t, c, br, "/"); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("first request: %d close %v", resp.StatusCode, resp.Close)
	}
	expectEOF(t, c, br)
	within(t, "the idle connection closed", start, 900*time.Millisecond, 5*time.Second) // ageQuiet: 1 s
	if !echoes(tun, tbr, "still here") {
		t.Fatal("the tunnel was closed for its age with AgeGrace 0")
	}
}

// TestMaxAgeTunnelGrace: a tunnel is closed at its age plus AgeGrace.
func TestMaxAgeTunnelGrace(t *testing.T) {
	noLeaks(t)
	addr, _ := ageSetup(t, 200*time.Millisecond, false)
	start := time.Now()
	tun, tbr := openTunnel(t, addr)
	if !echoes(tun, tbr, "hello") {
		t.Fatal("the tunnel does not echo")
	}
	expectEOF(t, tun, tbr)
	within(t, "the tunnel closed", start, 350*time.Millisecond, 5*time.Second)
}

// TestMaxAgeH2: an h2c connection gets a graceful GOAWAY at its age; the
// stream in flight then finishes.
func TestMaxAgeH2(t *testing.T) {
	noLeaks(t)
	addr, g := ageSetup(t, 0, true)
	start := time.Now()
	p := dialH2(t, addr)
	p.get(1, "/hold")
	g.waitEntered(t, 1)
	p.expect("GOAWAY 1 NO_ERROR")
	within(t, "GOAWAY", start, 150*time.Millisecond, 5*time.Second)
	g.open()
	p.expect("HEADERS 1 200", "DATA 1 end", "closed")
}

// TestMaxAgeH2Grace: streams that outlive the GOAWAY by AgeGrace are cut
// with the connection.
func TestMaxAgeH2Grace(t *testing.T) {
	noLeaks(t)
	addr, g := ageSetup(t, 200*time.Millisecond, true)
	start := time.Now()
	p := dialH2(t, addr)
	p.get(1, "/hold")
	g.waitEntered(t, 1)
	p.expect("GOAWAY 1 NO_ERROR", "closed")
	within(t, "the connection closed", start, 350*time.Millisecond, 5*time.Second)
}

// TestMaxAgeH1Paced: a client that pauses 20 ms between requests (its
// connection idle most of the time, never for the second an idle close
// needs) still gets "Connection: close" past the connection's age.
func TestMaxAgeH1Paced(t *testing.T) {
	noLeaks(t)
	addr, _ := ageSetup(t, 0, false)
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	for n := 0; ; n++ {
		resp := get(t, c, br, "/")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", n, resp.StatusCode)
		}
		if resp.Close {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no Connection: close after %d paced requests in 5 s", n)
		}
		<-pace.C
	}
	// The sweeper marks it within a tick (5 ms) of its age and the next
	// request comes within 20 ms: 600 ms is three times the age.
	within(t, "Connection: close", start, 150*time.Millisecond, 600*time.Millisecond)
	expectEOF(t, c, br)
}
