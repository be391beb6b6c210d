package upstream

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
)

func TestConnectionRefused(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := NewPool(addr, Config{})
	defer p.Close()
	_, _, err = do(t, p, get("GET", "/"))
	wantKind(t, err, KindRefused)
	if s := p.Stats(); s.Dials != 1 || s.DialFailures != 1 || s.Open != 0 {
		t.Errorf("Stats = %+v, want 1 dial, 1 failure, nothing open", s)
	}
}

func TestHeaderTimeout(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, readHeadThen(func(c net.Conn, br *bufio.Reader) {
		io.Copy(io.Discard, br) // never answers
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	req := get("GET", "/")
	req.HeaderTimeout = 100 * time.Millisecond
	start := time.Now()
	_, _, err := do(t, p, req)
	wantKind(t, err, KindTimeout)
	if d := time.Since(start); d < req.HeaderTimeout || d > 5*time.Second {
		t.Errorf("timed out after %v, want after the 100 ms HeaderTimeout", d)
	}
	if s := p.Stats(); s.Open != 0 {
		t.Errorf("Stats = %+v, want the timed-out connection closed", s)
	}
}

func TestResetMidBody(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, readHeadThen(func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
		c.(*net.TCPConn).SetLinger(0) // Close sends RST
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	st, body, err := do(t, p, get("GET", "/"))
	if st != 200 || !strings.HasPrefix("0123456789", body) {
		t.Errorf("status %d, body %q: want 200 and a prefix of the 10 bytes sent", st, body)
	}
	wantKind(t, err, KindReset)
}

func TestCutShortBodyIsReset(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, readHeadThen(func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	_, body, err := do(t, p, get("GET", "/"))
	e := wantKind(t, err, KindReset)
	if e.Err != io.ErrUnexpectedEOF || body != "0123456789" {
		t.Errorf("body %q, cause %v: want the 10 bytes, then io.ErrUnexpectedEOF", body, e.Err)
	}
}

// hangingBackend reads a request head, sends prefix (maybe nothing) and
// reports on seen when the client's side of the connection ends.
func hangingBackend(t *testing.T, prefix string, got chan<- struct{}, seen chan<- time.Time) *backend {
	return newBackend(t, readHeadThen(func(c net.Conn, br *bufio.Reader) {
		io.WriteString(c, prefix)
		got <- struct{}{}
		untilEOF(c, seen)
	}))
}

func TestCancelDuringHeaderWait(t *testing.T) {
	checkLeaks(t)
	got, seen := make(chan struct{}, 1), make(chan time.Time, 1)
	b := hangingBackend(t, "", got, seen)
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var at time.Time
	go func() {
		<-got
		at = time.Now()
		cancel()
	}()
	var resp Response
	err := p.RoundTrip(ctx, get("GET", "/"), &resp)
	wantKind(t, err, KindCanceled)
	checkSeen(t, seen, &at)
}

func TestCancelDuringBody(t *testing.T) {
	checkLeaks(t)
	got, seen := make(chan struct{}, 1), make(chan time.Time, 1)
	b := hangingBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc", got, seen)
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var resp Response
	if err := p.RoundTrip(ctx, get("GET", "/"), &resp); err != nil {
		t.Fatal(err)
	}
	<-got
	buf := make([]byte, 3)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "abc" {
		t.Fatalf("first body bytes %q %v, want \"abc\"", buf, err)
	}
	at := time.Now()
	cancel()
	_, err := resp.Body.Read(buf)
	wantKind(t, err, KindCanceled)
	checkSeen(t, seen, &at)
	resp.Close()
	if s := p.Stats(); s.Open != 0 {
		t.Errorf("Stats = %+v, want the canceled connection closed", s)
	}
}

// checkSeen waits for the backend to see the connection end and reports
// how long after the cancel it did (generous bound: 1 s).
func checkSeen(t *testing.T, seen <-chan time.Time, at *time.Time) {
	t.Helper()
	select {
	case end := <-seen:
		d := end.Sub(*at)
		t.Logf("backend saw the connection end %v after the cancel", d)
		if d > time.Second {
			t.Errorf("backend saw the end %v after the cancel, want within ~50 ms (bound 1 s)", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("backend did not see the connection end within 5 s of the cancel")
	}
}

// chunks is a body whose reads return the given pieces, then io.EOF.
type chunks struct{ parts []string }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	if c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func TestChunkedRequestWithTrailers(t *testing.T) {
	checkLeaks(t)
	type seenReq struct {
		te      []string
		body    string
		trailer string
	}
	got := make(chan seenReq, 1)
	b := newBackend(t, readRequests(func(r *http.Request, body []byte) string {
		got <- seenReq{r.TransferEncoding, string(body), r.Trailer.Get("X-Checksum")}
		return okHello
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	req := &Request{
		Method:     []byte("POST"),
		Head:       []byte("POST /up HTTP/1.1\r\nHost: b\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"),
		Body:       &chunks{parts: []string{"first ", "second ", "third"}},
		BodyLength: -1,
		Trailers: func() []httpwire.Field {
			return []httpwire.Field{{Name: []byte("X-Checksum"), Value: []byte("abc123")}}
		},
	}
	st, body, err := do(t, p, req)
	if err != nil || st != 200 || body != "hello" {
		t.Fatalf("%d %q %v, want 200 \"hello\"", st, body, err)
	}
	r := <-got
	want := seenReq{[]string{"chunked"}, "first second third", "abc123"}
	if r.body != want.body || r.trailer != want.trailer || len(r.te) != 1 || r.te[0] != "chunked" {
		t.Errorf("backend saw %+v, want %+v", r, want)
	}
}

func TestContentLengthRequestBody(t *testing.T) {
	checkLeaks(t)
	got := make(chan string, 1)
	b := newBackend(t, readRequests(func(r *http.Request, body []byte) string {
		got <- string(body)
		return okHello
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	big := strings.Repeat("0123456789abcdef", 5000) // 80,000 bytes: three buffers
	req := &Request{
		Method:     []byte("PUT"),
		Head:       []byte("PUT /x HTTP/1.1\r\nHost: b\r\nContent-Length: 80000\r\n\r\n"),
		Body:       strings.NewReader(big + "beyond the length"),
		BodyLength: 80000,
	}
	if st, _, err := do(t, p, req); err != nil || st != 200 {
		t.Fatalf("%d %v, want 200", st, err)
	}
	if body := <-got; body != big {
		t.Errorf("backend got %d bytes, want the 80,000 of BodyLength", len(body))
	}
	// A body shorter than its length is the client's failure.
	req.Body, req.BodyLength = strings.NewReader("short"), 10
	_, _, err := do(t, p, req)
	if e := wantKind(t, err, KindRequestBody); e.Err != ErrBodyTooShort {
		t.Errorf("cause %v, want ErrBodyTooShort", e.Err)
	}
}

func TestChunkedResponseWithTrailers(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"+
		"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n"))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	for i := range 2 { // the second on the same connection
		var resp Response
		if err := p.RoundTrip(context.Background(), get("GET", "/"), &resp); err != nil {
			t.Fatal(err)
		}
		if tr := resp.Trailers(); tr != nil {
			t.Errorf("Trailers before EOF = %q, want nil", tr)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || string(body) != "hello world" {
			t.Fatalf("body %q %v, want \"hello world\"", body, err)
		}
		tr := resp.Trailers()
		if len(tr) != 1 || string(tr[0].Name) != "X-Sum" || string(tr[0].Value) != "42" {
			t.Errorf("Trailers = %q, want X-Sum: 42", tr)
		}
		if i == 1 && !resp.Reused {
			t.Error("second chunked response not on the reused connection")
		}
		resp.Close()
	}
}

func TestResponsesWithoutBody(t *testing.T) {
	checkLeaks(t)
	cases := []struct {
		method, resp string
		status       int
	}{
		{"HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 200},
		{"GET", "HTTP/1.1 204 No Content\r\n\r\n", 204},
		{"GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 304},
	}
	for _, tc := range cases {
		b := newBackend(t, canned(tc.resp))
		p := NewPool(b.addr(), Config{})
		for i := range 2 {
			st, body, err := do(t, p, get(tc.method, "/"))
			if err != nil || st != tc.status || body != "" {
				t.Errorf("%s → %d: got %d %q %v, want no body", tc.method, tc.status, st, body, err)
			}
			if s := p.Stats(); i == 1 && s.Reused != 1 {
				t.Errorf("%s → %d: Stats %+v, want the connection reused", tc.method, tc.status, s)
			}
		}
		p.Close()
	}
}

func TestInterimThenFinal(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
		"HTTP/1.1 100 Continue\r\n\r\n"+okHello))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	var interim []string
	req := get("GET", "/")
	req.Interim = func(h *httpwire.ResponseHead) {
		s := http.StatusText(h.Status)
		for _, f := range h.Fields {
			s += "|" + string(f.Name) + "=" + string(f.Value)
		}
		interim = append(interim, s)
	}
	st, body, err := do(t, p, req)
	if err != nil || st != 200 || body != "hello" {
		t.Fatalf("%d %q %v, want 200 \"hello\"", st, body, err)
	}
	want := []string{"Early Hints|Link=</style.css>; rel=preload", "Continue"}
	if strings.Join(interim, ",") != strings.Join(want, ",") {
		t.Errorf("interim heads %q, want %q", interim, want)
	}
}

func TestTooManyInterim(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", maxInterim+1)+okHello))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	_, _, err := do(t, p, get("GET", "/"))
	if e := wantKind(t, err, KindBadResponse); e.Err != ErrTooManyInterim {
		t.Errorf("cause %v, want ErrTooManyInterim", e.Err)
	}
}

func TestSwitchingProtocolsHijack(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, readHeadThen(func(c net.Conn, br *bufio.Reader) {
		// The head and the first upgraded bytes in one write.
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nserver-first")
		buf := make([]byte, 12)
		if _, err := io.ReadFull(br, buf); err != nil {
			return
		}
		c.Write(append([]byte("echo:"), buf...))
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	var resp Response
	req := get("GET", "/ws")
	if err := p.RoundTrip(context.Background(), req, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Head.Status != 101 {
		t.Fatalf("status %d, want 101", resp.Head.Status)
	}
	nc, br := resp.Hijack()
	if nc == nil {
		t.Fatal("Hijack returned nil after a 101")
	}
	defer nc.Close()
	if c2, _ := resp.Hijack(); c2 != nil {
		t.Error("second Hijack returned a connection")
	}
	resp.Close() // a no-op now
	first := make([]byte, 12)
	if _, err := io.ReadFull(br, first); err != nil || string(first) != "server-first" {
		t.Fatalf("first upgraded bytes %q %v, want \"server-first\"", first, err)
	}
	if _, err := io.WriteString(nc, "client-bytes"); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, 17)
	if _, err := io.ReadFull(br, echo); err != nil || string(echo) != "echo:client-bytes" {
		t.Fatalf("echo %q %v, want \"echo:client-bytes\"", echo, err)
	}
	if s := p.Stats(); s.Open != 0 {
		t.Errorf("Stats = %+v, want the hijacked connection forgotten", s)
	}
}

func TestHijackRefusedForOrdinaryResponse(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	var resp Response
	if err := p.RoundTrip(context.Background(), get("GET", "/"), &resp); err != nil {
		t.Fatal(err)
	}
	if nc, br := resp.Hijack(); nc != nil || br != nil {
		t.Error("Hijack of a 200 returned a connection")
	}
	resp.Close()
}

func TestBadResponses(t *testing.T) {
	checkLeaks(t)
	cases := []struct{ name, resp string }{
		{"CL and TE", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 5\n\nhello"},
		{"not HTTP", "SSH-2.0-OpenSSH_9.6\r\n\r\n"},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
	}
	for _, tc := range cases {
		b := newBackend(t, canned(tc.resp))
		p := NewPool(b.addr(), Config{})
		_, _, err := do(t, p, get("GET", "/"))
		if e := wantKind(t, err, KindBadResponse); p.Stats().Open != 0 {
			t.Errorf("%s: %v, but the connection stays open", tc.name, e)
		}
		p.Close()
	}
}

func TestHeadLongerThanBuffer(t *testing.T) {
	checkLeaks(t)
	long := "X-Long: " + strings.Repeat("v", 10000) + "\r\n"
	b := newBackend(t, canned("HTTP/1.1 200 OK\r\n"+long+long+"Content-Length: 5\r\n\r\nhello"))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	var resp Response
	if err := p.RoundTrip(context.Background(), get("GET", "/"), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Head.Fields) != 3 || len(resp.Head.Fields[1].Value) != 10000 {
		t.Errorf("head of 20 KB: %d fields, want 3 with values of 10,000 bytes", len(resp.Head.Fields))
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello" || string(resp.Head.Fields[0].Name) != "X-Long" {
		t.Errorf("body %q and first field %q after reading the body: want hello, X-Long", body, resp.Head.Fields[0].Name)
	}
	resp.Close()
	// Beyond MaxHeaderBytes: refused.
	p2 := NewPool(b.addr(), Config{Limits: httpwire.Limits{MaxHeaderBytes: 8 << 10}})
	defer p2.Close()
	_, _, err := do(t, p2, get("GET", "/"))
	wantKind(t, err, KindBadResponse)
}

func TestEarlyAnswerWhileWritingBody(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, readHeadThen(func(c net.Conn, _ *bufio.Reader) {
		// Keep-alive allowed: the pool must still not reuse a connection whose
		// request was not sent whole.
		io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\n\r\ntoo big!")
	}))
	p := NewPool(b.addr(), Config{})
	defer p.Close()
	const size = 64 << 20 // more than loopback buffers hold: the write fails
	req := &Request{
		Method:     []byte("POST"),
		Head:       []byte("POST / HTTP/1.1\r\nHost: b\r\nContent-Length: 67108864\r\n\r\n"),
		Body:       io.LimitReader(zeros{}, size),
		BodyLength: size,
	}
	st, body, err := do(t, p, req)
	if err != nil || st != 413 || body != "too big!" {
		t.Fatalf("%d %q %v, want the early 413 delivered", st, body, err)
	}
	if s := p.Stats(); s.Open != 0 {
		t.Errorf("Stats = %+v, want the connection closed after an early answer", s)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
