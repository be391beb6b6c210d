package upstream

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/internal/conndeadline"
)

func TestKeepAliveReuse(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	for i := range 100 {
		st, body, err := do(t, p, get("GET", "/"))
		if err != nil || st != 200 || body != "hello" {
			t.Fatalf("request %d: %d %q %v, want 200 \"hello\"", i, st, body, err)
		}
	}
	if n := b.accepts.Load(); n != 1 {
		t.Errorf("backend accepted %d connections for 100 sequential requests, want 1", n)
	}
	s := p.Stats()
	want := PoolStats{Open: 1, Idle: 1, Dials: 1, Reused: 99}
	if s != want {
		t.Errorf("Stats = %+v, want %+v", s, want)
	}
}

func TestMaxIdle(t *testing.T) {
	checkLeaks(t)
	closed := make(chan time.Time, 8)
	b := newBackend(t, func(c net.Conn) {
		canned(okHello)(c)
		closed <- time.Now()
	})
	p := NewPool(b.addr(), Config{MaxIdle: 2})
	defer p.Close()
	// Five exchanges in flight at once need five connections.
	resps := make([]Response, 5)
	for i := range resps {
		if err := p.RoundTrip(context.Background(), get("GET", "/"), &resps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if s := p.Stats(); s.Open != 5 || s.InUse != 5 || s.Idle != 0 {
		t.Fatalf("with 5 in flight: Stats = %+v, want 5 open, 5 in use", s)
	}
	for i := range resps {
		io.ReadAll(resps[i].Body)
		resps[i].Close()
	}
	if s := p.Stats(); s.Open != 2 || s.Idle != 2 || s.InUse != 0 {
		t.Errorf("after release: Stats = %+v, want 2 open and idle (MaxIdle)", s)
	}
	for range 3 {
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the 3 connections beyond MaxIdle were not closed within 5 s")
		}
	}
	// The next requests reuse the two idle connections.
	do(t, p, get("GET", "/"))
	do(t, p, get("GET", "/"))
	if n := b.accepts.Load(); n != 5 {
		t.Errorf("backend accepted %d connections, want 5", n)
	}
}

func TestIdleTimeoutCloses(t *testing.T) {
	checkLeaks(t)
	b, closed := closeTimedBackend(t)
	const idle = 100 * time.Millisecond
	p := NewPool(b.addr(), Config{IdleTimeout: idle})
	defer p.Close()
	// Taken before the request: the pool releases the connection (and
	// starts its idle clock) inside do, which may return well after that
	// on a loaded machine, so a clock read after do could make a correct
	// close look early.
	sent := time.Now()
	if _, _, err := do(t, p, get("GET", "/")); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-closed:
		if d := at.Sub(sent); d < idle {
			t.Errorf("idle connection closed after %v, before IdleTimeout %v", d, idle)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("idle connection not closed within 5 s of a 100 ms IdleTimeout")
	}
	eventually(t, "pool forgets the expired connection", func() bool { return p.Stats().Open == 0 })
	// The pool dials again afterwards.
	if st, _, err := do(t, p, get("GET", "/")); err != nil || st != 200 {
		t.Fatalf("after expiry: %d %v", st, err)
	}
	if s := p.Stats(); s.Dials != 2 || s.Reused != 0 {
		t.Errorf("Stats = %+v, want 2 dials, none reused", s)
	}
}

// A connection's idle timer stays pending while the connection is reused
// (no timer operation per exchange): one that fires while the connection
// is in use leaves it open, and the connection is still closed
// IdleTimeout after its last release, not before.
func TestIdleTimeoutAfterReuse(t *testing.T) {
	checkLeaks(t)
	b, closed := closeTimedBackend(t)
	const idle = 100 * time.Millisecond
	p := NewPool(b.addr(), Config{IdleTimeout: idle})
	defer p.Close()
	if _, _, err := do(t, p, get("GET", "/")); err != nil {
		t.Fatal(err)
	}
	var resp Response // the same connection, held in use past its first IdleTimeout
	if err := p.RoundTrip(context.Background(), get("GET", "/"), &resp); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * idle) // lets the timer armed by the first release fire (if the machine runs it)
	select {
	case <-closed:
		t.Fatal("the connection was closed while in use")
	default:
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	resp.Close()
	select {
	case at := <-closed:
		if d := at.Sub(released); d < idle {
			t.Errorf("closed %v after its last release, before IdleTimeout %v", d, idle)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reused connection was not closed within 5 s of a 100 ms IdleTimeout")
	}
	if s := p.Stats(); s.Dials != 1 || s.Reused != 1 {
		t.Errorf("Stats = %+v, want 1 dial, 1 reuse", s)
	}
}

// Reused within IdleTimeout, again and again, a connection is closed
// IdleTimeout after its last release: the timer armed by an earlier
// release, firing early, is re-armed for the rest.
func TestIdleTimeoutReArmed(t *testing.T) {
	checkLeaks(t)
	b, closed := closeTimedBackend(t)
	const idle = 500 * time.Millisecond
	p := NewPool(b.addr(), Config{IdleTimeout: idle})
	defer p.Close()
	var released time.Time
	for i := 0; i < 4; i++ {
		released = time.Now()
		if _, _, err := do(t, p, get("GET", "/")); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			time.Sleep(idle / 4)
		}
	}
	if s := p.Stats(); s.Dials != 1 {
		t.Skipf("the machine stalled past IdleTimeout between requests (%+v)", s)
	}
	select {
	case at := <-closed:
		if d := at.Sub(released); d < idle {
			t.Errorf("closed %v after the last request began, before IdleTimeout %v", d, idle)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not closed within 5 s of a 500 ms IdleTimeout")
	}
}

// closingBackend answers each connection's first request with keep-alive,
// then closes it: every idle connection the pool keeps goes stale.
func closingBackend(t *testing.T) *backend {
	return newBackend(t, readHeadThen(func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, okHello)
	}))
}

