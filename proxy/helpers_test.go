package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// routerFunc adapts a function to Router.
type routerFunc func(v *request.View) (*Route, bool)

func (f routerFunc) Route(v *request.View) (*Route, bool) { return f(v) }

// one routes every request to rt.
func one(rt *Route) Router {
	return routerFunc(func(*request.View) (*Route, bool) { return rt, true })
}

// newCluster builds a round-robin cluster over addrs with HTTP/1.1 pools.
func newCluster(t testing.TB, name string, cfg upstream.Config, addrs ...string) *Cluster {
	t.Helper()
	set, err := balancer.NewSet(balancer.SetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	eps := make([]balancer.Endpoint, len(addrs))
	pools := make(map[string]*upstream.Pool, len(addrs))
	for i, a := range addrs {
		eps[i] = balancer.Endpoint{Addr: a}
		pools[a] = upstream.NewPool(a, cfg)
	}
	set.Update(0, eps)
	cl := &Cluster{Name: name, Set: set, Picker: balancer.Loaded{Picker: &balancer.RoundRobin{}}}
	cl.Pools.Store(&pools)
	cl.Init()
	t.Cleanup(func() {
		for _, p := range pools {
			p.Close()
		}
	})
	return cl
}

// backend starts a net/http server on loopback.
func backend(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = p
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// startProxy serves r on a loopback listener and returns its address.
func startProxy(t testing.TB, cfg Config, r Router) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg, r)
	done := make(chan struct{})
	go func() { _ = s.Serve(ln); close(done) }()
	t.Cleanup(func() {
		_ = ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String(), s
}

// raw sends bytes on a fresh connection and returns everything the proxy
// answers until it closes the connection or 5 s pass.
func raw(t testing.TB, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// statusOf returns the status line of a raw response.
func statusOf(resp string) string {
	line, _, _ := strings.Cut(resp, "\r\n")
	return line
}

// readResponse reads one response from br.
func readResponse(t testing.TB, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// noLeaks checks, after every cleanup of the test, that no goroutine it
// started is left (registered first, so it runs last).
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
}

func httpLimits(bytes, fields int) httpwire.Limits {
	return httpwire.Limits{MaxHeaderBytes: bytes, MaxFields: fields}
}

// forEachH2Engine runs test once per HTTP/2 engine, as subtests named
// after them.
func forEachH2Engine(t *testing.T, test func(t *testing.T, engine string)) {
	for _, e := range []string{H2Wire, H2Std} {
		t.Run(e, func(t *testing.T) { test(t, e) })
	}
}
