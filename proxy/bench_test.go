package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/spillwayhq/spillway/upstream"
)

// cannedBackend answers every request head on a connection with one fixed
// response; it allocates nothing per request, so allocation counts are the
// proxy's (and the client's, which is also canned).
func cannedBackend(tb testing.TB) string {
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, world\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReaderSize(c, 8192)
				for {
					if !skipHead(br) {
						return
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// skipHead reads one bodiless request head.
func skipHead(br *bufio.Reader) bool {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return false
		}
		if len(line) == 2 {
			return true
		}
	}
}

// BenchmarkProxyH1 measures one proxied HTTP/1.1 request (client → engine
// → upstream pool → canned backend and back) on kept-alive loopback
// connections; allocs/op counts the whole process, of which the canned
// client and backend allocate nothing per request.
func BenchmarkProxyH1(b *testing.B) {
	be := cannedBackend(b)
	benchH1(b, &Route{Name: "r", Cluster: newCluster(b, "app", upstream.Config{MaxIdle: 256}, be)})
}

// BenchmarkProxyH1Observed is BenchmarkProxyH1 with a no-op observer on
// the route and the cluster and a generation counter: their cost on the
// engine's side.
func BenchmarkProxyH1Observed(b *testing.B) {
	be := cannedBackend(b)
	rt := &Route{Name: "r", Cluster: newCluster(b, "app", upstream.Config{MaxIdle: 256}, be), Observer: nopObserver{}, Live: new(atomic.Int64)}
	rt.Cluster.Observer = nopObserver{}
	benchH1(b, rt)
}

func benchH1(b *testing.B, rt *Route) {
	addr, _ := startProxy(b, Config{}, one(rt))
	req := []byte("GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 8192)
		for pb.Next() {
			if _, err := c.Write(req); err != nil {
				b.Error(err)
				return
			}
			if !readCanned(br) {
				b.Error("bad response")
				return
			}
		}
	})
}

// readCanned reads one response with a Content-Length body.
func readCanned(br *bufio.Reader) bool {
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return false
		}
		if len(line) == 2 {
			break
		}
		if bytes.HasPrefix(line, []byte("Content-Length: ")) {
			n = 0
			for _, c := range line[16 : len(line)-2] {
				n = n*10 + int(c-'0')
			}
		}
	}
	if n < 0 {
		return false
	}
	_, err := br.Discard(n)
	return err == nil
}

// TestAllocProxyH1: a kept-alive HTTP/1.1 request through the engine, its
// upstream pool and back allocates nothing (the canned client and backend
// allocate nothing either, and AllocsPerRun counts every goroutine) — with
// a bare route, and with a route observed, counted in a generation and
// sampled for the access log at a share that logs nothing (the draw is
// made per request).
func TestAllocProxyH1(t *testing.T) {
	if raceOn {
		t.Skip("allocation counts are not meaningful under -race")
	}
	noLeaks(t)
	be := cannedBackend(t)
	bare := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	t.Run("bare", func(t *testing.T) { allocsPerRequest(t, bare) })
	watched := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be), Observer: nopObserver{},
		Live: new(atomic.Int64), AccessLog: LogSampled, AccessSample: 0}
	watched.Cluster.Observer = nopObserver{}
	t.Run("observed", func(t *testing.T) { allocsPerRequest(t, watched) })
}

// nopObserver is an Observer and ClusterObserver that does nothing.
type nopObserver struct{}

func (nopObserver) Begin()                              {}
func (nopObserver) End(Ending)                          {}
func (nopObserver) UpstreamError(string, upstream.Kind) {}

func allocsPerRequest(t *testing.T, rt *Route) {
	addr, _ := startProxy(t, Config{}, one(rt))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 8192)
	req := []byte("GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	once := func() {
		if _, err := c.Write(req); err != nil || !readCanned(br) {
			t.Fatal("exchange failed", err)
		}
	}
	once() // warm the pools
	if n := testing.AllocsPerRun(200, once); n >= 1 {
		t.Fatalf("%.2f allocations per proxied request, want 0", n)
	}
}

// BenchmarkProxyH2C measures one proxied request from an h2c client (Go's
// own HTTP/2 client, many streams on one connection) through each HTTP/2
// engine (sub-benchmarks wire and std) to the canned HTTP/1.1 backend;
// allocs/op includes the client's side and the engine's server side.
func BenchmarkProxyH2C(b *testing.B) {
	for _, e := range []string{H2Wire, H2Std} {
		b.Run(e, func(b *testing.B) { benchProxyH2C(b, e) })
	}
}

func benchProxyH2C(b *testing.B, engine string) {
	be := cannedBackend(b)
	rt := &Route{Name: "r", Cluster: newCluster(b, "app", upstream.Config{MaxIdle: 256}, be)}
	addr, _ := startProxy(b, Config{HTTP2: true, H2Engine: engine}, one(rt))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	url := "http://" + addr + "/"
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 64)
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.ReadFull(resp.Body, buf[:13])
			_ = resp.Body.Close()
		}
	})
}