func TestStaleConnRetriedWhenReplayable(t *testing.T) {
	checkLeaks(t)
	b := closingBackend(t)
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	p.staleCheck = time.Hour // no peek: the exchange meets the stale connection
	if _, _, err := do(t, p, get("GET", "/")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "backend closes the first connection", func() bool { return len(b.open()) == 0 })
	st, body, err := do(t, p, get("GET", "/"))
	if err != nil || st != 200 || body != "hello" {
		t.Fatalf("replayable request on a stale connection: %d %q %v, want 200 \"hello\"", st, body, err)
	}
	if s := p.Stats(); s.Dials != 2 || s.Reused != 1 {
		t.Errorf("Stats = %+v, want 2 dials and 1 reuse (the stale one)", s)
	}
}

func TestStaleConnNotReplayableIsReset(t *testing.T) {
	checkLeaks(t)
	b := closingBackend(t)
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	p.staleCheck = time.Hour // no peek: the exchange meets the stale connection
	if _, _, err := do(t, p, get("GET", "/")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "backend closes the first connection", func() bool { return len(b.open()) == 0 })
	req := get("POST", "/")
	req.Replayable = false
	_, _, err := do(t, p, req)
	wantKind(t, err, KindReset)
	if s := p.Stats(); s.Dials != 1 || s.Open != 0 {
		t.Errorf("Stats = %+v, want 1 dial and nothing open", s)
	}
}

func TestMaxConnsWaitsThenPoolFull(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	const wait = 150 * time.Millisecond
	p := NewPool(b.addr(), Config{MaxConns: 1, ConnectTimeout: wait})
	defer p.Close()
	var held Response
	if err := p.RoundTrip(context.Background(), get("GET", "/"), &held); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err := do(t, p, get("GET", "/"))
	e := wantKind(t, err, KindPoolFull)
	if d := time.Since(start); d < wait || d > 5*time.Second {
		t.Errorf("%v after %v, want after the 150 ms ConnectTimeout", e, d)
	}
	if s := p.Stats(); s.Waiting != 0 || s.Open != 1 {
		t.Errorf("Stats = %+v, want 1 open and no waiter left", s)
	}
	held.Close()
}

func TestMaxConnsHandsOverOnRelease(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	p := NewPool(b.addr(), Config{MaxConns: 1, ConnectTimeout: 10 * time.Second})
	defer p.Close()
	var held Response
	if err := p.RoundTrip(context.Background(), get("GET", "/"), &held); err != nil {
		t.Fatal(err)
	}
	type result struct {
		st  int
		err error
	}
	got := make(chan result, 1)
	go func() {
		var resp Response
		err := p.RoundTrip(context.Background(), get("GET", "/"), &resp)
		st := resp.Head.Status
		if err == nil {
			io.ReadAll(resp.Body)
			resp.Close()
		}
		got <- result{st, err}
	}()
	eventually(t, "the second request waits", func() bool { return p.Stats().Waiting == 1 })
	io.ReadAll(held.Body)
	held.Close()
	r := <-got
	if r.err != nil || r.st != 200 {
		t.Fatalf("waiting request: %d %v, want 200", r.st, r.err)
	}
	if s := p.Stats(); s.Dials != 1 || s.Reused != 1 || s.Open != 1 {
		t.Errorf("Stats = %+v, want the one connection handed over (1 dial, 1 reuse)", s)
	}
}

func TestClosedPoolRefuses(t *testing.T) {
	checkLeaks(t)
	b, closed := closeTimedBackend(t)
	p := NewPool(b.addr(), Config{})
	if _, _, err := do(t, p, get("GET", "/")); err != nil {
		t.Fatal(err)
	}
	p.Close()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close left the idle connection open")
	}
	_, _, err := do(t, p, get("GET", "/"))
	if e := wantKind(t, err, KindRefused); e.Err != ErrPoolClosed {
		t.Errorf("cause %v, want ErrPoolClosed", e.Err)
	}
}

