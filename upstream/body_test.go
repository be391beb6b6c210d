package upstream

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestUnreadBody(t *testing.T) {
	checkLeaks(t)
	big := strings.Repeat("x", 100000)
	cases := []struct {
		name, resp string
		reused     bool
	}{
		// The rest of a small body is already buffered: skipped, reused.
		{"buffered rest", okHello, true},
		// 100 KB unread: Close does not drain it from the network.
		{"large rest", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big, false},
	}
	for _, tc := range cases {
		b := newBackend(t, canned(tc.resp))
		p := NewPool(b.addr(), Config{})
		var resp Response
		if err := p.RoundTrip(context.Background(), get("GET", "/"), &resp); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatal(err)
		}
		resp.Close()
		resp.Close() // idempotent
		if s := p.Stats(); (s.Idle == 1) != tc.reused || s.Open != s.Idle {
			t.Errorf("%s: Stats after Close = %+v, want idle %v", tc.name, s, tc.reused)
		}
		if _, err := resp.Body.Read(buf); err == nil {
			t.Errorf("%s: Body.Read after Close succeeded", tc.name)
		}
		p.Close()
	}
}

func TestBodyUntilClose(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, readHeadThen(func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\nall of it, until the close")
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	st, body, err := do(t, p, get("GET", "/"))
	if err != nil || st != 200 || body != "all of it, until the close" {
		t.Fatalf("%d %q %v, want the body up to the close", st, body, err)
	}
	if s := p.Stats(); s.Open != 0 {
		t.Errorf("Stats = %+v, want the connection closed (its end delimited the body)", s)
	}
}

func TestReadTimeout(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, readHeadThen(func(c net.Conn, br *bufio.Reader) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
		io.Copy(io.Discard, br) // then silence
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	req := get("GET", "/")
	req.ReadTimeout = 100 * time.Millisecond
	var resp Response
	if err := p.RoundTrip(context.Background(), req, &resp); err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	start := time.Now()
	body, err := io.ReadAll(resp.Body)
	wantKind(t, err, KindTimeout)
	if d := time.Since(start); string(body) != "abc" || d < req.ReadTimeout || d > 5*time.Second {
		t.Errorf("body %q, timed out after %v: want \"abc\", then the 100 ms ReadTimeout", body, d)
	}
}

func TestWriteTimeout(t *testing.T) {
	checkLeaks(t)
	stop := make(chan struct{})
	b := newBackend(t, readHeadThen(func(c net.Conn, br *bufio.Reader) {
		<-stop // reads nothing of the body
	}))
	defer close(stop)
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	const size = 64 << 20
	req := &Request{
		Method:       []byte("POST"),
		Head:         []byte("POST / HTTP/1.1\r\nHost: b\r\nContent-Length: 67108864\r\n\r\n"),
		Body:         io.LimitReader(zeros{}, size),
		BodyLength:   size,
		WriteTimeout: 100 * time.Millisecond,
	}
	_, _, err := do(t, p, req)
	wantKind(t, err, KindTimeout)
}

func TestWaitCanceled(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	p := NewPool(b.addr(), Config{MaxConns: 1, ConnectTimeout: 10 * time.Second})
	defer p.Close()
	var held Response
	if err := p.RoundTrip(context.Background(), get("GET", "/"), &held); err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		var resp Response
		errc <- p.RoundTrip(ctx, get("GET", "/"), &resp)
	}()
	eventually(t, "the second request waits", func() bool { return p.Stats().Waiting == 1 })
	cancel()
	wantKind(t, <-errc, KindCanceled)
	if s := p.Stats(); s.Waiting != 0 {
		t.Errorf("Stats = %+v, want no waiter left", s)
	}
}

func TestCloseWakesWaiters(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	p := NewPool(b.addr(), Config{MaxConns: 1, ConnectTimeout: 10 * time.Second})
	var held Response
	if err := p.RoundTrip(context.Background(), get("GET", "/"), &held); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		var resp Response
		errc <- p.RoundTrip(context.Background(), get("GET", "/"), &resp)
	}()
	eventually(t, "the second request waits", func() bool { return p.Stats().Waiting == 1 })
	p.Close()
	if e := wantKind(t, <-errc, KindRefused); e.Err != ErrPoolClosed {
		t.Errorf("cause %v, want ErrPoolClosed", e.Err)
	}
	io.ReadAll(held.Body)
	held.Close() // in use at Close: closed now
	if s := p.Stats(); s.Open != 0 {
		t.Errorf("Stats = %+v, want nothing open after Close and release", s)
	}
}

func TestCanceledBeforeStart(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var resp Response
	wantKind(t, p.RoundTrip(ctx, get("GET", "/"), &resp), KindCanceled)
	if s := p.Stats(); s.Dials != 0 {
		t.Errorf("Stats = %+v, want no dial for a request already canceled", s)
	}
}

func TestErrorText(t *testing.T) {
	e := &Error{Kind: KindTimeout, Op: "read response head", Err: io.ErrUnexpectedEOF}
	if got, want := e.Error(), "upstream: read response head: timeout: unexpected EOF"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if Kind(0).String() != "unknown" || KindPoolFull.String() != "pool full" {
		t.Errorf("Kind names: %q %q", Kind(0), KindPoolFull)
	}
}
