package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// FuzzH1Engine feeds arbitrary bytes to the HTTP/1.1 engine as one client
// connection and checks three properties:
//
//   - no panic and no hang: every connection ends within fuzzWait (the
//     engine's own timeouts for heads, bodies and idle connections are
//     short, fuzzTimeout, so that an incomplete input costs little);
//   - every byte the proxy writes back is a sequence of responses that
//     http.ReadResponse parses (1xx heads included, a 101 ending it);
//   - the backend never receives a request httpwire would refuse: it
//     re-parses each head (with limits above the engine's, since the
//     engine adds forwarding fields) and decodes each chunked body, and
//     records every refusal, which fails the input.
//
// The proxy and its backend are started once per process and kept. The
// backend's answer depends on the path, so inputs reach every response
// path of the engine: /chunked (with a trailer), /103 (Early Hints before
// the final answer), /204, /304, /close (a body until close), /500, an
// Upgrade (101, then an echo), /none (no route: 404) and the default 200.
func FuzzH1Engine(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		env := fuzzSetup(t)
		if err := env.run(in); err != nil {
			t.Fatal(err)
		}
		if err := env.be.settle(); err != nil {
			t.Fatal(err)
		}
	})
}

const (
	fuzzTimeout = 100 * time.Millisecond
	fuzzWait    = 10 * time.Second
)

// fuzzLimits are the engine's head limits in the fuzz proxy, smaller than
// the defaults so that inputs reach them.
var fuzzLimits = httpwire.Limits{MaxHeaderBytes: 4 << 10, MaxFields: 32}

// fuzzEnv is the proxy FuzzH1Engine talks to.
type fuzzEnv struct {
	addr string
	be   *recBackend
}

var fuzzOnce struct {
	sync.Once
	env *fuzzEnv
	err error
}

// fuzzSetup starts the backend and the proxy on first use. They live as
// long as the process (a fuzz worker runs one input at a time).
func fuzzSetup(t *testing.T) *fuzzEnv {
	fuzzOnce.Do(func() {
		be, err := startRecBackend()
		if err != nil {
			fuzzOnce.err = err
			return
		}
		set, err := newFuzzCluster(be.addr)
		if err != nil {
			fuzzOnce.err = err
			return
		}
		rt := &Route{
			Name: "fuzz", Cluster: set, ResponseHeaderTimeout: time.Second, IdleTimeout: fuzzTimeout,
			MaxBodyBytes: 16 << 10, Upgrades: []string{"websocket"},
		}
		r := routerFunc(func(v *request.View) (*Route, bool) {
			return rt, !strings.HasPrefix(v.Path, "/none")
		})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fuzzOnce.err = err
			return
		}
		s := NewServer(Config{
			HeaderTimeout: fuzzTimeout, IdleTimeout: fuzzTimeout, BodyTimeout: fuzzTimeout,
			SendTimeout: time.Second, Limits: fuzzLimits, // the client reads as it goes
		}, r)
		go func() { _ = s.Serve(ln) }()
		fuzzOnce.env = &fuzzEnv{addr: ln.Addr().String(), be: be}
	})
	if fuzzOnce.err != nil {
		t.Fatal(fuzzOnce.err)
	}
	return fuzzOnce.env
}

// newFuzzCluster is newCluster without a testing.TB: one endpoint whose
// pool keeps no idle connection, so that every exchange's upstream
// connection is closed when it ends (settle waits for that).
func newFuzzCluster(addr string) (*Cluster, error) {
	set, err := balancer.NewSet(balancer.SetConfig{})
	if err != nil {
		return nil, err
	}
	set.Update(0, []balancer.Endpoint{{Addr: addr}})
	pools := map[string]*upstream.Pool{addr: upstream.NewPool(addr, upstream.Config{MaxIdle: -1})}
	cl := &Cluster{Name: "app", Set: set, Picker: balancer.Loaded{Picker: &balancer.RoundRobin{}}}
	cl.Pools.Store(&pools)
	cl.Init()
	return cl, nil
}