func TestStaleConnFoundBeforeReuse(t *testing.T) {
	checkLeaks(t)
	b := closingBackend(t)
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	p.staleCheck = 0 // peek at every reuse
	if _, _, err := do(t, p, get("GET", "/")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "backend closes the first connection", func() bool { return len(b.open()) == 0 })
	req := get("POST", "/")
	req.Replayable = false // not replayable, yet it succeeds: never sent on the stale one
	if st, _, err := do(t, p, req); err != nil || st != 200 {
		t.Fatalf("%d %v, want 200 on a new connection", st, err)
	}
	if s := p.Stats(); s.Stale != 1 || s.Dials != 2 || s.Reused != 0 {
		t.Errorf("Stats = %+v, want 1 stale found, 2 dials, no reuse", s)
	}
}

func TestStrayBytes(t *testing.T) {
	checkLeaks(t)
	cases := []struct {
		name  string
		after string // sent after the answer
		sep   bool   // in a second write, after the client got the answer
	}{
		{"in the same write", "EXTRA", false},
		{"an unasked 408 while idle", "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n", true},
	}
	for _, tc := range cases {
		answered, sent := make(chan struct{}), make(chan struct{}, 2)
		b := newBackend(t, readHeadThen(func(c net.Conn, br *bufio.Reader) {
			if !tc.sep {
				io.WriteString(c, okHello+tc.after)
			} else {
				io.WriteString(c, okHello)
				<-answered
				io.WriteString(c, tc.after) // on loopback, in the client's socket when Write returns
			}
			sent <- struct{}{}
			io.Copy(io.Discard, br)
		}))
		p := NewPool(b.addr(), Config{})
		p.staleCheck = 0
		if st, body, err := do(t, p, get("GET", "/")); err != nil || st != 200 || body != "hello" {
			t.Fatalf("%s: %d %q %v", tc.name, st, body, err)
		}
		close(answered)
		<-sent
		if st, _, err := do(t, p, get("GET", "/")); err != nil || st != 200 {
			t.Errorf("%s: second request %d %v, want 200 on a new connection", tc.name, st, err)
		}
		if s := p.Stats(); s.Dials != 2 {
			t.Errorf("%s: Stats = %+v, want 2 dials (the first connection not reused)", tc.name, s)
		}
		p.Close()
	}
}

// closeTimedBackend answers okHello on each connection and then says on
// closed when the connection ended (the pool closed it).
func closeTimedBackend(t *testing.T) (*backend, <-chan time.Time) {
	closed := make(chan time.Time, 1)
	b := newBackend(t, func(c net.Conn) {
		canned(okHello)(c)
		closed <- time.Now()
	})
	return b, closed
}

// TestReuseAfterLeftDeadlinePassed: an exchange whose body was buffered
// whole leaves its head deadline armed; once that has passed while the
// connection idles, the peek before reuse must not take the expired
// deadline for a dead connection.
func TestReuseAfterLeftDeadlinePassed(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	p.staleCheck = 0 // peek at every reuse
	req := get("GET", "/")
	req.HeaderTimeout = 20 * time.Millisecond
	if st, _, err := do(t, p, req); err != nil || st != 200 {
		t.Fatalf("%d %v, want 200", st, err)
	}
	time.Sleep(req.HeaderTimeout + 2*conndeadline.Slack(req.HeaderTimeout)) // past the deadline left armed
	if st, body, err := do(t, p, req); err != nil || st != 200 || body != "hello" {
		t.Fatalf("%d %q %v, want 200 \"hello\"", st, body, err)
	}
	if s := p.Stats(); s.Dials != 1 || s.Stale != 0 || s.Reused != 1 {
		t.Errorf("Stats = %+v, want the connection reused", s)
	}
}

// TestHeadDeadlineDoesNotBoundBody: after exchanges that left the head's
// deadline armed, a body that takes longer than HeaderTimeout to arrive
// is read whole (the bound is on the head only).
func TestHeadDeadlineDoesNotBoundBody(t *testing.T) {
	checkLeaks(t)
	const head = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
	release := make(chan struct{})
	b := newBackend(t, readHeadThen(func(c net.Conn, br *bufio.Reader) {
		_, _ = io.WriteString(c, okHello) // the first request: buffered whole
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, head+"hello")
		<-release
		_, _ = io.WriteString(c, "world")
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	req := get("GET", "/")
	req.HeaderTimeout = 20 * time.Millisecond
	if st, _, err := do(t, p, req); err != nil || st != 200 {
		t.Fatalf("first: %d %v, want 200", st, err)
	}
	time.AfterFunc(req.HeaderTimeout+2*conndeadline.Slack(req.HeaderTimeout)+50*time.Millisecond, func() { close(release) })
	if st, body, err := do(t, p, req); err != nil || st != 200 || body != "helloworld" {
		t.Fatalf("second: %d %q %v, want 200 \"helloworld\"", st, body, err)
	}
	if s := p.Stats(); s.Dials != 1 {
		t.Errorf("Stats = %+v, want one connection", s)
	}
}