// run sends in on one connection and reads the answers until the proxy
// closes it, or until every complete request in it is answered (an early
// end the proxy cannot see; what it answers is the same).
func (e *fuzzEnv) run(in []byte) error {
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(fuzzWait))
	wrote := make(chan struct{})
	go func() { _, _ = c.Write(in); close(wrote) }()
	defer func() { _ = c.Close(); <-wrote }()
	methods, exact := requestsIn(in)
	var rec bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &limitedBuffer{&rec, 1 << 16}))
	for n := 0; ; {
		if exact && n == len(methods) {
			return nil
		}
		if _, err := br.Peek(1); err != nil {
			return endOfStream(err, n, &rec)
		}
		method := "GET"
		if n < len(methods) {
			method = methods[n]
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return fmt.Errorf("response %d does not parse: %v\nreceived:\n%q", n+1, err, rec.Bytes())
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("response %d (%d) body: %v\nreceived:\n%q", n+1, resp.StatusCode, err, rec.Bytes())
		}
		switch {
		case resp.StatusCode == 101:
			return nil // a tunnel: what follows is the backend's echo
		case resp.StatusCode >= 200:
			n++
		}
	}
}

// endOfStream judges the end of the proxy's answers: EOF or a reset
// between two responses is a clean end; a deadline is a hang.
func endOfStream(err error, n int, rec *bytes.Buffer) error {
	switch {
	case err == io.EOF, errors.Is(err, syscall.ECONNRESET):
		return nil
	case isTimeout(err):
		return fmt.Errorf("no end after %v and %d responses (hang)\nreceived:\n%q", fuzzWait, n, rec.Bytes())
	default:
		return fmt.Errorf("after %d responses: %v", n, err)
	}
}

// requestsIn lists the methods of the complete requests at the start of
// in, parsed as the engine parses them; exact reports that they are all of
// in (nothing after them, nothing refused, no upgrade), so that every one
// of them will be answered and nothing else.
func requestsIn(in []byte) (methods []string, exact bool) {
	var h httpwire.RequestHead
	br := bufio.NewReader(bytes.NewReader(in))
	for {
		buf, _ := br.Peek(br.Buffered())
		if len(buf) == 0 {
			if _, err := br.Peek(1); err != nil {
				return methods, true
			}
			continue
		}
		n, err := httpwire.ParseRequestHead(buf, &h, fuzzLimits)
		if err == httpwire.ErrIncomplete {
			if _, err := br.Peek(br.Buffered() + 1); err != nil {
				return methods, false
			}
			continue
		}
		if err != nil || h.Upgrade != nil || !h.KeepAlive {
			return methods, false
		}
		methods = append(methods, string(h.Method))
		chunked, length := h.Chunked, h.ContentLength
		_, _ = br.Discard(n)
		if length > 16<<10 || !skipBody(br, chunked, length) {
			return methods, false
		}
	}
}

// skipBody reads a request body off br; false when it is incomplete or
// malformed.
func skipBody(br *bufio.Reader, chunked bool, length int64) bool {
	if chunked {
		var cr httpwire.ChunkedReader
		cr.Reset(br, fuzzLimits)
		n, err := io.Copy(io.Discard, &cr)
		return err == nil && n <= 16<<10
	}
	if length > 0 {
		_, err := br.Discard(int(length))
		return err == nil
	}
	return true
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// recBackend is a raw HTTP/1.1 backend that checks what the proxy sends.
type recBackend struct {
	addr string
	open atomic.Int32 // connections open
	mu   sync.Mutex
	bad  []string // requests httpwire refused, as received
}

// backendLimits are above what the engine forwards for fuzzLimits heads
// (it adds up to seven fields and repeats the Host twice).
var backendLimits = httpwire.Limits{MaxHeaderBytes: 64 << 10, MaxFields: 64}

func startRecBackend() (*recBackend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &recBackend{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.open.Add(1)
			go b.serve(c)
		}
	}()
	return b, nil
}

func (b *recBackend) refused(what string, got []byte, err error) {
	b.mu.Lock()
	b.bad = append(b.bad, fmt.Sprintf("%s: %v\n%q", what, err, got))
	b.mu.Unlock()
}

// settle waits for every upstream connection to close (the pool keeps
// none), then reports the refusals recorded for the input.
func (b *recBackend) settle() error {
	for deadline := time.Now().Add(fuzzWait); b.open.Load() > 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d upstream connections still open after %v", b.open.Load(), fuzzWait)
		}
		time.Sleep(time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bad := b.bad
	b.bad = nil
	if len(bad) > 0 {
		return fmt.Errorf("the backend received %d requests httpwire refuses:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	return nil
}

// serve answers the requests on one upstream connection.
func (b *recBackend) serve(c net.Conn) {
	defer b.open.Add(-1)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(fuzzWait))
	br := bufio.NewReaderSize(c, backendLimits.MaxHeaderBytes+512)
	var h httpwire.RequestHead
	for {
		n, err := readHeadFrom(br, &h)
		if err != nil {
			if err != io.EOF {
				buf, _ := br.Peek(br.Buffered())
				b.refused("head", buf, err)
			}
			return
		}
		head := append([]byte(nil), func() []byte { p, _ := br.Peek(n); return p }()...)
		_, _ = br.Discard(n)
		if !b.readBody(br, head) {
			return
		}
		if !b.answer(c, br, head) {
			return
		}
	}
}

// readHeadFrom parses the next head on br; io.EOF when the connection
// ended between requests (or inside a head: the proxy aborted it).
func readHeadFrom(br *bufio.Reader, h *httpwire.RequestHead) (int, error) {
	if _, err := br.Peek(1); err != nil {
		return 0, io.EOF
	}
	for {
		buf, _ := br.Peek(br.Buffered())
		n, err := httpwire.ParseRequestHead(buf, h, backendLimits)
		if err != httpwire.ErrIncomplete {
			return n, err
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return 0, io.EOF
		}
	}
}

// readBody reads the body of the request whose head is head; a chunked
// body httpwire refuses is recorded. False ends the connection.
func (b *recBackend) readBody(br *bufio.Reader, head []byte) bool {
	var h httpwire.RequestHead
	_, _ = httpwire.ParseRequestHead(head, &h, backendLimits)
	switch {
	case h.Chunked:
		var cr httpwire.ChunkedReader
		cr.Reset(br, backendLimits)
		if _, err := io.Copy(io.Discard, &cr); err != nil {
			var we *httpwire.Error
			if errors.As(err, &we) {
				b.refused("chunked body", head, err)
			}
			return false // else the proxy aborted the body
		}
	case h.ContentLength > 0:
		if _, err := br.Discard(int(h.ContentLength)); err != nil {
			return false
		}
	}
	return true
}

// answer writes the response the request's path asks for; false ends the
// connection.
func (b *recBackend) answer(c net.Conn, br *bufio.Reader, head []byte) bool {
	var h httpwire.RequestHead
	_, _ = httpwire.ParseRequestHead(head, &h, backendLimits)
	path := string(h.Path)
	if h.Upgrade != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_, _ = io.Copy(c, br) // echo until the proxy closes its side
		return false
	}
	resp, keep := fuzzAnswer(path, string(h.Method) == "HEAD")
	if _, err := io.WriteString(c, resp); err != nil {
		return false
	}
	return keep && h.KeepAlive
}

// fuzzAnswer is the canned response for path, and whether the connection
// stays open after it.
func fuzzAnswer(path string, head bool) (string, bool) {
	switch {
	case head:
		return "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", true
	case strings.HasPrefix(path, "/chunked"):
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", true
	case strings.HasPrefix(path, "/103"):
		return "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true
	case strings.HasPrefix(path, "/204"):
		return "HTTP/1.1 204 No Content\r\n\r\n", true
	case strings.HasPrefix(path, "/304"):
		return "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", true
	case strings.HasPrefix(path, "/close"):
		return "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close", false
	case strings.HasPrefix(path, "/500"):
		return "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", true
	}
	return "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", true
}
